//! One classic group: its members, the join barrier, the leader's assignments.
//! Kafka's states: Empty -> PreparingRebalance (barrier) -> CompletingRebalance
//! (waiting for the leader's SyncGroup) -> Stable; any membership or protocol change
//! goes back to PreparingRebalance. The generation moves only when a barrier closes.

use std::collections::BTreeMap;

use super::stored::{StoreRequest, StoredGroup, StoredMember};
use super::{
    ClassicConfig, ClassicDescription, ClassicMember, ClassicState, Completion, JoinGroup, JoinResult,
    JoinedMember, MemberRef, Outbox, Protocol, SyncGroup, Synced, unknown,
};
use crate::LeaderHint;
use crate::error::{GroupError, Result};
use crate::limits;

/// The leader's SyncGroup assignments: member id, opaque bytes.
type Assignments = Vec<(String, Vec<u8>)>;

#[derive(Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    protocol_type: String,
    protocols: Vec<Protocol>,
    assignment: Vec<u8>,
    last_seen_ms: i64,
    /// Parked in a JoinGroup of the current barrier.
    awaiting_join: bool,
    /// Parked in a SyncGroup, waiting for the leader's.
    awaiting_sync: bool,
}

impl Member {
    fn new(req: JoinGroup, now: i64) -> Member {
        Member {
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Vec::new(),
            last_seen_ms: now,
            awaiting_join: true,
            awaiting_sync: false,
        }
    }

    fn expires_ms(&self) -> i64 {
        self.last_seen_ms.saturating_add(self.session_timeout_ms as i64)
    }

    fn metadata(&self, protocol: &str) -> Vec<u8> {
        self.protocols.iter().find(|p| p.name == protocol).map(|p| p.metadata.clone()).unwrap_or_default()
    }
}

#[derive(Debug)]
pub(super) struct Group {
    state: ClassicState,
    generation: i32,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Join order: the first member leads when the leader is gone.
    order: Vec<String>,
    /// group.instance.id -> the member id holding it now.
    statics: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with when they expire.
    pending: BTreeMap<String, i64>,
    /// PreparingRebalance: the barrier does not close before this (initial delay).
    not_before_ms: i64,
    /// PreparingRebalance: the barrier closes at this at the latest (rebalance timeout);
    /// CompletingRebalance: members that have not synced by then are removed.
    deadline_ms: i64,
    started_ms: i64,
    /// The barrier is a new group's: it closes at the end of the initial delay even
    /// with member ids handed out but not used yet.
    initial: bool,
    last_protocol_type: String,
    /// CompletingRebalance: the leader's assignments, waiting for the group's record
    /// (store `seq`) to be durable before any member gets its own (Kafka's storeGroup).
    storing: Option<(u64, Assignments)>,
    /// JoinGroup answers of static members that replaced another without a
    /// rebalance, held until the record naming them (store `seq`) is durable.
    held_joins: Vec<(u64, Completion)>,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            state: ClassicState::Empty,
            generation: 0,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            order: Vec::new(),
            statics: BTreeMap::new(),
            pending: BTreeMap::new(),
            not_before_ms: 0,
            deadline_ms: 0,
            started_ms: 0,
            initial: false,
            last_protocol_type: String::new(),
            storing: None,
            held_joins: Vec::new(),
        }
    }
}

impl Group {
    pub(super) fn state(&self) -> ClassicState {
        self.state
    }

    /// The members' protocol type; an empty group keeps its last one (ListGroups
    /// shows an empty consumer group as "consumer").
    pub(super) fn protocol_type(&self) -> String {
        let current = self.members.values().next().map(|m| m.protocol_type.clone());
        current.unwrap_or_else(|| self.last_protocol_type.clone())
    }

    /// A group that was created by a refused join and holds nothing.
    pub(super) fn is_unused(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty() && self.generation == 0
    }

    fn rebalance_timeout_ms(&self) -> i64 {
        self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0) as i64
    }

    pub(super) fn next_deadline_ms(&self) -> Option<i64> {
        let sessions =
            self.members.values().filter(|m| !m.awaiting_join && !m.awaiting_sync).map(Member::expires_ms);
        let pending = self.pending.values().copied();
        // The initial delay matters only once everyone is in; before that, a
        // not_before in the past would wake the caller's timer for nothing.
        let barrier = match self.state {
            ClassicState::PreparingRebalance if self.everyone_joined() => {
                Some(self.not_before_ms.min(self.deadline_ms))
            }
            ClassicState::PreparingRebalance => Some(self.deadline_ms),
            // Nobody is removed while the leader's record is being written.
            ClassicState::CompletingRebalance if self.storing.is_some() => None,
            ClassicState::CompletingRebalance => Some(self.deadline_ms),
            ClassicState::Empty | ClassicState::Stable => None,
        };
        sessions.chain(pending).chain(barrier).min()
    }

    pub(super) fn tick(&mut self, name: &str, now: i64, out: &mut Outbox) {
        self.pending.retain(|_, expires| *expires > now);
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| !m.awaiting_join && !m.awaiting_sync && m.expires_ms() <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = name, member = %id, "evicting a Kafka group member: session timeout");
        }
        if self.state == ClassicState::CompletingRebalance
            && self.storing.is_none()
            && now >= self.deadline_ms
        {
            let unsynced = self.members.iter().filter(|(_, m)| !m.awaiting_sync).map(|(id, _)| id.clone());
            let unsynced: Vec<String> = unsynced.collect();
            tracing::info!(group = name, members = ?unsynced, "removing Kafka group members that never synced");
            self.remove_all(name, &unsynced, now, out);
        }
        if !expired.is_empty() {
            self.remove_all(name, &expired, now, out);
        }
        self.try_complete_join(name, now, out);
    }

    pub(super) fn join(
        &mut self,
        name: &str,
        req: JoinGroup,
        fresh: Option<String>,
        now: i64,
        config: &ClassicConfig,
        out: &mut Outbox,
    ) -> Result<String> {
        self.check_protocols(name, &req)?;
        if let Some(instance) = req.instance_id.clone() {
            return self.join_static(name, req, instance, fresh, now, config, out);
        }
        match fresh {
            Some(id) if req.require_known_member_id => {
                self.check_room(name)?;
                self.pending.insert(id.clone(), now.saturating_add(req.session_timeout_ms as i64));
                Err(GroupError::MemberIdRequired { group: name.to_owned(), member_id: id })
            }
            Some(id) => self.add(name, id, req, now, config, out),
            None if self.pending.remove(&req.member_id).is_some() => {
                let id = req.member_id.clone();
                self.add(name, id, req, now, config, out)
            }
            None if self.members.contains_key(&req.member_id) => {
                let id = req.member_id.clone();
                self.rejoin(name, id, req, now, out)
            }
            None => Err(unknown(name, &req.member_id)),
        }
    }

    /// The member's protocol type must be the group's, and at least one of its
    /// protocols one every other member supports.
    fn check_protocols(&self, name: &str, req: &JoinGroup) -> Result<()> {
        let others: Vec<&Member> = self
            .members
            .iter()
            .filter(|(id, m)| {
                **id != req.member_id
                    && m.instance_id.as_ref().is_none_or(|i| Some(i) != req.instance_id.as_ref())
            })
            .map(|(_, m)| m)
            .collect();
        let Some(first) = others.first() else { return Ok(()) };
        let refuse =
            |reason: String| Err(GroupError::InconsistentGroupProtocol { group: name.to_owned(), reason });
        if first.protocol_type != req.protocol_type {
            return refuse(format!(
                "the group's protocol type is {:?}, not {:?}",
                first.protocol_type, req.protocol_type
            ));
        }
        let common =
            req.protocols.iter().any(|p| others.iter().all(|m| m.protocols.iter().any(|q| q.name == p.name)));
        if !common {
            return refuse("none of the member's protocols is supported by every member".into());
        }
        Ok(())
    }

    fn check_room(&self, name: &str) -> Result<()> {
        if self.members.len() + self.pending.len() >= limits::CLASSIC_GROUP_MEMBERS_MAX {
            return Err(GroupError::GroupFull {
                group: name.to_owned(),
                max: limits::CLASSIC_GROUP_MEMBERS_MAX,
            });
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn join_static(
        &mut self,
        name: &str,
        req: JoinGroup,
        instance: String,
        fresh: Option<String>,
        now: i64,
        config: &ClassicConfig,
        out: &mut Outbox,
    ) -> Result<String> {
        let holder = self.statics.get(&instance).cloned();
        match (holder, fresh) {
            (Some(old), None) if old == req.member_id => self.rejoin(name, old, req, now, out),
            (Some(old), None) => Err(fenced(name, &req.member_id, &instance, &old)),
            (None, None) => Err(unknown(name, &req.member_id)),
            (None, Some(id)) => {
                self.statics.insert(instance, id.clone());
                self.add(name, id, req, now, config, out)
            }
            (Some(old), Some(id)) => self.replace_static(name, old, id, req, now, out),
        }
    }

    /// A static member restarted (it has its instance id, not its member id): it takes
    /// over the old member's slot under a new id, which fences the old one. Unchanged
    /// protocols keep the generation: no rebalance (KIP-345).
    #[allow(clippy::too_many_arguments)]
    fn replace_static(
        &mut self,
        name: &str,
        old: String,
        id: String,
        req: JoinGroup,
        now: i64,
        out: &mut Outbox,
    ) -> Result<String> {
        let mut member = self.members.remove(&old).expect("a static member is a member");
        let instance = req.instance_id.clone().expect("static");
        if member.awaiting_join {
            out.push(Completion::Join {
                group: name.to_owned(),
                member_id: old.clone(),
                result: Err(fenced(name, &old, &instance, &id)),
            });
        }
        if member.awaiting_sync {
            out.push(Completion::Sync {
                group: name.to_owned(),
                member_id: old.clone(),
                result: Err(fenced(name, &old, &instance, &id)),
            });
            member.awaiting_sync = false;
        }
        for o in self.order.iter_mut().filter(|o| **o == old) {
            *o = id.clone();
        }
        if self.leader.as_deref() == Some(old.as_str()) {
            self.leader = Some(id.clone());
        }
        // The group's protocol still offered with the same metadata is no change,
        // whatever else the list holds (a member loaded from a record knows only
        // the chosen protocol; Kafka compares the selected protocol here too).
        if let Some(p) = &self.protocol
            && req.protocols.iter().any(|q| q.name == *p && q.metadata == member.metadata(p))
        {
            member.protocols = req.protocols.clone();
        }
        self.statics.insert(instance, id.clone());
        self.members.insert(id.clone(), member);
        // The leader's assignment may already name the old id: rebalance (Kafka).
        if self.state == ClassicState::CompletingRebalance {
            self.prepare(name, now, 0, out);
        }
        let joined = self.rejoin(name, id.clone(), req, now, out);
        if self.state == ClassicState::Stable {
            // No rebalance: the member gets its answer once the record names its
            // new id, or a coordinator that takes over would fence it.
            let at = out
                .completions
                .iter()
                .position(|c| matches!(c, Completion::Join { member_id, .. } if *member_id == id));
            if let Some(answer) = at.map(|i| out.completions.remove(i)) {
                let seq = self.ask_store(name, self.snapshot(None), true, out);
                self.held_joins.push((seq, answer));
            }
        }
        joined
    }

    /// Asks for `snapshot` to be made durable; returns the request's number.
    fn ask_store(&mut self, name: &str, snapshot: StoredGroup, awaited: bool, out: &mut Outbox) -> u64 {
        // Numbered across the coordinator: a group deleted and created again
        // never takes an old write's outcome for its own.
        out.last_seq += 1;
        let (seq, generation) = (out.last_seq, self.generation);
        out.store(StoreRequest {
            group: name.to_owned(),
            seq,
            generation,
            snapshot: Some(snapshot),
            awaited,
        });
        seq
    }

    fn add(
        &mut self,
        name: &str,
        id: String,
        req: JoinGroup,
        now: i64,
        config: &ClassicConfig,
        out: &mut Outbox,
    ) -> Result<String> {
        self.check_room(name)?;
        self.members.insert(id.clone(), Member::new(req, now));
        self.order.push(id.clone());
        match self.state {
            ClassicState::Empty => self.prepare(name, now, config.initial_rebalance_delay_ms, out),
            ClassicState::Stable | ClassicState::CompletingRebalance => self.prepare(name, now, 0, out),
            ClassicState::PreparingRebalance => self.extend_initial_delay(now, config),
        }
        self.try_complete_join(name, now, out);
        Ok(id)
    }

    /// A known member joins again: it waits at the barrier if one is up; otherwise
    /// a change of protocols, or the leader rejoining, starts one; anything else
    /// gets the current generation back at once.
    fn rejoin(
        &mut self,
        name: &str,
        id: String,
        req: JoinGroup,
        now: i64,
        out: &mut Outbox,
    ) -> Result<String> {
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        let m = self.members.get_mut(&id).expect("known member");
        let changed = m.protocols != req.protocols;
        let is_static = m.instance_id.is_some();
        m.client_id = req.client_id;
        m.client_host = req.client_host;
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.protocols = req.protocols;
        m.last_seen_ms = now;
        // Kafka: in CompletingRebalance only a change rebalances; in Stable the
        // leader rejoining does too (it wants to recompute), unless it is static.
        let unchanged = match self.state {
            ClassicState::CompletingRebalance => !changed,
            ClassicState::Stable => !changed && (!is_leader || is_static),
            ClassicState::PreparingRebalance | ClassicState::Empty => false,
        };
        if unchanged {
            let skip = is_leader && self.state == ClassicState::Stable;
            let result = self.join_result(&id, skip);
            out.push(Completion::Join { group: name.to_owned(), member_id: id.clone(), result: Ok(result) });
            return Ok(id);
        }
        m.awaiting_join = true;
        match self.state {
            ClassicState::PreparingRebalance => {}
            ClassicState::CompletingRebalance | ClassicState::Stable => self.prepare(name, now, 0, out),
            ClassicState::Empty => return Err(unknown(name, &id)),
        }
        self.try_complete_join(name, now, out);
        Ok(id)
    }

    /// Starts a barrier. Parked syncs of the old generation are told to rejoin.
    fn prepare(&mut self, name: &str, now: i64, initial_delay_ms: u64, out: &mut Outbox) {
        for (id, m) in self.members.iter_mut().filter(|(_, m)| m.awaiting_sync) {
            m.awaiting_sync = false;
            let result = Err(GroupError::RebalanceInProgress(name.to_owned()));
            out.push(Completion::Sync { group: name.to_owned(), member_id: id.clone(), result });
        }
        self.state = ClassicState::PreparingRebalance;
        self.storing = None;
        self.started_ms = now;
        self.deadline_ms = now.saturating_add(self.rebalance_timeout_ms());
        self.not_before_ms = now.saturating_add(initial_delay_ms as i64).min(self.deadline_ms);
        self.initial = initial_delay_ms > 0;
    }

    /// A new group's initial delay restarts with each join, within the rebalance timeout.
    fn extend_initial_delay(&mut self, now: i64, config: &ClassicConfig) {
        self.deadline_ms = self.deadline_ms.max(self.started_ms.saturating_add(self.rebalance_timeout_ms()));
        if self.not_before_ms > now {
            let later = now.saturating_add(config.initial_rebalance_delay_ms as i64);
            self.not_before_ms = later.min(self.deadline_ms);
        }
    }

    /// Every member has rejoined, and no handed-out member id is still to come
    /// (a new group's initial delay does not wait for those).
    fn everyone_joined(&self) -> bool {
        self.members.values().all(|m| m.awaiting_join) && (self.initial || self.pending.is_empty())
    }

    fn try_complete_join(&mut self, name: &str, now: i64, out: &mut Outbox) {
        if self.state != ClassicState::PreparingRebalance {
            return;
        }
        if (self.everyone_joined() && now >= self.not_before_ms) || now >= self.deadline_ms {
            self.complete_join(name, now, out);
        }
    }

    /// Closes the barrier: members that did not rejoin are out; a new generation with
    /// the protocol every member supports, in the leader's order of preference.
    fn complete_join(&mut self, name: &str, now: i64, out: &mut Outbox) {
        let gone: Vec<String> =
            self.members.iter().filter(|(_, m)| !m.awaiting_join).map(|(id, _)| id.clone()).collect();
        for id in &gone {
            tracing::info!(group = name, member = %id, "removing a Kafka group member that did not rejoin in time");
            self.forget(name, id, out);
        }
        self.generation += 1;
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.order.first().cloned();
        }
        let Some(leader) = self.leader.clone() else {
            self.state = ClassicState::Empty;
            self.protocol = None;
            // The generation outlives the members, as in Kafka.
            self.ask_store(name, self.snapshot(None), false, out);
            return;
        };
        let protocols = &self.members[&leader].protocols;
        let chosen = protocols
            .iter()
            .find(|p| self.members.values().all(|m| m.protocols.iter().any(|q| q.name == p.name)))
            .unwrap_or(&protocols[0]);
        self.protocol = Some(chosen.name.clone());
        self.last_protocol_type = self.members[&leader].protocol_type.clone();
        self.state = ClassicState::CompletingRebalance;
        self.deadline_ms = now.saturating_add(self.rebalance_timeout_ms());
        let ids: Vec<String> = self.order.clone();
        for id in ids {
            let m = self.members.get_mut(&id).expect("ordered member");
            m.awaiting_join = false;
            m.last_seen_ms = now;
            m.assignment.clear();
            let result = Ok(self.join_result(&id, false));
            out.push(Completion::Join { group: name.to_owned(), member_id: id, result });
        }
    }

    fn join_result(&self, id: &str, skip_assignment: bool) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == id {
            let all = self.order.iter().map(|m| (m, &self.members[m]));
            all.map(|(m, mm)| JoinedMember {
                member_id: m.clone(),
                instance_id: mm.instance_id.clone(),
                metadata: mm.metadata(&protocol),
            })
            .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            generation: self.generation,
            protocol_type: self.protocol_type(),
            protocol_name: protocol,
            leader,
            member_id: id.to_owned(),
            members,
            skip_assignment,
        }
    }

    /// Resolves the member a call names, fencing a replaced static member.
    fn member(&self, name: &str, member: &str, instance: Option<&str>) -> Result<()> {
        if let Some(instance) = instance {
            match self.statics.get(instance) {
                Some(holder) if holder != member => return Err(fenced(name, member, instance, holder)),
                Some(_) => {}
                None => return Err(unknown(name, member)),
            }
        }
        if !self.members.contains_key(member) {
            return Err(unknown(name, member));
        }
        Ok(())
    }

    fn check_generation(&self, name: &str, generation: i32) -> Result<()> {
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration {
                group: name.to_owned(),
                given: generation,
                current: self.generation,
            });
        }
        Ok(())
    }

    pub(super) fn sync(&mut self, name: &str, req: SyncGroup, now: i64, out: &mut Outbox) -> Result<()> {
        self.member(name, &req.member_id, req.instance_id.as_deref())?;
        self.check_generation(name, req.generation)?;
        let protocol = self.protocol.clone().unwrap_or_default();
        let kind = self.protocol_type();
        if req.protocol_type.as_ref().is_some_and(|t| *t != kind)
            || req.protocol_name.as_ref().is_some_and(|p| *p != protocol)
        {
            let reason = format!("the group's protocol is {kind:?} / {protocol:?}");
            return Err(GroupError::InconsistentGroupProtocol { group: name.to_owned(), reason });
        }
        let m = self.members.get_mut(&req.member_id).expect("checked");
        m.last_seen_ms = now;
        match self.state {
            ClassicState::Empty => Err(unknown(name, &req.member_id)),
            ClassicState::PreparingRebalance => Err(GroupError::RebalanceInProgress(name.to_owned())),
            ClassicState::Stable => {
                let result = Ok(Synced {
                    protocol_type: kind,
                    protocol_name: protocol,
                    assignment: m.assignment.clone(),
                });
                out.push(Completion::Sync { group: name.to_owned(), member_id: req.member_id, result });
                Ok(())
            }
            ClassicState::CompletingRebalance => {
                m.awaiting_sync = true;
                if self.leader.as_deref() == Some(req.member_id.as_str()) && self.storing.is_none() {
                    // Nobody gets an assignment before the group's record holding it
                    // is durable: a coordinator that takes over then knows it.
                    let seq = self.ask_store(name, self.snapshot(Some(&req.assignments)), true, out);
                    self.storing = Some((seq, req.assignments));
                }
                Ok(())
            }
        }
    }

    /// The outcome of store `seq`. The leader's SyncGroup's: durable, every member
    /// gets its assignment; failed (`Err(hint)`: where the coordinator is, if
    /// known), every waiting member is sent to find the coordinator (NOT_COORDINATOR,
    /// as Kafka answers a failed store) and the group rebalances. A replacing static
    /// member's: its JoinGroup answer, or NOT_COORDINATOR and a rebalance (so the
    /// next record names it). Stale outcomes (another barrier since) change nothing.
    pub(super) fn stored(
        &mut self,
        name: &str,
        seq: u64,
        outcome: std::result::Result<(), Option<LeaderHint>>,
        now: i64,
        out: &mut Outbox,
    ) {
        if let Some(i) = self.held_joins.iter().position(|(s, _)| *s == seq) {
            let (_, answer) = self.held_joins.remove(i);
            match (outcome, answer) {
                (Ok(()), answer) => out.push(answer),
                (Err(hint), Completion::Join { member_id, .. }) => {
                    let result = Err(GroupError::NotCoordinator { hint });
                    out.push(Completion::Join { group: name.to_owned(), member_id, result });
                    if matches!(self.state, ClassicState::Stable | ClassicState::CompletingRebalance) {
                        self.prepare(name, now, 0, out);
                    }
                }
                (Err(_), other) => out.push(other),
            }
            return;
        }
        if self.state != ClassicState::CompletingRebalance
            || self.storing.as_ref().is_none_or(|(s, _)| *s != seq)
        {
            return;
        }
        let Some((_, assignments)) = self.storing.take() else { return };
        match outcome {
            Ok(()) => self.distribute(name, assignments, now, out),
            Err(hint) => {
                for (id, m) in self.members.iter_mut().filter(|(_, m)| m.awaiting_sync) {
                    m.awaiting_sync = false;
                    let result = Err(GroupError::NotCoordinator { hint: hint.clone() });
                    out.push(Completion::Sync { group: name.to_owned(), member_id: id.clone(), result });
                }
                self.prepare(name, now, 0, out);
            }
        }
    }

    /// The group's record: members in join order, with `assignments` (the
    /// leader's, about to be handed out) or the ones they hold.
    pub(super) fn snapshot(&self, assignments: Option<&[(String, Vec<u8>)]>) -> StoredGroup {
        let protocol = self.protocol.clone();
        let chosen = protocol.clone().unwrap_or_default();
        let given: Option<BTreeMap<&str, &Vec<u8>>> =
            assignments.map(|a| a.iter().map(|(id, bytes)| (id.as_str(), bytes)).collect());
        let members = self
            .order
            .iter()
            .filter_map(|id| self.members.get(id).map(|m| (id, m)))
            .map(|(id, m)| StoredMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                metadata: m.metadata(&chosen),
                assignment: match &given {
                    Some(given) => given.get(id.as_str()).map(|b| (*b).clone()).unwrap_or_default(),
                    None => m.assignment.clone(),
                },
            })
            .collect();
        StoredGroup {
            generation: self.generation,
            protocol_type: self.protocol_type(),
            protocol,
            leader: self.leader.clone().filter(|l| self.members.contains_key(l)),
            members,
        }
    }

    /// A group as its record has it, loaded by a coordinator at `now`: Stable with
    /// its members (each with a fresh session, as a heartbeat just now), or Empty.
    /// A member's protocols are its chosen one only (as Kafka loads them), so a
    /// member rejoining with its full list starts a rebalance.
    pub(super) fn restore(s: StoredGroup, now: i64) -> Group {
        let protocol = s.protocol.clone().unwrap_or_default();
        let mut group = Group {
            generation: s.generation,
            last_protocol_type: s.protocol_type.clone(),
            ..Group::default()
        };
        for m in s.members {
            if let Some(instance) = &m.instance_id {
                group.statics.insert(instance.clone(), m.member_id.clone());
            }
            group.order.push(m.member_id.clone());
            let member = Member {
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: s.protocol_type.clone(),
                protocols: vec![Protocol { name: protocol.clone(), metadata: m.metadata }],
                assignment: m.assignment,
                last_seen_ms: now,
                awaiting_join: false,
                awaiting_sync: false,
            };
            group.members.insert(m.member_id, member);
        }
        if !group.members.is_empty() {
            group.state = ClassicState::Stable;
            group.protocol = s.protocol;
            group.leader =
                s.leader.filter(|l| group.members.contains_key(l)).or_else(|| group.order.first().cloned());
        }
        group
    }

    /// The leader's SyncGroup: every member gets its assignment (none named: empty).
    fn distribute(&mut self, name: &str, assignments: Vec<(String, Vec<u8>)>, now: i64, out: &mut Outbox) {
        let mut given: BTreeMap<String, Vec<u8>> = assignments.into_iter().collect();
        let (kind, protocol) = (self.protocol_type(), self.protocol.clone().unwrap_or_default());
        for (id, m) in self.members.iter_mut() {
            m.assignment = given.remove(id).unwrap_or_default();
            if m.awaiting_sync {
                m.awaiting_sync = false;
                m.last_seen_ms = now;
                let result = Ok(Synced {
                    protocol_type: kind.clone(),
                    protocol_name: protocol.clone(),
                    assignment: m.assignment.clone(),
                });
                out.push(Completion::Sync { group: name.to_owned(), member_id: id.clone(), result });
            }
        }
        self.state = ClassicState::Stable;
    }

    pub(super) fn heartbeat(
        &mut self,
        name: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<()> {
        self.member(name, member, instance)?;
        self.members.get_mut(member).expect("checked").last_seen_ms = now;
        self.check_generation(name, generation)?;
        match self.state {
            ClassicState::Empty => Err(unknown(name, member)),
            ClassicState::PreparingRebalance => Err(GroupError::RebalanceInProgress(name.to_owned())),
            ClassicState::CompletingRebalance | ClassicState::Stable => Ok(()),
        }
    }

    pub(super) fn leave(
        &mut self,
        name: &str,
        members: &[MemberRef],
        now: i64,
        out: &mut Outbox,
    ) -> Vec<Result<()>> {
        let mut answers = Vec::with_capacity(members.len());
        let mut gone = Vec::new();
        for m in members {
            let id = match &m.instance_id {
                Some(instance) => match self.statics.get(instance) {
                    Some(holder) if !m.member_id.is_empty() && *holder != m.member_id => {
                        answers.push(Err(fenced(name, &m.member_id, instance, holder)));
                        continue;
                    }
                    Some(holder) => holder.clone(),
                    None => {
                        answers.push(Err(unknown(name, &m.member_id)));
                        continue;
                    }
                },
                None => m.member_id.clone(),
            };
            if self.pending.remove(&id).is_some() {
                answers.push(Ok(()));
            } else if self.members.contains_key(&id) {
                gone.push(id);
                answers.push(Ok(()));
            } else {
                answers.push(Err(unknown(name, &m.member_id)));
            }
        }
        self.remove_all(name, &gone, now, out);
        answers
    }

    /// Removes members and starts a barrier if the group was settled; parked calls
    /// of removed members are answered UNKNOWN_MEMBER_ID.
    fn remove_all(&mut self, name: &str, ids: &[String], now: i64, out: &mut Outbox) {
        if ids.is_empty() {
            return;
        }
        for id in ids {
            if let Some(m) = self.members.get(id) {
                if m.awaiting_join {
                    out.push(Completion::Join {
                        group: name.to_owned(),
                        member_id: id.clone(),
                        result: Err(unknown(name, id)),
                    });
                }
                if m.awaiting_sync {
                    out.push(Completion::Sync {
                        group: name.to_owned(),
                        member_id: id.clone(),
                        result: Err(unknown(name, id)),
                    });
                }
            }
            self.forget(name, id, out);
        }
        if matches!(self.state, ClassicState::Stable | ClassicState::CompletingRebalance) {
            self.prepare(name, now, 0, out);
        }
        self.try_complete_join(name, now, out);
    }

    /// Removes a member; a JoinGroup answer held for it (a static replacement
    /// being stored) becomes UNKNOWN_MEMBER_ID.
    fn forget(&mut self, name: &str, id: &str, out: &mut Outbox) {
        if let Some(instance) = self.members.remove(id).and_then(|m| m.instance_id) {
            self.statics.remove(&instance);
        }
        self.order.retain(|o| o != id);
        let held = |c: &Completion| matches!(c, Completion::Join { member_id, .. } if member_id == id);
        if self.held_joins.iter().any(|(_, c)| held(c)) {
            self.held_joins.retain(|(_, c)| !held(c));
            out.push(Completion::Join {
                group: name.to_owned(),
                member_id: id.to_owned(),
                result: Err(unknown(name, id)),
            });
        }
    }

    pub(super) fn check_commit(
        &mut self,
        name: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<()> {
        if generation < 0 && member.is_empty() && instance.is_none() && self.state == ClassicState::Empty {
            return Ok(());
        }
        self.member(name, member, instance)?;
        self.members.get_mut(member).expect("checked").last_seen_ms = now;
        self.check_generation(name, generation)?;
        if self.state == ClassicState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress(name.to_owned()));
        }
        Ok(())
    }

    pub(super) fn describe(&self, name: &str, now: i64) -> ClassicDescription {
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = self
            .order
            .iter()
            .map(|id| {
                let m = &self.members[id];
                ClassicMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    last_heartbeat_ms_ago: now - m.last_seen_ms,
                    metadata: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                }
            })
            .collect();
        ClassicDescription {
            group: name.to_owned(),
            state: self.state,
            generation: self.generation,
            protocol_type: self.protocol_type(),
            protocol,
            leader: self.leader.clone().filter(|l| self.members.contains_key(l)).unwrap_or_default(),
            members,
        }
    }
}

fn fenced(name: &str, member: &str, instance: &str, _holder: &str) -> GroupError {
    GroupError::FencedInstanceId {
        group: name.to_owned(),
        member: member.to_owned(),
        instance: instance.to_owned(),
    }
}
