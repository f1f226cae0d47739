//! Every size and count limit of the storage layer in one place. Defaults follow
//! Kafka's where Kafka has one; hard caps bound what any configuration may ask for.

/// Default largest encoded batch one append may carry: Kafka's `message.max.bytes`
/// (1 MiB + 12), so a client sees the same refusals on es as on Kafka. It limits
/// each record too (es batches of 500 x 256-byte records are about 150 KiB).
pub const BATCH_BYTES_MAX_DEFAULT: usize = 1024 * 1024 + 12;
/// Reads, recovery, retention and compaction accept stored batches up to at least
/// this whatever the topic's limit is now, so batches written under a larger limit
/// (8 MiB was the default before 2026-12-02) stay readable after it is lowered.
pub const BATCH_BYTES_READ_FLOOR: usize = 8 * 1024 * 1024;
/// No configuration may raise the batch limit above this.
pub const BATCH_BYTES_MAX_HARD: usize = 64 * 1024 * 1024;
/// Most records one batch may hold.
pub const BATCH_RECORDS_MAX: usize = 1_000_000;
/// Most headers one record may hold.
pub const RECORD_HEADERS_MAX: usize = 1024;

/// Default segment size before a roll (Kafka's `segment.bytes`).
pub const SEGMENT_BYTES_DEFAULT: u64 = 1024 * 1024 * 1024;
/// Smallest segment size a configuration may ask for.
pub const SEGMENT_BYTES_MIN: u64 = 4 * 1024;
/// Segment positions are stored as u32 in the index, so a segment stays below 4 GiB.
pub const SEGMENT_BYTES_MAX: u64 = u32::MAX as u64 - BATCH_BYTES_MAX_HARD as u64;
/// Default age before the active segment rolls (Kafka's `segment.ms`: 7 days).
pub const SEGMENT_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;
/// Bytes between two sparse index entries (Kafka's `index.interval.bytes`).
pub const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;
/// Default retention by age (Kafka's `retention.ms`: 7 days). -1 keeps forever.
pub const RETENTION_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;
/// Default retention by size per partition. -1 keeps any size.
pub const RETENTION_BYTES_DEFAULT: i64 = -1;
/// How long a tombstone survives compaction (Kafka's `delete.retention.ms`: 1 day).
pub const DELETE_RETENTION_MS_DEFAULT: i64 = 24 * 3600 * 1000;

/// Default bytes of fetched cold-tier segments cached locally, across all partitions.
pub const COLD_CACHE_BYTES_DEFAULT: u64 = 4 * 1024 * 1024 * 1024;
/// Default part size of S3 multipart uploads (S3 wants at least 5 MiB but the last).
pub const COLD_PART_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// The smallest part S3 accepts (every part but the last).
pub const COLD_PART_BYTES_MIN: u64 = 5 * 1024 * 1024;
/// Most parts one S3 multipart upload may have.
pub const COLD_PARTS_MAX: u64 = 10_000;
/// Bytes one ranged read of a cold object asks for (a fetch never holds more).
pub const COLD_FETCH_CHUNK_BYTES: u64 = 8 * 1024 * 1024;
/// The longest one cold-store call may take, its retries included.
pub const COLD_OP_TIMEOUT_SECS_DEFAULT: u64 = 30;
/// Most segment files kept open for reading at once, across all partitions.
pub const OPEN_SEGMENT_FILES_MAX_DEFAULT: usize = 1024;

/// Smallest zstd window (log2 bytes) a decompression accepts, whatever its budget:
/// streaming compressors declare their level's window (8 MiB up to level 19) even for
/// a small batch.
pub const ZSTD_WINDOW_LOG_MIN: u32 = 23;
/// Largest zstd window (log2 bytes) any decompression accepts: zstd's own default
/// limit (128 MiB). A budget below it lowers the limit to the budget.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Size a journal file is preallocated to; past it the journal rotates and the
/// segments written while it was current are checkpointed (fdatasync), after which
/// the file is deleted. With at most two files live, this bounds journal space.
pub const JOURNAL_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Longest partition name a journal record carries.
pub const JOURNAL_NAME_BYTES_MAX: usize = 1024;
/// How long the flusher waits before retrying a journal write refused for lack of space.
pub const JOURNAL_FULL_RETRY_MS: u64 = 20;
