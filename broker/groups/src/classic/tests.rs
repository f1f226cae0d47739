//! The classic coordinator over a manual clock: barrier, leader sync, timeouts,
//! static membership, fencing, generations, commits.

use std::collections::BTreeMap;
use std::sync::Arc;

use es_core::ManualClock;

use super::*;

const DELAY: u64 = 3_000;
const SESSION: u64 = 10_000;
const REBALANCE: u64 = 30_000;

struct H {
    clock: Arc<ManualClock>,
    c: ClassicCoordinator,
    /// Completions taken out of the coordinator by `sync_now`, for `joins`/`syncs`.
    held: Vec<Completion>,
    /// Every store the coordinator asked for, in order.
    stores: Vec<StoreRequest>,
}

fn h() -> H {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let config = ClassicConfig {
        initial_rebalance_delay_ms: DELAY,
        min_session_timeout_ms: 1,
        max_session_timeout_ms: 100_000,
    };
    H { c: ClassicCoordinator::new(clock.clone(), config), clock, held: Vec::new(), stores: Vec::new() }
}

fn protos(names: &[&str], meta: &str) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol { name: (*n).into(), metadata: format!("{n}:{meta}").into_bytes() })
        .collect()
}

fn req(member: &str, meta: &str) -> JoinGroup {
    JoinGroup {
        group: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: "app".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protos(&["range"], meta),
        require_known_member_id: true,
    }
}

fn sync_req(member: &str, generation: i32, assignments: Vec<(String, Vec<u8>)>) -> SyncGroup {
    SyncGroup {
        group: "g".into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

impl H {
    fn advance(&mut self, ms: u64) {
        self.clock.advance_ms(ms as i64);
        self.c.tick();
    }

    /// KIP-394: the first join of a v4+ member only hands out its id.
    fn member_id(&mut self) -> String {
        match self.c.join(req("", "")) {
            Outcome::Done(Err(GroupError::MemberIdRequired { member_id, .. })) => member_id,
            other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
        }
    }

    fn parked_join(&mut self, r: JoinGroup) -> String {
        match self.c.join(r) {
            Outcome::Parked { member_id } => member_id,
            other => panic!("expected a parked join, got {other:?}"),
        }
    }

    /// Completions so far, held ones first.
    fn completions(&mut self) -> Vec<Completion> {
        let mut all = std::mem::take(&mut self.held);
        all.extend(self.c.take_completions());
        all
    }

    /// Makes every store asked for durable (reports success for awaited ones).
    fn settle_stores(&mut self) {
        for s in self.c.take_stores() {
            if s.awaited {
                self.c.stored(&s.group, s.seq, Ok(()));
            }
            self.stores.push(s);
        }
    }

    fn joins(&mut self) -> BTreeMap<String, JoinResult> {
        let mut out = BTreeMap::new();
        for c in self.completions() {
            match c {
                Completion::Join { member_id, result, .. } => out.insert(member_id, result.unwrap()),
                Completion::Sync { member_id, .. } => panic!("unexpected sync completion for {member_id}"),
            };
        }
        out
    }

    fn syncs(&mut self) -> BTreeMap<String, Result<Synced>> {
        let mut out = BTreeMap::new();
        for c in self.completions() {
            match c {
                Completion::Sync { member_id, result, .. } => out.insert(member_id, result),
                Completion::Join { member_id, .. } => panic!("unexpected join completion for {member_id}"),
            };
        }
        out
    }

    /// A sync answered at once, or (the leader's) once its store is durable.
    fn sync_now(&mut self, s: SyncGroup) -> Result<Synced> {
        let member_id = match self.c.sync(s) {
            Outcome::Done(r) => return r,
            Outcome::Parked { member_id } => member_id,
        };
        self.settle_stores();
        let mut mine = None;
        for c in self.completions() {
            match c {
                Completion::Sync { member_id: m, result, .. } if m == member_id => mine = Some(result),
                other => self.held.push(other),
            }
        }
        mine.unwrap_or_else(|| panic!("{member_id}'s sync parked"))
    }

    /// Two members through the first generation: (leader, follower).
    fn stable_pair(&mut self) -> (String, String) {
        let (a, b) = self.first_generation_follower_waiting();
        let assign = vec![(a.clone(), b"A".to_vec()), (b.clone(), b"B".to_vec())];
        assert_eq!(self.sync_now(sync_req(&a, 1, assign)).unwrap().assignment, b"A");
        assert_eq!(self.syncs()[&b].as_ref().unwrap().assignment, b"B");
        (a, b)
    }

    /// Members a (the leader) and b through the first join, b's SyncGroup parked
    /// for the leader's: (a, b).
    fn first_generation_follower_waiting(&mut self) -> (String, String) {
        let (a, b) = (self.member_id(), self.member_id());
        self.parked_join(req(&a, "a"));
        self.parked_join(req(&b, "b"));
        self.advance(DELAY);
        self.joins();
        assert!(matches!(self.c.sync(sync_req(&b, 1, vec![])), Outcome::Parked { .. }));
        (a, b)
    }

    fn state(&mut self) -> ClassicState {
        self.c.describe("g").unwrap().state
    }
}

#[test]
fn new_members_get_an_id_first_and_wait_for_the_initial_delay() {
    let mut h = h();
    let (a, b) = (h.member_id(), h.member_id());
    assert!(a.starts_with("app-") && a.len() == "app-".len() + 36, "{a}");
    assert_ne!(a, b);
    h.parked_join(req(&a, "a"));
    h.advance(DELAY - 1);
    h.parked_join(req(&b, "b"));
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    // The second join restarted the delay: nothing at the first deadline.
    h.advance(1);
    assert!(h.joins().is_empty());
    assert_eq!(h.c.next_deadline_ms(), Some(h.clock.now_ms() + DELAY as i64 - 1));
    h.advance(DELAY);
    let joins = h.joins();
    let (ja, jb) = (&joins[&a], &joins[&b]);
    assert_eq!((ja.generation, jb.generation), (1, 1));
    assert_eq!((ja.leader.as_str(), jb.leader.as_str()), (a.as_str(), a.as_str()));
    let metas: Vec<&[u8]> = ja.members.iter().map(|m| m.metadata.as_slice()).collect();
    assert_eq!(metas, vec![b"range:a".as_slice(), b"range:b"]);
    assert!(jb.members.is_empty(), "followers get no member list");
    assert_eq!((ja.protocol_type.as_str(), ja.protocol_name.as_str()), ("consumer", "range"));
    assert_eq!(h.state(), ClassicState::CompletingRebalance);
}

#[test]
fn the_initial_delay_is_bounded_by_the_rebalance_timeout() {
    let mut h = h();
    let first = h.member_id();
    h.parked_join(JoinGroup { rebalance_timeout_ms: 5_000, ..req(&first, "x") });
    for _ in 0..3 {
        h.advance(DELAY - 1);
        let id = h.member_id();
        h.parked_join(JoinGroup { rebalance_timeout_ms: 5_000, ..req(&id, "x") });
    }
    // Joins at 2999, 5998 (after the 5000 deadline closed the first barrier) ...
    let done = h.joins();
    assert!(done.contains_key(&first), "the barrier closed at the rebalance timeout");
}

#[test]
fn pre_v4_members_join_without_an_id_round_trip() {
    let mut h = h();
    let id = h.parked_join(JoinGroup { require_known_member_id: false, ..req("", "a") });
    h.advance(DELAY);
    let j = h.joins().remove(&id).unwrap();
    assert_eq!((j.generation, j.leader), (1, id));
}

#[test]
fn the_leaders_sync_reaches_waiting_followers_and_members_it_forgot_get_nothing() {
    let mut h = h();
    let (a, b, c) = (h.member_id(), h.member_id(), h.member_id());
    for (m, meta) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        h.parked_join(req(m, meta));
    }
    h.advance(DELAY);
    assert_eq!(h.joins().len(), 3);
    assert!(matches!(
        h.c.sync(sync_req(&b, 1, vec![(b.clone(), b"ignored".to_vec())])),
        Outcome::Parked { .. }
    ));
    assert_eq!(h.state(), ClassicState::CompletingRebalance);
    let mine =
        h.sync_now(sync_req(&a, 1, vec![(a.clone(), b"A".to_vec()), (b.clone(), b"B".to_vec())])).unwrap();
    assert_eq!(mine.assignment, b"A");
    assert_eq!(h.syncs()[&b].as_ref().unwrap().assignment, b"B");
    assert_eq!(h.state(), ClassicState::Stable);
    // A late follower gets its (empty) assignment at once.
    assert_eq!(h.sync_now(sync_req(&c, 1, vec![])).unwrap().assignment, b"");
    let d = h.c.describe("g").unwrap();
    assert_eq!((d.generation, d.leader.as_str(), d.protocol.as_str()), (1, a.as_str(), "range"));
    assert_eq!(d.members[1].assignment, b"B");
    assert_eq!(d.members[1].metadata, b"range:b");
}

#[test]
fn sync_and_heartbeat_errors_are_kafkas() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    assert!(matches!(h.sync_now(sync_req("nobody", 1, vec![])), Err(GroupError::UnknownMember { .. })));
    assert!(matches!(h.sync_now(sync_req(&a, 0, vec![])), Err(GroupError::IllegalGeneration { .. })));
    let wrong = SyncGroup { protocol_name: Some("roundrobin".into()), ..sync_req(&a, 1, vec![]) };
    assert!(matches!(h.sync_now(wrong), Err(GroupError::InconsistentGroupProtocol { .. })));
    assert!(h.c.heartbeat("g", &a, None, 1).is_ok());
    assert!(matches!(h.c.heartbeat("g", &a, None, 2), Err(GroupError::IllegalGeneration { .. })));
    assert!(matches!(h.c.heartbeat("g", "x", None, 1), Err(GroupError::UnknownMember { .. })));
    assert!(matches!(h.c.heartbeat("nog", &a, None, 1), Err(GroupError::UnknownMember { .. })));
    // A new member starts a rebalance: the others hear it on their heartbeat, and a
    // sync of the old generation is refused the same way.
    let c = h.member_id();
    h.parked_join(req(&c, "c"));
    assert!(matches!(h.c.heartbeat("g", &b, None, 1), Err(GroupError::RebalanceInProgress(_))));
    assert!(matches!(h.sync_now(sync_req(&b, 1, vec![])), Err(GroupError::RebalanceInProgress(_))));
}

#[test]
fn an_unchanged_follower_rejoin_keeps_the_generation_and_a_new_member_rebalances_without_delay() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    match h.c.join(req(&b, "b")) {
        Outcome::Done(Ok(j)) => assert_eq!((j.generation, j.members.len()), (1, 0)),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.state(), ClassicState::Stable);
    let c = h.member_id();
    h.parked_join(req(&c, "c"));
    h.parked_join(req(&a, "a"));
    // Everyone is back: the barrier closes with no initial delay.
    match h.c.join(req(&b, "b")) {
        Outcome::Done(Ok(j)) => assert_eq!(j.generation, 2),
        other => panic!("{other:?}"),
    }
    let joins = h.joins();
    assert_eq!(joins[&a].members.len(), 3);
    assert_eq!(joins[&c].leader, a);
}

#[test]
fn the_leader_rejoining_a_stable_group_starts_a_generation() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    h.parked_join(req(&a, "a"));
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert!(matches!(h.c.join(req(&b, "b")), Outcome::Done(Ok(JoinResult { generation: 2, .. }))));
}

#[test]
fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    let c = h.member_id();
    h.parked_join(req(&c, "c"));
    h.parked_join(req(&a, "a"));
    // The timer's next wake-up is ahead (b's session, then the rebalance timeout),
    // never the barrier's start, which would wake it at once, again and again.
    assert!(h.c.next_deadline_ms().unwrap() > h.clock.now_ms());
    // b heartbeats (alive) but never rejoins.
    for _ in 0..REBALANCE / 5_000 {
        assert!(matches!(h.c.heartbeat("g", &b, None, 1), Err(GroupError::RebalanceInProgress(_))));
        h.advance(5_000);
    }
    let joins = h.joins();
    assert_eq!(joins.len(), 2);
    assert_eq!(
        joins[&a].members.iter().map(|m| m.member_id.clone()).collect::<Vec<_>>(),
        vec![a.clone(), c.clone()]
    );
    assert!(matches!(h.c.heartbeat("g", &b, None, 2), Err(GroupError::UnknownMember { .. })));
}

#[test]
fn a_silent_member_is_evicted_after_its_session_timeout() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    h.advance(SESSION / 2);
    h.c.heartbeat("g", &a, None, 1).unwrap();
    h.advance(SESSION / 2);
    assert_eq!(h.state(), ClassicState::PreparingRebalance, "b went silent");
    assert!(matches!(h.c.heartbeat("g", &b, None, 1), Err(GroupError::UnknownMember { .. })));
    assert!(matches!(h.c.heartbeat("g", &a, None, 1), Err(GroupError::RebalanceInProgress(_))));
    match h.c.join(req(&a, "a")) {
        Outcome::Done(Ok(j)) => assert_eq!((j.generation, j.members.len()), (2, 1)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_leader_that_never_syncs_is_removed_and_waiting_followers_told_to_rejoin() {
    let mut h = h();
    let (_a, b) = h.first_generation_follower_waiting();
    h.advance(REBALANCE);
    let syncs = h.syncs();
    assert!(matches!(syncs[&b], Err(GroupError::RebalanceInProgress(_))), "{syncs:?}");
    assert!(h.c.describe("g").unwrap().members.iter().all(|m| m.member_id == b));
}

#[test]
fn leave_takes_a_batch_and_the_last_one_out_empties_the_group() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    let refs = |ids: &[&str]| {
        ids.iter().map(|m| MemberRef { member_id: (*m).into(), instance_id: None }).collect::<Vec<_>>()
    };
    let answers = h.c.leave("g", &refs(&[&a, "ghost"]));
    assert!(answers[0].is_ok());
    assert!(matches!(answers[1], Err(GroupError::UnknownMember { .. })));
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert!(h.c.leave("g", &refs(&[&b]))[0].is_ok());
    let d = h.c.describe("g").unwrap();
    assert_eq!((d.state, d.generation, d.members.len()), (ClassicState::Empty, 2, 0));
    assert!(matches!(h.c.leave("nog", &refs(&[&a]))[0], Err(GroupError::UnknownMember { .. })));
}

fn static_req(member: &str, instance: &str, meta: &str) -> JoinGroup {
    JoinGroup { instance_id: Some(instance.into()), ..req(member, meta) }
}

/// Static a (instance i-a, the leader) and static b (i-b), synced at generation 1.
fn static_pair(h: &mut H) -> (String, String) {
    let a = h.parked_join(static_req("", "i-a", "a"));
    let b = h.parked_join(static_req("", "i-b", "b"));
    h.advance(DELAY);
    h.joins();
    assert!(matches!(h.c.sync(sync_req(&b, 1, vec![])), Outcome::Parked { .. }));
    h.sync_now(sync_req(&a, 1, vec![(a.clone(), b"A".to_vec()), (b.clone(), b"B".to_vec())])).unwrap();
    h.syncs();
    (a, b)
}

#[test]
fn a_restarted_static_member_keeps_its_slot_without_a_rebalance_and_fences_its_old_id() {
    let mut h = h();
    let (a, b) = static_pair(&mut h);
    let b2 = h.parked_join(static_req("", "i-b", "b"));
    h.settle_stores();
    let j = &h.joins()[&b2];
    assert_eq!((j.generation, j.members.len(), j.skip_assignment), (1, 0, false));
    assert_ne!(b2, b);
    assert_eq!(h.state(), ClassicState::Stable);
    let s = SyncGroup { instance_id: Some("i-b".into()), ..sync_req(&b2, 1, vec![]) };
    assert_eq!(h.sync_now(s).unwrap().assignment, b"B", "the slot's assignment stays");
    assert!(matches!(h.c.heartbeat("g", &b, Some("i-b"), 1), Err(GroupError::FencedInstanceId { .. })));
    assert!(matches!(h.c.check_commit("g", &b, Some("i-b"), 1), Err(GroupError::FencedInstanceId { .. })));
    let old = h.c.join(static_req(&b, "i-b", "b"));
    assert!(matches!(old, Outcome::Done(Err(GroupError::FencedInstanceId { .. }))), "{old:?}");
    let leave = h.c.leave("g", &[MemberRef { member_id: b.clone(), instance_id: Some("i-b".into()) }]);
    assert!(matches!(leave[0], Err(GroupError::FencedInstanceId { .. })));
    h.c.heartbeat("g", &b2, Some("i-b"), 1).unwrap();
    // The static leader restarting keeps the assignment too (JoinGroup v9 skip_assignment).
    let a2 = h.parked_join(static_req("", "i-a", "a"));
    h.settle_stores();
    let j = &h.joins()[&a2];
    assert!(j.skip_assignment);
    assert_eq!((j.leader.as_str(), j.members.len()), (j.member_id.as_str(), 2));
    assert_ne!(j.member_id, a);
    assert_eq!(h.state(), ClassicState::Stable);
}

#[test]
fn a_static_member_with_new_metadata_rebalances_and_leaves_by_instance_id() {
    let mut h = h();
    let (a, _b) = static_pair(&mut h);
    let b2 = h.parked_join(static_req("", "i-b", "b-changed"));
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert!(matches!(
        h.c.join(static_req(&a, "i-a", "a")),
        Outcome::Done(Ok(JoinResult { generation: 2, .. }))
    ));
    let joins = h.joins();
    assert_eq!(joins[&b2].generation, 2);
    let by_instance = MemberRef { member_id: String::new(), instance_id: Some("i-b".into()) };
    assert!(h.c.leave("g", &[by_instance])[0].is_ok());
    assert_eq!(h.c.describe("g").unwrap().members.len(), 1);
}

#[test]
fn the_protocol_is_one_everyone_supports_in_the_leaders_order() {
    let mut h = h();
    let (a, b) = (h.member_id(), h.member_id());
    h.parked_join(JoinGroup {
        protocols: protos(&["cooperative-sticky", "range", "roundrobin"], "a"),
        ..req(&a, "")
    });
    h.parked_join(JoinGroup { protocols: protos(&["roundrobin", "range"], "b"), ..req(&b, "") });
    let c = h.member_id();
    let odd = h.c.join(JoinGroup { protocols: protos(&["sticky"], "c"), ..req(&c, "") });
    assert!(matches!(odd, Outcome::Done(Err(GroupError::InconsistentGroupProtocol { .. }))), "{odd:?}");
    let connect = h.c.join(JoinGroup { protocol_type: "connect".into(), ..req(&c, "") });
    assert!(matches!(connect, Outcome::Done(Err(GroupError::InconsistentGroupProtocol { .. }))));
    h.advance(DELAY);
    let joins = h.joins();
    assert_eq!(joins[&a].protocol_name, "range");
    assert_eq!(joins[&a].members[1].metadata, b"range:b");
}

#[test]
fn other_protocol_types_are_opaque() {
    let mut h = h();
    let id = h.member_id();
    let r = JoinGroup {
        protocol_type: "connect".into(),
        protocols: protos(&["sessioned", "compatible"], "w"),
        ..req(&id, "")
    };
    h.parked_join(r);
    h.advance(DELAY);
    let j = h.joins().remove(&id).unwrap();
    assert_eq!((j.protocol_type.as_str(), j.protocol_name.as_str()), ("connect", "sessioned"));
    let d = h.c.describe("g").unwrap();
    assert_eq!(d.protocol_type, "connect");
}

#[test]
fn cooperative_members_rejoin_after_revoking_and_get_another_generation() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    let c = h.member_id();
    h.parked_join(req(&c, "c"));
    h.parked_join(req(&a, "a owns 0,1"));
    h.c.join(req(&b, "b owns 2"));
    assert_eq!(h.joins()[&a].generation, 2);
    h.sync_now(sync_req(&a, 2, vec![(a.clone(), b"A2".to_vec())])).unwrap();
    // KIP-429: a revoked a partition, so every member joins again with what it owns now.
    h.parked_join(req(&a, "a owns 0"));
    h.parked_join(req(&c, "c owns -"));
    match h.c.join(req(&b, "b owns 2")) {
        Outcome::Done(Ok(j)) => assert_eq!(j.generation, 3),
        other => panic!("{other:?}"),
    }
    let joins = h.joins();
    let metas: Vec<&[u8]> = joins[&a].members.iter().map(|m| m.metadata.as_slice()).collect();
    assert_eq!(metas, vec![b"range:a owns 0".as_slice(), b"range:b owns 2", b"range:c owns -"]);
}

#[test]
fn commits_are_fenced_by_member_and_generation() {
    let mut h = h();
    assert!(h.c.check_commit("g", "", None, -1).is_ok(), "a simple commit to a new group");
    assert!(matches!(h.c.check_commit("g", "m", None, 3), Err(GroupError::IllegalGeneration { .. })));
    let (a, b) = (h.member_id(), h.member_id());
    h.parked_join(req(&a, "a"));
    h.parked_join(req(&b, "b"));
    h.advance(DELAY);
    h.joins();
    assert!(matches!(h.c.check_commit("g", &a, None, 1), Err(GroupError::RebalanceInProgress(_))));
    h.sync_now(sync_req(&a, 1, vec![])).unwrap();
    h.c.take_completions();
    h.c.check_commit("g", &a, None, 1).unwrap();
    assert!(matches!(h.c.check_commit("g", &a, None, 0), Err(GroupError::IllegalGeneration { .. })));
    assert!(matches!(h.c.check_commit("g", "", None, -1), Err(GroupError::UnknownMember { .. })));
    assert!(matches!(h.c.check_commit("g", "x", None, 1), Err(GroupError::UnknownMember { .. })));
    // During a rebalance members of the current generation may still commit (eager
    // consumers commit in onPartitionsRevoked before they rejoin).
    h.parked_join(req(&a, "a"));
    h.c.check_commit("g", &b, None, 1).unwrap();
    let all: Vec<MemberRef> =
        [&a, &b].iter().map(|m| MemberRef { member_id: (*m).clone(), instance_id: None }).collect();
    h.c.leave("g", &all);
    h.c.take_completions();
    assert!(h.c.check_commit("g", "", None, -1).is_ok(), "a simple commit to an empty group");
}

#[test]
fn delete_takes_only_empty_groups() {
    let mut h = h();
    assert!(matches!(h.c.delete("g"), Err(GroupError::GroupNotFound(_))));
    let (a, b) = h.stable_pair();
    assert!(matches!(h.c.delete("g"), Err(GroupError::GroupNotEmpty(_))));
    let all: Vec<MemberRef> =
        [a, b].into_iter().map(|member_id| MemberRef { member_id, instance_id: None }).collect();
    h.c.leave("g", &all);
    h.c.delete("g").unwrap();
    assert!(!h.c.knows("g"));
    assert!(h.c.list().is_empty());
}

#[test]
fn refused_joins_leave_no_group_behind_and_session_timeouts_are_checked() {
    let mut h = h();
    let bad = h.c.join(JoinGroup { session_timeout_ms: 0, ..req("", "") });
    assert!(matches!(bad, Outcome::Done(Err(GroupError::InvalidSessionTimeout { .. }))));
    let unknown = h.c.join(req("made-up", ""));
    assert!(matches!(unknown, Outcome::Done(Err(GroupError::UnknownMember { .. }))));
    assert!(matches!(
        h.c.join(JoinGroup { group: String::new(), ..req("", "") }),
        Outcome::Done(Err(GroupError::InvalidRequest(_)))
    ));
    assert!(!h.c.knows("g"));
    // An id handed out but never used expires with its session timeout.
    h.member_id();
    assert!(h.c.knows("g"));
    h.advance(SESSION);
    assert!(matches!(h.c.join(req("made-up", "")), Outcome::Done(Err(GroupError::UnknownMember { .. }))));
}

#[test]
fn a_new_join_answers_parked_syncs_of_the_old_generation() {
    let mut h = h();
    let (_a, b) = h.first_generation_follower_waiting();
    let c = h.member_id();
    h.parked_join(req(&c, "c"));
    let syncs = h.syncs();
    assert!(matches!(syncs[&b], Err(GroupError::RebalanceInProgress(_))));
    let list = h.c.list();
    assert_eq!(list, vec![("g".to_owned(), ClassicState::PreparingRebalance, "consumer".to_owned())]);
}

/// Members a (leader) and b through the first join, b's sync parked and a's sync
/// parked behind the store it asked for: (a, b, that store).
fn storing_pair(h: &mut H) -> (String, String, StoreRequest) {
    let (a, b) = h.first_generation_follower_waiting();
    let assign = vec![(a.clone(), b"A".to_vec()), (b.clone(), b"B".to_vec())];
    assert!(matches!(h.c.sync(sync_req(&a, 1, assign)), Outcome::Parked { .. }));
    assert!(h.completions().is_empty(), "nobody is answered before the record is durable");
    assert_eq!(h.state(), ClassicState::CompletingRebalance);
    let mut stores = h.c.take_stores();
    assert_eq!(stores.len(), 1, "{stores:?}");
    (a, b, stores.remove(0))
}

#[test]
fn a_loaded_record_keeps_the_members_in_their_generation_without_a_rebalance() {
    let mut h = h();
    let (a, b, store) = storing_pair(&mut h);
    assert!(store.awaited);
    let record = store.snapshot.clone().unwrap();
    assert_eq!(
        (record.generation, record.protocol.as_deref(), record.leader.as_deref()),
        (1, Some("range"), Some(a.as_str()))
    );
    let members: Vec<(&str, &[u8], &[u8])> =
        record.members.iter().map(|m| (m.member_id.as_str(), &m.metadata[..], &m.assignment[..])).collect();
    assert_eq!(
        members,
        vec![(a.as_str(), &b"range:a"[..], &b"A"[..]), (b.as_str(), &b"range:b"[..], &b"B"[..])]
    );
    h.c.stored("g", store.seq, Ok(()));
    let syncs = h.syncs();
    assert_eq!(
        (
            syncs[&a].as_ref().unwrap().assignment.as_slice(),
            syncs[&b].as_ref().unwrap().assignment.as_slice()
        ),
        (&b"A"[..], &b"B"[..])
    );
    assert_eq!(h.state(), ClassicState::Stable);

    // Another coordinator (a restart, a failover) loads the record.
    let mut k = self::h();
    k.clock.advance_ms(5_000);
    k.c.load(vec![("g".to_owned(), record)]);
    let d = k.c.describe("g").unwrap();
    assert_eq!(
        (d.state, d.generation, d.leader.as_str(), d.protocol.as_str()),
        (ClassicState::Stable, 1, a.as_str(), "range")
    );
    let held: Vec<(&str, &[u8])> =
        d.members.iter().map(|m| (m.member_id.as_str(), &m.assignment[..])).collect();
    assert_eq!(held, vec![(a.as_str(), &b"A"[..]), (b.as_str(), &b"B"[..])]);
    k.c.heartbeat("g", &b, None, 1).unwrap();
    k.c.check_commit("g", &a, None, 1).unwrap();
    assert_eq!(k.sync_now(sync_req(&b, 1, vec![])).unwrap().assignment, b"B");
    match k.c.join(req(&b, "b")) {
        Outcome::Done(Ok(j)) => assert_eq!((j.generation, j.leader.as_str()), (1, a.as_str())),
        other => panic!("an unchanged follower keeps the generation: {other:?}"),
    }
    assert!(k.c.take_stores().is_empty(), "nothing changed, nothing to store");
    // Sessions started at the load: a member that stays silent still expires.
    k.advance(SESSION - 1);
    k.c.heartbeat("g", &b, None, 1).unwrap();
    k.advance(1);
    assert!(matches!(k.c.heartbeat("g", &a, None, 1), Err(GroupError::UnknownMember { .. })));
    assert_eq!(k.state(), ClassicState::PreparingRebalance);
}

#[test]
fn a_failed_store_sends_the_members_to_the_coordinator_and_rebalances() {
    let mut h = h();
    let (a, b, store) = storing_pair(&mut h);
    let hint = LeaderHint { http: "http://127.0.0.1:1".into(), binary: None };
    h.c.stored("g", store.seq, Err(Some(hint.clone())));
    let syncs = h.syncs();
    for m in [&a, &b] {
        match &syncs[m] {
            Err(GroupError::NotCoordinator { hint: Some(h) }) => assert_eq!(*h, hint),
            other => panic!("{m}: {other:?}"),
        }
    }
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    // A late outcome of the same store changes nothing.
    h.c.stored("g", store.seq, Ok(()));
    assert_eq!(h.state(), ClassicState::PreparingRebalance);
    assert!(h.syncs().is_empty());
}

#[test]
fn an_emptied_group_keeps_its_generation() {
    let mut h = h();
    let (a, b) = h.stable_pair();
    let refs = [a, b].map(|m| MemberRef { member_id: m, instance_id: None });
    assert!(h.c.leave("g", &refs).iter().all(Result::is_ok));
    h.settle_stores();
    let last = h.stores.last().unwrap().clone();
    let record = last.snapshot.unwrap();
    assert!(!last.awaited);
    assert_eq!((record.generation, record.members.len(), record.protocol_type.as_str()), (2, 0, "consumer"));
    let mut k = self::h();
    k.c.load(vec![("g".to_owned(), record)]);
    assert_eq!(k.c.list(), vec![("g".to_owned(), ClassicState::Empty, "consumer".to_owned())]);
    assert_eq!(k.c.describe("g").unwrap().generation, 2);
    k.c.delete("g").unwrap();
    assert!(k.c.take_stores().is_empty(), "a deleted group's tombstone is the caller's");
}

/// A static member restarting (instance id, no member id) in a settled group:
/// (its new member id, the store its JoinGroup waits for).
fn replace_b(h: &mut H, protocols: Vec<Protocol>) -> (String, StoreRequest) {
    let parked = h.parked_join(JoinGroup { protocols, ..static_req("", "i-b", "b") });
    assert!(h.completions().is_empty(), "no answer before the record names the new id");
    let mut stores = h.c.take_stores();
    assert_eq!(stores.len(), 1, "{stores:?}");
    assert!(stores[0].awaited);
    (parked, stores.remove(0))
}

#[test]
fn a_static_member_replaced_without_a_rebalance_is_answered_once_stored_under_its_new_id() {
    let mut h = h();
    let (_a, b) = static_pair(&mut h);
    h.settle_stores();
    let (b2, store) = replace_b(&mut h, protos(&["range"], "b"));
    let record = store.snapshot.clone().unwrap();
    let ids: Vec<(&str, Option<&str>)> =
        record.members.iter().map(|m| (m.member_id.as_str(), m.instance_id.as_deref())).collect();
    assert!(ids.contains(&(b2.as_str(), Some("i-b"))) && !ids.iter().any(|(m, _)| *m == b), "{ids:?}");
    h.c.stored("g", store.seq, Ok(()));
    assert_eq!(h.joins()[&b2].generation, 1);
    assert_eq!(h.state(), ClassicState::Stable);
    let mut k = self::h();
    k.c.load(vec![("g".to_owned(), record)]);
    k.c.heartbeat("g", &b2, Some("i-b"), 1).unwrap();
    assert!(matches!(k.c.heartbeat("g", &b, Some("i-b"), 1), Err(GroupError::FencedInstanceId { .. })));

    // After a load the member knows only the chosen protocol; a static restart
    // offering more, with the same metadata for it, is still no change.
    let (b3, store) = replace_b(&mut k, protos(&["range", "cooperative-sticky"], "b"));
    k.c.stored("g", store.seq, Ok(()));
    assert_eq!(k.joins()[&b3].generation, 1);
    assert_eq!(k.state(), ClassicState::Stable);
    // A failed store answers NOT_COORDINATOR and rebalances, so the next record names it.
    let (b4, store) = replace_b(&mut k, protos(&["range"], "b"));
    k.c.stored("g", store.seq, Err(None));
    let joins = k.completions();
    assert!(
        matches!(&joins[..], [Completion::Join { member_id, result: Err(GroupError::NotCoordinator { .. }), .. }] if *member_id == b4),
        "{joins:?}"
    );
    assert_eq!(k.state(), ClassicState::PreparingRebalance);
}

#[test]
fn a_static_member_replaced_while_the_assignment_is_computed_rebalances() {
    let mut h = h();
    let a = h.parked_join(static_req("", "i-a", "a"));
    let b = h.parked_join(static_req("", "i-b", "b"));
    h.advance(DELAY);
    h.joins();
    assert_eq!(h.state(), ClassicState::CompletingRebalance);
    let b2 = h.parked_join(static_req("", "i-b", "b"));
    assert_ne!(b2, b);
    assert_eq!(h.state(), ClassicState::PreparingRebalance, "the leader's plan may name the old id");
    let leader = match h.c.join(static_req(&a, "i-a", "a")) {
        Outcome::Done(Ok(j)) => j,
        other => panic!("the barrier closes with the leader's join: {other:?}"),
    };
    assert_eq!((leader.generation, h.joins()[&b2].generation), (2, 2));
}

#[test]
fn a_held_static_join_is_answered_when_its_member_leaves_meanwhile() {
    let mut h = h();
    let (_a, _b) = static_pair(&mut h);
    h.settle_stores();
    let (b2, store) = replace_b(&mut h, protos(&["range"], "b"));
    let leave = h.c.leave("g", &[MemberRef { member_id: String::new(), instance_id: Some("i-b".into()) }]);
    assert!(leave[0].is_ok());
    let joins = h.completions();
    assert!(
        joins.iter().any(|c| matches!(c, Completion::Join { member_id, result: Err(GroupError::UnknownMember { .. }), .. } if *member_id == b2)),
        "{joins:?}"
    );
    // The write's late outcome answers nobody twice.
    h.c.stored("g", store.seq, Ok(()));
    assert!(
        !h.completions().iter().any(|c| matches!(c, Completion::Join { member_id, .. } if *member_id == b2))
    );
}
