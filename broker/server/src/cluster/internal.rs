//! The broker's internal partitions in a cluster: `__es_offsets` (consumer groups'
//! committed offsets) and `__es_schemas` (the schema registry) are Raft groups
//! over every node like the data partitions, with group ids fixed by name (each
//! node creates these topics itself, so their topic ids differ between nodes).
//!
//! Kafka's design: the group coordinator is the leader of the offsets partition.
//! [`spawn_coordinator`] follows that leadership: a node that gains it drops what
//! it knew, waits until its whole log is committed (a new leader's earlier-term
//! entries commit with its blank entry), rebuilds the committed offsets from the
//! log and only then serves (COORDINATOR_LOAD_IN_PROGRESS meanwhile); a node that
//! loses it stops serving and drops its members, which rejoin at the new leader.
//! [`spawn_schema_applier`] applies the registry's committed records on every node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use es_groups::{GroupError, offsets::Appender};
use es_raft::{Group, ProposeError};

use super::{Cluster, raft_error};
use crate::groups::{OFFSETS_TOPIC, Serving};
use crate::registry::Registry;
use crate::schemas::SCHEMAS_TOPIC;
use crate::service::error::Result;

/// How long a new coordinator waits for its log to commit before it looks again.
const LOAD_WAIT: Duration = Duration::from_secs(10);
/// How often leadership is looked at again without a change (the leader's
/// address, learned late, reaches the NOT_COORDINATOR hint this way).
const RECHECK: Duration = Duration::from_secs(1);

/// An internal partition's group id: the same on every node, from its name.
pub fn internal_group_id(name: &str) -> u64 {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(b"es internal partition\0");
    h.update(name.as_bytes());
    let digest = h.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")).max(1)
}

/// The two internal groups, opened on this node.
pub(super) struct InternalGroups {
    pub offsets: Group,
    pub schemas: Group,
}

/// Opens the internal partitions' groups (the registry created their topics).
pub(super) async fn open(
    host: &es_raft::RaftHost,
    registry: &Registry,
    voters: &[u64],
) -> Result<InternalGroups> {
    let offsets = open_one(host, registry, voters, OFFSETS_TOPIC).await?;
    let schemas = open_one(host, registry, voters, SCHEMAS_TOPIC).await?;
    Ok(InternalGroups { offsets, schemas })
}

async fn open_one(
    host: &es_raft::RaftHost,
    registry: &Registry,
    voters: &[u64],
    name: &str,
) -> Result<Group> {
    let topic = registry.topic(name)?;
    super::refuse_single_node_data(&topic, host.node_id())?;
    let log = topic.partition(0)?.clone();
    host.open_group(internal_group_id(name), log, voters).await.map_err(raft_error)
}

/// Routes offset writes through the offsets group and starts following its
/// leadership. This node serves no group call until it leads and has loaded.
pub(super) fn spawn_coordinator(cluster: &Arc<Cluster>) {
    let groups = cluster.registry.groups();
    groups.stop_coordinating(None);
    groups.offsets.set_appender(appender(cluster));
    let weak = Arc::downgrade(cluster);
    let mut leader = cluster.internal.offsets.watch_leader();
    tokio::spawn(async move {
        loop {
            let Some(cluster) = weak.upgrade() else { return };
            follow_leadership(&cluster).await;
            drop(cluster);
            let _ = tokio::time::timeout(RECHECK, leader.changed()).await;
        }
    });
}

/// Proposes a commit's records to the offsets group: acknowledged once a
/// majority has them. Losing leadership meanwhile answers NOT_COORDINATOR.
fn appender(cluster: &Arc<Cluster>) -> Appender {
    let weak = Arc::downgrade(cluster);
    let group = cluster.internal.offsets.clone();
    Arc::new(move |records| {
        let (weak, group) = (weak.clone(), group.clone());
        Box::pin(async move {
            let batch = es_core::batch::encode(&records, now_ms(), es_core::ProducerInfo::NONE)
                .map_err(|e| GroupError::InvalidRequest(e.to_string()))?;
            match group.propose(batch).await {
                Ok(appended) => Ok(appended.base_offset),
                Err(ProposeError::NotLeader { leader }) => {
                    let hint = weak.upgrade().and_then(|c| c.leader_hint(leader));
                    Err(GroupError::NotCoordinator { hint })
                }
                Err(ProposeError::LeadershipLost { leader }) => {
                    let hint = weak.upgrade().and_then(|c| c.leader_hint(leader));
                    Err(GroupError::CoordinatorLost { hint })
                }
                Err(e) => Err(GroupError::Storage(es_log::LogError::Failed(format!(
                    "replicating to {OFFSETS_TOPIC}: {e}"
                )))),
            }
        })
    })
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as i64)
}

/// One look at the offsets group's leadership: stop, or load and start, serving.
async fn follow_leadership(cluster: &Arc<Cluster>) {
    let groups = cluster.registry.groups().clone();
    let group = &cluster.internal.offsets;
    if !group.is_leader() {
        let hint = cluster.leader_hint(group.leader());
        if groups.serving() != (Serving::NotCoordinator { hint: hint.clone() }) {
            groups.stop_coordinating(hint);
        }
        return;
    }
    let term = u64::try_from(group.leader_epoch().0).unwrap_or(0);
    if groups.serving() == (Serving::Coordinator { term }) {
        return;
    }
    if groups.serving() != Serving::Loading {
        tracing::info!(term, "leading {OFFSETS_TOPIC}: loading the group coordinator");
        groups.start_loading();
    }
    if !log_committed(group, term).await {
        return;
    }
    let loaded = tokio::task::spawn_blocking(move || groups.finish_loading(term)).await;
    match loaded {
        Ok(Ok(())) => tracing::info!(term, "serving as the group coordinator"),
        Ok(Err(e)) => tracing::error!(error = %e, "loading the committed offsets failed; retrying"),
        Err(e) => tracing::error!(error = %e, "loading the committed offsets panicked; retrying"),
    }
}

/// Waits (bounded) until everything in this leader's log is committed; false if
/// that did not happen in time or leadership moved meanwhile.
async fn log_committed(group: &Group, term: u64) -> bool {
    let log = group.log();
    let mut watermark = log.subscribe();
    let deadline = Instant::now() + LOAD_WAIT;
    loop {
        let still = group.is_leader() && u64::try_from(group.leader_epoch().0).unwrap_or(0) == term;
        if !still || Instant::now() > deadline {
            return false;
        }
        if log.high_watermark() >= log.info().log_end_offset {
            return true;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), watermark.changed()).await;
    }
}

/// Makes the schema registry a replica of its group and applies the committed
/// records on this node as the group's high watermark moves.
pub(super) fn spawn_schema_applier(cluster: &Arc<Cluster>) {
    let schemas = cluster.registry.schemas().clone();
    schemas.replicate(cluster.internal.schemas.clone());
    let mut committed = cluster.internal.schemas.log().subscribe();
    let weak = Arc::downgrade(cluster);
    tokio::spawn(async move {
        loop {
            if weak.strong_count() == 0 {
                return;
            }
            let s = schemas.clone();
            match tokio::task::spawn_blocking(move || s.apply_committed()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "applying {SCHEMAS_TOPIC} failed; retrying"),
                Err(e) => tracing::error!(error = %e, "applying {SCHEMAS_TOPIC} panicked; retrying"),
            }
            // Woken by the log; the timeout re-checks in case a wake was missed.
            let _ = tokio::time::timeout(Duration::from_millis(500), committed.changed()).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_group_ids_are_fixed_distinct_and_never_the_metadata_group() {
        let offsets = internal_group_id(OFFSETS_TOPIC);
        assert_eq!(offsets, internal_group_id("__es_offsets"));
        assert_ne!(offsets, internal_group_id(SCHEMAS_TOPIC));
        assert_ne!(offsets, 0);
        assert_ne!(internal_group_id(SCHEMAS_TOPIC), 0);
    }
}
