//! Black-box consumer-group tests through the real es-broker over HTTP: balance,
//! failover of a member that stops heartbeating, minimal movement on join, fencing of
//! stale generations, durability of commits across kill -9, offset resets, and the
//! simple session API. Every loop is bounded in time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, Resp};
use serde_json::{Value, json};

const SESSION_MS: u64 = 2_000;
const PARTITIONS: u32 = 6;

/// A well-behaved group member driven step by step by the test.
#[derive(Debug)]
struct Member {
    id: String,
    generation: i64,
    reading: BTreeSet<u32>,
    /// Next offset per partition read since the last commit (revoked ones included).
    positions: BTreeMap<u32, u64>,
}

/// (member, partition, offset) of every record handed to a member, plus each member's
/// last successfully committed offset per partition.
#[derive(Debug, Default)]
struct Ledger {
    reads: Vec<(String, u32, u64)>,
    committed: BTreeMap<(String, u32), u64>,
}

fn ok(r: &Resp, what: &str) -> Value {
    assert!(r.status < 300, "{what}: {} {}", r.status, r.body);
    r.body.clone()
}

fn produce(b: &Broker, from: u64, count: u64) {
    let records: Vec<Value> = (from..from + count)
        .map(|i| json!({"value": format!("v{i}"), "partition": i % u64::from(PARTITIONS)}))
        .collect();
    ok(&b.post("/topics/orders/records", &json!({ "records": records })), "produce");
}

fn committed(b: &Broker) -> BTreeMap<u32, u64> {
    let v = ok(&b.get("/groups/g/offsets"), "fetch offsets");
    v["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["partition"].as_u64().unwrap() as u32, o["offset"].as_u64().unwrap()))
        .collect()
}

impl Member {
    fn join(b: &Broker) -> Member {
        let v = ok(
            &b.post("/groups/g/join", &json!({"topics": ["orders"], "session_timeout_ms": SESSION_MS})),
            "join",
        );
        let mut m = Member {
            id: v["member_id"].as_str().unwrap().to_owned(),
            generation: -1,
            reading: BTreeSet::new(),
            positions: BTreeMap::new(),
        };
        m.resync(b);
        m
    }

    /// Rejoins with its id, syncs, and keeps reading what it keeps.
    fn resync(&mut self, b: &Broker) {
        let v = ok(
            &b.post(
                "/groups/g/join",
                &json!({"member_id": self.id, "topics": ["orders"], "session_timeout_ms": SESSION_MS}),
            ),
            "rejoin",
        );
        self.generation = v["generation"].as_i64().unwrap();
        let s = ok(
            &b.post("/groups/g/sync", &json!({"member_id": self.id, "generation": self.generation})),
            "sync",
        );
        self.reading = s["assignment"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tp| tp["partition"].as_u64().unwrap() as u32)
            .collect();
        let start = committed(b);
        for p in &self.reading {
            self.positions.entry(*p).or_insert_with(|| start.get(p).copied().unwrap_or(0));
        }
    }

    /// Reads a little from each partition, commits, heartbeats; follows rebalances.
    fn step(&mut self, b: &Broker, ledger: &mut Ledger) {
        for p in self.reading.clone() {
            let at = self.positions[&p];
            let v = ok(
                &b.get(&format!("/topics/orders/partitions/{p}/records?offset={at}&max_records=7")),
                "read",
            );
            for r in v["records"].as_array().unwrap() {
                ledger.reads.push((self.id.clone(), p, r["offset"].as_u64().unwrap()));
            }
            self.positions.insert(p, v["next_offset"].as_u64().unwrap());
        }
        while !self.commit(b, ledger) {
            self.resync(b);
        }
        self.positions.retain(|p, _| self.reading.contains(p));
        let r = b.post("/groups/g/heartbeat", &json!({"member_id": self.id, "generation": self.generation}));
        match r.code() {
            "" => {}
            "rebalance_in_progress" => self.resync(b),
            other => panic!("heartbeat of {}: {other} {}", self.id, r.body),
        }
    }

    fn commit(&self, b: &Broker, ledger: &mut Ledger) -> bool {
        let offsets: Vec<Value> = self
            .positions
            .iter()
            .map(|(p, o)| json!({"topic": "orders", "partition": p, "offset": o}))
            .collect();
        let r = b.post(
            "/groups/g/offsets",
            &json!({"member_id": self.id, "generation": self.generation, "offsets": offsets}),
        );
        match r.code() {
            "" => {
                for (p, o) in &self.positions {
                    ledger.committed.insert((self.id.clone(), *p), *o);
                }
                true
            }
            "illegal_generation" | "rebalance_in_progress" => false,
            other => panic!("commit of {}: {other} {}", self.id, r.body),
        }
    }
}

fn owners(b: &Broker) -> BTreeMap<u32, String> {
    let d = ok(&b.get("/groups/g"), "describe");
    let mut out = BTreeMap::new();
    for m in d["members"].as_array().unwrap() {
        for tp in m["assignment"].as_array().unwrap() {
            let prev = out.insert(
                tp["partition"].as_u64().unwrap() as u32,
                m["member_id"].as_str().unwrap().to_owned(),
            );
            assert!(prev.is_none(), "a partition with two owners: {d}");
        }
    }
    out
}

fn state(b: &Broker) -> String {
    ok(&b.get("/groups/g"), "describe")["state"].as_str().unwrap().to_owned()
}

/// Steps every member until the group is stable and each member reads what it owns.
fn settle(b: &Broker, members: &mut [Member], ledger: &mut Ledger) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for m in members.iter_mut() {
            m.step(b, ledger);
        }
        check_disjoint(members);
        let o = owners(b);
        let consistent = members.iter().all(|m| m.reading.iter().all(|p| o.get(p) == Some(&m.id)));
        let live = o.values().all(|id| members.iter().any(|m| m.id == *id));
        if state(b) == "Stable" && o.len() == PARTITIONS as usize && consistent && live {
            return;
        }
        assert!(Instant::now() < deadline, "group did not settle: {}", b.get("/groups/g").body);
    }
}

fn check_disjoint(members: &[Member]) {
    let mut seen = BTreeSet::new();
    for m in members {
        for p in &m.reading {
            assert!(seen.insert(*p), "partition {p} read by two members at once");
        }
    }
}

#[test]
fn three_consumers_balance_fail_over_and_move_minimally() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", PARTITIONS);
    produce(&b, 0, 600);
    let mut ledger = Ledger::default();
    let mut members: Vec<Member> = (0..3).map(|_| Member::join(&b)).collect();
    settle(&b, &mut members, &mut ledger);
    for m in &members {
        assert_eq!(m.reading.len(), 2, "balanced: {:?}", members);
    }
    // The first member dies: it stops heartbeating and never leaves.
    let dead = members.remove(0);
    let died = Instant::now();
    produce(&b, 600, 300);
    settle(&b, &mut members, &mut ledger);
    let took = died.elapsed();
    assert!(took < Duration::from_millis(SESSION_MS + 3_000), "failover took {took:?}");
    assert!(owners(&b).values().all(|o| *o != dead.id));
    // Drain everything, then check nothing was lost and nothing read twice between commits.
    let deadline = Instant::now() + Duration::from_secs(30);
    while committed(&b).values().sum::<u64>() < 900 {
        for m in members.iter_mut() {
            m.step(&b, &mut ledger);
        }
        assert!(Instant::now() < deadline, "did not drain: {:?}", committed(&b));
    }
    check_ledger(&ledger, &dead.id);
    // A newcomer takes only its share: one partition from each survivor.
    let before = owners(&b);
    members.push(Member::join(&b));
    settle(&b, &mut members, &mut ledger);
    let after = owners(&b);
    let moved = before.iter().filter(|(p, o)| after.get(*p) != Some(*o)).count();
    assert_eq!(moved, 2, "before {before:?} after {after:?}");
    assert!(members.iter().all(|m| m.reading.len() == 2));
}

/// Every offset below 900 (150 per partition) was read; a record read by two members
/// was read by the dead one after its last commit.
fn check_ledger(ledger: &Ledger, dead: &str) {
    let mut readers: BTreeMap<(u32, u64), BTreeSet<String>> = BTreeMap::new();
    for (m, p, o) in &ledger.reads {
        readers.entry((*p, *o)).or_default().insert(m.clone());
    }
    for p in 0..PARTITIONS {
        for o in 0..150 {
            let who = readers.get(&(p, o)).unwrap_or_else(|| panic!("record {p}/{o} lost"));
            if who.len() > 1 {
                assert!(who.len() == 2 && who.contains(dead), "{p}/{o} read by {who:?}");
                let last = ledger.committed.get(&(dead.to_owned(), p)).copied().unwrap_or(0);
                assert!(o >= last, "{p}/{o} was committed by the dead member and read again");
            }
        }
    }
}

#[test]
fn fencing_durability_reset_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("orders", PARTITIONS);
    produce(&b, 0, 60);
    let mut a = Member::join(&b);
    let commit = |b: &Broker, m: &Member, o: u64| {
        b.post(
            "/groups/g/offsets",
            &json!({"member_id": m.id, "generation": m.generation,
            "offsets": [{"topic": "orders", "partition": 0, "offset": o, "metadata": "note"}]}),
        )
    };
    ok(&commit(&b, &a, 5), "commit");
    let _newcomer = Member::join(&b);
    let r = commit(&b, &a, 6);
    assert_eq!((r.status, r.code()), (409, "illegal_generation"), "{}", r.body);
    let r = b.post("/groups/g/reset-offsets", &json!({"topic": "orders", "to": "earliest"}));
    assert_eq!((r.status, r.code()), (409, "group_not_empty"));
    a.resync(&b);
    ok(&commit(&b, &a, 7), "commit at the new generation");
    // The internal topic is hidden and protected.
    let topics = ok(&b.get("/topics"), "list topics");
    assert!(!topics.to_string().contains("__es_offsets"), "{topics}");
    assert_eq!(b.delete("/topics/__es_offsets").status, 400);
    // kill -9: the acknowledged commit is there after restart, and members are gone.
    b.kill9();
    let b = Broker::start(dir.path());
    let v = ok(&b.get("/groups/g/offsets"), "offsets after restart");
    assert_eq!(v["offsets"], json!([{"topic": "orders", "partition": 0, "offset": 7, "metadata": "note"}]));
    let d = ok(&b.get("/groups/g"), "describe");
    assert_eq!(d["state"], "Empty");
    let p0 = &d["partitions"][0];
    assert_eq!(
        (p0["committed"].as_u64(), p0["high_watermark"].as_u64(), p0["lag"].as_u64()),
        (Some(7), Some(10), Some(3))
    );
    assert!(ok(&b.get("/groups"), "list")["groups"].to_string().contains("\"g\""));
    // Resets: earliest, latest, to an offset, to a timestamp.
    let reset = |body: Value| ok(&b.post("/groups/g/reset-offsets", &body), "reset")["offsets"].clone();
    let all =
        |v: &Value| v.as_array().unwrap().iter().map(|o| o["offset"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(all(&reset(json!({"topic": "orders", "to": "latest"}))), vec![10; 6]);
    assert_eq!(all(&reset(json!({"topic": "orders", "to": "earliest"}))), vec![0; 6]);
    assert_eq!(all(&reset(json!({"topic": "orders", "to": "offset", "offset": 4, "partitions": [1]})))[1], 4);
    assert_eq!(all(&reset(json!({"topic": "orders", "to": "timestamp", "timestamp": 0})))[2], 0);
    assert_eq!(b.delete("/groups/g").status, 204);
    assert_eq!(b.get("/groups/g").code(), "group_not_found");
}

#[test]
fn simple_sessions_share_partitions_and_auto_commit() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", PARTITIONS);
    produce(&b, 0, 120);
    let body = json!({"topics": ["orders"], "session_timeout_ms": 5000});
    let m1 = ok(&b.post("/groups/s/members", &body), "create")["member_id"].as_str().unwrap().to_owned();
    let m2 = ok(&b.post("/groups/s/members", &body), "create")["member_id"].as_str().unwrap().to_owned();
    let mut seen: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 120 {
        for m in [&m1, &m2] {
            let v = ok(&b.get(&format!("/groups/s/members/{m}/records?wait_ms=100&max_records=13")), "poll");
            for r in v["records"].as_array().unwrap() {
                let key = (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap());
                let prev = seen.insert(key, m.clone());
                assert!(prev.is_none(), "{key:?} delivered twice");
            }
        }
        assert!(Instant::now() < deadline, "only {} of 120 records arrived", seen.len());
    }
    let owners: BTreeSet<&String> = seen.values().collect();
    assert_eq!(owners.len(), 2, "both members got partitions");
    for m in [&m1, &m2] {
        assert_eq!(b.delete(&format!("/groups/s/members/{m}")).status, 204);
    }
    let v = ok(&b.get("/groups/s/offsets"), "offsets");
    let total: u64 = v["offsets"].as_array().unwrap().iter().map(|o| o["offset"].as_u64().unwrap()).sum();
    assert_eq!(total, 120, "leaving committed everything delivered: {v}");
}

/// Polls a session once; returns (partition, offset) of the records it delivered.
fn poll(b: &Broker, group: &str, member: &str) -> Vec<(u32, u64)> {
    let v =
        ok(&b.get(&format!("/groups/{group}/members/{member}/records?wait_ms=20&max_records=10")), "poll");
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["partition"].as_u64().unwrap() as u32, r["offset"].as_u64().unwrap()))
        .collect()
}

#[test]
fn a_session_that_stops_polling_hands_its_partitions_over() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", PARTITIONS);
    produce(&b, 0, 300);
    let body = json!({"topics": ["orders"], "session_timeout_ms": SESSION_MS});
    let ids: Vec<String> = (0..3)
        .map(|_| ok(&b.post("/groups/f/members", &body), "create")["member_id"].as_str().unwrap().to_owned())
        .collect();
    let mut delivered: BTreeMap<(u32, u64), Vec<String>> = BTreeMap::new();
    let round = |members: &[String], delivered: &mut BTreeMap<(u32, u64), Vec<String>>| {
        for m in members {
            for key in poll(&b, "f", m) {
                delivered.entry(key).or_default().push(m.clone());
            }
        }
    };
    for _ in 0..4 {
        round(&ids, &mut delivered);
    }
    let d = ok(&b.get("/groups/f"), "describe");
    assert_eq!(d["state"], "Stable", "{d}");
    assert!(
        d["members"].as_array().unwrap().iter().all(|m| m["assignment"].as_array().unwrap().len() == 2),
        "{d}"
    );
    // The first session stops polling: no leave, no more commits.
    let dead = ids[0].clone();
    let at_death: BTreeMap<(String, u64), u64> = ok(&b.get("/groups/f/offsets"), "offsets")["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                (o["topic"].as_str().unwrap().to_owned(), o["partition"].as_u64().unwrap()),
                o["offset"].as_u64().unwrap(),
            )
        })
        .collect();
    let died = Instant::now();
    let deadline = died + Duration::from_secs(30);
    let mut failed_over = None;
    while delivered.len() < 300 || failed_over.is_none() {
        round(&ids[1..], &mut delivered);
        let d = ok(&b.get("/groups/f"), "describe");
        if failed_over.is_none() && d["members"].as_array().unwrap().len() == 2 && d["state"] == "Stable" {
            failed_over = Some(died.elapsed());
        }
        assert!(Instant::now() < deadline, "{} of 300 delivered; {d}", delivered.len());
    }
    let took = failed_over.unwrap();
    assert!(took < Duration::from_millis(SESSION_MS + 3_000), "failover took {took:?}");
    for ((p, o), who) in &delivered {
        if who.len() > 1 {
            let committed = at_death.get(&("orders".to_owned(), u64::from(*p))).copied().unwrap_or(0);
            assert!(who.len() == 2 && who[0] == dead && *o >= committed, "{p}/{o} delivered to {who:?}");
        }
    }
}
