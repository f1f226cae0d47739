//! The state machine of a data partition: what applying entries means when the
//! records are already in the log. It tracks the last applied log id, the
//! membership and the high watermark (the end offset of the last applied data
//! entry), which it sets as the log's committed offset: readers of any replica never
//! see past it. An entry's proposer is answered as it is applied (it is committed);
//! the high watermark follows once the committed id covering the entry is on disk
//! ([`CommitGate`]), moved by a publisher task so the apply never waits for that
//! write: later entries are answered meanwhile. A restart starts from the snapshot's offset; openraft re-applies
//! the committed entries after it. Idempotent-producer state is not replicated here yet (docs/cluster.md).
//!
//! Snapshots are metadata only and are taken at the retention boundary, never at
//! the applied index alone (DESIGN §4, "snapshot trap"): a snapshot covers only
//! entries below the first data entry this replica keeps (the first held, or the
//! first past the segments retention waits to delete), so a follower that installs
//! it and purges its log up to the snapshot never loses a record a consumer can
//! still read. (Purge does not delete segments: retention does, once purged.)

use std::collections::VecDeque;
use std::io::{self, Cursor};
use std::sync::{Arc, Mutex, OnceLock};

use es_core::batch::RaftControl;
use es_log::{PartitionLog, RaftFile};
use futures_util::{Stream, StreamExt};
use openraft::OptionalSend;
use openraft::entry::RaftEntry;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine, Snapshot, SnapshotMeta};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::error::{RaftError, io};
use crate::store::CommitGate;
use crate::types::{Applied, CommittedLeaderId, LogId, StoredMembership, Term, TypeConfig};

/// Control entries scanned for the first data entry before the snapshot settles
/// for a lower boundary (lower is always safe).
const FLOOR_SCAN_MAX: u64 = 4096;
/// Memberships remembered to answer which one held at a snapshot's index.
const MEMBERSHIPS_KEPT: usize = 16;

type Meta = SnapshotMeta<CommittedLeaderId, u64, openraft::impls::BasicNode>;
type Snap = Snapshot<CommittedLeaderId, u64, openraft::impls::BasicNode, Cursor<Vec<u8>>>;

/// What the state machine has applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppliedState {
    pub(crate) last_applied: Option<LogId>,
    pub(crate) membership: StoredMembership,
    /// The offset after the last applied data entry: readers never go past it.
    pub high_watermark: u64,
}

/// A snapshot: its metadata and the offset the log continues at.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotFile {
    meta: Meta,
    next_offset: u64,
    /// On a follower that installed it: the last entry its state machine had
    /// applied before (committed, maybe readable), which a restart's
    /// `drop_unmatched_tail` keeps too. Never sent (a leader's own snapshot has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    applied_before: Option<LogId>,
}

#[derive(Debug, Default)]
struct State {
    applied: AppliedState,
    memberships: Vec<StoredMembership>,
    snapshot: Option<SnapshotFile>,
}

/// The state machine of one data partition. Clones share one state.
#[derive(Clone)]
pub struct DataStateMachine {
    log: Arc<PartitionLog>,
    state: Arc<Mutex<State>>,
    /// Readers see an applied entry once the committed id on disk covers it.
    gate: CommitGate,
    /// Each applied data entry's (Raft index, end offset), for the task that
    /// publishes them as the high watermark once the gate covers them (started on
    /// the first apply).
    publish: Arc<OnceLock<mpsc::UnboundedSender<(u64, u64)>>>,
    /// Counts the state machine, whose snapshot installs write to the log, among
    /// the tasks a closing group waits for, until its last clone is dropped.
    _hold: Arc<crate::store::WritingHold>,
}

impl DataStateMachine {
    /// Opens the state machine of `log`, starting from its last snapshot; it
    /// applies entries through `gate` (`LogStore::commit_gate` of the same log).
    pub fn open(log: Arc<PartitionLog>, gate: CommitGate) -> Result<Self, RaftError> {
        let snapshot: Option<SnapshotFile> = crate::store::read_snapshot_file(&log)?;
        let mut state = State::default();
        if let Some(s) = &snapshot {
            state.applied = AppliedState {
                last_applied: s.meta.last_log_id,
                membership: s.meta.last_membership.clone(),
                high_watermark: s.next_offset,
            };
        }
        // A crash between keeping a snapshot and dropping the tail it left unmatched.
        let applied_before = snapshot.as_ref().and_then(|s| s.applied_before);
        crate::store::drop_unmatched_tail(&log, state.applied.last_applied, applied_before, &gate)?;
        state.snapshot = snapshot;
        log.set_committed_offset(state.applied.high_watermark);
        let hold = Arc::new(gate.hold());
        Ok(DataStateMachine {
            log,
            state: Arc::new(Mutex::new(state)),
            gate,
            publish: Arc::default(),
            _hold: hold,
        })
    }

    /// Moves the high watermark to `offset` once the committed id on disk covers
    /// Raft index `index`: the publisher takes every entry the id on disk covers
    /// each time it moves, and publishes the last one's offset. It ends with the
    /// state machine, or when the committed-id writer is gone (the group closed)
    /// or failed (`apply` then fails the group); a closing group waits for it
    /// (`CommitGate::hold`), so it never touches a log handed to someone else.
    fn publish(&self, index: u64, offset: u64) {
        let tx = self.publish.get_or_init(|| {
            let (tx, mut rx) = mpsc::unbounded_channel::<(u64, u64)>();
            let (log, mut gate) = (self.log.clone(), self.gate.clone());
            let hold = gate.hold();
            tokio::spawn(async move {
                let _hold = hold;
                let mut waiting: VecDeque<(u64, u64)> = VecDeque::new();
                let mut taken = Vec::new();
                loop {
                    tokio::select! {
                        biased;
                        n = rx.recv_many(&mut taken, 1024) => {
                            if n == 0 {
                                return;
                            }
                            waiting.extend(taken.drain(..));
                        }
                        more = gate.changed() => {
                            if !more {
                                return;
                            }
                        }
                    }
                    let mut last = None;
                    while let Some(&(index, offset)) = waiting.front() {
                        if !gate.covers(index) {
                            break;
                        }
                        last = Some(offset);
                        waiting.pop_front();
                    }
                    if let Some(offset) = last {
                        // Readers of this replica may now see the entries (es-log Raft mode).
                        log.set_committed_offset(offset);
                    }
                }
            });
            tx
        });
        let _ = tx.send((index, offset));
    }

    pub fn applied(&self) -> AppliedState {
        self.lock().applied.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("state machine lock")
    }

    fn apply_one(&self, entry: &crate::entry::EsEntry) -> Applied {
        let mut st = self.lock();
        let log_id = entry.log_id();
        st.applied.last_applied = Some(log_id);
        if let Some(m) = entry.get_membership() {
            let stored = StoredMembership::new(Some(log_id), m);
            st.applied.membership = stored.clone();
            st.memberships.push(stored);
            if st.memberships.len() > MEMBERSHIPS_KEPT {
                st.memberships.remove(0);
            }
        }
        match entry.header() {
            Some(h) if !h.is_raft_control() => {
                st.applied.high_watermark = h.next_offset();
                self.publish(log_id.index, h.next_offset());
                Applied { base_offset: h.base_offset, next_offset: h.next_offset() }
            }
            Some(h) => {
                if let Some(RaftControl::Compaction { index, horizon_ms }) = entry.control() {
                    // Committed: every replica compacts what comes before it the same
                    // way. Not storing it only delays compaction to the next decision.
                    if let Err(e) = self.log.apply_compaction(index, h.base_offset, horizon_ms) {
                        tracing::warn!(log = self.log.name(), index, error = %e, "storing a compaction decision failed");
                    }
                }
                Applied { base_offset: st.applied.high_watermark, next_offset: st.applied.high_watermark }
            }
            None => {
                Applied { base_offset: st.applied.high_watermark, next_offset: st.applied.high_watermark }
            }
        }
    }

    /// The Raft index of the first data entry this replica keeps (`None`: none),
    /// and its base offset: the first one held, or, when retention waits for a
    /// purge to delete segments, the first one after them. Scans at most
    /// `FLOOR_SCAN_MAX` control entries.
    fn data_floor(&self) -> io::Result<Option<(u64, u64)>> {
        let range = self.log.entry_range();
        let start = self.log.retention_wants().map_or(range.first, |w| w.clamp(range.first, range.next));
        let mut index = start;
        while index < range.next {
            if index - start >= FLOOR_SCAN_MAX {
                return Ok(Some((index, self.log.info().log_start_offset)));
            }
            let Some((_, bytes)) = self.log.read_entries(index, index + 1, 1).map_err(io)?.pop() else {
                return Ok(None);
            };
            let h = es_core::BatchHeader::parse(&bytes, usize::MAX)
                .map_err(|e| io::Error::other(e.to_string()))?;
            if !h.is_raft_control() {
                return Ok(Some((index, h.base_offset)));
            }
            index += 1;
        }
        Ok(None)
    }

    /// The snapshot at the retention boundary: the last applied index below the
    /// first data entry held, with the membership and term at that index.
    fn build(&self) -> io::Result<SnapshotFile> {
        let floor = self.data_floor()?;
        let st = self.lock();
        let applied = st.applied.clone();
        let at = match (applied.last_applied, floor) {
            (None, _) | (_, Some((0, _))) => None,
            (Some(a), None) => Some((a.index, applied.high_watermark)),
            (Some(a), Some((f, offset))) if a.index < f => {
                Some((a.index, applied.high_watermark.max(offset)))
            }
            (Some(_), Some((f, offset))) => Some((f - 1, offset)),
        };
        let Some((index, next_offset)) = at else {
            return Ok(SnapshotFile { meta: Meta::default(), next_offset: 0, applied_before: None });
        };
        let log_id = match applied.last_applied {
            Some(a) if a.index == index => Some(a),
            _ => self.term_at(index).map(|t| LogId::new(CommittedLeaderId::new(t), index)),
        };
        let membership = st
            .memberships
            .iter()
            .rev()
            .find(|m| m.log_id().is_some_and(|id| id.index <= index))
            .cloned()
            .unwrap_or_default();
        Ok(SnapshotFile {
            meta: Meta { last_log_id: log_id, last_membership: membership },
            next_offset,
            applied_before: None,
        })
    }

    /// The term of the entry at `index`, from the leader-epoch checkpoint.
    fn term_at(&self, index: u64) -> Option<Term> {
        let starts = self.log.entry_epochs();
        let start = starts.iter().rev().find(|e| e.index.is_some_and(|i| i <= index))?;
        Term::from_epoch(start.epoch)
    }

    fn keep(&self, snapshot: SnapshotFile) -> io::Result<Snap> {
        let bytes = serde_json::to_vec(&snapshot).map_err(io::Error::other)?;
        self.log.write_raft_file(RaftFile::Snapshot, &bytes).map_err(io)?;
        let meta = snapshot.meta.clone();
        self.lock().snapshot = Some(snapshot);
        Ok(Snapshot { meta, snapshot: Cursor::new(bytes) })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for DataStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> io::Result<Snap> {
        let snapshot = self.build()?;
        self.keep(snapshot)
    }
}

impl RaftStateMachine<TypeConfig> for DataStateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = DataStateMachine;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        let st = self.lock();
        Ok((st.applied.last_applied, st.applied.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> io::Result<()>
    where
        Strm: Stream<Item = io::Result<EntryResponder<TypeConfig>>> + Unpin + OptionalSend,
    {
        // A failed committed-id write stops the group, as a failed apply would.
        self.gate.check()?;
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let applied = self.apply_one(&entry);
            if let Some(r) = responder {
                r.send(applied);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Cursor<Vec<u8>>) -> io::Result<()> {
        self.gate.check()?;
        let file: SnapshotFile = serde_json::from_slice(snapshot.get_ref()).map_err(io::Error::other)?;
        let applied_before = {
            let mut st = self.lock();
            st.memberships = vec![meta.last_membership.clone()];
            let installed = AppliedState {
                last_applied: meta.last_log_id,
                membership: meta.last_membership.clone(),
                high_watermark: file.next_offset,
            };
            std::mem::replace(&mut st.applied, installed).last_applied
        };
        // On disk before readers see its offset: a restart starts from it.
        self.keep(SnapshotFile { meta: meta.clone(), next_offset: file.next_offset, applied_before })?;
        crate::store::drop_unmatched_tail(&self.log, meta.last_log_id, applied_before, &self.gate)
            .map_err(io)?;
        self.log.set_committed_offset(file.next_offset);
        es_log::failpoint::hit("raft-snapshot-installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snap>> {
        let Some(s) = self.lock().snapshot.clone() else {
            return Ok(None);
        };
        let s = SnapshotFile { applied_before: None, ..s };
        let bytes = serde_json::to_vec(&s).map_err(io::Error::other)?;
        Ok(Some(Snapshot { meta: s.meta, snapshot: Cursor::new(bytes) }))
    }
}
