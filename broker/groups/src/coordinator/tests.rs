//! Coordinator tests on a manual clock: clients are simulated, and after every step
//! the partitions they read are checked to be disjoint.

use std::collections::{BTreeMap, BTreeSet};

use es_core::ManualClock;

use super::*;

const SESSION_MS: u64 = 10_000;
const REBALANCE_MS: u64 = 30_000;

/// A simulated well-behaved client: what it reads, and its generation.
#[derive(Debug, Default)]
struct Client {
    generation: i32,
    reading: BTreeSet<TopicPartition>,
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
        self.clients.insert(j.member_id.clone(), Client { generation: j.generation, ..Client::default() });
        self.check();
        j.member_id
    }

    /// One client step: heartbeat, and on a rebalance rejoin and sync.
    fn step(&mut self, id: &str) {
        let generation = self.clients[id].generation;
        match self.c.heartbeat("g", id, generation) {
            Ok(()) => {}
            Err(GroupError::RebalanceInProgress(_)) => {
                let j = self.join(Some(id)).unwrap();
                let s = self.c.sync("g", id, j.generation).unwrap();
                let client = self.clients.get_mut(id).unwrap();
                client.generation = s.generation;
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

    fn check(&self) {
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
