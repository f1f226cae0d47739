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

use std::collections::BTreeMap;
use std::path::PathBuf;
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

/// The metadata group and this node's progress applying it.
pub struct MetadataLog {
    group: Group,
    applied_file: PathBuf,
    /// The next offset to apply.
    applied: watch::Sender<u64>,
    /// The outcome of each applied command by offset, until its proposer takes it.
    outcomes: Mutex<BTreeMap<u64, Result<()>>>,
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
        Ok(MetadataLog {
            group,
            applied_file,
            applied: watch::Sender::new(applied),
            outcomes: Mutex::default(),
        })
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Whether the group has a leader and this node applied everything it knows
    /// to be committed.
    pub(super) fn caught_up(&self) -> bool {
        self.group.leader().is_some() && *self.applied.borrow() >= self.group.log().high_watermark()
    }

    /// Appends `command` through the leader (forwarding it when that is another
    /// node); answers its offset once committed.
    pub(super) async fn propose(&self, cluster: &Cluster, command: &Command) -> Result<u64> {
        let value = serde_json::to_vec(command).map_err(|e| BrokerError::Internal(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + LEADER_WAIT;
        loop {
            let attempt = match self.group.leader() {
                Some(leader) if leader == cluster.node_id => self.propose_here(&value).await,
                Some(leader) => super::rpc::forward_metadata(cluster, leader, &value).await,
                None => Err(Retry::NoLeader),
            };
            match attempt {
                Ok(offset) => return Ok(offset),
                Err(Retry::Failed(e)) => return Err(e),
                Err(Retry::NoLeader) if tokio::time::Instant::now() >= deadline => {
                    return Err(BrokerError::NotLeader {
                        topic: "__es_cluster_metadata".into(),
                        partition: 0,
                        leader: None,
                    });
                }
                Err(Retry::NoLeader) => wait_for_leader(&self.group).await,
            }
        }
    }

    /// Proposes a command's record here, as the leader.
    pub(super) async fn propose_here(&self, value: &[u8]) -> std::result::Result<u64, Retry> {
        let record = Record::from_value(value.to_vec());
        let batch = es_core::batch::encode(
            &[record],
            es_core::Clock::now_ms(&es_core::SystemClock),
            ProducerInfo::NONE,
        )
        .map_err(|e| Retry::Failed(BrokerError::Internal(e.to_string())))?;
        match self.group.propose(batch).await {
            Ok(appended) => Ok(appended.base_offset),
            Err(ProposeError::NotLeader { .. } | ProposeError::LeadershipLost { .. }) => Err(Retry::NoLeader),
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
        self.outcomes.lock().expect("outcomes lock").remove(&offset).unwrap_or(Ok(()))
    }

    fn record_outcome(&self, offset: u64, outcome: Result<()>) {
        let mut outcomes = self.outcomes.lock().expect("outcomes lock");
        outcomes.insert(offset, outcome);
        while outcomes.len() > OUTCOMES_KEPT {
            outcomes.pop_first();
        }
    }

    fn save_applied(&self, next: u64) -> Result<()> {
        crate::store::write_durably(&self.applied_file, next.to_string().as_bytes())
            .map_err(|e| BrokerError::Internal(format!("saving {}: {e}", self.applied_file.display())))?;
        self.applied.send_replace(next);
        Ok(())
    }
}

/// Why a proposal did not land, and whether to try again.
pub(super) enum Retry {
    NoLeader,
    Failed(BrokerError),
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

/// Applies every committed record from the next offset to apply.
async fn apply_available(cluster: &Arc<Cluster>) -> Result<()> {
    let log = cluster.metadata.group.log().clone();
    loop {
        let next = *cluster.metadata.applied.borrow();
        if next >= log.high_watermark() {
            return Ok(());
        }
        let read = log.read(next, READ_BYTES)?;
        let mut records = Vec::new();
        for batch in read.batches() {
            for r in batch.records() {
                let r = r.map_err(|e| BrokerError::Internal(format!("a metadata record: {e}")))?;
                if r.offset >= next {
                    records.push((r.offset, r.value.map(<[u8]>::to_vec).unwrap_or_default()));
                }
            }
        }
        if records.is_empty() {
            return Ok(());
        }
        for (offset, value) in records {
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
            cluster.metadata.record_outcome(offset, outcome);
            cluster.metadata.save_applied(offset + 1)?;
        }
    }
}

/// Applies one command: the registry's local part, then the partitions' groups.
async fn apply_one(cluster: &Arc<Cluster>, value: &[u8]) -> Result<()> {
    let command: Command = serde_json::from_slice(value)
        // The same bytes on every node: refused alike everywhere, then skipped.
        .map_err(|e| BrokerError::InvalidRequest(format!("an unreadable metadata command: {e}")))?;
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
