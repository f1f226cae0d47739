//! The JSON answers of the consumer-group routes (`http/groups.rs`,
//! `http/group_sessions.rs`), as the handlers write them, so `/openapi.json`
//! describes exactly what goes over the wire. The coordinator's own types
//! (`es_groups`) convert into these.

use es_groups::{GroupDescription, GroupState, Joined, MemberDescription, SyncResult};
use serde::Serialize;
use utoipa::ToSchema;

use crate::groups::{CommittedOffset, PartitionLag};

/// One partition of one topic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupPartition {
    pub topic: String,
    pub partition: u32,
}

impl From<es_groups::TopicPartition> for GroupPartition {
    fn from(tp: es_groups::TopicPartition) -> Self {
        GroupPartition { topic: tp.topic, partition: tp.partition }
    }
}

fn partitions(tps: impl IntoIterator<Item = es_groups::TopicPartition>) -> Vec<GroupPartition> {
    tps.into_iter().map(GroupPartition::from).collect()
}

/// `POST /groups/{g}/join`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JoinAnswer {
    pub member_id: String,
    pub generation: i32,
    /// The member Kafka clients would elect to compute the assignment (the oldest).
    pub leader: String,
    pub members: Vec<String>,
}

impl From<Joined> for JoinAnswer {
    fn from(j: Joined) -> Self {
        JoinAnswer { member_id: j.member_id, generation: j.generation, leader: j.leader, members: j.members }
    }
}

/// `POST /groups/{g}/sync`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SyncAnswer {
    pub generation: i32,
    /// Partitions to read now.
    pub assignment: Vec<GroupPartition>,
    /// Partitions to stop reading and commit; they pass on at the next heartbeat.
    pub revoking: Vec<GroupPartition>,
}

impl From<SyncResult> for SyncAnswer {
    fn from(s: SyncResult) -> Self {
        SyncAnswer {
            generation: s.generation,
            assignment: partitions(s.assignment),
            revoking: partitions(s.revoking),
        }
    }
}

/// A group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub enum GroupStateName {
    /// No members.
    Empty,
    /// Some partitions wait for their old owner to release them.
    PreparingRebalance,
    /// Some members have not synced the current generation yet.
    CompletingRebalance,
    Stable,
}

impl From<GroupState> for GroupStateName {
    fn from(s: GroupState) -> Self {
        match s {
            GroupState::Empty => GroupStateName::Empty,
            GroupState::PreparingRebalance => GroupStateName::PreparingRebalance,
            GroupState::CompletingRebalance => GroupStateName::CompletingRebalance,
            GroupState::Stable => GroupStateName::Stable,
        }
    }
}

/// One member of `GET /groups/{g}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupMember {
    pub member_id: String,
    pub client_id: String,
    pub session_timeout_ms: u64,
    pub last_heartbeat_ms_ago: i64,
    /// Partitions this member owns (reads) now.
    pub assignment: Vec<GroupPartition>,
}

impl From<MemberDescription> for GroupMember {
    fn from(m: MemberDescription) -> Self {
        GroupMember {
            member_id: m.member_id,
            client_id: m.client_id,
            session_timeout_ms: m.session_timeout_ms,
            last_heartbeat_ms_ago: m.last_heartbeat_ms_ago,
            assignment: partitions(m.assignment),
        }
    }
}

/// `GET /groups/{g}`: the group and, per partition of its topics, the committed
/// offset and lag.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupDescribed {
    pub group: String,
    /// `es` (HTTP and binary protocol members) or `kafka` (Kafka's classic protocol).
    pub kind: String,
    pub state: GroupStateName,
    pub generation: i32,
    pub topics: Vec<String>,
    pub members: Vec<GroupMember>,
    pub partitions: Vec<PartitionLag>,
}

impl GroupDescribed {
    pub fn new(g: GroupDescription, partitions: Vec<PartitionLag>) -> Self {
        GroupDescribed {
            group: g.group,
            kind: g.kind.as_str().to_owned(),
            state: g.state.into(),
            generation: g.generation,
            topics: g.topics,
            members: g.members.into_iter().map(GroupMember::from).collect(),
            partitions,
        }
    }
}

/// One group of `GET /groups`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupSummary {
    pub group: String,
    /// `Empty`, `PreparingRebalance`, `CompletingRebalance` or `Stable`.
    pub state: String,
    /// `es` or `kafka`.
    pub kind: String,
}

/// `GET /groups`: groups with members or committed offsets.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupSummary>,
}

/// A group's committed offsets (`GET /groups/{g}/offsets`, and what a reset wrote).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GroupOffsets {
    pub group: String,
    pub offsets: Vec<CommittedOffset>,
}

/// `POST /groups/{g}/members`: the new session's member.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionJoined {
    pub member_id: String,
    pub generation: i32,
    pub assignment: Vec<GroupPartition>,
}

/// One record of a session poll: where it comes from, and the record as a
/// partition consume returns it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionRecord {
    pub topic: String,
    pub partition: u32,
    #[serde(flatten)]
    pub record: crate::api::ConsumedRecord,
}

/// `GET /groups/{g}/members/{m}/records`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionPoll {
    pub member_id: String,
    pub generation: i32,
    pub assignment: Vec<GroupPartition>,
    pub records: Vec<SessionRecord>,
}

/// A committed position of a session.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

/// `POST /groups/{g}/members/{m}/commit`: every position committed so far.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionCommitted {
    /// `ok`.
    pub status: String,
    pub offsets: Vec<SessionOffset>,
}
