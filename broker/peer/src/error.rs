//! The peer crate's error type: why a handshake, a frame or a call failed.

use std::fmt;

/// Why a link could not be made or was killed, or why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a peer hello (bad magic or version)")]
    BadMagic,
    #[error("peer claims to be node {got}, expected node {expected}")]
    WrongNode { expected: u64, got: u64 },
    #[error("node {0} is not a configured peer that may dial this node")]
    UnknownNode(u64),
    #[error("peer uses key id {0}, which this node does not hold")]
    UnknownKeyId(u32),
    #[error("peer uses key id {got}, expected {expected}")]
    KeyIdMismatch { expected: u32, got: u32 },
    #[error("peer's proof of the shared secret is wrong")]
    BadProof,
    #[error("peer reflected a challenge nonce")]
    Reflected,
    #[error("peer replayed a handshake (a client nonce seen before)")]
    Replayed,
    #[error("handshake timed out")]
    HandshakeTimeout,
    #[error("no frame from the peer within {0:?}")]
    IdleTimeout(std::time::Duration),
    #[error("frame length {len} is outside the allowed range (at most {max})")]
    FrameSize { len: usize, max: usize },
    #[error("frame {seq} failed authentication (tampered, replayed, reordered or dropped)")]
    FrameAuth { seq: u64 },
    #[error("malformed message in an authenticated frame: {0}")]
    Malformed(&'static str),
    #[error("secret {key_id} is shorter than {min} bytes")]
    SecretTooShort { key_id: u32, min: usize },
    #[error("the current and the previous secret share key id {0}")]
    DuplicateKeyId(u32),
    #[error("the peer map holds this node's own id {0}")]
    SelfInPeers(u64),
    #[error("no call to this node itself")]
    SelfCall,
    #[error("no link to node {0} within the timeout")]
    Unavailable(u64),
    #[error("the call timed out")]
    Timeout,
    #[error("the link closed before the response")]
    LinkClosed,
    #[error("the peer node is shutting down")]
    Shutdown,
    #[error("the remote handler failed: {0}")]
    Remote(RpcError),
}

/// What a registered handler answers instead of a payload: a code the caller's
/// layer defines (es-peer never interprets it) and a message for logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: u16,
    pub message: String,
}

impl RpcError {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}

impl PeerError {
    /// Whether this failure says the other side does not hold our secret or is not
    /// who it claims: counted as an authentication failure.
    pub fn is_auth_failure(&self) -> bool {
        match self {
            Self::BadMagic
            | Self::WrongNode { .. }
            | Self::UnknownNode(_)
            | Self::UnknownKeyId(_)
            | Self::KeyIdMismatch { .. }
            | Self::BadProof
            | Self::Reflected
            | Self::Replayed
            | Self::FrameAuth { .. } => true,
            Self::Io(_)
            | Self::HandshakeTimeout
            | Self::IdleTimeout(_)
            | Self::FrameSize { .. }
            | Self::Malformed(_)
            | Self::SecretTooShort { .. }
            | Self::DuplicateKeyId(_)
            | Self::SelfInPeers(_)
            | Self::SelfCall
            | Self::Unavailable(_)
            | Self::Timeout
            | Self::LinkClosed
            | Self::Shutdown
            | Self::Remote(_) => false,
        }
    }
}
