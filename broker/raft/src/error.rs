//! es-raft's error types: [`RaftError`] for opening and running groups,
//! [`ProposeError`] for a proposal.

use es_log::LogError;

#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    #[error("partition log: {0}")]
    Log(#[from] LogError),
    #[error("Raft file {file} is unreadable: {reason}")]
    BadFile { file: &'static str, reason: String },
    #[error("Raft term {0} does not fit a Kafka leader epoch (at most 2147483647)")]
    TermTooLarge(u64),
    #[error("peer links: {0}")]
    Peer(#[from] es_peer::PeerError),
    #[error("Raft configuration: {0}")]
    Config(String),
    #[error("group {group} is already open on this node")]
    GroupOpen { group: u64 },
    #[error("group {group}: {reason}")]
    Group { group: u64, reason: String },
    #[error("the Raft host is shut down")]
    Shutdown,
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

/// Why a proposal was not acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// This node does not lead the group, so the batch was not appended (openraft's
    /// `ForwardToLeader`): the caller may resend it to `leader`.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<u64> },
    /// The batch was handed to openraft and this node stopped leading (or was
    /// fenced) before it committed: it may or may not be in the log, and may still
    /// commit under the next leader (openraft's `LogEntryDiscarded`, or fencing).
    /// A resend may write it twice unless it comes from an idempotent producer,
    /// whose retry is answered with the original offsets.
    #[error("leadership lost before the commit; the batch may or may not be written (leader: {leader:?})")]
    LeadershipLost { leader: Option<u64> },
    /// Not committed within the proposal timeout; it may still commit.
    #[error("the proposal was not committed in time")]
    Timeout,
    /// The group or the host is closed.
    #[error("the group is shut down")]
    Shutdown,
    /// The batch is refused before it is proposed: invalid, out of order, fenced.
    #[error("batch refused: {0}")]
    Rejected(#[from] LogError),
    /// A Raft control batch (blank, membership) cannot be proposed as data.
    #[error("a Raft control batch cannot be proposed as data")]
    ControlBatch,
    /// A leader transfer's target did not answer the leader within an election
    /// timeout (down, cut off, or still starting): nothing was transferred.
    #[error("node {node} did not answer its leader within an election timeout (it may be down or starting)")]
    Unanswered { node: u64 },
    /// A leader transfer's target did not catch up with the leader's log in time
    /// (twice the longest election timeout): nothing was transferred.
    #[error(
        "node {node} is behind its leader (it holds up to index {matched:?} of {last}); nothing was transferred"
    )]
    Behind { node: u64, matched: Option<u64>, last: u64 },
    /// The group failed (a storage error or a panic in openraft): it must be reopened.
    #[error("the group failed: {0}")]
    Failed(String),
}
