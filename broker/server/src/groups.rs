//! The broker's consumer-group service: the es-groups coordinator behind a lock, the
//! durable committed-offset store in the internal topic `__es_offsets`, and the
//! operations the HTTP and binary listeners share (join, sync, heartbeat, leave,
//! commit, fetch, list, describe with lag, reset, delete).
//!
//! In a cluster `__es_offsets` is a Raft group and this node coordinates groups
//! only while it leads it ([`Serving`], driven by `cluster/coordinator.rs`):
//! offsets are written through the group and acknowledged once a majority has
//! them; elsewhere every group call answers NOT_COORDINATOR (HTTP 421).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

use es_core::{Clock, SystemClock};
use es_groups::classic::{ClassicConfig, ClassicDescription, ClassicState, consumer_protocol};
use es_groups::{
    Committed, Coordinator, GroupDescription, GroupError, GroupKind, GroupState, JoinRequest, Joined,
    LeaderHint, MemberDescription, OffsetStore, SyncResult, TopicPartition,
};
use serde::{Deserialize, Serialize};

use crate::classic_groups::{ClassicGroups, GroupWriter};
use crate::cluster::ends::PartitionEnds;
use crate::registry::Registry;
use crate::service::error::{BrokerError, Result};

/// The internal compacted topic that holds committed offsets.
pub const OFFSETS_TOPIC: &str = "__es_offsets";
/// Topics whose names start with this are internal: hidden from lists, not deletable.
pub const INTERNAL_PREFIX: &str = "__es_";
pub const SESSION_TIMEOUT_MS_DEFAULT: u64 = 10_000;
pub const REBALANCE_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Whether this node serves group calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// A single node coordinates every group, always.
    Local,
    /// A cluster member that leads `__es_offsets` in `term`, its state loaded.
    Coordinator { term: u64 },
    /// A cluster member that just became leader, rebuilding state from the log.
    Loading,
    /// A cluster member that does not lead `__es_offsets`; `hint` names the leader.
    NotCoordinator { hint: Option<LeaderHint> },
}

/// Consumer groups of one broker.
#[derive(Debug)]
pub struct Groups {
    coordinator: Mutex<Coordinator>,
    clock: Arc<dyn Clock>,
    serving: RwLock<Serving>,
    /// Kafka's classic-protocol groups; a group id is in one coordinator or the other.
    pub(crate) classic: ClassicGroups,
    pub(crate) offsets: Arc<OffsetStore>,
}

/// Where `reset` moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetTo {
    Earliest,
    Latest,
    /// The first offset at or after a timestamp (ms).
    Timestamp(i64),
    Offset(u64),
}

/// One partition of `describe`: committed offset, high watermark and lag.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: u32,
    pub committed: Option<u64>,
    pub metadata: Option<String>,
    pub high_watermark: u64,
    /// High watermark minus committed (from the log start when nothing is committed).
    pub lag: u64,
    /// The member that owns the partition now, if any.
    pub owner: Option<String>,
}

/// One committed offset on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    #[serde(default)]
    pub metadata: String,
}

impl Groups {
    /// Opens the group service over the internal offsets partition.
    pub fn open(offsets_log: Arc<es_log::PartitionLog>, kafka: ClassicConfig) -> Result<Groups> {
        Self::open_with_clock(offsets_log, Arc::new(SystemClock), kafka)
    }

    /// Like [`Groups::open`] with the clock session timeouts and rebalance delays
    /// are measured on (tests drive a manual clock).
    pub fn open_with_clock(
        offsets_log: Arc<es_log::PartitionLog>,
        clock: Arc<dyn Clock>,
        kafka: ClassicConfig,
    ) -> Result<Groups> {
        let offsets = Arc::new(OffsetStore::open(offsets_log)?);
        let store = offsets.clone();
        let write: GroupWriter = Arc::new(move |records| {
            let store = store.clone();
            Box::pin(async move { store.write_groups(records).await })
        });
        let classic = ClassicGroups::new(clock.clone(), kafka, write);
        classic.load(loadable(&offsets));
        Ok(Groups {
            coordinator: Mutex::new(Coordinator::new(clock.clone())),
            clock,
            serving: RwLock::new(Serving::Local),
            classic,
            offsets,
        })
    }

    pub fn serving(&self) -> Serving {
        self.serving.read().expect("serving lock").clone()
    }

    /// Refuses every group call unless this node coordinates groups now.
    pub fn check_coordinator(&self) -> Result<()> {
        match self.serving() {
            Serving::Local | Serving::Coordinator { .. } => Ok(()),
            Serving::Loading => Err(BrokerError::Group(GroupError::CoordinatorLoading)),
            Serving::NotCoordinator { hint } => Err(GroupError::NotCoordinator { hint }.into()),
        }
    }

    /// Stops coordinating (another node leads `__es_offsets`): members are dropped
    /// and rejoin at the new coordinator.
    pub fn stop_coordinating(&self, hint: Option<LeaderHint>) {
        *self.serving.write().expect("serving lock") = Serving::NotCoordinator { hint: hint.clone() };
        self.drop_members(hint);
    }

    /// This node leads `__es_offsets` now and rebuilds its state before it serves.
    pub fn start_loading(&self) {
        *self.serving.write().expect("serving lock") = Serving::Loading;
        self.drop_members(None);
    }

    /// Rebuilds the committed offsets and the Kafka groups' membership from the
    /// (committed) log and starts serving as the coordinator of `term` (blocking
    /// reads): the groups' members go on in their generation.
    pub fn finish_loading(&self, term: u64) -> Result<()> {
        self.offsets.reload()?;
        self.classic.load(loadable(&self.offsets));
        *self.serving.write().expect("serving lock") = Serving::Coordinator { term };
        Ok(())
    }

    fn drop_members(&self, hint: Option<LeaderHint>) {
        *self.coordinator() = Coordinator::new(self.clock.clone());
        self.classic.reset(hint);
    }

    /// Which kind of group `group` is, if it exists: the coordinators first, then
    /// the committed offsets (which outlive a restart).
    pub fn kind_of(&self, group: &str) -> Option<GroupKind> {
        if self.classic.knows(group) {
            return Some(GroupKind::Kafka);
        }
        if self.coordinator().describe(group).is_some() {
            return Some(GroupKind::Es);
        }
        self.offsets.kind(group)
    }

    /// Refuses to use a group of the other kind.
    pub fn check_kind(&self, group: &str, wanted: GroupKind) -> Result<()> {
        match self.kind_of(group) {
            Some(kind) if kind != wanted => {
                Err(BrokerError::Group(GroupError::WrongKind { group: group.to_owned(), kind, wanted }))
            }
            Some(_) | None => Ok(()),
        }
    }

    fn coordinator(&self) -> std::sync::MutexGuard<'_, Coordinator> {
        self.coordinator.lock().expect("coordinator lock")
    }

    #[allow(clippy::too_many_arguments)]
    pub fn join(
        &self,
        registry: &Registry,
        group: &str,
        member_id: Option<String>,
        client_id: &str,
        topics: &[String],
        session_timeout_ms: u64,
        rebalance_timeout_ms: u64,
    ) -> Result<Joined> {
        self.check_coordinator()?;
        self.check_kind(group, GroupKind::Es)?;
        let mut resolved = Vec::new();
        for t in topics.iter().collect::<BTreeSet<_>>() {
            resolved.push((t.clone(), registry.topic(t)?.partition_count()));
        }
        let req = JoinRequest {
            group: group.to_owned(),
            member_id,
            client_id: if client_id.is_empty() { "consumer".into() } else { client_id.to_owned() },
            topics: resolved,
            session_timeout_ms,
            rebalance_timeout_ms,
        };
        Ok(self.coordinator().join(req)?)
    }

    pub fn sync(&self, group: &str, member: &str, generation: i32) -> Result<SyncResult> {
        self.check_coordinator()?;
        Ok(self.coordinator().sync(group, member, generation)?)
    }

    pub fn heartbeat(&self, group: &str, member: &str, generation: i32) -> Result<()> {
        self.check_coordinator()?;
        Ok(self.coordinator().heartbeat(group, member, generation)?)
    }

    pub fn leave(&self, group: &str, member: &str) -> Result<()> {
        self.check_coordinator()?;
        Ok(self.coordinator().leave(group, member)?)
    }

    /// Commits offsets fenced by member and generation; returns once they are fsynced.
    pub async fn commit(
        &self,
        registry: &Registry,
        group: &str,
        member: &str,
        generation: i32,
        offsets: Vec<CommittedOffset>,
    ) -> Result<()> {
        self.check_coordinator()?;
        check_group_id(group)?;
        self.check_kind(group, GroupKind::Es)?;
        for o in &offsets {
            registry.topic(&o.topic)?.partition(u64::from(o.partition))?;
        }
        self.coordinator().check_commit(group, member, generation)?;
        let entries = offsets
            .into_iter()
            .map(|o| {
                let value = Committed::new(o.offset, o.metadata);
                (TopicPartition::new(o.topic, o.partition), Some(value))
            })
            .collect();
        Ok(self.offsets.write(group, entries).await?)
    }

    /// The group's committed offsets; in a cluster only the coordinator answers
    /// (NOT_COORDINATOR elsewhere), since a follower's copy may trail the leader's.
    pub fn fetch(&self, group: &str) -> Result<Vec<CommittedOffset>> {
        self.check_coordinator()?;
        Ok(self.committed(group))
    }

    /// The group's committed offsets in this node's table, unchecked.
    fn committed(&self, group: &str) -> Vec<CommittedOffset> {
        self.offsets
            .fetch(group)
            .into_iter()
            .map(|(tp, c)| CommittedOffset {
                topic: tp.topic,
                partition: tp.partition,
                offset: c.offset,
                metadata: c.metadata,
            })
            .collect()
    }

    /// Groups of both kinds with members or committed offsets: (name, state, kind).
    /// In a cluster only the coordinator lists groups (Kafka's ListGroups: each
    /// broker the groups it coordinates); elsewhere the list is empty.
    pub fn list(&self) -> Vec<(String, String, GroupKind)> {
        if self.check_coordinator().is_err() {
            return Vec::new();
        }
        let kafka: BTreeMap<String, ClassicState> =
            self.classic.list().into_iter().map(|(g, state, _)| (g, state)).collect();
        let mut names: BTreeSet<String> = self.offsets.groups().into_iter().collect();
        let mut coordinator = self.coordinator();
        names.extend(coordinator.groups());
        names.extend(kafka.keys().cloned());
        names
            .into_iter()
            .map(|g| match kafka.get(&g) {
                Some(state) => (g, state.as_str().to_owned(), GroupKind::Kafka),
                None => {
                    let kind = self.offsets.kind(&g).unwrap_or(GroupKind::Es);
                    let state =
                        coordinator.describe(&g).map_or("Empty".to_owned(), |d| format!("{:?}", d.state));
                    (g, state, kind)
                }
            })
            .collect()
    }

    /// State and members, with the committed offsets: what `describe` shows
    /// besides each partition's ends (the caller's: `lags` computes the rest).
    pub fn describe_state(
        &self,
        group: &str,
    ) -> Result<(GroupDescription, BTreeMap<TopicPartition, Committed>)> {
        self.check_coordinator()?;
        let committed = self.offsets.fetch(group);
        let description = match self.classic.describe(group) {
            Some(kafka) => Some(kafka_description(kafka)),
            None => self.coordinator().describe(group),
        };
        let description = match description {
            Some(d) => d,
            None if !committed.is_empty() => {
                let kind = self.offsets.kind(group).unwrap_or(GroupKind::Es);
                empty_description(group, kind, &committed)
            }
            None => return Err(BrokerError::Group(GroupError::GroupNotFound(group.to_owned()))),
        };
        Ok((description, committed))
    }

    /// Per partition of each topic in `ends` (its partitions' ends, in order): the
    /// committed offset, the high watermark, the lag and the owner.
    pub fn lags(
        description: &GroupDescription,
        committed: &BTreeMap<TopicPartition, Committed>,
        ends: &BTreeMap<String, Vec<PartitionEnds>>,
    ) -> Vec<PartitionLag> {
        let owners: BTreeMap<&TopicPartition, &str> = description
            .members
            .iter()
            .flat_map(|m| m.assignment.iter().map(move |tp| (tp, m.member_id.as_str())))
            .collect();
        let mut lags = Vec::new();
        for (topic, partitions) in ends {
            for (p, end) in partitions.iter().enumerate() {
                let tp = TopicPartition::new(topic.clone(), p as u32);
                let c = committed.get(&tp);
                let from = c.map_or(end.log_start, |c| c.offset);
                lags.push(PartitionLag {
                    topic: topic.clone(),
                    partition: p as u32,
                    committed: c.map(|c| c.offset),
                    metadata: c.map(|c| c.metadata.clone()),
                    high_watermark: end.high_watermark,
                    lag: end.high_watermark.saturating_sub(from),
                    owner: owners.get(&tp).map(|m| (*m).to_owned()),
                });
            }
        }
        lags
    }

    /// Refuses a reset of `group`'s offsets while it has members (they would
    /// overwrite it with their next commit); answers the group's kind.
    pub fn check_reset(&self, group: &str) -> Result<GroupKind> {
        self.check_coordinator()?;
        check_group_id(group)?;
        let kafka_members = self.classic.describe(group).is_some_and(|d| !d.members.is_empty());
        if self.coordinator().is_active(group) || kafka_members {
            return Err(BrokerError::Group(GroupError::GroupNotEmpty(group.to_owned())));
        }
        Ok(self.kind_of(group).unwrap_or(GroupKind::Es))
    }

    /// Commits `offsets` (partition, offset) of `topic` for a group `check_reset`
    /// still allows (the caller computed them meanwhile); answers the topic's
    /// committed offsets afterwards.
    pub async fn write_reset(
        &self,
        group: &str,
        topic: &str,
        offsets: Vec<(u32, u64)>,
    ) -> Result<Vec<CommittedOffset>> {
        let kind = self.check_reset(group)?;
        let entries = offsets
            .into_iter()
            .map(|(p, offset)| {
                let value = Committed { kind, ..Committed::new(offset, String::new()) };
                (TopicPartition::new(topic, p), Some(value))
            })
            .collect();
        self.offsets.write(group, entries).await?;
        // Written: answer from the table, with no second coordinator check (a 421
        // now would have the caller resend a reset that is done).
        Ok(self.committed(group).into_iter().filter(|c| c.topic == topic).collect())
    }

    /// Deletes an empty group and its committed offsets (tombstones, fsynced).
    pub async fn delete(&self, group: &str) -> Result<()> {
        self.check_coordinator()?;
        let committed = self.offsets.fetch(group);
        let classic = self.classic.knows(group);
        if classic {
            self.classic.delete(group).await?;
        } else {
            let mut coordinator = self.coordinator();
            if committed.is_empty() && coordinator.describe(group).is_none() {
                return Err(BrokerError::Group(GroupError::GroupNotFound(group.to_owned())));
            }
            coordinator.delete(group)?;
        }
        let tombstones = committed.into_keys().map(|tp| (tp, None)).collect();
        // A Kafka group's own tombstone is written by now: a refusal of the
        // offsets' tombstones must not read as "nothing was done".
        self.offsets.write(group, tombstones).await.map_err(|e| match e {
            GroupError::NotCoordinator { hint } if classic => GroupError::CoordinatorLost { hint }.into(),
            other => other.into(),
        })
    }
}

/// The Kafka groups' records a coordinator loads: an empty group without committed
/// offsets is left out (Kafka drops such a group at its next offsets cleanup), so
/// it does not come back in ListGroups after every restart.
fn loadable(offsets: &OffsetStore) -> Vec<(String, es_groups::classic::StoredGroup)> {
    let stored = offsets.stored_groups().into_iter();
    stored.filter(|(g, s)| !s.members.is_empty() || offsets.kind(g).is_some()).collect()
}

fn check_group_id(group: &str) -> Result<()> {
    if group.is_empty() || group.len() > 249 {
        return Err(BrokerError::InvalidRequest("a group id has 1 to 249 characters".into()));
    }
    Ok(())
}

/// A Kafka group as `describe` shows it: for the "consumer" protocol, topics and
/// partitions read from the members' metadata and assignments (opaque otherwise).
fn kafka_description(d: ClassicDescription) -> GroupDescription {
    let consumer = d.protocol_type == "consumer";
    let mut topics = BTreeSet::new();
    let members = d
        .members
        .into_iter()
        .map(|m| {
            if consumer {
                topics.extend(consumer_protocol::subscription_topics(&m.metadata).unwrap_or_default());
            }
            let assignment = match consumer {
                true => consumer_protocol::assigned_partitions(&m.assignment).unwrap_or_default(),
                false => Vec::new(),
            };
            MemberDescription {
                member_id: m.member_id,
                client_id: m.client_id,
                session_timeout_ms: m.session_timeout_ms,
                last_heartbeat_ms_ago: m.last_heartbeat_ms_ago,
                assignment,
            }
        })
        .collect();
    let state = match d.state {
        ClassicState::Empty => GroupState::Empty,
        ClassicState::PreparingRebalance => GroupState::PreparingRebalance,
        ClassicState::CompletingRebalance => GroupState::CompletingRebalance,
        ClassicState::Stable => GroupState::Stable,
    };
    GroupDescription {
        group: d.group,
        kind: GroupKind::Kafka,
        state,
        generation: d.generation,
        topics: topics.into_iter().collect(),
        members,
    }
}

fn empty_description(
    group: &str,
    kind: GroupKind,
    committed: &BTreeMap<TopicPartition, Committed>,
) -> GroupDescription {
    let topics: BTreeSet<String> = committed.keys().map(|tp| tp.topic.clone()).collect();
    GroupDescription {
        group: group.to_owned(),
        kind,
        state: es_groups::GroupState::Empty,
        generation: 0,
        topics: topics.into_iter().collect(),
        members: Vec::new(),
    }
}

impl From<GroupError> for BrokerError {
    fn from(e: GroupError) -> Self {
        match e {
            GroupError::Storage(l) => l.into(),
            GroupError::InvalidRequest(m) => BrokerError::InvalidRequest(m),
            // The existing not-leader shape: 421 + es-leader on HTTP, NotLeader on
            // binary, NOT_COORDINATOR on Kafka's group calls.
            GroupError::NotCoordinator { hint } => {
                BrokerError::NotLeader { topic: OFFSETS_TOPIC.to_owned(), partition: 0, leader: hint }
            }
            GroupError::CoordinatorLost { hint } => {
                BrokerError::LeadershipLost { topic: OFFSETS_TOPIC.to_owned(), partition: 0, leader: hint }
            }
            other => BrokerError::Group(other),
        }
    }
}

/// The stable HTTP code of a group refusal.
pub fn error_code(e: &GroupError) -> &'static str {
    match e {
        GroupError::UnknownMember { .. } => "unknown_member",
        GroupError::IllegalGeneration { .. } => "illegal_generation",
        GroupError::RebalanceInProgress(_) => "rebalance_in_progress",
        GroupError::InconsistentSubscription { .. } => "inconsistent_subscription",
        GroupError::GroupNotFound(_) => "group_not_found",
        GroupError::GroupNotEmpty(_) => "group_not_empty",
        GroupError::InvalidRequest(_) => "invalid_request",
        GroupError::WrongKind { .. } => "group_kind_mismatch",
        // Kafka's classic protocol only: no HTTP route reaches them.
        GroupError::MemberIdRequired { .. }
        | GroupError::FencedInstanceId { .. }
        | GroupError::InconsistentGroupProtocol { .. }
        | GroupError::InvalidSessionTimeout { .. }
        | GroupError::GroupFull { .. }
        | GroupError::SubscribedToTopic { .. } => "invalid_request",
        GroupError::NotCoordinator { .. } => "not_leader",
        GroupError::CoordinatorLost { .. } => "leadership_lost",
        GroupError::CoordinatorLoading => "coordinator_loading",
        GroupError::Storage(_) => "storage_error",
        GroupError::Corrupt { .. } => "internal_error",
    }
}

pub fn error_status(e: &GroupError) -> axum::http::StatusCode {
    use axum::http::StatusCode;
    match e {
        GroupError::GroupNotFound(_) => StatusCode::NOT_FOUND,
        GroupError::InvalidRequest(_)
        | GroupError::MemberIdRequired { .. }
        | GroupError::FencedInstanceId { .. }
        | GroupError::InconsistentGroupProtocol { .. }
        | GroupError::InvalidSessionTimeout { .. }
        | GroupError::GroupFull { .. }
        | GroupError::SubscribedToTopic { .. } => StatusCode::BAD_REQUEST,
        GroupError::Storage(_) | GroupError::Corrupt { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        GroupError::NotCoordinator { .. } => StatusCode::MISDIRECTED_REQUEST,
        GroupError::CoordinatorLoading | GroupError::CoordinatorLost { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        GroupError::UnknownMember { .. }
        | GroupError::IllegalGeneration { .. }
        | GroupError::RebalanceInProgress(_)
        | GroupError::InconsistentSubscription { .. }
        | GroupError::WrongKind { .. }
        | GroupError::GroupNotEmpty(_) => StatusCode::CONFLICT,
    }
}
