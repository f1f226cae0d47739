//! The client's error type.

use es_protocol::{ErrorCode, WireError};

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the broker at {addr}: {reason}; is es-broker running with --bind-binary there?")]
    Connect { addr: String, reason: String },
    #[error("TLS with the broker at {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    #[error("TLS setup: {path}: {reason}")]
    TlsFiles { path: String, reason: String },
    #[error("connection lost: {0}")]
    Disconnected(String),
    #[error("the broker answered {code:?}: {message}")]
    Broker { code: ErrorCode, message: String },
    #[error("protocol error: {0}")]
    Wire(#[from] WireError),
    #[error("unexpected response to {0}")]
    UnexpectedResponse(&'static str),
    #[error("invalid batch: {0}")]
    Batch(#[from] es_core::CodecError),
    #[error("timed out after {0} ms")]
    Timeout(u64),
}

impl ClientError {
    /// Worth retrying on a fresh connection after a pause.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connect { .. } | ClientError::Disconnected(_) | ClientError::Timeout(_) => true,
            ClientError::Broker { code, .. } => code.is_retriable(),
            _ => false,
        }
    }

    /// A failure a leader change explains, which goes away once clients find the
    /// new leader: not the leader (mid-election, or a fenced one), an open
    /// connection lost (the leader died), a timeout (a commit the old leader could
    /// not finish). Retried beyond the retry count, within
    /// `ClientOptions::failover_timeout_ms`. Not a connection refused (a broker
    /// that is not running: `es` should say so at once), nor the other retriable
    /// failures: a full window or a quota wants backoff, a rebalance a rejoin, a
    /// storage error an operator.
    pub fn is_failover(&self) -> bool {
        match self {
            ClientError::Disconnected(_) | ClientError::Timeout(_) => true,
            ClientError::Broker { code, .. } => matches!(code, ErrorCode::NotLeader | ErrorCode::Timeout),
            _ => false,
        }
    }

    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;
