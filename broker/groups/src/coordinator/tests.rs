//! Coordinator tests on a manual clock: clients are simulated, and after every step
//! the partitions they read are checked to be disjoint.

use std::collections::{BTreeMap, BTreeSet};

use es_core::ManualClock;
use proptest::prelude::*;

use super::*;

const SESSION_MS: u64 = 10_000;
const REBALANCE_MS: u64 = 30_000;

/// A simulated well-behaved client: what it reads, and its generation.
#[derive(Debug, Default)]
struct Client {
    generation: i32,
    reading: BTreeSet<TopicPartition>,
    /// When the broker last answered this client successfully.
    last_ok_ms: i64,
}

struct World {
    clock: Arc<ManualClock>,
    c: Coordinator,
    clients: BTreeMap<String, Client>,
}

impl World {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(1_000));
        World { c: Coordinator::new(clock.clone()), clock, clients: BTreeMap::new() }
    }

    fn join(&mut self, member: Option<&str>) -> Result<Joined> {
        self.c.join(JoinRequest {
            group: "g".into(),
            member_id: member.map(str::to_owned),
            client_id: "c".into(),
            topics: vec![("t".into(), 6)],
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
        })
    }

    fn add(&mut self) -> String {
        let j = self.join(None).unwrap();
        let last_ok_ms = self.clock.now_ms();
        self.clients.insert(
            j.member_id.clone(),
            Client { generation: j.generation, last_ok_ms, ..Client::default() },
        );
        self.check();
        j.member_id
    }

    /// One client step: heartbeat, and on a rebalance rejoin and sync.
    fn step(&mut self, id: &str) {
        let generation = self.clients[id].generation;
        match self.c.heartbeat("g", id, generation) {
            Ok(()) => self.clients.get_mut(id).unwrap().last_ok_ms = self.clock.now_ms(),
            Err(GroupError::RebalanceInProgress(_)) => {
                let j = self.join(Some(id)).unwrap();
                let s = self.c.sync("g", id, j.generation).unwrap();
                let client = self.clients.get_mut(id).unwrap();
                client.generation = s.generation;
                client.last_ok_ms = self.clock.now_ms();
                // Keeps reading what it keeps; drops revoked partitions at once.
                client.reading = s.assignment.into_iter().collect();
            }
            Err(e) => panic!("{id}: {e}"),
        }
        self.check();
    }

    /// Every live client steps until the group is stable (bounded).
    fn settle(&mut self, ids: &[String]) {
        for _ in 0..20 {
            for id in ids {
                self.step(id);
            }
            if self.c.describe("g").unwrap().state == GroupState::Stable {
                return;
            }
        }
        panic!("group did not settle: {:?}", self.c.describe("g"));
    }

    /// A client that has not heard from the broker for a whole session stops reading
    /// (the broker evicts only after strictly more than a session), as a zombie must.
    fn check(&mut self) {
        let now = self.clock.now_ms();
        for client in self.clients.values_mut() {
            if now - client.last_ok_ms >= SESSION_MS as i64 {
                client.reading.clear();
            }
        }
        let mut seen = BTreeSet::new();
        for (id, client) in &self.clients {
            for tp in &client.reading {
                assert!(seen.insert(tp.clone()), "{tp} read by two members (one is {id})");
            }
        }
    }

    fn loads(&self) -> Vec<usize> {
        self.clients.values().map(|c| c.reading.len()).collect()
    }
}

#[test]
fn three_members_share_six_partitions() {
    let mut w = World::new();
    let ids: Vec<String> = (0..3).map(|_| w.add()).collect();
    w.settle(&ids);
    assert_eq!(w.loads(), vec![2, 2, 2]);
    let d = w.c.describe("g").unwrap();
    assert_eq!(d.state, GroupState::Stable);
    assert_eq!(d.members.len(), 3);
}

#[test]
fn a_silent_member_is_evicted_and_its_partitions_move() {
    let mut w = World::new();
    let ids: Vec<String> = (0..3).map(|_| w.add()).collect();
    w.settle(&ids);
    let dead = ids[0].clone();
    let gen_before = w.clients[&dead].generation;
    let kept: BTreeMap<String, BTreeSet<TopicPartition>> =
        ids[1..].iter().map(|id| (id.clone(), w.clients[id].reading.clone())).collect();
    w.clients.remove(&dead);
    for _ in 0..4 {
        w.clock.advance_ms(SESSION_MS as i64 / 3);
        w.settle(&ids[1..]);
    }
    assert_eq!(w.loads(), vec![3, 3]);
    for (id, before) in kept {
        assert!(before.is_subset(&w.clients[&id].reading), "a survivor lost a partition");
    }
    let e = w.c.check_commit("g", &dead, gen_before).unwrap_err();
    assert!(matches!(e, GroupError::UnknownMember { .. }), "{e}");
}

#[test]
fn a_joining_member_moves_only_its_share_cooperatively() {
    let mut w = World::new();
    let mut ids: Vec<String> = (0..3).map(|_| w.add()).collect();
    w.settle(&ids);
    let before: BTreeMap<String, BTreeSet<TopicPartition>> =
        w.clients.iter().map(|(id, c)| (id.clone(), c.reading.clone())).collect();
    ids.push(w.add());
    w.settle(&ids);
    let mut loads = w.loads();
    loads.sort_unstable();
    assert_eq!(loads, vec![1, 1, 2, 2]);
    let moved: usize = before.iter().map(|(id, b)| b.difference(&w.clients[id].reading).count()).sum();
    assert_eq!(moved, 1, "only the newcomer's share moves");
}

#[test]
fn stale_generation_commits_are_refused() {
    let mut w = World::new();
    let a = w.add();
    w.settle(std::slice::from_ref(&a));
    let old = w.clients[&a].generation;
    w.c.check_commit("g", &a, old).unwrap();
    let b = w.add();
    let e = w.c.check_commit("g", &a, old).unwrap_err();
    assert!(matches!(e, GroupError::IllegalGeneration { .. }), "{e}");
    w.settle(&[a.clone(), b]);
    w.c.check_commit("g", &a, w.clients[&a].generation).unwrap();
    let e = w.c.check_commit("g", "", -1).unwrap_err();
    assert!(matches!(e, GroupError::GroupNotEmpty(_)), "{e}");
}

#[test]
fn a_member_that_never_releases_is_evicted_after_the_rebalance_timeout() {
    let mut w = World::new();
    let a = w.add();
    w.settle(std::slice::from_ref(&a));
    let b = w.add();
    // `a` keeps heartbeating its old generation but never syncs, so it never releases.
    for _ in 0..4 {
        w.clock.advance_ms(REBALANCE_MS as i64 / 3);
        if let Some(client) = w.clients.get(&a) {
            // A well-behaved client stops reading once it learns it was evicted.
            if let Err(GroupError::UnknownMember { .. }) = w.c.heartbeat("g", &a, client.generation) {
                w.clients.remove(&a);
            }
        }
        w.step(&b);
    }
    assert!(!w.clients.contains_key(&a), "the slow member was evicted");
    w.settle(std::slice::from_ref(&b));
    assert_eq!(w.clients[&b].reading.len(), 6);
}

#[test]
fn leave_and_delete() {
    let mut w = World::new();
    let a = w.add();
    assert!(w.c.delete("g").is_err());
    w.c.leave("g", &a).unwrap();
    assert_eq!(w.c.describe("g").unwrap().state, GroupState::Empty);
    assert!(!w.c.is_active("g"));
    w.c.delete("g").unwrap();
    assert!(w.c.describe("g").is_none());
    assert!(matches!(w.join(Some(&a)), Err(GroupError::UnknownMember { .. })));
}

/// One simulated event.
#[derive(Debug, Clone)]
enum Action {
    Add,
    Step(usize),
    /// The client vanishes without leaving (kill -9).
    Kill(usize),
    Leave(usize),
    AdvanceMs(i64),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        2 => Just(Action::Add),
        8 => (0usize..8).prop_map(Action::Step),
        1 => (0usize..8).prop_map(Action::Kill),
        1 => (0usize..8).prop_map(Action::Leave),
        2 => (0i64..6_000).prop_map(Action::AdvanceMs),
    ]
}

impl World {
    fn nth(&self, i: usize) -> Option<String> {
        let n = self.clients.len();
        (n > 0).then(|| self.clients.keys().nth(i % n).cloned().expect("in range"))
    }

    /// A step that tolerates eviction: an evicted client stops reading and is gone.
    fn step_or_drop(&mut self, id: &str) {
        let generation = self.clients[id].generation;
        let evicted = match self.c.heartbeat("g", id, generation) {
            Err(GroupError::UnknownMember { .. }) => true,
            Err(GroupError::RebalanceInProgress(_)) => match self.join(Some(id)) {
                Ok(j) => {
                    let s = self.c.sync("g", id, j.generation).unwrap();
                    let client = self.clients.get_mut(id).unwrap();
                    client.generation = s.generation;
                    client.reading = s.assignment.into_iter().collect();
                    client.last_ok_ms = self.clock.now_ms();
                    false
                }
                Err(GroupError::UnknownMember { .. }) => true,
                Err(e) => panic!("{e}"),
            },
            Ok(()) => {
                self.clients.get_mut(id).unwrap().last_ok_ms = self.clock.now_ms();
                false
            }
            Err(e) => panic!("{e}"),
        };
        if evicted {
            self.clients.remove(id);
        }
        self.check();
    }

    fn apply(&mut self, a: &Action) {
        match a {
            Action::Add if self.clients.len() < 8 => {
                self.add();
            }
            Action::Add => {}
            Action::Step(i) => {
                if let Some(id) = self.nth(*i) {
                    self.step_or_drop(&id);
                }
            }
            Action::Kill(i) => {
                if let Some(id) = self.nth(*i) {
                    self.clients.remove(&id);
                }
            }
            Action::Leave(i) => {
                if let Some(id) = self.nth(*i) {
                    self.c.leave("g", &id).unwrap_or(());
                    self.clients.remove(&id);
                }
            }
            Action::AdvanceMs(ms) => self.clock.advance_ms(*ms),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Whatever happens, no partition is read by two members at once; once the
    /// survivors keep stepping, every partition is read by exactly one, balanced.
    #[test]
    fn random_histories_keep_partitions_exclusive(actions in proptest::collection::vec(action(), 1..60)) {
        let mut w = World::new();
        for a in &actions {
            w.apply(a);
        }
        // Let the dead expire, then let the survivors settle.
        w.clock.advance_ms(REBALANCE_MS as i64 + 1);
        let ids: Vec<String> = w.clients.keys().cloned().collect();
        for id in &ids {
            w.step_or_drop(id);
        }
        let ids: Vec<String> = w.clients.keys().cloned().collect();
        if ids.is_empty() {
            return Ok(());
        }
        w.settle(&ids);
        let total: usize = w.loads().iter().sum();
        prop_assert_eq!(total, 6);
        let loads = w.loads();
        prop_assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1, "{:?}", loads);
    }
}
