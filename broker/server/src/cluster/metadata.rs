//! The replicated metadata log: Raft group 0 over the partition
//! `__es_cluster_metadata`, one record per command (the command as JSON in the
//! value), applied in offset order by every node to its registry.
//!
//! A command reaches the log through the group's leader (this node, or forwarded
//! to it: `rpc.rs`). The applier tails the committed records; after applying one it
//! saves the next offset to apply in `<data>/cluster/metadata-applied` (written
//! atomically), so a restart resumes where it stopped. A crash between an apply and
//! that save applies one command twice, which changes nothing the second time
//! (`registry/replicated.rs`). The proposer waits for its own node's apply and
//! answers its outcome, so a created topic is visible where it was created.
//!
//! A proposal whose answer was lost (its leader stepped down, the forwarded call
//! timed out) is proposed again, so it can land twice. Each proposal carries an id
//! (the record's key, the same for every attempt), and the applier applies a
//! record whose id it applied within the last [`DEDUPE_WINDOW`] offsets as a no-op
//! with the first one's outcome ([`Seen`]). The rule reads only the log, so every
//! node skips the same records: a retried create that lands after a delete of the
//! same topic does not bring it back on one node and not on another.
//!
//! The log is kept by size (`cluster.metadata_retention_bytes`), never past what
//! this node applied: every [`CHECKPOINT_EVERY`] commands, or sooner once the log
//! outgrows its retention, the applier writes its dedupe window to
//! `<data>/cluster/metadata-seen` and only then lets retention remove the
//! segments before it ([`PartitionLog::set_retention_floor`]), so a restart
//! rebuilds the same window from the checkpoint and the log. A node whose next
//! offset to apply is below its log's start (it joined, or was down, after the
//! leader purged) installs the registry of a peer that applied past it
//! (`image.rs`) and goes on from there.
//!
//! [`PartitionLog::set_retention_floor`]: es_log::PartitionLog::set_retention_floor

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use es_core::{ProducerInfo, Record};
use es_raft::{Group, ProposeError};
use tokio::sync::watch;

use super::{Cluster, LEADER_WAIT};
use crate::registry::metadata::Command;
use crate::registry::{Applied, Registry};
use crate::service::error::{BrokerError, Result};

/// How long a proposer waits for its node to apply its command.
pub(super) const APPLY_WAIT: Duration = Duration::from_secs(30);
/// Outcomes kept for proposers that have not collected theirs yet.
const OUTCOMES_KEPT: usize = 1024;
/// Bytes read from the metadata log per step of the applier.
const READ_BYTES: usize = 1 << 20;
/// How many offsets back a record's proposal id is looked for. A retry lands
/// within seconds of its first attempt (`LEADER_WAIT`); metadata commands come a
/// few per second at most.
pub(super) const DEDUPE_WINDOW: u64 = 65_536;
/// Commands applied between two checkpoints of the dedupe window (sooner when the
/// log outgrows its retention).
const CHECKPOINT_EVERY: u64 = 1024;
/// The checkpoint's file name in `<data>/cluster`.
const SEEN_FILE: &str = "metadata-seen";

/// A proposal's identity: the proposing node (8 bytes, big-endian) and a random
/// number. The record's key; every attempt of one proposal carries the same.
pub(super) type ProposalId = [u8; 16];

fn new_proposal_id(node: u64) -> ProposalId {
    let mut id = [0; 16];
    id[..8].copy_from_slice(&node.to_be_bytes());
    id[8..].copy_from_slice(&rand::random::<u64>().to_be_bytes());
    id
}

/// The metadata group and this node's progress applying it.
pub struct MetadataLog {
    group: Group,
    applied_file: PathBuf,
    /// The next offset to apply.
    applied: watch::Sender<u64>,
    /// The outcome of each applied command by offset, until its proposer takes it.
    outcomes: Mutex<BTreeMap<u64, Result<()>>>,
    /// The applier's dedupe window (built on its first step), locked while it
    /// applies: what is read under it (`image.rs`) matches `applied`.
    pub(super) applying: tokio::sync::Mutex<Option<Seen>>,
    seen_file: PathBuf,
    /// The next offset of the last checkpoint of the window: retention's floor.
    checkpointed: AtomicU64,
    /// The offsets the last image install went past without applying them here.
    installed_over: Mutex<std::ops::Range<u64>>,
}

impl MetadataLog {
    pub(super) fn open(registry: &Registry, group: Group) -> Result<MetadataLog> {
        let dir = super::cluster_dir(registry);
        std::fs::create_dir_all(&dir)
            .map_err(|e| BrokerError::Internal(format!("creating {}: {e}", dir.display())))?;
        let applied_file = dir.join("metadata-applied");
        let applied = match std::fs::read_to_string(&applied_file) {
            Ok(text) => text.trim().parse::<u64>().map_err(|e| {
                BrokerError::Internal(format!(
                    "{} is not an offset ({e}); restore it from a peer",
                    applied_file.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(BrokerError::Internal(format!("reading {}: {e}", applied_file.display()))),
        };
        let seen_file = dir.join(SEEN_FILE);
        let checkpointed = load_checkpoint(&seen_file)?.map_or(0, |c| c.next);
        // Nothing this node has not checkpointed leaves its log.
        group.log().set_retention_floor(checkpointed);
        Ok(MetadataLog {
            group,
            applied_file,
            applied: watch::Sender::new(applied),
            outcomes: Mutex::default(),
            applying: tokio::sync::Mutex::default(),
            seen_file,
            checkpointed: AtomicU64::new(checkpointed),
            installed_over: Mutex::new(0..0),
        })
    }

    /// The next offset this node applies.
    pub(super) fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Whether the group has a leader and this node applied everything it knows
    /// to be committed.
    pub(super) fn caught_up(&self) -> bool {
        let log = self.group.log();
        let end = log.high_watermark().max(log.committed_offset().unwrap_or(0));
        self.group.leader().is_some() && *self.applied.borrow() >= end
    }

    /// Appends `command` through the leader (forwarding it when that is another
    /// node); answers its offset once committed. An attempt whose outcome is unknown
    /// is made again with the same proposal id, which the applier applies once.
    pub(super) async fn propose(&self, cluster: &Cluster, command: &Command) -> Result<u64> {
        let value = serde_json::to_vec(command).map_err(|e| BrokerError::Internal(e.to_string()))?;
        let id = new_proposal_id(cluster.node_id);
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        let mut may_have_landed = false;
        loop {
            let attempt = match self.group.leader() {
                Some(leader) if leader == cluster.node_id => self.propose_here(&id, &value).await,
                Some(leader) => super::rpc::forward_metadata(cluster, leader, &id, &value).await,
                None => Err(Retry::NoLeader),
            };
            let retry = match attempt {
                Ok(offset) => return Ok(offset),
                Err(Retry::Failed(e)) => return Err(e),
                Err(retry) => retry,
            };
            may_have_landed |= matches!(retry, Retry::MayHaveLanded);
            if tokio::time::Instant::now() >= deadline {
                let (topic, partition) = ("__es_cluster_metadata".to_owned(), 0);
                // 421 promises nothing was done; after an attempt that may have been
                // committed, only "unknown" is true.
                return Err(if may_have_landed {
                    BrokerError::LeadershipLost { topic, partition, leader: None }
                } else {
                    BrokerError::NotLeader { topic, partition, leader: None }
                });
            }
            wait_for_leader(&self.group).await;
        }
    }

    /// Proposes a command's record here, as the leader.
    pub(super) async fn propose_here(
        &self,
        id: &ProposalId,
        value: &[u8],
    ) -> std::result::Result<u64, Retry> {
        let record = Record::keyed(id.to_vec(), value.to_vec());
        let batch = es_core::batch::encode(
            &[record],
            es_core::Clock::now_ms(&es_core::SystemClock),
            ProducerInfo::NONE,
        )
        .map_err(|e| Retry::Failed(BrokerError::Internal(e.to_string())))?;
        match self.group.propose(batch).await {
            Ok(appended) => Ok(appended.base_offset),
            Err(ProposeError::NotLeader { .. }) => Err(Retry::NoLeader),
            Err(ProposeError::LeadershipLost { .. } | ProposeError::Timeout) => Err(Retry::MayHaveLanded),
            Err(e) => {
                Err(Retry::Failed(BrokerError::Internal(format!("replicating a metadata change: {e}"))))
            }
        }
    }

    /// Waits (bounded) until this node applied `offset`, and answers its outcome.
    pub(super) async fn outcome(&self, offset: u64, wait: Duration) -> Result<()> {
        let mut rx = self.applied.subscribe();
        let reached = tokio::time::timeout(wait, rx.wait_for(|next| *next > offset)).await;
        if !matches!(reached, Ok(Ok(_))) {
            return Err(BrokerError::Internal(format!(
                "the metadata change at offset {offset} was committed but not applied here within {wait:?}"
            )));
        }
        let outcome = self.outcomes.lock().expect("outcomes lock").remove(&offset);
        outcome.unwrap_or_else(|| {
            if self.installed_over.lock().expect("installed lock").contains(&offset) {
                // Committed, and this node took a peer's registry past it: whether
                // it was applied or refused is not known here.
                let (topic, partition) = ("__es_cluster_metadata".to_owned(), 0);
                return Err(BrokerError::LeadershipLost { topic, partition, leader: None });
            }
            Ok(())
        })
    }

    /// Records that an image took this node from `from` to `to` without applying
    /// the commands in between here.
    pub(super) fn installed(&self, from: u64, to: u64) {
        *self.installed_over.lock().expect("installed lock") = from..to;
    }

    /// Takes the outcome recorded for `offset`, if nobody collected it yet.
    fn take_outcome(&self, offset: u64) -> Option<Result<()>> {
        self.outcomes.lock().expect("outcomes lock").remove(&offset)
    }

    fn record_outcome(&self, offset: u64, outcome: Result<()>) {
        let mut outcomes = self.outcomes.lock().expect("outcomes lock");
        outcomes.insert(offset, outcome);
        while outcomes.len() > OUTCOMES_KEPT {
            outcomes.pop_first();
        }
    }

    /// The applier's dedupe window, built from the checkpoint and the log on
    /// first use (by the applier, or by a peer's ask for an image).
    pub(super) fn window<'g>(&self, guard: &'g mut Option<Seen>) -> Result<&'g mut Seen> {
        match guard {
            Some(seen) => Ok(seen),
            None => {
                let checkpoint = load_checkpoint(&self.seen_file)?;
                Ok(guard.insert(Seen::rebuild(self.group.log(), self.applied(), checkpoint)?))
            }
        }
    }

    /// Writes the window as it stands before `next` (atomically), then lets
    /// retention remove what precedes `next`.
    pub(super) fn save_checkpoint(&self, seen: &Seen, next: u64) -> Result<()> {
        let checkpoint = Checkpoint { next, entries: seen.entries(next) };
        crate::store::write_durably(&self.seen_file, &checkpoint.encode())
            .map_err(|e| BrokerError::Internal(format!("saving {}: {e}", self.seen_file.display())))?;
        self.checkpointed.store(next, Ordering::Release);
        self.group.log().set_retention_floor(next);
        Ok(())
    }

    /// Checkpoints after [`CHECKPOINT_EVERY`] commands, or after any once the
    /// floor holds retention back (the log is over its retention by a segment).
    fn maybe_checkpoint(&self, seen: &Seen) -> Result<()> {
        let (next, last) = (self.applied(), self.checkpointed.load(Ordering::Acquire));
        let log = self.group.log();
        let config = log.config();
        let full = config.retention_bytes >= 0
            && log.info().size_bytes >= config.retention_bytes as u64 + config.segment_bytes;
        if next > last && (next - last >= CHECKPOINT_EVERY || full) {
            self.save_checkpoint(seen, next)?;
        }
        Ok(())
    }

    pub(super) fn save_applied(&self, next: u64) -> Result<()> {
        crate::store::write_durably(&self.applied_file, next.to_string().as_bytes())
            .map_err(|e| BrokerError::Internal(format!("saving {}: {e}", self.applied_file.display())))?;
        self.applied.send_replace(next);
        Ok(())
    }
}

/// Why a proposal did not land, and whether to try again.
pub(super) enum Retry {
    /// No leader took it: nothing was appended.
    NoLeader,
    /// A leader took it and lost its answer (stepped down, or the call timed out):
    /// it may be committed.
    MayHaveLanded,
    Failed(BrokerError),
}

/// The proposal ids applied in the last [`DEDUPE_WINDOW`] offsets, by offset.
/// Rebuilt from the log at start ([`Seen::rebuild`]), so it is the same on every
/// node at the same offset.
#[derive(Default)]
pub(super) struct Seen {
    /// Where each id in the window was first applied.
    at: HashMap<ProposalId, u64>,
    order: VecDeque<(u64, ProposalId)>,
    /// Where each id last landed, its outcome moved there for its proposer (this
    /// node's bookkeeping; no decision reads it).
    latest: HashMap<ProposalId, u64>,
}

impl Seen {
    /// The window before `next` (the next offset to apply): the records in it,
    /// from this node's checkpoint below the checkpoint's offset and from the log
    /// above it.
    fn rebuild(log: &es_log::PartitionLog, next: u64, checkpoint: Option<Checkpoint>) -> Result<Seen> {
        let from = next.saturating_sub(DEDUPE_WINDOW);
        let mut offset = from;
        let mut seen = Seen::default();
        if let Some(c) = checkpoint.filter(|c| c.next <= next) {
            seen = Seen::from_entries(c.entries.into_iter().filter(|(at, _)| *at >= from && *at < c.next));
            offset = offset.max(c.next);
        }
        let start = log.info().log_start_offset;
        if start > offset {
            tracing::warn!(
                from = offset,
                to = start,
                "the metadata log no longer holds these offsets and no checkpoint covers them: a retried \
                 proposal that first landed there would be applied again here"
            );
            offset = start;
        }
        while offset < next {
            let records = read_commands(log, offset)?;
            let Some(last) = records.last() else { break };
            offset = last.0 + 1;
            for (at, id, _) in records.into_iter().filter(|r| r.0 < next) {
                if let Some(id) = id
                    && seen.first(&id, at).is_none()
                {
                    seen.insert(id, at);
                }
            }
        }
        Ok(seen)
    }

    /// A window of first landings, oldest first (a checkpoint's or an image's).
    pub(super) fn from_entries(entries: impl IntoIterator<Item = (u64, ProposalId)>) -> Seen {
        let mut seen = Seen::default();
        for (at, id) in entries {
            seen.insert(id, at);
        }
        seen
    }

    /// The first landings still in the window before `next`, oldest first.
    pub(super) fn entries(&self, next: u64) -> Vec<(u64, ProposalId)> {
        let from = next.saturating_sub(DEDUPE_WINDOW);
        self.order
            .iter()
            .filter(|(at, id)| *at >= from && *at < next && self.at.get(id) == Some(at))
            .copied()
            .collect()
    }

    /// Where `id` was first applied, if within the window before `offset`.
    fn first(&mut self, id: &ProposalId, offset: u64) -> Option<u64> {
        while let Some((at, old)) = self.order.front() {
            if at + DEDUPE_WINDOW >= offset {
                break;
            }
            if self.at.get(old) == Some(at) {
                self.at.remove(old);
                self.latest.remove(old);
            }
            self.order.pop_front();
        }
        self.at.get(id).copied().filter(|first| *first < offset)
    }

    /// `id` applied at `offset`, its first landing.
    fn insert(&mut self, id: ProposalId, offset: u64) {
        self.at.insert(id, offset);
        self.order.push_back((offset, id));
    }

    /// `id` landed again at `offset`: answers where its outcome was until now.
    fn landed_again(&mut self, id: ProposalId, offset: u64) -> Option<u64> {
        let first = self.at.get(&id).copied();
        self.latest.insert(id, offset).or(first)
    }
}

/// The dedupe window before `next`, as `<data>/cluster/metadata-seen` holds it
/// and an image carries it: `next` (u64 BE), then each first landing's offset
/// (u64 BE) and proposal id (16 bytes), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checkpoint {
    pub next: u64,
    pub entries: Vec<(u64, ProposalId)>,
}

const ENTRY_BYTES: usize = 8 + 16;

impl Checkpoint {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.len() * ENTRY_BYTES);
        out.extend_from_slice(&self.next.to_be_bytes());
        for (at, id) in &self.entries {
            out.extend_from_slice(&at.to_be_bytes());
            out.extend_from_slice(id);
        }
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> std::result::Result<Checkpoint, String> {
        let Some((next, rest)) = bytes.split_first_chunk::<8>() else {
            return Err(format!("{} bytes, not a checkpoint", bytes.len()));
        };
        if rest.len() % ENTRY_BYTES != 0 {
            return Err(format!("{} bytes of entries, not a multiple of {ENTRY_BYTES}", rest.len()));
        }
        let entries = rest
            .chunks_exact(ENTRY_BYTES)
            .map(|e| {
                let (at, id) = e.split_at(8);
                (u64::from_be_bytes(at.try_into().expect("8 bytes")), id.try_into().expect("16 bytes"))
            })
            .collect();
        Ok(Checkpoint { next: u64::from_be_bytes(*next), entries })
    }
}

fn load_checkpoint(path: &std::path::Path) -> Result<Option<Checkpoint>> {
    match std::fs::read(path) {
        Ok(bytes) => Checkpoint::decode(&bytes).map(Some).map_err(|e| {
            BrokerError::Internal(format!(
                "{} is damaged ({e}); remove it and the node rebuilds its window from the log",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BrokerError::Internal(format!("reading {}: {e}", path.display()))),
    }
}

async fn wait_for_leader(group: &Group) {
    let mut rx = group.watch_leader();
    let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
}

/// Starts the task that applies committed metadata records, in order, for the
/// node's life.
pub(super) fn spawn_applier(cluster: &Arc<Cluster>) {
    let weak = Arc::downgrade(cluster);
    let mut committed = cluster.metadata.group.log().subscribe();
    tokio::spawn(async move {
        loop {
            let Some(cluster) = weak.upgrade() else { return };
            if let Err(e) = apply_available(&cluster).await {
                tracing::error!(error = %e, "applying the metadata log failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            drop(cluster);
            let stop = async {
                let _ = committed.changed().await;
            };
            // Woken by the log; the timeout re-checks in case a wake was missed.
            let _ = tokio::time::timeout(Duration::from_millis(500), stop).await;
        }
    });
}

/// Applies every committed record from the next offset to apply; the dedupe
/// window is built on the first call. Below the log's start, installs a peer's
/// registry first (`image.rs`).
async fn apply_available(cluster: &Arc<Cluster>) -> Result<()> {
    let log = cluster.metadata.group.log().clone();
    loop {
        let next = cluster.metadata.applied();
        if let Some(at_least) = missing_here(&log, next) {
            super::image::catch_up(cluster, next, at_least).await?;
            continue;
        }
        if next >= log.high_watermark() {
            return Ok(());
        }
        let records = read_commands(&log, next)?;
        if records.is_empty() {
            return Ok(());
        }
        for (offset, id, value) in records {
            // Taken a command at a time: an image asked for meanwhile waits for one.
            let mut guard = cluster.metadata.applying.lock().await;
            let seen = cluster.metadata.window(&mut guard)?;
            if let Some((id, first)) = id.and_then(|id| Some((id, seen.first(&id, offset)?))) {
                // A retried proposal that landed twice: applied once, at `first`. The
                // outcome moves to this offset, where its proposer may be waiting (it
                // waits on one landing only). One no longer kept (over
                // `OUTCOMES_KEPT` commands ago) was an apply, refused or not: Ok.
                tracing::info!(offset, first, "a retried metadata proposal landed twice; applied once");
                let outcome = seen
                    .landed_again(id, offset)
                    .and_then(|at| cluster.metadata.take_outcome(at))
                    .unwrap_or(Ok(()));
                cluster.metadata.record_outcome(offset, outcome);
                cluster.metadata.save_applied(offset + 1)?;
                continue;
            }
            let outcome = apply_one(cluster, &value).await;
            match &outcome {
                // This node could not do its part (a disk error): it must not skip the
                // command, or it would differ from the others; the applier retries.
                Err(e @ (BrokerError::Internal(_) | BrokerError::Storage(_))) => {
                    return Err(BrokerError::Internal(format!("applying metadata offset {offset}: {e}")));
                }
                Err(e) => {
                    tracing::info!(offset, error = %e, "a replicated metadata change was refused on apply")
                }
                Ok(()) => {}
            }
            if let Some(id) = id {
                seen.insert(id, offset);
            }
            cluster.metadata.record_outcome(offset, outcome);
            cluster.metadata.save_applied(offset + 1)?;
        }
        let mut guard = cluster.metadata.applying.lock().await;
        let seen = cluster.metadata.window(&mut guard)?;
        cluster.metadata.maybe_checkpoint(seen)?;
    }
}

/// The lowest image offset this node needs when its next command to apply is not
/// in its log: the group committed past the log's end (a snapshot was installed;
/// the log starts over at its next append, and what it holds until then may
/// include entries no leader committed), or the next command is below its start.
pub(super) fn missing_here(log: &es_log::PartitionLog, next: u64) -> Option<u64> {
    // The committed offset first: an append committed between the two reads must
    // not look like a commit past the log's end.
    let committed = log.committed_offset().unwrap_or(0);
    let info = log.info();
    if committed > info.log_end_offset && committed > next {
        // The local tail may hold entries the leader never committed: not applied.
        Some(committed)
    } else if next < info.log_start_offset {
        Some(info.log_start_offset)
    } else {
        None
    }
}

/// A committed record: its offset, proposal id (none for a record of a build
/// before ids) and command.
type CommandRecord = (u64, Option<ProposalId>, Vec<u8>);

/// The committed records from `from` on (up to `READ_BYTES` of them).
fn read_commands(log: &es_log::PartitionLog, from: u64) -> Result<Vec<CommandRecord>> {
    let read = log.read(from, READ_BYTES)?;
    let mut records = Vec::new();
    for batch in read.batches() {
        for r in batch.records() {
            let r = r.map_err(|e| BrokerError::Internal(format!("a metadata record: {e}")))?;
            if r.offset >= from {
                let id = r.key.and_then(|k| ProposalId::try_from(k).ok());
                records.push((r.offset, id, r.value.map(<[u8]>::to_vec).unwrap_or_default()));
            }
        }
    }
    Ok(records)
}

/// Applies one command: the registry's local part, then the partitions' groups.
async fn apply_one(cluster: &Arc<Cluster>, value: &[u8]) -> Result<()> {
    let command: Command = serde_json::from_slice(value)
        // The same bytes on every node: refused alike everywhere, then skipped.
        .map_err(|e| BrokerError::InvalidRequest(format!("an unreadable metadata command: {e}")))?;
    apply_command(cluster, command).await
}

/// Applies one command, from the log or made up to install an image (`image.rs`).
pub(super) async fn apply_command(cluster: &Arc<Cluster>, command: Command) -> Result<()> {
    if matches!(command, Command::AddNode { .. } | Command::RemoveNode { .. }) {
        return cluster.apply_membership(&command).await;
    }
    let mut placing = None;
    if let Command::DeleteTopic { name } = &command
        && let Ok(topic) = cluster.registry.topic(name)
    {
        // The groups stop before their logs are deleted under them, and no
        // moved-away replica's log is discarded meanwhile.
        placing = Some(cluster.placing.lock().await);
        cluster.close_groups(&topic).await;
    }
    let grows = match &command {
        Command::CreateTopic(meta) => Some(meta.name.clone()),
        Command::SetPartitions { name, .. } | Command::SetReplicas { name, .. } => Some(name.clone()),
        _ => None,
    };
    let uploads = matches!(command, Command::PutPlugin { .. });
    let registry = cluster.registry.clone();
    let applied = tokio::task::spawn_blocking(move || registry.apply_replicated(&command))
        .await
        .map_err(|e| BrokerError::Internal(format!("the metadata apply task failed: {e}")))??;
    drop(placing);
    if uploads && !cluster.registry.plugins().missing_blobs().is_empty() {
        // The blob travels apart (`blobs.rs`); later commands do not wait for it.
        cluster.blobs_wanted.notify_one();
    }
    match (applied, grows) {
        (Applied::Created(topic) | Applied::Moved(topic, _), _) => cluster.open_groups(&topic, false).await,
        // Applied before (a retry after this node failed to open a group, or a
        // replay): the groups still missing are opened now.
        (Applied::Unchanged, Some(name)) => match cluster.registry.topic(&name) {
            Ok(topic) => cluster.open_groups(&topic, false).await,
            Err(_) => Ok(()),
        },
        (Applied::Unchanged | Applied::Deleted(_), _) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::BrokerOptions;

    fn keyed(id: u8) -> ProposalId {
        [id; 16]
    }

    #[test]
    fn an_id_is_found_within_the_window_only() {
        let mut seen = Seen::default();
        seen.insert(keyed(1), 10);
        seen.insert(keyed(2), 20);
        assert_eq!(seen.first(&keyed(1), 10 + DEDUPE_WINDOW), Some(10));
        assert_eq!(seen.first(&keyed(3), 11), None);
        // Past the window the first id is forgotten, the second not yet.
        assert_eq!(seen.first(&keyed(1), 11 + DEDUPE_WINDOW), None);
        assert_eq!(seen.first(&keyed(2), 11 + DEDUPE_WINDOW), Some(20));
        assert_eq!(seen.at.len(), 1);
    }

    /// What a restarted node rebuilds from its log is what the applier built going
    /// along: the window before the next offset, records without an id left out.
    #[test]
    fn the_window_rebuilt_from_the_log_matches_the_one_built_applying() {
        let dir = tempfile::tempdir().unwrap();
        let registry = crate::registry::Registry::open(BrokerOptions::new(dir.path())).unwrap().0;
        let log = registry
            .open_cluster_log("metadata", crate::cluster::MetadataLogConfig::default().log_config())
            .unwrap();
        // Every fourth record has no id; every fifth lands again two records later.
        let records: Vec<Record> = (0..40u8)
            .map(|i| match (i % 4, i % 5) {
                (0, _) => Record::from_value(b"{}".to_vec()),
                (_, 2) => Record::keyed(keyed(i - 2).to_vec(), b"{}".to_vec()),
                _ => Record::keyed(keyed(i).to_vec(), b"{}".to_vec()),
            })
            .collect();
        for chunk in records.chunks(3) {
            log.append_records(chunk, es_core::LeaderEpoch::INITIAL).unwrap().wait().unwrap();
        }
        let rebuilt = Seen::rebuild(&log, 31, None).unwrap();
        let mut built = Seen::default();
        let mut skipped = 0;
        for (offset, r) in records.iter().enumerate().take(31) {
            let Some(id) = r.key.as_ref().map(|k| ProposalId::try_from(k.as_ref()).unwrap()) else {
                continue;
            };
            match built.first(&id, offset as u64) {
                Some(_) => skipped += 1,
                None => built.insert(id, offset as u64),
            }
        }
        assert_eq!(rebuilt.at, built.at);
        assert_eq!(rebuilt.order, built.order);
        assert_eq!(skipped, 3, "offsets 7, 17 and 27 land an id again");
        assert_eq!(rebuilt.at.len(), 23 - skipped, "31 records, 8 of them without an id");
        // From a checkpoint at 20 (read back from its bytes) and the log after it:
        // the same window, whatever the log still holds before 20.
        let at_20 = Seen::rebuild(&log, 20, None).unwrap();
        let checkpoint = Checkpoint { next: 20, entries: at_20.entries(20) };
        let checkpoint = Checkpoint::decode(&checkpoint.encode()).unwrap();
        assert_eq!(checkpoint.entries.len(), at_20.at.len());
        let resumed = Seen::rebuild(&log, 31, Some(checkpoint.clone())).unwrap();
        assert_eq!((resumed.at, resumed.order), (built.at, built.order));
        // A checkpoint past the next offset (written by an install the applied
        // offset never followed) is not used.
        let ahead = Checkpoint { next: 40, entries: Vec::new() };
        assert_eq!(Seen::rebuild(&log, 31, Some(ahead)).unwrap().at, rebuilt.at);
        assert!(Checkpoint::decode(&[0; 9]).is_err(), "a torn entry is refused");
    }

    async fn single_node(dir: &std::path::Path) -> Arc<Cluster> {
        let registry = crate::registry::Registry::open(BrokerOptions::new(dir)).unwrap().0;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let options = super::super::ClusterOptions {
            node_id: 1,
            peers: BTreeMap::from([(1, addr.clone())]),
            secrets: es_peer::Secrets::single(es_peer::Secret::new(1, vec![7; 32])),
            timers: es_raft::Timers::default(),
            addresses: super::super::NodeAddresses {
                kafka_host: "127.0.0.1".into(),
                kafka_port: 9092,
                http: "http://127.0.0.1:8080".into(),
                binary: "127.0.0.1:9093".into(),
                rack: None,
            },
            leader_balance: None,
            join: false,
            metadata_log: Default::default(),
        };
        let cluster = Cluster::start(registry, options, listener).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !cluster.metadata.caught_up() {
            assert!(tokio::time::Instant::now() < deadline, "the metadata group elected no leader");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cluster
    }

    fn create(name: &str) -> Vec<u8> {
        serde_json::to_vec(&Command::CreateTopic(crate::store::TopicMeta {
            name: name.into(),
            partitions: 1,
            config: crate::config::TopicConfig::default(),
            created_ms: 0,
            validators: Vec::new(),
            topic_id: Some(crate::store::new_topic_id()),
            replicas: Some(vec![vec![1]]),
            moved: Default::default(),
        }))
        .unwrap()
    }

    async fn propose(cluster: &Cluster, id: &ProposalId, value: &[u8]) -> (u64, Result<()>) {
        let Ok(offset) = cluster.metadata.propose_here(id, value).await else { panic!("not proposed") };
        (offset, cluster.metadata.outcome(offset, APPLY_WAIT).await)
    }

    /// A create's retry that lands after the topic was deleted does not bring the
    /// topic back, and a retry's proposer gets the first landing's outcome.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_proposal_that_lands_twice_is_applied_once() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = single_node(dir.path()).await;
        let id = new_proposal_id(1);
        let value = create("t");
        let (first, outcome) = propose(&cluster, &id, &value).await;
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(cluster.registry.topic("t").is_ok());
        cluster.replicate_async(Command::DeleteTopic { name: "t".into() }).await.unwrap();
        assert!(cluster.registry.topic("t").is_err());
        let (again, outcome) = propose(&cluster, &id, &value).await;
        assert!(again > first);
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(cluster.registry.topic("t").is_err(), "the retried create brought the deleted topic back");

        // The first landing refused (the topic exists) and its outcome never collected,
        // nor the second's: the third answers that refusal.
        cluster.replicate_async(serde_json::from_slice(&create("u")).unwrap()).await.unwrap();
        let id = new_proposal_id(1);
        let value = create("u");
        let mut landed = Vec::new();
        for _ in 0..2 {
            let Ok(offset) = cluster.metadata.propose_here(&id, &value).await else { panic!("not proposed") };
            landed.push(offset);
        }
        let (_, outcome) = propose(&cluster, &id, &value).await;
        assert!(matches!(outcome, Err(BrokerError::TopicExists(_))), "{outcome:?}");
        for offset in landed {
            assert!(cluster.metadata.take_outcome(offset).is_none(), "the outcome moved to the last landing");
        }
        cluster.shutdown().await;
    }
}
