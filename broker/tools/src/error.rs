//! The one error type of es-tools: each refusal names the file and says why, in
//! words an operator can act on.

use std::path::PathBuf;

pub type Result<T, E = ToolsError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("i/o error while {context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error(
        "the data directory {dir} is in use: a running broker holds its LOCK. Stop the broker \
         (SIGTERM, and wait for it to exit), then run this again"
    )]
    DataDirInUse { dir: PathBuf },
    #[error(
        "the data directory {dir} is in use: a running broker holds its LOCK. Stop the broker \
         (SIGTERM, and wait for it to exit), then run this again; or dump it while it runs with \
         `es-tools dump --online --url http://BROKER-HTTP-ADDRESS --data-dir {dir} --out FILE`"
    )]
    DumpWhileRunning { dir: PathBuf },
    #[error("{dir} is not a broker data directory: {reason}")]
    NotADataDir { dir: PathBuf, reason: String },
    #[error(
        "the journal in {dir} holds {files} file(s) a crash left unreplayed, so the segments may \
         lack acknowledged batches. Run again with --replay-journal (it replays them as the \
         broker does at start), or start the broker once and stop it cleanly"
    )]
    JournalNotReplayed { dir: PathBuf, files: usize },
    #[error("replaying the journal failed: {0}")]
    Replay(#[from] es_log::LogError),
    #[error("{path} cannot be dumped: it is a {kind}, and a data directory holds only regular files")]
    UnexpectedFileType { path: String, kind: &'static str },
    #[error(
        "{path} is damaged at byte {position}: {reason}. If it is the newest segment of its \
         partition, start the broker once (recovery trims a torn tail) and stop it, then dump again"
    )]
    CorruptSegment { path: String, position: u64, reason: String },
    #[error(
        "{path} changed while it was being dumped ({reason}); is something else writing to the data directory?"
    )]
    ChangedDuringDump { path: String, reason: String },
    #[error("the archive has no manifest: its first entry is {found:?}, not {expected:?}")]
    NoManifest { found: String, expected: &'static str },
    #[error("the archive's manifest is unusable: {reason}")]
    BadManifest { reason: String },
    #[error("refused {path:?}: {reason}")]
    UnsafePath { path: String, reason: &'static str },
    #[error("refused {path}: it is a {kind} entry, and a dump holds only regular files")]
    NotRegularFile { path: String, kind: String },
    #[error("refused {path}: the archive holds it twice")]
    Duplicate { path: String },
    #[error("refused {path}: the manifest does not name it")]
    Undeclared { path: String },
    #[error("refused {path}: the archive says {found} bytes, the manifest {declared}")]
    SizeMismatch { path: String, declared: u64, found: u64 },
    #[error("refused {path}: the archive ends after {read} of its {declared} bytes (a truncated archive)")]
    Truncated { path: String, read: u64, declared: u64 },
    #[error("the archive is truncated or damaged after {after}: {reason}")]
    ArchiveDamaged { after: String, reason: String },
    #[error(
        "the archive lacks {count} file(s) the manifest names, the first being {first} (a truncated archive)"
    )]
    Missing { first: String, count: usize },
    #[error("refused {path}: its sha256 is {actual}, the manifest says {expected} (the file was altered)")]
    HashMismatch { path: String, expected: String, actual: String },
    #[error("refused {path}: the batch at byte {position} is bad: {reason}")]
    BadBatch { path: String, position: u64, reason: String },
    #[error("cannot restore into {dir}: {reason}")]
    BadTarget { dir: PathBuf, reason: String },
    #[error(
        "the swap into {dir} stopped half way ({reason}): the old data is in {old} and the checked \
         copy in {restored}; move one of them to {dir} before starting the broker"
    )]
    SwapIncomplete { dir: PathBuf, old: PathBuf, restored: PathBuf, reason: String },
    #[error("cannot reach the broker at {url}: {reason}. Point --url at the running broker's HTTP address")]
    BrokerUnreachable { url: String, reason: String },
    #[error("the broker at {url} refused {call} (HTTP {status}, {code}): {message}")]
    BrokerRefused { url: String, call: String, status: u16, code: String, message: String },
    #[error("the broker's snapshot is not in {dir}: {reason}")]
    SnapshotElsewhere { dir: PathBuf, reason: String },
    #[error("the archive does not match the broker's snapshot ({reason}); it was removed")]
    SnapshotMismatch { reason: String },
    #[error("{path} already exists; remove it or choose another --out")]
    OutputExists { path: PathBuf },
}

impl ToolsError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ToolsError::Io { context: context.into(), source }
    }
}

/// Adds what was being done to an I/O error.
pub(crate) trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| ToolsError::io(what(), e))
    }
}
