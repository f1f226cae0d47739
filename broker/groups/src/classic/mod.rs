//! Kafka's classic group protocol: a pure state machine over a [`Clock`]. Unlike the
//! es-native [`crate::Coordinator`], the broker computes no assignment: the leader
//! member gets every member's (opaque) protocol metadata in its JoinGroup answer and
//! hands the assignments back in its SyncGroup, which the coordinator distributes.
//!
//! Joins and syncs may have to wait (the join barrier, a follower's sync before the
//! leader's): such a call answers [`Outcome::Parked`], and its answer comes later as a
//! [`Completion`] from [`ClassicCoordinator::take_completions`]. Time only moves
//! inside calls: every call first runs [`ClassicCoordinator::tick`], and the caller's
//! timer calls it at [`ClassicCoordinator::next_deadline_ms`], so no thread or task
//! lives here.

pub mod consumer_protocol;
mod group;
pub mod stored;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use es_core::Clock;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::LeaderHint;
use crate::error::{GroupError, Result};
use crate::limits;
use group::Group;
pub use stored::{StoreRequest, StoredGroup, StoredMember};

/// The broker's settings for classic groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassicConfig {
    /// `group.initial.rebalance.delay.ms`: a new group's barrier waits this long
    /// (extended by each join, up to the rebalance timeout) so that members starting
    /// together land in one generation instead of each leading its own.
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
}

impl Default for ClassicConfig {
    fn default() -> Self {
        ClassicConfig {
            initial_rebalance_delay_ms: limits::INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            min_session_timeout_ms: limits::SESSION_TIMEOUT_MS_MIN_DEFAULT,
            max_session_timeout_ms: limits::SESSION_TIMEOUT_MS_MAX_DEFAULT,
        }
    }
}

/// One protocol a member supports (e.g. "range", "cooperative-sticky") with its
/// metadata, both opaque to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Vec<u8>,
}

/// A JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinGroup {
    pub group: String,
    /// Empty for a member that has none yet.
    pub member_id: String,
    /// `group.instance.id` of a static member (KIP-345).
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+ (KIP-394): a new dynamic member first gets its id with
    /// MEMBER_ID_REQUIRED and joins again with it.
    pub require_known_member_id: bool,
}

/// A member as the leader sees it in its JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Its metadata for the chosen protocol.
    pub metadata: Vec<u8>,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub generation: i32,
    pub protocol_type: String,
    pub protocol_name: String,
    pub leader: String,
    pub member_id: String,
    /// Every member, for the leader only; empty for followers.
    pub members: Vec<JoinedMember>,
    /// A static leader rejoined without change: the group keeps its assignment, the
    /// leader must not compute a new one (JoinGroup v9).
    pub skip_assignment: bool,
}

/// A SyncGroup.
#[derive(Debug, Clone)]
pub struct SyncGroup {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    /// Checked when given (SyncGroup v5).
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// From the leader: each member's assignment. Ignored from followers.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup answer: the member's assignment, opaque.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    pub protocol_type: String,
    pub protocol_name: String,
    pub assignment: Vec<u8>,
}

/// A call's answer, now or later.
#[derive(Debug)]
pub enum Outcome<T> {
    Done(Result<T>),
    /// Answered by a later [`Completion`] for this member.
    Parked {
        member_id: String,
    },
}

/// The answer of a parked call.
#[derive(Debug)]
pub enum Completion {
    Join { group: String, member_id: String, result: Result<JoinResult> },
    Sync { group: String, member_id: String, result: Result<Synced> },
}

/// What calls produce besides their own answer: parked calls' answers, and the
/// group records to make durable ([`ClassicCoordinator::take_stores`]).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    completions: Vec<Completion>,
    stores: Vec<StoreRequest>,
    /// The last store's number ([`StoreRequest::seq`]), across every group.
    last_seq: u64,
}

impl Outbox {
    fn push(&mut self, c: Completion) {
        self.completions.push(c);
    }

    fn store(&mut self, r: StoreRequest) {
        self.stores.push(r);
    }
}

/// A member named in a LeaveGroup (v3+ names several, by id or instance id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRef {
    pub member_id: String,
    pub instance_id: Option<String>,
}

/// The states DescribeGroups and ListGroups report (Dead is a group that is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl ClassicState {
    /// Kafka's spelling, as DescribeGroups and ListGroups carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub last_heartbeat_ms_ago: i64,
    /// Metadata for the chosen protocol (empty before the first generation).
    pub metadata: Vec<u8>,
    /// What the leader assigned it in this generation (empty until synced).
    pub assignment: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicDescription {
    pub group: String,
    pub state: ClassicState,
    pub generation: i32,
    /// Empty while the group has no members.
    pub protocol_type: String,
    /// The chosen protocol; empty while none is.
    pub protocol: String,
    pub leader: String,
    pub members: Vec<ClassicMember>,
}

/// Every classic group of the broker.
pub struct ClassicCoordinator {
    clock: Arc<dyn Clock>,
    config: ClassicConfig,
    groups: BTreeMap<String, Group>,
    outbox: Outbox,
    ids: rand::rngs::StdRng,
}

impl std::fmt::Debug for ClassicCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassicCoordinator").field("groups", &self.groups.len()).finish_non_exhaustive()
    }
}

impl ClassicCoordinator {
    pub fn new(clock: Arc<dyn Clock>, config: ClassicConfig) -> Self {
        let ids = rand::rngs::StdRng::from_os_rng();
        ClassicCoordinator { clock, config, groups: BTreeMap::new(), outbox: Outbox::default(), ids }
    }

    pub fn config(&self) -> ClassicConfig {
        self.config
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// `<client_id>-<uuid v4>`, as Kafka names members.
    fn member_id(&mut self, client_id: &str) -> String {
        let n: u128 = self.ids.random();
        let n = (n & !(0xf000 << 64) | (0x4000 << 64)) & !(0xc000 << 48) | (0x8000 << 48);
        let h = format!("{n:032x}");
        format!("{client_id}-{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
    }

    /// Runs every timeout that is due: session expiry, the join barrier (initial
    /// delay, rebalance timeout), members that never synced. Every call runs it first.
    pub fn tick(&mut self) {
        let now = self.now();
        for (name, group) in self.groups.iter_mut() {
            group.tick(name, now, &mut self.outbox);
        }
    }

    /// When the next timeout falls due, if any: the caller's timer sleeps until then.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.groups.values().filter_map(Group::next_deadline_ms).min()
    }

    /// Answers of parked calls that are now complete.
    pub fn take_completions(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.outbox.completions)
    }

    /// Group records to make durable, in the order they must reach the log. An
    /// awaited one holds its group's SyncGroup answers until [`Self::stored`].
    pub fn take_stores(&mut self) -> Vec<StoreRequest> {
        std::mem::take(&mut self.outbox.stores)
    }

    /// The outcome of awaited store `seq` of `group` (`Err`: it failed; where the
    /// coordinator is, if known). Answers the calls that waited for it.
    pub fn stored(&mut self, group: &str, seq: u64, outcome: std::result::Result<(), Option<LeaderHint>>) {
        self.tick();
        let now = self.now();
        if let Some(g) = self.groups.get_mut(group) {
            g.stored(group, seq, outcome, now, &mut self.outbox);
        }
    }

    /// Replaces every group with the ones `stored` holds (a coordinator starting, or
    /// taking over): members keep their ids, generation and assignment, and their
    /// session timeouts start now.
    pub fn load(&mut self, stored: Vec<(String, StoredGroup)>) {
        let now = self.now();
        self.groups = stored.into_iter().map(|(name, s)| (name, Group::restore(s, now))).collect();
    }

    pub fn join(&mut self, req: JoinGroup) -> Outcome<JoinResult> {
        self.tick();
        let now = self.now();
        if let Err(e) = self.validate_join(&req) {
            return Outcome::Done(Err(e));
        }
        let fresh = req.member_id.is_empty().then(|| self.member_id(&req.client_id));
        let name = req.group.clone();
        let config = self.config;
        let group = self.groups.entry(name.clone()).or_default();
        let joined = group.join(&name, req, fresh, now, &config, &mut self.outbox);
        if group.is_unused() {
            self.groups.remove(&name);
        }
        match joined {
            Err(e) => Outcome::Done(Err(e)),
            Ok(member_id) => self.own_join(&name, member_id),
        }
    }

    fn validate_join(&self, req: &JoinGroup) -> Result<()> {
        check_group_id(&req.group)?;
        let (min, max) = (self.config.min_session_timeout_ms, self.config.max_session_timeout_ms);
        if !(min..=max).contains(&req.session_timeout_ms) {
            return Err(GroupError::InvalidSessionTimeout { given: req.session_timeout_ms, min, max });
        }
        if !(1..=limits::REBALANCE_TIMEOUT_MS_MAX).contains(&req.rebalance_timeout_ms) {
            return Err(GroupError::InvalidRequest(format!(
                "a rebalance timeout is between 1 and {} ms",
                limits::REBALANCE_TIMEOUT_MS_MAX
            )));
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol {
                group: req.group.clone(),
                reason: "a member names a protocol type and at least one protocol".into(),
            });
        }
        Ok(())
    }

    fn own_join(&mut self, group: &str, member_id: String) -> Outcome<JoinResult> {
        let at = self.outbox.completions.iter().position(
            |c| matches!(c, Completion::Join { group: g, member_id: m, .. } if g == group && *m == member_id),
        );
        match at.map(|i| self.outbox.completions.remove(i)) {
            Some(Completion::Join { result, .. }) => Outcome::Done(result),
            Some(other) => {
                self.outbox.push(other);
                Outcome::Parked { member_id }
            }
            None => Outcome::Parked { member_id },
        }
    }

    fn own_sync(&mut self, group: &str, member_id: String) -> Outcome<Synced> {
        let at = self.outbox.completions.iter().position(
            |c| matches!(c, Completion::Sync { group: g, member_id: m, .. } if g == group && *m == member_id),
        );
        match at.map(|i| self.outbox.completions.remove(i)) {
            Some(Completion::Sync { result, .. }) => Outcome::Done(result),
            Some(other) => {
                self.outbox.push(other);
                Outcome::Parked { member_id }
            }
            None => Outcome::Parked { member_id },
        }
    }

    pub fn sync(&mut self, req: SyncGroup) -> Outcome<Synced> {
        self.tick();
        let now = self.now();
        let Some(group) = self.groups.get_mut(&req.group) else {
            return Outcome::Done(Err(unknown(&req.group, &req.member_id)));
        };
        let name = req.group.clone();
        let member = req.member_id.clone();
        match group.sync(&name, req, now, &mut self.outbox) {
            Err(e) => Outcome::Done(Err(e)),
            Ok(()) => self.own_sync(&name, member),
        }
    }

    pub fn heartbeat(
        &mut self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<()> {
        self.tick();
        let now = self.now();
        let g = self.groups.get_mut(group).ok_or_else(|| unknown(group, member))?;
        g.heartbeat(group, member, instance, generation, now)
    }

    /// Removes members; one answer per member, in order.
    pub fn leave(&mut self, group: &str, members: &[MemberRef]) -> Vec<Result<()>> {
        self.tick();
        let now = self.now();
        let Some(g) = self.groups.get_mut(group) else {
            return members.iter().map(|m| Err(unknown(group, &m.member_id))).collect();
        };
        g.leave(group, members, now, &mut self.outbox)
    }

    /// Fences an OffsetCommit. Generation -1 with no member id is a simple commit
    /// (a consumer that assigns itself partitions), allowed while the group is empty.
    pub fn check_commit(
        &mut self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<()> {
        self.tick();
        let now = self.now();
        match self.groups.get_mut(group) {
            None if generation < 0 => Ok(()),
            None => {
                Err(GroupError::IllegalGeneration { group: group.to_owned(), given: generation, current: -1 })
            }
            Some(g) => g.check_commit(group, member, instance, generation, now),
        }
    }

    /// True when the coordinator holds state for `group`.
    pub fn knows(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    pub fn describe(&mut self, group: &str) -> Option<ClassicDescription> {
        self.tick();
        let now = self.now();
        self.groups.get(group).map(|g| g.describe(group, now))
    }

    /// Every group with its state and protocol type.
    pub fn list(&mut self) -> Vec<(String, ClassicState, String)> {
        self.tick();
        self.groups.iter().map(|(n, g)| (n.clone(), g.state(), g.protocol_type())).collect()
    }

    /// Forgets an empty group (its offsets and its record are the caller's).
    pub fn delete(&mut self, group: &str) -> Result<()> {
        self.tick();
        match self.groups.get(group) {
            None => Err(GroupError::GroupNotFound(group.to_owned())),
            Some(g) if g.state() != ClassicState::Empty => Err(GroupError::GroupNotEmpty(group.to_owned())),
            Some(_) => {
                self.groups.remove(group);
                Ok(())
            }
        }
    }
}

fn unknown(group: &str, member: &str) -> GroupError {
    GroupError::UnknownMember { group: group.to_owned(), member: member.to_owned() }
}

/// A group id es accepts (Kafka's INVALID_GROUP_ID otherwise).
pub fn check_group_id(group: &str) -> Result<()> {
    if group.is_empty() || group.len() > limits::GROUP_ID_BYTES_MAX {
        return Err(GroupError::InvalidRequest(format!(
            "a group id has 1 to {} bytes",
            limits::GROUP_ID_BYTES_MAX
        )));
    }
    Ok(())
}
