//! The partition handle: the only way the service reads or appends a partition,
//! carrying the role and leader epoch the append is stamped with. Replication
//! replaces what is behind it (a Raft-backed append), not its callers.

use std::sync::Arc;

use es_core::LeaderEpoch;
use es_log::{PartitionInfo, PartitionLog, PendingAppend, ReadResult};

use crate::registry::Topic;
use crate::service::error::{BrokerError, Result};

/// A single node is the leader of every partition it has, in one epoch that never
/// changes. The one place the epoch is set.
pub(crate) const LOCAL_LEADER_EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

/// This broker's role for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
}

/// One partition as the service uses it.
#[derive(Clone)]
pub struct PartitionHandle {
    pub topic: Arc<Topic>,
    pub partition: u32,
    pub role: Role,
    pub leader_epoch: LeaderEpoch,
    log: Arc<PartitionLog>,
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
        })
    }

    /// Appends an encoded batch as leader: offsets and epoch are stamped here.
    pub fn append(&self, batch: Vec<u8>) -> Result<PendingAppend> {
        let (records, bytes) = self.topic.stats.measure(&batch);
        let pending = match self.role {
            Role::Leader => self.log.append(batch, self.leader_epoch).map_err(|e| self.log_error(e))?,
        };
        self.topic.stats.produced(records, bytes);
        Ok(pending)
    }

    /// Whole batches from `offset`, at most `max_bytes` (at least one batch).
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<ReadResult> {
        self.log.read(offset, max_bytes).map_err(|e| self.log_error(e))
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
