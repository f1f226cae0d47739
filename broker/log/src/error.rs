//! The log's error type: one enum, cheap to clone so a failed flush can be reported
//! to every writer that shared it.

use std::path::PathBuf;
use std::sync::Arc;

use es_core::{CodecError, LeaderEpoch};

#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    #[error("i/o error while {context}: {source}")]
    Io { context: String, source: Arc<std::io::Error> },
    #[error("corrupt data in {file} at byte {position}: {reason}")]
    Corrupt { file: PathBuf, position: u64, reason: String },
    #[error("invalid batch: {0}")]
    InvalidBatch(#[from] CodecError),
    #[error("batch of {size} bytes exceeds the limit of {max} bytes")]
    BatchTooLarge { size: usize, max: usize },
    #[error("record of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },
    #[error("offset {requested} is out of range: the log holds [{log_start}, {high_watermark})")]
    OffsetOutOfRange { requested: u64, log_start: u64, high_watermark: u64 },
    #[error("replica batch starts at offset {got}, but the log ends at {expected}")]
    OffsetMismatch { expected: u64, got: u64 },
    #[error("leader epoch {epoch} is older than the log's latest epoch {latest}")]
    StaleEpoch { epoch: LeaderEpoch, latest: LeaderEpoch },
    #[error("leader epoch {epoch} is not one a leader assigns (epochs are non-negative)")]
    UnknownEpoch { epoch: LeaderEpoch },
    #[error("Raft entry {got} does not follow the log's last entry (the next index is {expected})")]
    NotContiguous { expected: u64, got: u64 },
    #[error("Raft entry {index} is not in the log (it holds [{first}, {next}))")]
    EntryOutOfRange { index: u64, first: u64, next: u64 },
    #[error("Raft entry {index} has leader epoch {stored}, not the {expected} it was appended with")]
    EpochMismatch { index: u64, stored: LeaderEpoch, expected: LeaderEpoch },
    #[error("cannot truncate at offset {offset}: it is not a batch boundary")]
    NotBatchBoundary { offset: u64 },
    #[error(
        "producer {producer_id}: expected sequence {expected}, got {got}; a batch is missing or was reordered"
    )]
    OutOfOrderSequence { producer_id: i64, expected: i32, got: i32 },
    #[error(
        "producer {producer_id} epoch {epoch} is fenced by epoch {current}; a newer instance of this producer took over"
    )]
    ProducerFenced { producer_id: i64, epoch: i16, current: i16 },
    #[error(
        "{dir} holds partition data from an earlier es storage format ({found}). es now stores Kafka v2 batches, and no release ever shipped the old format, so there is nothing to migrate: move the directory away or delete it, then start again"
    )]
    OldFormat { dir: PathBuf, found: String },
    #[error("cold store {op} of {key:?} failed: {reason}")]
    ColdStore { op: &'static str, key: String, reason: String },
    #[error(
        "cold store object {key} changed under this broker (a conditional write failed): another broker may be writing under the same prefix"
    )]
    ColdConflict { key: String },
    #[error("cold object {key} refused: {reason}; it is never served")]
    ColdCorrupt { key: String, reason: String },
    #[error("cold manifest: {0}")]
    ColdManifest(String),
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
    #[error(
        "the log stopped accepting writes after a failed flush ({0}); restart the broker to recover from disk"
    )]
    Failed(String),
    #[error(
        "the journal in {dir} has no disk space; appends are refused until space is freed (they resume by themselves)"
    )]
    JournalFull { dir: PathBuf },
    #[error("the log is shut down")]
    ShutDown,
}

impl LogError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LogError::Io { context: context.into(), source: Arc::new(source) }
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// Adds a context sentence to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| LogError::io(context(), e))
    }
}
