//! Per-partition log configuration (Kafka's topic-level names in comments) and its
//! validation.

use es_core::batch::{BatchHeader, TimestampType};
use es_core::limits;

use crate::error::{LogError, Result};

/// What happens to old data (`cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    Delete,
    Compact,
    CompactDelete,
}

impl CleanupPolicy {
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }

    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }
}

impl std::str::FromStr for CleanupPolicy {
    type Err = LogError;

    fn from_str(s: &str) -> Result<Self> {
        match s.replace(' ', "").as_str() {
            "delete" => Ok(CleanupPolicy::Delete),
            "compact" => Ok(CleanupPolicy::Compact),
            "compact,delete" | "delete,compact" => Ok(CleanupPolicy::CompactDelete),
            other => Err(LogError::InvalidConfig(format!(
                "cleanup.policy must be delete, compact or compact,delete; got {other:?}"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment past this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment once its first batch is this old.
    pub segment_ms: i64,
    /// `retention.ms`: delete (or tier) sealed segments whose newest record is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: keep the partition below this size; -1 = unbounded.
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long compaction keeps a tombstone.
    pub delete_retention_ms: i64,
    /// `max.message.bytes`: the largest batch one append may carry.
    pub batch_bytes_max: usize,
    /// The largest single record (key + value + headers). The broker sets it to
    /// `batch_bytes_max`, as Kafka limits only the batch.
    pub record_bytes_max: usize,
    /// `index.interval.bytes`.
    pub index_interval_bytes: u32,
    /// Move expired segments to the cold tier instead of deleting them.
    pub cold_tier: bool,
    /// `message.timestamp.type`: keep producers' CreateTime, or have the leader stamp
    /// LogAppendTime on every batch.
    pub timestamp_type: TimestampType,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: limits::SEGMENT_BYTES_DEFAULT,
            segment_ms: limits::SEGMENT_MS_DEFAULT,
            retention_ms: limits::RETENTION_MS_DEFAULT,
            retention_bytes: limits::RETENTION_BYTES_DEFAULT,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: limits::DELETE_RETENTION_MS_DEFAULT,
            batch_bytes_max: limits::BATCH_BYTES_MAX_DEFAULT,
            record_bytes_max: limits::BATCH_BYTES_MAX_DEFAULT,
            index_interval_bytes: limits::INDEX_INTERVAL_BYTES_DEFAULT,
            cold_tier: false,
            timestamp_type: TimestampType::CreateTime,
        }
    }
}

impl LogConfig {
    /// Checks every bound; the message says which setting is wrong and what is allowed.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(LogError::InvalidConfig(m));
        if !(limits::SEGMENT_BYTES_MIN..=limits::SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return bad(format!(
                "segment.bytes must be between {} and {}; got {}",
                limits::SEGMENT_BYTES_MIN,
                limits::SEGMENT_BYTES_MAX,
                self.segment_bytes
            ));
        }
        if self.segment_ms < 1 {
            return bad(format!("segment.ms must be at least 1; got {}", self.segment_ms));
        }
        if self.retention_ms < -1 || self.retention_bytes < -1 || self.delete_retention_ms < 0 {
            return bad("retention.ms and retention.bytes take -1 (unlimited) or a non-negative value; delete.retention.ms must be non-negative".into());
        }
        if self.batch_bytes_max < BatchHeader::LEN || self.batch_bytes_max > limits::BATCH_BYTES_MAX_HARD {
            return bad(format!(
                "max.message.bytes must be between {} and {}; got {}",
                BatchHeader::LEN,
                limits::BATCH_BYTES_MAX_HARD,
                self.batch_bytes_max
            ));
        }
        if self.record_bytes_max == 0 || self.record_bytes_max > self.batch_bytes_max {
            return bad(format!(
                "the record size limit must be between 1 and max.message.bytes ({}); got {}",
                self.batch_bytes_max, self.record_bytes_max
            ));
        }
        if self.index_interval_bytes == 0 {
            return bad("index.interval.bytes must be at least 1".into());
        }
        Ok(())
    }
}
