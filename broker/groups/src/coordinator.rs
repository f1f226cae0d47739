//! The group coordinator: a pure state machine over a [`Clock`], modelled on Kafka's
//! group protocol (member ids, generations, join / sync / heartbeat / leave, session
//! and rebalance timeouts), with the assignment computed by the broker.
//!
//! Two maps per group keep "each partition to exactly one member" true at every
//! instant, not only at rest: `target` is where the sticky assignor wants each
//! partition; `owner` is the one member allowed to read it now. A partition whose
//! target changed stays with its owner (revoking) until that owner has synced the new
//! generation and heartbeats again (it stops reading and commits in between), or is
//! evicted; only then does it pass to its target, in a new generation. Members that
//! keep a partition own it throughout, so they never stop reading it (cooperative
//! rebalancing in two phases: revoke, then assign).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use es_core::Clock;
use serde::Serialize;

use crate::TopicPartition;
use crate::assignor::{self, Assignment};
use crate::error::{GroupError, Result};

/// A join: a new member (no `member_id`) or a known one rejoining to learn the generation.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group: String,
    pub member_id: Option<String>,
    pub client_id: String,
    /// Topics with their partition counts, resolved by the caller.
    pub topics: Vec<(String, u32)>,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Joined {
    pub member_id: String,
    pub generation: i32,
    /// The member Kafka clients would elect to compute the assignment (the oldest).
    pub leader: String,
    pub members: Vec<String>,
}

/// What `sync` hands a member for its generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyncResult {
    pub generation: i32,
    /// Partitions to read now.
    pub assignment: Vec<TopicPartition>,
    /// Partitions to stop reading and commit; they pass on at the next heartbeat.
    pub revoking: Vec<TopicPartition>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Some partitions wait for their old owner to release them.
    PreparingRebalance,
    /// Some members have not synced the current generation yet.
    CompletingRebalance,
    Stable,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemberDescription {
    pub member_id: String,
    pub client_id: String,
    pub session_timeout_ms: u64,
    pub last_heartbeat_ms_ago: i64,
    /// Partitions this member owns (reads) now.
    pub assignment: Vec<TopicPartition>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupDescription {
    pub group: String,
    pub kind: crate::GroupKind,
    pub state: GroupState,
    pub generation: i32,
    pub topics: Vec<String>,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug)]
struct Member {
    client_id: String,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    last_seen_ms: i64,
    synced_generation: i32,
}

#[derive(Debug, Default)]
struct Group {
    generation: i32,
    generation_started_ms: i64,
    /// Join order, for the leader.
    members: BTreeMap<String, Member>,
    joined: Vec<String>,
    topics: Vec<(String, u32)>,
    target: Assignment,
    owner: Assignment,
}

/// Every group of the broker.
#[derive(Debug)]
pub struct Coordinator {
    clock: Arc<dyn Clock>,
    groups: BTreeMap<String, Group>,
    next_member: u64,
}

impl Coordinator {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Coordinator { clock, groups: BTreeMap::new(), next_member: 0 }
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Evicts members whose session expired, or that hold a revoking partition past
    /// their rebalance timeout, and rebalances their groups. Every call runs it first.
    pub fn expire(&mut self) {
        let now = self.now();
        for group in self.groups.values_mut() {
            let dead: Vec<String> = group
                .members
                .iter()
                .filter(|(id, m)| {
                    let silent = now - m.last_seen_ms > m.session_timeout_ms as i64;
                    let slow = group.is_revoking(id)
                        && now - group.generation_started_ms > m.rebalance_timeout_ms as i64;
                    silent || slow
                })
                .map(|(id, _)| id.clone())
                .collect();
            if !dead.is_empty() {
                for id in &dead {
                    tracing::info!(member = %id, "evicting a group member: session or rebalance timeout");
                    group.remove(id);
                }
                group.rebalance(now);
            }
        }
    }

    pub fn join(&mut self, req: JoinRequest) -> Result<Joined> {
        self.expire();
        let now = self.now();
        validate_join(&req)?;
        let id = match &req.member_id {
            Some(id) if !id.is_empty() => id.clone(),
            _ => {
                self.next_member += 1;
                format!("{}-{:x}-{}", req.client_id, now, self.next_member)
            }
        };
        let group = self.groups.entry(req.group.clone()).or_default();
        let mut topics = req.topics.clone();
        topics.sort();
        if let Some(m) = group.members.get_mut(&id) {
            m.last_seen_ms = now;
            if group.topics == topics {
                return Ok(group.joined_result(&id));
            }
        } else if req.member_id.as_deref().is_some_and(|m| !m.is_empty()) {
            return Err(GroupError::UnknownMember { group: req.group, member: id });
        }
        if !group.members.is_empty()
            && group.topics != topics
            && group.members.len() > usize::from(group.members.contains_key(&id))
        {
            return Err(GroupError::InconsistentSubscription {
                group: req.group,
                existing: group.topics.iter().map(|(t, _)| t.clone()).collect(),
                requested: topics.into_iter().map(|(t, _)| t).collect(),
            });
        }
        group.topics = topics;
        if !group.members.contains_key(&id) {
            group.joined.push(id.clone());
        }
        group.members.insert(
            id.clone(),
            Member {
                client_id: req.client_id,
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                last_seen_ms: now,
                synced_generation: -1,
            },
        );
        group.rebalance(now);
        Ok(group.joined_result(&id))
    }

    pub fn sync(&mut self, group: &str, member: &str, generation: i32) -> Result<SyncResult> {
        self.expire();
        let now = self.now();
        let g = self.member_group(group, member, now)?;
        g.check_generation(group, generation)?;
        g.members.get_mut(member).expect("checked").synced_generation = generation;
        let owned = g.owner.iter().filter(|(_, o)| o.as_str() == member).map(|(tp, _)| tp.clone());
        let (assignment, revoking) = owned.partition(|tp| g.target.get(tp).is_some_and(|t| t == member));
        Ok(SyncResult { generation, assignment, revoking })
    }

    /// Keeps the session alive. Refused with `RebalanceInProgress` until the member
    /// has synced the current generation; a synced member's heartbeat releases the
    /// partitions it was revoking (it has stopped reading and committed them).
    pub fn heartbeat(&mut self, group: &str, member: &str, generation: i32) -> Result<()> {
        self.expire();
        let now = self.now();
        let g = self.member_group(group, member, now)?;
        let synced = g.members[member].synced_generation;
        if generation != g.generation || synced != g.generation {
            return Err(GroupError::RebalanceInProgress(group.to_owned()));
        }
        if g.is_revoking(member) {
            for (tp, o) in g.owner.iter_mut() {
                if o == member {
                    *o = g.target[tp].clone();
                }
            }
            g.bump(now);
            return Err(GroupError::RebalanceInProgress(group.to_owned()));
        }
        Ok(())
    }

    pub fn leave(&mut self, group: &str, member: &str) -> Result<()> {
        self.expire();
        let now = self.now();
        let g = self.member_group(group, member, now)?;
        g.remove(member);
        g.rebalance(now);
        Ok(())
    }

    /// Fences a commit: a member must be current; `member == ""` with generation -1
    /// is a standalone commit, allowed only while the group has no members.
    pub fn check_commit(&mut self, group: &str, member: &str, generation: i32) -> Result<()> {
        self.expire();
        let now = self.now();
        if member.is_empty() && generation < 0 {
            return match self.groups.get(group) {
                Some(g) if !g.members.is_empty() => Err(GroupError::GroupNotEmpty(group.to_owned())),
                _ => Ok(()),
            };
        }
        let g = self.member_group(group, member, now)?;
        g.check_generation(group, generation)
    }

    /// True while the group has members (offset resets and deletes are refused then).
    pub fn is_active(&mut self, group: &str) -> bool {
        self.expire();
        self.groups.get(group).is_some_and(|g| !g.members.is_empty())
    }

    pub fn describe(&mut self, group: &str) -> Option<GroupDescription> {
        self.expire();
        let now = self.now();
        self.groups.get(group).map(|g| g.describe(group, now))
    }

    /// Names of groups with members or a history in this process.
    pub fn groups(&mut self) -> Vec<String> {
        self.expire();
        self.groups.keys().cloned().collect()
    }

    /// Forgets an empty group.
    pub fn delete(&mut self, group: &str) -> Result<()> {
        if self.is_active(group) {
            return Err(GroupError::GroupNotEmpty(group.to_owned()));
        }
        self.groups.remove(group);
        Ok(())
    }

    fn member_group(&mut self, group: &str, member: &str, now: i64) -> Result<&mut Group> {
        let unknown = || GroupError::UnknownMember { group: group.to_owned(), member: member.to_owned() };
        let g = self.groups.get_mut(group).ok_or_else(unknown)?;
        let m = g.members.get_mut(member).ok_or_else(unknown)?;
        m.last_seen_ms = now;
        Ok(g)
    }
}

fn validate_join(req: &JoinRequest) -> Result<()> {
    let bad = |m: &str| Err(GroupError::InvalidRequest(m.to_owned()));
    if req.group.is_empty() || req.group.len() > 249 {
        return bad("a group id has 1 to 249 characters");
    }
    if req.topics.is_empty() {
        return bad("a member subscribes to at least one topic");
    }
    if !(1..=3_600_000).contains(&req.session_timeout_ms)
        || !(1..=3_600_000).contains(&req.rebalance_timeout_ms)
    {
        return bad("session_timeout_ms and rebalance_timeout_ms are between 1 and 3600000");
    }
    Ok(())
}

impl Group {
    fn is_revoking(&self, member: &str) -> bool {
        self.owner.iter().any(|(tp, o)| o == member && self.target.get(tp).is_some_and(|t| t != member))
    }

    fn remove(&mut self, member: &str) {
        self.members.remove(member);
        self.joined.retain(|m| m != member);
        self.owner.retain(|_, o| o != member);
    }

    fn check_generation(&self, group: &str, generation: i32) -> Result<()> {
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration {
                group: group.to_owned(),
                given: generation,
                current: self.generation,
            });
        }
        Ok(())
    }

    fn bump(&mut self, now: i64) {
        self.generation += 1;
        self.generation_started_ms = now;
    }

    /// A new generation: a fresh sticky target from the current owners; partitions
    /// nobody owns go to their target at once, owned ones wait for release.
    fn rebalance(&mut self, now: i64) {
        self.bump(now);
        let partitions: BTreeSet<TopicPartition> = self
            .topics
            .iter()
            .flat_map(|(t, n)| (0..*n).map(move |p| TopicPartition::new(t.clone(), p)))
            .collect();
        let members: BTreeSet<String> = self.members.keys().cloned().collect();
        self.owner.retain(|tp, o| partitions.contains(tp) && members.contains(o));
        let mut previous = self.target.clone();
        previous.retain(|tp, _| !self.owner.contains_key(tp));
        previous.extend(self.owner.clone());
        self.target = assignor::assign(&partitions, &members, &previous);
        for (tp, m) in &self.target {
            self.owner.entry(tp.clone()).or_insert_with(|| m.clone());
        }
    }

    fn joined_result(&self, id: &str) -> Joined {
        Joined {
            member_id: id.to_owned(),
            generation: self.generation,
            leader: self.joined.first().cloned().unwrap_or_default(),
            members: self.joined.clone(),
        }
    }

    fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.owner != self.target {
            GroupState::PreparingRebalance
        } else if self.members.values().any(|m| m.synced_generation != self.generation) {
            GroupState::CompletingRebalance
        } else {
            GroupState::Stable
        }
    }

    fn describe(&self, group: &str, now: i64) -> GroupDescription {
        let members = self
            .joined
            .iter()
            .map(|id| {
                let m = &self.members[id];
                MemberDescription {
                    member_id: id.clone(),
                    client_id: m.client_id.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    last_heartbeat_ms_ago: now - m.last_seen_ms,
                    assignment: self
                        .owner
                        .iter()
                        .filter(|(_, o)| *o == id)
                        .map(|(tp, _)| tp.clone())
                        .collect(),
                }
            })
            .collect();
        GroupDescription {
            group: group.to_owned(),
            kind: crate::GroupKind::Es,
            state: self.state(),
            generation: self.generation,
            topics: self.topics.iter().map(|(t, _)| t.clone()).collect(),
            members,
        }
    }
}

#[cfg(test)]
mod tests;
