//! es-tools' limits, in one place.

/// The largest manifest a restore reads into memory. A manifest holds one line per
/// file, so this allows millions of segment files while refusing an archive whose
/// first entry claims gigabytes.
pub const MANIFEST_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// The most files one archive may declare.
pub const FILES_MAX: usize = 4_000_000;

/// The longest path (in bytes) a manifest may name: a topic name is at most 249
/// characters, and the rest of a path is well under this.
pub const PATH_BYTES_MAX: usize = 1024;

/// The largest batch the segment checker buffers: the log's hard batch limit.
pub const BATCH_BYTES_MAX: usize = es_core::limits::BATCH_BYTES_MAX_HARD;

/// Copy buffer size for streaming files into and out of archives.
pub const COPY_BUFFER_BYTES: usize = 256 * 1024;
