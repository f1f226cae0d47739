//! es-raft's error type.

use es_log::LogError;

#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    #[error("partition log: {0}")]
    Log(#[from] LogError),
    #[error("Raft file {file} is unreadable: {reason}")]
    BadFile { file: &'static str, reason: String },
    #[error("Raft term {0} does not fit a Kafka leader epoch (at most 2147483647)")]
    TermTooLarge(u64),
}

impl RaftError {
    /// openraft's storage traits speak `io::Error`; any error is fatal for the group.
    pub(crate) fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// Maps a log error into what openraft's storage traits return.
pub(crate) fn io(e: LogError) -> std::io::Error {
    RaftError::Log(e).into_io()
}
