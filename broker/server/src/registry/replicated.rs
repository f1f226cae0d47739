//! The registry in a cluster. A client's topic change (create, delete, add
//! partitions, alter config) is planned here against this node's metadata, then
//! handed to the cluster (the metadata Raft group, `crate::cluster`), which
//! commits it on a majority and waits until this node applied it. Every node,
//! the proposer included, applies committed commands through
//! [`Registry::apply_replicated`], in log order, so all nodes end in one state.
//!
//! Validator bindings and uploaded plugins take the same road
//! (`cluster_plugins.rs`); a plugin's blob travels apart, by its sha256.
//!
//! Applying re-checks each command against the state it meets, deterministically:
//! two nodes that planned the same topic at once both propose, and the second one
//! applied is refused on every node alike. A command applied twice (a crash after
//! the apply, before the applied offset was saved) changes nothing the second time.

use std::sync::Arc;

use super::metadata::{Command, Origin};
use super::{Registry, Topic};
use crate::cluster::Cluster;
use crate::service::error::{BrokerError, Result};

/// Partition directories of the cluster's own logs (the metadata group) start with
/// this; startup never removes them as orphans.
pub const CLUSTER_DIR_PREFIX: &str = "__es_cluster_";

/// In a cluster each node hands out producer ids from its own blocks (reserved in
/// its local metadata, not replicated): node `n`'s `k`th id is `k * STRIDE + n`, so
/// no two nodes ever hand out the same id. Node ids are below this.
pub const PRODUCER_ID_STRIDE: i64 = 1024;

/// The producer id a node's `local`th allocation is; a single node (`None`) keeps
/// the plain count.
pub(super) fn cluster_producer_id(node: Option<u64>, local: i64) -> i64 {
    match node {
        None => local,
        Some(n) => local * PRODUCER_ID_STRIDE + n as i64,
    }
}

/// The node that handed out cluster producer id `id`.
pub(super) fn issuing_node(id: i64) -> Option<u64> {
    (id >= 0).then_some((id % PRODUCER_ID_STRIDE) as u64)
}

/// The local allocation number of `id`, if this node handed it out.
pub(super) fn local_producer_id(node: Option<u64>, id: i64) -> Option<i64> {
    match node {
        None => Some(id),
        Some(_) if id < 0 => None,
        Some(n) => (id % PRODUCER_ID_STRIDE == n as i64).then_some(id / PRODUCER_ID_STRIDE),
    }
}

impl Registry {
    /// Makes this registry a cluster member: from now on client topic changes are
    /// replicated. Set once, before any listener starts.
    pub fn set_cluster(&self, cluster: Arc<Cluster>) {
        self.auth.set_cluster(&cluster);
        if self.cluster.set(cluster).is_err() {
            tracing::warn!("the registry's cluster was set twice; the first one stays");
        }
    }

    /// The cluster this node is a member of; `None` for a single node.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.get()
    }

    /// This node's id in the cluster; `None` for a single node.
    pub fn node_id(&self) -> Option<u64> {
        self.cluster.get().map(|c| c.node_id())
    }

    /// Whether this node holds a replica of `topic`'s `partition`: always on a
    /// single node and for a topic on every member (no placement); otherwise when
    /// its placement names this node. A partition placed elsewhere keeps an empty
    /// directory here, which DescribeLogDirs and the partition gauges leave out.
    pub fn hosts(&self, topic: &Topic, partition: u32) -> bool {
        let Some(me) = self.node_id() else { return true };
        topic.meta.lock().expect("meta lock").replicas_of(partition).is_none_or(|r| r.contains(&me))
    }

    /// True once this node is a cluster member.
    pub fn is_clustered(&self) -> bool {
        self.cluster.get().is_some()
    }

    /// The cluster a change from `origin` is replicated through. The broker's own
    /// internal topics stay local to each node (docs/cluster.md says what that means).
    pub(super) fn replicator_for(&self, origin: Origin) -> Option<&Arc<Cluster>> {
        match origin {
            Origin::Client => self.cluster.get(),
            Origin::Broker => None,
        }
    }

    /// Opens (creating when new) a log of the cluster's own under `partitions/`,
    /// e.g. the metadata group's, with `config` (the metadata log's retention
    /// removes only what this node applied: `cluster/metadata.rs`).
    pub fn open_cluster_log(
        &self,
        name: &str,
        config: es_log::LogConfig,
    ) -> Result<Arc<es_log::PartitionLog>> {
        let dir = format!("{CLUSTER_DIR_PREFIX}{name}");
        let (log, recovery) = self.manager.open_partition(&dir, config)?;
        let mut repairs = Vec::new();
        super::describe_recovery(&dir, &recovery, &mut repairs);
        for repair in repairs {
            tracing::warn!("recovery: {repair}");
        }
        Ok(log)
    }

    /// Marks `partitions` of `name` as moved, durably, before their groups open
    /// (a node installing a peer's registry, `cluster/image.rs`): a fresh replica
    /// of such a partition joins the group its first replicas formed.
    pub fn mark_moved(&self, name: &str, partitions: &std::collections::BTreeSet<u32>) -> Result<()> {
        let _admin = self.admin.lock().expect("admin lock");
        let topic = self.topic(name)?;
        let command = Command::MarkMoved { name: name.to_owned(), partitions: partitions.clone() };
        let next = self.commit(&command)?.topic(name).expect("the topic just marked").clone();
        *topic.meta.lock().expect("meta lock") = next;
        Ok(())
    }

    /// Applies a command the metadata group committed: the local part (partition
    /// directories, logs, the local metadata files). What it answers is the same on
    /// every node for the same log.
    pub fn apply_replicated(&self, command: &Command) -> Result<Applied> {
        match command {
            Command::Auth { pepper, commands } => {
                return self.auth.apply_replicated(pepper, commands).map(|()| Applied::Unchanged);
            }
            Command::PutPlugin { manifest, replace } => return self.apply_put_plugin(manifest, *replace),
            Command::RemovePlugin { name } => return self.apply_remove_plugin(name),
            Command::SetValidators { name, validators } => {
                return self.apply_set_validators(name, validators, command);
            }
            _ => {}
        }
        let _admin = self.admin.lock().expect("admin lock");
        let existing = command.topic().and_then(|name| self.metadata().topic(name).cloned());
        match (command, existing) {
            (Command::CreateTopic(meta), Some(have)) if have.topic_id == meta.topic_id => {
                Ok(Applied::Unchanged)
            }
            (Command::CreateTopic(meta), Some(_)) => Err(BrokerError::TopicExists(meta.name.clone())),
            (Command::CreateTopic(meta), None) => {
                self.apply_create(meta, command).map(|t| Applied::Created(t.clone()))
            }
            (Command::DeleteTopic { name }, Some(_)) => {
                let topic = self.topic(name)?;
                self.apply_delete(name, command).map(|()| Applied::Deleted(topic))
            }
            (Command::SetPartitions { count, .. }, Some(have)) if *count <= have.partitions => {
                Ok(Applied::Unchanged)
            }
            (Command::SetReplicas { name, partition, replicas }, Some(have)) => {
                if have.replicas_of(*partition) == Some(replicas.as_slice()) {
                    return Ok(Applied::Unchanged);
                }
                if have.replicas_of(*partition).is_none() {
                    return Err(BrokerError::InvalidRequest(format!(
                        "partition {partition} of {name:?} has no placement to change (the topic predates \
                         placement and is replicated by every member)"
                    )));
                }
                let topic = self.topic(name)?;
                let next = self.commit(command)?.topic(name).expect("the topic the command moved").clone();
                *topic.meta.lock().expect("meta lock") = next;
                Ok(Applied::Moved(topic, *partition))
            }
            (Command::SetPartitions { name, count, .. }, Some(_)) => {
                self.apply_add_partitions(name, *count, command).map(Applied::Created)
            }
            (Command::SetConfig { name, .. }, Some(_)) => {
                self.apply_alter(name, command).map(|_| Applied::Unchanged)
            }
            (
                Command::DeleteTopic { name }
                | Command::SetPartitions { name, .. }
                | Command::SetReplicas { name, .. }
                | Command::SetConfig { name, .. },
                None,
            ) => Err(BrokerError::TopicNotFound(name.clone())),
            (
                Command::SetValidators { .. }
                | Command::SetTopicId { .. }
                | Command::MarkMoved { .. }
                | Command::ReserveProducerIds { .. }
                | Command::Auth { .. }
                | Command::AddNode { .. }
                | Command::RemoveNode { .. }
                | Command::PutPlugin { .. }
                | Command::RemovePlugin { .. },
                _,
            ) => Err(BrokerError::InvalidRequest(format!(
                "{} is not a replicated metadata command",
                command_name(command)
            ))),
        }
    }
}

/// What applying a replicated command did, for the cluster to follow up (open or
/// close the partitions' Raft groups).
pub enum Applied {
    Unchanged,
    /// The topic as it now stands, with partitions new to this node.
    Created(Arc<Topic>),
    /// The topic that was removed (its logs are closed and deleted).
    Deleted(Arc<Topic>),
    /// A partition's replicas changed (`Command::SetReplicas`).
    Moved(Arc<Topic>, u32),
}

fn command_name(command: &Command) -> &'static str {
    match command {
        Command::CreateTopic(_) => "CreateTopic",
        Command::DeleteTopic { .. } => "DeleteTopic",
        Command::SetPartitions { .. } => "SetPartitions",
        Command::SetReplicas { .. } => "SetReplicas",
        Command::SetConfig { .. } => "SetConfig",
        Command::SetValidators { .. } => "SetValidators",
        Command::SetTopicId { .. } => "SetTopicId",
        Command::MarkMoved { .. } => "MarkMoved",
        Command::ReserveProducerIds { .. } => "ReserveProducerIds",
        Command::Auth { .. } => "Auth",
        Command::AddNode { .. } => "AddNode",
        Command::RemoveNode { .. } => "RemoveNode",
        Command::PutPlugin { .. } => "PutPlugin",
        Command::RemovePlugin { .. } => "RemovePlugin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::BrokerOptions;
    use es_core::{LeaderEpoch, Record};

    /// The metadata log outlives retention by age: a command from 1970 in a sealed
    /// segment is kept, where a log with the default config beside it loses it.
    /// (Its retention by size removes only what the node applied: `cluster/metadata.rs`.)
    #[test]
    fn the_cluster_log_is_never_removed_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(BrokerOptions::new(dir.path())).unwrap().0;
        let log = registry
            .open_cluster_log("metadata", crate::cluster::MetadataLogConfig::default().log_config())
            .unwrap();
        assert_eq!(log.config().retention_ms, -1);
        let (control, _) =
            registry.manager.open_partition("control-0", es_log::LogConfig::default()).unwrap();
        let old = Record { value: Some(b"{}".to_vec().into()), timestamp: Some(1), ..Record::default() };
        for l in [&log, &control] {
            l.append_records(std::slice::from_ref(&old), LeaderEpoch::INITIAL).unwrap().wait().unwrap();
            l.force_roll().unwrap();
            l.append_records(&[Record::from_value(b"{}".to_vec())], LeaderEpoch::INITIAL)
                .unwrap()
                .wait()
                .unwrap();
        }
        // The flusher seals a rolled segment on its own thread (bounded wait).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while control.housekeeping().unwrap().deleted_segments.is_empty() {
            assert!(std::time::Instant::now() < deadline, "retention never removed the control's segment");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let report = log.housekeeping().unwrap();
        assert!(report.deleted_segments.is_empty(), "{report:?}");
        assert_eq!(log.info().log_start_offset, 0);
    }
}
