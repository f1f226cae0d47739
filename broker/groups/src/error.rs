//! The group crate's error type; each variant maps to a stable wire code.

/// Why a group request was refused.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error(
        "member {member:?} is not in group {group:?} (evicted after its session timeout, or it left); join again"
    )]
    UnknownMember { group: String, member: String },
    #[error(
        "generation {given} of group {group:?} is stale; the group is at generation {current}: join and sync again"
    )]
    IllegalGeneration { group: String, given: i32, current: i32 },
    #[error(
        "group {0:?} is rebalancing: join again (with your member id) and sync to get the new assignment"
    )]
    RebalanceInProgress(String),
    #[error("group {group:?} subscribes to {existing:?}; a member asked for {requested:?}")]
    InconsistentSubscription { group: String, existing: Vec<String>, requested: Vec<String> },
    #[error("group {0:?} does not exist")]
    GroupNotFound(String),
    #[error("group {0:?} has active members; stop them (or wait for their session timeout) first")]
    GroupNotEmpty(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("group {group:?} is a{} group; it cannot be used as a{} one", kind.article(), wanted.article())]
    WrongKind { group: String, kind: crate::GroupKind, wanted: crate::GroupKind },
    #[error("join group {group:?} again with the member id {member_id:?} the broker assigned")]
    MemberIdRequired { group: String, member_id: String },
    #[error(
        "member {member:?} of group {group:?} was replaced by a newer member with group.instance.id {instance:?}"
    )]
    FencedInstanceId { group: String, member: String, instance: String },
    #[error("group {group:?}: {reason}")]
    InconsistentGroupProtocol { group: String, reason: String },
    #[error("group {group:?} has members subscribed to topic {topic:?}; stop them first")]
    SubscribedToTopic { group: String, topic: String },
    #[error("group {group:?} has its maximum of {max} members")]
    GroupFull { group: String, max: usize },
    #[error("session timeout {given} ms is outside the broker's {min}..={max} ms")]
    InvalidSessionTimeout { given: u64, min: u64, max: u64 },
    /// In a cluster: this node does not lead `__es_offsets`, so it coordinates no
    /// group; `hint` names the node that does, when known (Kafka's NOT_COORDINATOR).
    #[error("this node is not the group coordinator{}", hint.as_ref().map(|h| format!("; the coordinator is {}", h.http)).unwrap_or_default())]
    NotCoordinator { hint: Option<LeaderHint> },
    /// In a cluster: this node stopped coordinating groups (it lost the leadership
    /// of `__es_offsets`, or was fenced) after it proposed a write and before the
    /// write committed: it may or may not be written. Unlike NotCoordinator, which
    /// promises nothing was, a blind resend may act twice.
    #[error(
        "this node stopped coordinating groups before the write committed, so it may or may not be written{}: read the group before retrying",
        hint.as_ref().map(|h| format!("; the coordinator is {}", h.http)).unwrap_or_default()
    )]
    CoordinatorLost { hint: Option<LeaderHint> },
    /// In a cluster: this node just became the coordinator and is rebuilding group
    /// state from the committed log (Kafka's COORDINATOR_LOAD_IN_PROGRESS); retry.
    #[error("the group coordinator is loading committed offsets; retry shortly")]
    CoordinatorLoading,
    #[error("the committed-offsets log failed: {0}")]
    Storage(#[from] es_log::LogError),
    #[error("the committed-offsets log holds an unreadable record at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
}

pub type Result<T, E = GroupError> = std::result::Result<T, E>;

/// Where another node that leads something is, as far as this node knows: its HTTP
/// URL (or `node N` while its addresses are unknown), and its binary listener's
/// advertised address, which es-client follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    pub http: String,
    pub binary: Option<String>,
}
