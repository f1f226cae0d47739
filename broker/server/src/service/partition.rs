//! The partition handle: the only way the service reads or appends a partition,
//! carrying the role and leader epoch the append is stamped with. On a single node
//! it appends to the local log; in a cluster it proposes the batch to the
//! partition's Raft group, and the append resolves on commit by a majority.

use std::sync::Arc;

use es_core::LeaderEpoch;
use es_log::{Appended, PartitionInfo, PartitionLog, PendingAppend, ReadResult};

use crate::cluster::IdempotentTurn;
use crate::registry::Topic;
use crate::service::error::{BrokerError, Result};
use crate::service::fetch::Replicas;

/// A single node is the leader of every partition it has, in one epoch that never
/// changes. The one place the epoch is set.
pub(crate) const LOCAL_LEADER_EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

/// This broker's role for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// A replica of a partition another node (or no node, mid-election) leads.
    Follower {
        leader: Option<u64>,
    },
}

/// One partition as the service uses it.
#[derive(Clone)]
pub struct PartitionHandle {
    pub topic: Arc<Topic>,
    pub partition: u32,
    pub role: Role,
    pub leader_epoch: LeaderEpoch,
    log: Arc<PartitionLog>,
    /// The partition's Raft group, in a cluster.
    replica: Option<Replica>,
}

#[derive(Clone)]
struct Replica {
    group: es_raft::Group,
    cluster: Arc<crate::cluster::Cluster>,
    /// The group's leader and epoch when this handle was made.
    seen: (Option<u64>, LeaderEpoch),
}

/// When a replicated append is answered. A record is committed once a majority
/// has it durably; this leader's readers see it one fsync later, once the
/// committed id covering it is on disk (the high watermark never moves back
/// across a restart: es-raft's `CommitGate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerAt {
    /// At the commit: es's binary protocol, whose pipelined producers are
    /// bound by that latency; a reader may trail the answer by the fsync.
    Commit,
    /// Once this leader's high watermark covers the batch, as Kafka answers
    /// acks=all: a fetch or ListOffsets sent right after the answer sees it.
    Seen,
}

/// An append on its way to durability: local (the group commit's fsync) or
/// replicated (commit by a majority, each after its fsync).
pub enum Pending {
    Local(PendingAppend),
    Replicated(tokio::task::JoinHandle<Result<Appended>>),
}

impl Pending {
    /// Resolves once the batch is durable (locally, or on a majority).
    pub async fn durable(self) -> Result<Appended> {
        match self {
            Pending::Local(p) => Ok(p.durable().await?),
            Pending::Replicated(task) => task
                .await
                .map_err(|e| BrokerError::Internal(format!("a replicated append's task failed: {e}")))?,
        }
    }
}

impl PartitionHandle {
    /// The local partition, or `PartitionNotFound`.
    pub fn local(topic: &Arc<Topic>, partition: u32) -> Result<PartitionHandle> {
        let log = topic.partition(u64::from(partition))?.clone();
        Ok(PartitionHandle {
            topic: topic.clone(),
            partition,
            role: Role::Leader,
            leader_epoch: LOCAL_LEADER_EPOCH,
            log,
            replica: None,
        })
    }

    /// The partition as a replica of its Raft group: this node's role and the
    /// group's current leader epoch (term).
    pub fn replicated(
        topic: &Arc<Topic>,
        partition: u32,
        cluster: &Arc<crate::cluster::Cluster>,
        group: es_raft::Group,
    ) -> Result<PartitionHandle> {
        let log = topic.partition(u64::from(partition))?.clone();
        // Read before the role: a change after it is seen by `subscribe_leader`.
        let seen = group.leader_view();
        let role = if group.is_leader() { Role::Leader } else { Role::Follower { leader: group.leader() } };
        Ok(PartitionHandle {
            topic: topic.clone(),
            partition,
            role,
            leader_epoch: seen.1,
            log,
            replica: Some(Replica { group, cluster: cluster.clone(), seen }),
        })
    }

    /// The leader's id when another node leads (`None`: this one, or unknown).
    pub fn leader(&self) -> Option<u64> {
        match self.role {
            Role::Leader => self.replica.as_ref().map(|r| r.cluster.node_id()),
            Role::Follower { leader } => leader,
        }
    }

    /// Refuses with NotLeader (and the leader's address) unless this node leads.
    pub fn check_leader(&self) -> Result<()> {
        match (self.role, &self.replica) {
            (Role::Leader, _) | (_, None) => Ok(()),
            (Role::Follower { leader }, Some(r)) => {
                Err(r.cluster.not_leader(self.topic.name(), self.partition, leader))
            }
        }
    }

    /// Refuses a read this replica may not answer: one naming a leader epoch
    /// (Kafka's `current_leader_epoch`, KIP-320; `None`: not named) other than
    /// this replica's, checked first as Kafka does; then one that `from` does not
    /// let this replica serve (NotLeader, with the leader's address).
    pub fn check_read(&self, from: Replicas, leader_epoch: Option<i32>) -> Result<()> {
        if let Some(asked) = leader_epoch
            && asked != self.leader_epoch.0
        {
            return Err(BrokerError::LeaderEpoch {
                topic: self.topic.name(),
                partition: self.partition,
                asked,
                current: self.leader_epoch.0,
            });
        }
        match (from, self.role) {
            (Replicas::Leader, _) | (Replicas::Led, Role::Follower { leader: None }) => self.check_leader(),
            (Replicas::Led | Replicas::Any, _) => Ok(()),
        }
    }

    /// Appends an encoded batch as leader: offsets and epoch are stamped here (in
    /// a cluster, by the group's leader as it appends the entry). In a cluster,
    /// `answer` says when the pending append resolves: at the commit, or once this
    /// leader's readers see the batch too.
    pub fn append(&self, batch: Vec<u8>, answer: AnswerAt) -> Result<Pending> {
        self.check_leader()?;
        let (records, bytes) = self.topic.stats.measure(&batch);
        let pending = match &self.replica {
            None => Pending::Local(self.log.append(batch, self.leader_epoch).map_err(|e| self.log_error(e))?),
            Some(r) => {
                // An idempotent producer's turn is taken here, in arrival order.
                let producer_id = es_core::BatchHeader::parse(&batch, usize::MAX)
                    .map(|h| h.producer.producer_id)
                    .map_err(|e| BrokerError::InvalidBatch(e.to_string()))?;
                let turn = (producer_id >= 0)
                    .then(|| r.cluster.idempotent_turn(&self.topic, self.partition, producer_id));
                Pending::Replicated(tokio::spawn(self.clone().propose(r.clone(), batch, turn, answer)))
            }
        };
        self.topic.stats.produced(records, bytes);
        Ok(pending)
    }

    /// Proposes one batch to the group. An idempotent producer's batch (`turn`) is
    /// checked against the producer table first (a retry answers the original
    /// offsets), and one producer's proposals to one partition go one at a time in
    /// arrival order, so a retry never passes the check while its original is
    /// still in flight and no batch overtakes the one before it; different
    /// producers' proposals go in parallel.
    async fn propose(
        self,
        replica: Replica,
        batch: Vec<u8>,
        mut turn: Option<IdempotentTurn>,
        answer: AnswerAt,
    ) -> Result<Appended> {
        if let Some(t) = turn.as_mut() {
            t.wait().await;
        }
        // A retry of a batch in the log is answered by the group once the original
        // is committed (`Group::propose`): one whose original timed out may still
        // be uncommitted, and must not be acknowledged before it is.
        let appended = replica.group.propose(batch).await.map_err(|e| self.propose_error(&replica, e))?;
        // The producer's next batch may go as soon as this one is committed.
        drop(turn);
        if answer == AnswerAt::Seen {
            replica.group.visible(appended.last_offset).await.map_err(|e| match e {
                es_raft::ProposeError::Timeout => BrokerError::Timeout(format!(
                    "partition {} of {:?} committed the batch on a majority of its replicas, but this leader \
                     could not show it to readers in time (its disk may be stalled): retry, with an idempotent \
                     producer to be sure it is written once",
                    self.partition,
                    self.topic.name()
                )),
                other => self.propose_error(&replica, other),
            })?;
        }
        Ok(appended)
    }

    fn propose_error(&self, replica: &Replica, e: es_raft::ProposeError) -> BrokerError {
        match e {
            es_raft::ProposeError::NotLeader { leader } => {
                replica.cluster.not_leader(self.topic.name(), self.partition, leader)
            }
            es_raft::ProposeError::LeadershipLost { leader } => BrokerError::LeadershipLost {
                topic: self.topic.name(),
                partition: self.partition,
                leader: replica.cluster.leader_hint(leader),
            },
            // The leader cannot reach a majority (cut off, or the others are
            // down): the batch may still commit, as after any lost answer.
            es_raft::ProposeError::Timeout => BrokerError::Timeout(format!(
                "partition {} of {:?} did not commit the batch on a majority of its replicas in time \
                 (this node may be cut off from the others); it may still commit: retry, \
                 with an idempotent producer to be sure it is written once",
                self.partition,
                self.topic.name()
            )),
            es_raft::ProposeError::Shutdown => BrokerError::ShuttingDown,
            // The same refusals as a local append (out of order, fenced, invalid).
            es_raft::ProposeError::Rejected(e) => self.log_error(e),
            other => BrokerError::Internal(format!(
                "replicating to partition {} of {}: {other}",
                self.partition,
                self.topic.name()
            )),
        }
    }

    /// Whole batches from `offset`, at most `max_bytes` (at least one batch), never past the high watermark. A replica in a
    /// cluster answers an offset past its high watermark that its log holds with
    /// nothing yet, as Kafka does (past the log's end it is out of range): a
    /// follower learns of a commit a round after its leader, and a new leader's
    /// watermark waits for its first entry to commit, so a reader sent here with a
    /// position another replica served waits for it rather than resetting.
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<ReadResult> {
        match self.log.read(offset, max_bytes) {
            Err(es_log::LogError::OffsetOutOfRange { requested, log_start, high_watermark })
                if self.replica.is_some()
                    && requested >= log_start
                    && requested <= self.log.info().log_end_offset =>
            {
                Ok(ReadResult { data: bytes::Bytes::new(), high_watermark, log_start_offset: log_start })
            }
            other => other.map_err(|e| self.log_error(e)),
        }
    }

    /// KIP-392: the in-sync replica a consumer in `rack` should read from instead,
    /// when this node leads the partition and is in another rack
    /// (`cluster/racks.rs`); `None`: read here. In sync means caught up to the
    /// commit and answering pings: an idle partition's replica that died stays
    /// caught up, and would be named until the next write.
    pub fn preferred_read_replica(&self, rack: &str) -> Option<u64> {
        let (Role::Leader, Some(r)) = (self.role, &self.replica) else {
            return None;
        };
        let mut in_sync = r.group.status().in_sync;
        in_sync.retain(|n| r.group.peer_alive(*n));
        r.cluster.preferred_read_replica(rack, &in_sync, self.partition)
    }

    pub fn info(&self) -> PartitionInfo {
        self.log.info()
    }

    pub fn high_watermark(&self) -> u64 {
        self.log.high_watermark()
    }

    pub fn config(&self) -> es_log::LogConfig {
        self.log.config()
    }

    /// Wakes when the high watermark moves.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.log.subscribe()
    }

    /// Changes when the partition's leader or leader epoch differs from what this
    /// handle was made with: at once if it already does (`None` on a single node,
    /// where neither ever changes).
    pub fn subscribe_leader(&self) -> Option<tokio::sync::watch::Receiver<(Option<u64>, LeaderEpoch)>> {
        let replica = self.replica.as_ref()?;
        let mut leader = replica.group.watch_leader();
        if *leader.borrow() == replica.seen {
            leader.mark_unchanged();
        } else {
            leader.mark_changed();
        }
        Some(leader)
    }

    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<u64>> {
        self.log.offset_for_timestamp(timestamp).map_err(|e| self.log_error(e))
    }

    /// The first offset holding the greatest timestamp, and that timestamp.
    pub fn max_timestamp_offset(&self) -> Result<Option<(u64, i64)>> {
        self.log.max_timestamp_offset().map_err(|e| self.log_error(e))
    }

    /// Moves the log start to `before` (blocking: an fsync); answers the new start.
    pub fn delete_records_before(&self, before: u64) -> Result<u64> {
        self.log.delete_records_before(before).map_err(|e| self.log_error(e))
    }

    /// The (leader epoch, first offset) transitions of the log, oldest first.
    pub fn epoch_starts(&self) -> Vec<(LeaderEpoch, u64)> {
        self.log.epoch_starts()
    }

    pub fn producers(&self) -> Vec<es_log::ProducerSummary> {
        self.log.producers()
    }

    /// A log error with this partition's name where the service has a variant for it.
    fn log_error(&self, e: es_log::LogError) -> BrokerError {
        match e {
            es_log::LogError::OffsetOutOfRange { requested, log_start, high_watermark } => {
                BrokerError::OffsetOutOfRange {
                    partition: self.partition,
                    requested,
                    log_start,
                    high_watermark,
                }
            }
            es_log::LogError::BatchTooLarge { size, max } => {
                BrokerError::BatchTooLarge { partition: self.partition, size, max }
            }
            other @ (es_log::LogError::Io { .. }
            | es_log::LogError::Corrupt { .. }
            | es_log::LogError::ColdStore { .. }
            | es_log::LogError::ColdConflict { .. }
            | es_log::LogError::ColdCorrupt { .. }
            | es_log::LogError::ColdManifest(_)
            | es_log::LogError::InvalidBatch(_)
            | es_log::LogError::RecordTooLarge { .. }
            | es_log::LogError::OffsetMismatch { .. }
            | es_log::LogError::StaleEpoch { .. }
            | es_log::LogError::UnknownEpoch { .. }
            | es_log::LogError::OldFormat { .. }
            | es_log::LogError::NotBatchBoundary { .. }
            | es_log::LogError::NotContiguous { .. }
            | es_log::LogError::EntryOutOfRange { .. }
            | es_log::LogError::EpochMismatch { .. }
            | es_log::LogError::OutOfOrderSequence { .. }
            | es_log::LogError::ProducerFenced { .. }
            | es_log::LogError::InvalidConfig(_)
            | es_log::LogError::Failed(_)
            | es_log::LogError::JournalFull { .. }
            | es_log::LogError::ShutDown) => other.into(),
        }
    }
}
