//! The es partition log: durable, group-committed, recoverable.
//!
//! A [`LogManager`] owns one data directory, the flusher thread that turns many
//! concurrent appends into one round, made durable by one `fdatasync` of the
//! directory's journal whatever the number of partitions (or, journal off, one per
//! segment), and a housekeeping thread for retention, tiering and compaction. Each
//! [`PartitionLog`] is a directory of segments. An append returns its offsets at
//! once and resolves only when the batch is on disk; readers never see past the
//! durable high watermark. The log knows nothing of HTTP, Kafka, Raft or Wasm.

mod check;
mod cold;
mod compaction;
mod config;
mod discard;
mod epochs;
mod error;
pub mod failpoint;
mod files;
mod flusher;
mod index;
mod journal;
mod journal_file;
mod journal_replay;
mod log_start;
mod manager;
mod open_files;
mod partition;
mod producers;
mod raft;
mod raft_index;
mod replay;
mod retention;
mod segment;
mod slots;
mod snapshot;

pub use check::{SegmentCheck, check_partition};
pub use cold::{ColdOptions, ColdStatus, ColdStore, DirStore, Expect, Listed, S3Config, S3Store};
pub use compaction::CompactionDecision;
pub use config::{CleanupPolicy, LogConfig};
pub use epochs::EpochStart;
pub use error::{LogError, Result};
pub use flusher::FlushStats;
pub use journal_file::pending_files as pending_journal_files;
pub use journal_replay::JournalReplay;
pub use manager::{FORMAT_FILE, JOURNAL_DIR, LogManager, ManagerOptions};
pub use partition::{Appended, PartitionInfo, PartitionLog, PendingAppend, ReadResult, RecoveryReport};
pub use producers::{BATCHES_KEPT, ProducerBatch, ProducerSummary};
pub use raft::{EntryRange, EntryStamp, RaftFile};
pub use replay::ReplayError;
pub use retention::HousekeepingReport;
pub use segment::Trimmed;
pub use snapshot::{PartitionSnapshot, SnapshotCut};
