//! openraft's log storage on an es-log partition: [`LogStore`] implements
//! `RaftLogStorage` and `RaftLogReader` with the partition's segments as the log.
//!
//! An append hands each entry's bytes to the partition (the leader stamps base offset
//! and term there; a follower's stamped bytes are checked), and a completion task
//! calls `IOFlushed::io_completed` once the group commit made them durable, in
//! submission order. Votes and purges go to small files written only after every
//! queued append is durable (es-log `write_raft_file`), so a vote never overtakes
//! an append (openraft#1252). The committed id is written off openraft's core task
//! ([`CommitGate`]), since the core awaits `save_committed` on every commit, and
//! only behind the completions of the appends queued before it (the entries it
//! covers), not of those queued since. Purge moves the Raft log start only:
//! segments go by retention, never because Raft purged them (the snapshot trap);
//! in Raft mode retention deletes only what was purged, and asks for the purge
//! (`PartitionLog::retention_wants`, acted on by the host's purge task).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds, RangeInclusive};
use std::sync::{Arc, Mutex, OnceLock};

use es_log::{EntryStamp, LogError, PartitionLog, PendingAppend, RaftFile};
use openraft::OptionalSend;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use crate::entry::EsEntry;
use crate::error::{RaftError, io};
use crate::types::{CommittedLeaderId, LogId, Term, TypeConfig, Vote};

/// What the completion task handles, in submission order.
enum Completion {
    /// Entries appended: reported durable to openraft once they are.
    Appended(Vec<PendingAppend>, IOFlushed<TypeConfig>),
    /// A committed id openraft saved: every entry it covers was appended before
    /// it, so once the completions before it are through, it may be written.
    Committed(Option<LogId>),
}

/// A partition's Raft log. Cheap to clone: clones share one state.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

struct Shared {
    log: Arc<PartitionLog>,
    meta: Mutex<Meta>,
    /// Feeds the task that reports appends durable, in order (started lazily, on
    /// the runtime openraft runs on).
    completions: OnceLock<mpsc::UnboundedSender<Completion>>,
    /// The committed id openraft saved last whose entries are durable, for the
    /// task that writes it (`persist_committed`, started lazily like
    /// `completions`, which feeds it).
    committed: Arc<watch::Sender<Option<LogId>>>,
    committed_writer: OnceLock<()>,
    /// How many tasks may still write to the log or its Raft files: the
    /// committed-id writer (`persist_committed`) and the state machine's
    /// high-watermark publisher. A group closing waits for none to be left before
    /// the log is handed to anyone else (a discard, a new group).
    writing: Arc<watch::Sender<usize>>,
    /// How far the committed id is on disk ([`CommitGate`]).
    durable: Arc<watch::Sender<Durable>>,
}

/// How far the committed id is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Durable {
    /// Written up to this Raft index (`None`: nothing committed yet).
    Upto(Option<u64>),
    /// Writing it failed; the group stops (as a failed `save_committed` stopped it).
    Failed(String),
    /// Never waits: for state machines applying what no store committed (the Suite).
    Open,
}

/// Holds the high watermark readers see until the committed id covering the
/// entry is on disk. openraft awaits `save_committed` on its core task before
/// each apply, and writing the id costs a file's fsync (about 1-2 ms here),
/// during which the core neither appended, replicated nor answered: one commit at
/// a time. So `save_committed` only hands the id to a writer task and returns; the
/// state machine applies and answers the proposer at once (the entry is
/// committed), and its publisher moves the high watermark once this gate opens.
/// What a reader saw is then always covered by the committed id on disk, which a
/// restart restores before anything else (the watermark never moves back), while
/// the core goes on with the next entries and proposers are not held by the write.
#[derive(Clone)]
pub struct CommitGate {
    durable: watch::Receiver<Durable>,
    /// `Shared::writing`, for [`CommitGate::hold`] (`None` for an open gate).
    writing: Option<Arc<watch::Sender<usize>>>,
}

impl CommitGate {
    /// A gate that never waits: for a state machine that applies entries no store
    /// committed (openraft's storage Suite). Never for a running group.
    pub fn open() -> CommitGate {
        CommitGate { durable: watch::Sender::new(Durable::Open).subscribe(), writing: None }
    }

    /// Counts a task that writes to the log as one a closing group waits for,
    /// until the returned hold is dropped.
    pub(crate) fn hold(&self) -> WritingHold {
        WritingHold::new(self.writing.clone())
    }

    /// Whether the committed id on disk covers Raft index `index` now.
    pub(crate) fn covers(&self, index: u64) -> bool {
        match &*self.durable.borrow() {
            Durable::Upto(upto) => upto.is_some_and(|u| u >= index),
            Durable::Failed(_) => false,
            Durable::Open => true,
        }
    }

    /// Waits until the committed id on disk moves (or its write fails); `false`
    /// once the writer is gone (the group closed). An open gate never moves.
    pub(crate) async fn changed(&mut self) -> bool {
        if matches!(*self.durable.borrow(), Durable::Open) {
            return std::future::pending().await;
        }
        self.durable.changed().await.is_ok()
    }

    /// The Raft index the committed id on disk covers (`Some(None)`: nothing
    /// committed yet); `None` for an open gate or a failed write.
    fn on_disk(&self) -> Option<Option<u64>> {
        match &*self.durable.borrow() {
            Durable::Upto(upto) => Some(*upto),
            Durable::Failed(_) | Durable::Open => None,
        }
    }

    /// Fails once writing the committed id failed, or an append did (the
    /// completion task then writes no committed id past it).
    pub(crate) fn check(&self) -> io::Result<()> {
        match &*self.durable.borrow() {
            Durable::Failed(e) => {
                Err(io::Error::other(format!("the committed id can no longer be written: {e}")))
            }
            Durable::Upto(_) | Durable::Open => Ok(()),
        }
    }
}

/// Writes the committed id openraft saves, the latest one each time (a write that
/// finds several saved since the last one writes only the newest). The
/// completion task hands it over once the appends queued before it (the entries
/// it covers among them) are durable, so the write does not wait for appends
/// queued after it (`write_committed_covered`):
/// under load those are the next round's, and waiting for them cost a round per
/// commit. Ends when the store is dropped, after writing the last id saved;
/// stops at the first failure.
async fn persist_committed(
    log: Arc<PartitionLog>,
    mut saved: watch::Receiver<Option<LogId>>,
    durable: Arc<watch::Sender<Durable>>,
) {
    while saved.changed().await.is_ok() {
        let committed = *saved.borrow_and_update();
        let log = log.clone();
        let written = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&committed).map_err(io::Error::other)?;
            log.write_committed_covered(&bytes).map_err(io)
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        match written {
            Ok(()) => {
                // A failed append (the completion task) stops the group for good.
                durable.send_if_modified(|d| match d {
                    Durable::Failed(_) => false,
                    _ => {
                        *d = Durable::Upto(committed.map(|c| c.index));
                        true
                    }
                });
            }
            Err(e) => {
                tracing::error!(error = %e, "writing the Raft committed id failed; the group stops");
                durable.send_replace(Durable::Failed(e.to_string()));
                return;
            }
        }
    }
}

/// One task counted in `Shared::writing`, until dropped, however the task ends.
pub(crate) struct WritingHold(Option<Arc<watch::Sender<usize>>>);

impl WritingHold {
    fn new(writing: Option<Arc<watch::Sender<usize>>>) -> WritingHold {
        if let Some(w) = &writing {
            w.send_modify(|n| *n += 1);
        }
        WritingHold(writing)
    }
}

impl Drop for WritingHold {
    fn drop(&mut self) {
        if let Some(w) = &self.0 {
            w.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

fn write_file<T: Serialize>(log: &PartitionLog, file: RaftFile, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    log.write_raft_file(file, &bytes).map_err(io)
}

#[derive(Debug, Default, Clone)]
struct Meta {
    vote: Option<Vote>,
    purged: Option<LogId>,
    committed: Option<LogId>,
}

/// What a group's log holds, in es terms (for status and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreState {
    /// The first Raft index held on disk (entries below went by retention).
    pub first_index: u64,
    /// The Raft index the next entry gets.
    pub next_index: u64,
    /// The last purged Raft index: the log starts after it for Raft.
    pub purged_index: Option<u64>,
}

impl LogStore {
    /// Opens the Raft log of `log`, reading its vote, purge point and committed id.
    pub fn open(log: Arc<PartitionLog>) -> Result<LogStore, RaftError> {
        log.set_raft_mode();
        let meta = Meta {
            vote: read_file(&log, RaftFile::Vote)?,
            purged: read_file(&log, RaftFile::Purged)?,
            committed: read_file(&log, RaftFile::Committed)?,
        };
        if let Some(committed) = meta.committed {
            restore_committed_offset(&log, committed.index)?;
        }
        if let Some(purged) = meta.purged {
            log.set_raft_purged(purged.index);
        }
        let durable = Arc::new(watch::Sender::new(Durable::Upto(meta.committed.map(|c| c.index))));
        let shared = Shared {
            log,
            committed: Arc::new(watch::Sender::new(meta.committed)),
            meta: Mutex::new(meta),
            completions: OnceLock::new(),
            committed_writer: OnceLock::new(),
            writing: Arc::new(watch::Sender::new(0)),
            durable,
        };
        Ok(LogStore { shared: Arc::new(shared) })
    }

    /// Watches how many tasks may still write to the log (see `Shared::writing`).
    pub fn committed_writer(&self) -> watch::Receiver<usize> {
        self.shared.writing.subscribe()
    }

    /// The gate the group's state machine applies through.
    pub fn commit_gate(&self) -> CommitGate {
        CommitGate { durable: self.shared.durable.subscribe(), writing: Some(self.shared.writing.clone()) }
    }

    pub fn state(&self) -> StoreState {
        let range = self.shared.log.entry_range();
        let purged = self.meta().purged.map(|p| p.index);
        StoreState { first_index: range.first, next_index: range.next, purged_index: purged }
    }

    fn meta(&self) -> Meta {
        self.shared.meta.lock().expect("raft meta lock").clone()
    }

    /// The first index Raft may read: after the purge point, and held on disk.
    fn readable_from(&self) -> u64 {
        let first = self.shared.log.entry_range().first;
        self.meta().purged.map_or(first, |p| first.max(p.index + 1))
    }

    /// Entries `[from, to)` that the log holds. In Raft mode retention deletes only
    /// purged entries, so the ones missing at the start are purged or were never
    /// here (a log that started past its end); openraft tolerates both.
    fn entries(&self, from: u64, to: u64) -> io::Result<Vec<EsEntry>> {
        let from = from.max(self.readable_from());
        let read = self.shared.log.read_entries(from, to, usize::MAX).map_err(io)?;
        read.into_iter().map(|(index, bytes)| stored_entry(index, bytes)).collect()
    }

    fn completions(&self) -> &mpsc::UnboundedSender<Completion> {
        self.shared.completions.get_or_init(|| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Completion>();
            let (committed, durable) = (self.shared.committed.clone(), self.shared.durable.clone());
            tokio::spawn(async move {
                let mut failed = false;
                while let Some(completion) = rx.recv().await {
                    match completion {
                        Completion::Appended(pending, callback) => {
                            let mut result = Ok(());
                            for p in pending {
                                if let Err(e) = p.durable().await {
                                    result = Err(io(e));
                                }
                            }
                            if let Err(e) = &result
                                && !failed
                            {
                                // openraft may still commit entries after the lost
                                // ones (a majority has them): no committed id past
                                // a hole in this log is written, and the group stops.
                                failed = true;
                                durable.send_replace(Durable::Failed(format!("an append failed: {e}")));
                            }
                            callback.io_completed(result);
                        }
                        Completion::Committed(_) if failed => {}
                        Completion::Committed(id) => {
                            committed.send_replace(id);
                        }
                    }
                }
            });
            tx
        })
    }

    /// Stores one entry: the leader path stamps an unstamped batch, the follower path
    /// stores the leader's stamped bytes after checking them.
    fn append_one(&self, entry: EsEntry) -> io::Result<PendingAppend> {
        let (leader, index) = openraft::entry::RaftEntry::log_id_parts(&entry);
        let term = leader.term;
        let header = entry.header().ok_or_else(|| io::Error::other("an entry is not a v2 batch"))?;
        self.restart_if_purged(index, header.base_offset)?;
        let stamp = if header.leader_epoch.is_known() {
            EntryStamp::Follower(term.epoch())
        } else {
            EntryStamp::Leader(term.epoch())
        };
        self.shared.log.append_entry(entry.batch().to_vec(), index, stamp).map_err(io)
    }

    /// openraft appends past the log's end only when every entry held is purged (a
    /// snapshot was installed): the log then continues at `index` and at the
    /// entry's base offset `offset` (the leader's log start, when its retention
    /// removed the records this replica lacks).
    fn restart_if_purged(&self, index: u64, offset: u64) -> io::Result<()> {
        let range = self.shared.log.entry_range();
        if index <= range.next {
            return Ok(());
        }
        let all_purged =
            range.next == range.first || self.meta().purged.is_some_and(|p| p.index + 1 >= range.next);
        if !all_purged {
            // es-log refuses it: a non-contiguous append (openraft#1795).
            return Ok(());
        }
        self.shared.log.restart_entries_at(index, offset).map_err(io)
    }

    fn write_meta<T: Serialize>(&self, file: RaftFile, value: &T) -> io::Result<()> {
        write_file(&self.shared.log, file, value)
    }
}

/// Readers see the committed records again as soon as the group reopens, not only
/// once openraft has re-applied them: a consumer that read up to the watermark
/// before a restart must not find it lower after (it could reset its offsets). The
/// committed id is written after the entries it covers are durable, so the entry is
/// here; its end offset is the committed offset (a control batch's base offset is
/// the next offset at its place, as it takes none). An entry retention removed
/// leaves the offset to the re-apply.
fn restore_committed_offset(log: &PartitionLog, index: u64) -> Result<(), RaftError> {
    let range = log.entry_range();
    if index < range.first || index >= range.next {
        return Ok(());
    }
    let Some((_, bytes)) = log.read_entries(index, index + 1, 1)?.pop() else {
        return Ok(());
    };
    let h = es_core::BatchHeader::parse(&bytes, usize::MAX).map_err(LogError::InvalidBatch)?;
    log.set_committed_offset(if h.is_raft_control() { h.base_offset } else { h.next_offset() });
    Ok(())
}

/// Drops the entries a snapshot past the log's end leaves unmatched. openraft
/// installs such a snapshot without comparing any entry held here with the
/// leader's (it only truncates when it holds one at the snapshot's index), and
/// purges them all; the log keeps them until its next append. Those after the
/// committed id on disk may be an old leader's entries that never committed: read
/// up to the snapshot's offset, or kept under it when the log continues at its own
/// next offset, they would serve records no other replica has. Those at or below
/// the committed id match the leader's (Raft's log matching) and are what readers
/// may have seen, so they stay, as do those up to `applied` (the state machine
/// applied them: committed; an earlier snapshot may have made them readable before
/// the committed id on disk covered them). Run after the snapshot is on disk (a
/// restart in between runs it again on open, `DataStateMachine::open`) and before
/// its offset is readable. An open gate (the Suite) knows no committed id: nothing
/// is dropped.
pub(crate) fn drop_unmatched_tail(
    log: &PartitionLog,
    snapshot: Option<LogId>,
    applied: Option<LogId>,
    gate: &CommitGate,
) -> Result<(), LogError> {
    let (Some(snapshot), Some(committed)) = (snapshot, gate.on_disk()) else {
        return Ok(());
    };
    let range = log.entry_range();
    if snapshot.index < range.next {
        return Ok(());
    }
    let matched = committed.max(applied.map(|a| a.index));
    let from = matched.map_or(range.first, |c| c + 1).max(range.first);
    if from < range.next {
        tracing::info!(
            from,
            to = range.next,
            "a snapshot past the log's end: dropping the entries after the committed and applied ones, which no leader vouches for"
        );
    }
    log.truncate_entries_from(from)
}

/// An entry read back from the log: its term is the batch's leader epoch.
fn stored_entry(index: u64, bytes: bytes::Bytes) -> io::Result<EsEntry> {
    let header =
        es_core::BatchHeader::parse(&bytes, usize::MAX).map_err(|e| io(LogError::InvalidBatch(e)))?;
    let term = Term::from_epoch(header.leader_epoch)
        .ok_or_else(|| io::Error::other(format!("stored entry {index} has no leader epoch")))?;
    Ok(EsEntry::stored(CommittedLeaderId::new(term), index, bytes))
}

fn read_file<T: DeserializeOwned>(log: &PartitionLog, file: RaftFile) -> Result<Option<T>, RaftError> {
    let name = match file {
        RaftFile::Vote => "vote",
        RaftFile::Purged => "purged",
        RaftFile::Committed => "committed",
        RaftFile::Snapshot => "snapshot",
    };
    match log.read_raft_file(file)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| RaftError::BadFile { file: name, reason: e.to_string() }),
    }
}

pub(crate) fn read_snapshot_file<T: DeserializeOwned>(log: &PartitionLog) -> Result<Option<T>, RaftError> {
    read_file(log, RaftFile::Snapshot)
}

/// `[start, end)` of a range of indexes.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<EsEntry>> {
        let (start, end) = bounds(&range);
        self.entries(start, end)
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.meta().vote)
    }

    /// The last log id of each term in `range`, from the leader-epoch checkpoint
    /// (each term's first Raft index) instead of openraft's binary search over
    /// reads; the search is the fallback when the checkpoint cannot answer.
    async fn get_key_log_ids(&mut self, range: RangeInclusive<LogId>) -> io::Result<Vec<LogId>> {
        match key_log_ids(&self.shared.log.entry_epochs(), &range) {
            Some(ids) => Ok(ids),
            None => self.key_log_ids_by_search(range),
        }
    }
}

impl LogStore {
    fn log_id_at(&self, index: u64) -> io::Result<LogId> {
        let entry = self.entries(index, index + 1)?.pop();
        entry
            .map(|e| openraft::entry::RaftEntry::log_id(&e))
            .ok_or_else(|| io::Error::other(format!("Raft entry {index} is not in the log")))
    }

    /// The fallback of `get_key_log_ids`: terms only grow along the log, so the
    /// last index of each term is found by bisection between its first entry and
    /// the range's end.
    pub(crate) fn key_log_ids_by_search(&self, range: RangeInclusive<LogId>) -> io::Result<Vec<LogId>> {
        let (mut at, last) = (*range.start(), *range.end());
        let mut out = Vec::new();
        while at.leader_id != last.leader_id {
            // term(lo) == term(at), term(hi) != term(at).
            let (mut lo, mut hi) = (at.index, last.index);
            let mut hi_id = last;
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                let id = self.log_id_at(mid)?;
                if id.leader_id == at.leader_id {
                    lo = mid;
                } else {
                    (hi, hi_id) = (mid, id);
                }
            }
            out.push(LogId::new(at.leader_id, lo));
            at = hi_id;
        }
        out.push(last);
        Ok(out)
    }
}

/// The last log id of each term overlapping `range`, or `None` when the checkpoint
/// does not agree with the range's ends (a line without an index, say).
pub(crate) fn key_log_ids(
    epochs: &[es_log::EpochStart],
    range: &RangeInclusive<LogId>,
) -> Option<Vec<LogId>> {
    let (first, last) = (range.start(), range.end());
    let mut starts = Vec::with_capacity(epochs.len());
    for e in epochs {
        starts.push((Term::from_epoch(e.epoch)?, e.index?));
    }
    let mut out = Vec::new();
    for (i, (term, start)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(last.index, |n| n.1.saturating_sub(1)).min(last.index);
        if end < first.index || *start > last.index || *start > end {
            continue;
        }
        out.push(LogId::new(CommittedLeaderId::new(*term), end));
    }
    let agrees = out.first().is_some_and(|id| id.leader_id == first.leader_id) && out.last() == Some(last);
    agrees.then_some(out)
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> io::Result<LogState<TypeConfig>> {
        let purged = self.meta().purged;
        let next = self.shared.log.entry_range().next;
        let last_held = if next > self.readable_from() {
            let last = self.entries(next - 1, next)?;
            last.first().map(openraft::entry::RaftEntry::log_id)
        } else {
            None
        };
        Ok(LogState { last_purged_log_id: purged, last_log_id: last_held.or(purged) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        self.write_meta(RaftFile::Vote, vote)?;
        self.shared.meta.lock().expect("raft meta lock").vote = Some(*vote);
        Ok(())
    }

    /// Hands the id to the writer task and returns: the apply waits for it to be
    /// on disk instead ([`CommitGate`]).
    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        self.shared.meta.lock().expect("raft meta lock").committed = committed;
        self.shared.committed_writer.get_or_init(|| {
            let saved = self.shared.committed.subscribe();
            let writing = WritingHold::new(Some(self.shared.writing.clone()));
            let (log, durable) = (self.shared.log.clone(), self.shared.durable.clone());
            tokio::spawn(async move {
                persist_committed(log, saved, durable).await;
                drop(writing);
            });
        });
        // Behind the completions of every append before it: written once they are durable.
        self.completions()
            .send(Completion::Committed(committed))
            .map_err(|_| io::Error::other("the append completion task stopped"))
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.meta().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> io::Result<()>
    where
        I: IntoIterator<Item = EsEntry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut pending = Vec::new();
        for entry in entries {
            pending.push(self.append_one(entry)?);
        }
        self.completions()
            .send(Completion::Appended(pending, callback))
            .map_err(|_| io::Error::other("the append completion task stopped"))
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        let from = match last_log_id {
            Some(id) => id.index + 1,
            None => self.shared.log.entry_range().first,
        };
        self.shared.log.truncate_entries_from(from).map_err(io)
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        self.write_meta(RaftFile::Purged, &Some(log_id))?;
        self.shared.meta.lock().expect("raft meta lock").purged = Some(log_id);
        // Retention may now delete the segments up to here.
        self.shared.log.set_raft_purged(log_id.index);
        Ok(())
    }
}
