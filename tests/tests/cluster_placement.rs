//! Placement (docs/cluster.md, "Placement"): partitions on some of the nodes, a
//! node that is no replica sending clients to the leader, and a partition moved
//! to other nodes under load with nothing acknowledged lost.

use std::collections::BTreeMap;
use std::time::Duration;

use es_tests::cluster::{Cluster, ELECTION_WAIT, IdempotentLoad, consume_all, eventually};
use serde_json::{Value, json};

/// Partition `p` of `topic` in node `id`'s `GET /cluster`.
fn partition_seen(c: &Cluster, id: u64, topic: &str, p: u64) -> Option<Value> {
    let r = c.node(id).get("/cluster");
    r.body["partitions"].as_array()?.iter().find(|x| x["topic"] == topic && x["partition"] == p).cloned()
}

fn ids(v: &Value) -> Vec<u64> {
    let mut ids: Vec<u64> =
        v.as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// Reads partition 0 of `placed` from its start with an es-client consumer
/// bootstrapped at `bootstrap` until `want` records came (bounded).
fn read_with_es_client(bootstrap: String, want: usize) -> BTreeMap<u64, String> {
    use es_client::{Client, ClientOptions, Consumer};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client =
            std::sync::Arc::new(Client::connect(&bootstrap, ClientOptions::default()).await.unwrap());
        let mut consumer = Consumer::new(client);
        consumer.assign("placed", 0, es_protocol::OffsetSpec::Earliest).await.unwrap();
        let mut read = BTreeMap::new();
        let deadline = std::time::Instant::now() + ELECTION_WAIT;
        while read.len() < want {
            assert!(std::time::Instant::now() < deadline, "read {} of {want}", read.len());
            for r in consumer.poll().await.unwrap() {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
                read.insert(r.offset, value);
            }
        }
        read
    })
}

/// Whether node `id`'s scrape has partition 0 of `placed`'s size gauge.
fn size_gauge(c: &Cluster, id: u64) -> bool {
    let r = c.node(id).get("/metrics");
    r.body.as_str().unwrap_or_default().contains(r#"es_partition_size_bytes{topic="placed",partition="0"} "#)
}

fn es(c: &Cluster, asked: u64, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(es_tests::broker::es_bin());
    cmd.args(["--broker", &c.node(asked).url]).args(args);
    es_tests::peers::run(&mut cmd, None, Duration::from_secs(120), "es")
}

/// Four nodes, a topic of four partitions with two replicas each: the replicas
/// and preferred leaders go round-robin, every node names every partition's
/// leader, a node that is no replica answers 421 naming it, and a record written
/// through any node lands. Then partition 0 moves to the two other nodes while an
/// idempotent es-client producer (bootstrapped at a node that is no replica)
/// writes to it: every acknowledged record is on the new replicas at its offset,
/// and the old ones let go of it and discard their copies; moved back, they get
/// the whole log again. A factor above the members is refused.
#[test]
fn partitions_live_on_their_replicas_and_move_under_load() {
    let mut c = Cluster::new(4, &[], &[]);
    for id in 1..=4 {
        c.start_node(id);
    }
    let too_many = eventually(ELECTION_WAIT, "the metadata leader", || {
        let r = c.node(1).post("/topics", &json!({"name": "wide", "partitions": 1, "replication_factor": 5}));
        (r.status != 503 && r.status != 504).then_some(r)
    });
    assert_eq!((too_many.status, too_many.code()), (400, "invalid_request"), "{:?}", too_many.body);
    assert!(too_many.body.to_string().contains("larger than the 4 node"), "{:?}", too_many.body);

    let out = es(&c, 2, &["topic", "create", "placed", "--partitions", "4", "--replication-factor", "2"]);
    assert!(out.contains("created topic placed"), "{out}");
    // Round-robin from node 1: 1,2 / 2,3 / 3,4 / 4,1; each preferred leader leads.
    let expected: [Vec<u64>; 4] = [vec![1, 2], vec![2, 3], vec![3, 4], vec![1, 4]];
    for p in 0..4u64 {
        let preferred = [1, 2, 3, 4][p as usize];
        for id in 1..=4 {
            eventually(ELECTION_WAIT, &format!("partition {p} on node {id}'s view"), || {
                let seen = partition_seen(&c, id, "placed", p)?;
                let ok = ids(&seen["assigned"]) == expected[p as usize]
                    && ids(&seen["replicas"]) == expected[p as usize]
                    && seen["leader"].as_u64() == Some(preferred);
                ok.then_some(())
            });
        }
    }

    // Node 3 is no replica of partition 0: it names the leader, node 1.
    let leader_url = c.node(1).url.clone();
    let body = json!({"records": [{"value": "via-3", "partition": 0}]});
    let r = c.node(3).post("/topics/placed/records", &body);
    assert_eq!((r.status, r.code()), (421, "not_leader"), "{:?}", r.body);
    assert!(r.body.to_string().contains(&leader_url), "{:?} names {leader_url}", r.body);
    let read = c.node(3).get("/topics/placed/partitions/0/records?offset=0");
    assert_eq!(read.status, 421, "a node that is no replica serves no reads: {:?}", read.body);
    // Asked of node 3 first, the write lands on the leader.
    let (node, offsets) = c.produce_via(&[3, 4, 1, 2], "placed", &["first".to_owned()]);
    assert_eq!((node, offsets), (1, vec![0]));

    // Partition 0 moves from 1,2 to 3,4 while a producer bootstrapped at node 4
    // (no replica yet) writes to it.
    let load = IdempotentLoad::start(c.node(4).binary_addr.clone(), "placed");
    load.flowing(50, ELECTION_WAIT);
    let out = es(&c, 2, &["cluster", "move", "placed", "0", "--replicas", "3,4", "--timeout-s", "90"]);
    assert!(out.contains("partition 0 of placed is moving to 3,4"), "{out}");
    assert!(out.contains("every partition is on its assigned replicas (4)"), "{out}");
    load.flowing(50, ELECTION_WAIT);
    let mut acked: BTreeMap<u64, String> = load.stop();
    acked.insert(0, "first".to_owned());
    let n = acked.len() as u64;
    assert_eq!(acked.keys().copied().collect::<Vec<_>>(), (0..n).collect::<Vec<_>>(), "dense offsets");
    for id in [3, 4] {
        let got = eventually(ELECTION_WAIT, &format!("node {id} serving partition 0"), || {
            let got = consume_all(c.node(id), "placed");
            (got.len() >= acked.len()).then_some(got)
        });
        assert_eq!(got, acked, "node {id}");
    }
    // An es-client consumer bootstrapped at node 1, no replica any more, is sent
    // to the leader by its first fetch and reads every record from there.
    let read = read_with_es_client(c.node(1).binary_addr.clone(), acked.len());
    assert_eq!(read, acked, "what es-client read through node 1");
    // The old replicas let go: they send readers to the new leader.
    for id in [1, 2] {
        eventually(ELECTION_WAIT, &format!("node {id} no longer serving partition 0"), || {
            let r = c.node(id).get("/topics/placed/partitions/0/records?offset=0");
            (r.status == 421).then_some(())
        });
    }
    // And discard their copies: no segment data, no Raft file, no gauge.
    for id in [1, 2] {
        let dir = c.root.path().join(format!("node{id}")).join("partitions").join("placed-0");
        eventually(ELECTION_WAIT, &format!("node {id}'s copy of partition 0 discarded"), || {
            let files: Vec<(String, u64)> = std::fs::read_dir(&dir)
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().map_or(0, |m| m.len())))
                .collect();
            let data: u64 = files.iter().filter(|(n, _)| n.ends_with(".log")).map(|(_, len)| len).sum();
            let raft = files.iter().any(|(n, _)| n.starts_with("raft-"));
            (data == 0 && !raft).then_some(())
        });
        assert!(!size_gauge(&c, id), "node {id} still reports a partition it holds no replica of");
    }
    assert!(size_gauge(&c, 3), "a replica reports its partition");
    // Moved back, the discarded nodes join as new replicas and get the whole log.
    let out = es(&c, 3, &["cluster", "move", "placed", "0", "--replicas", "1,2", "--timeout-s", "90"]);
    assert!(out.contains("every partition is on its assigned replicas (4)"), "{out}");
    for id in [1, 2] {
        let got = eventually(ELECTION_WAIT, &format!("node {id} serving partition 0 again"), || {
            let got = consume_all(c.node(id), "placed");
            (got.len() >= acked.len()).then_some(got)
        });
        assert_eq!(got, acked, "node {id} after the move back");
    }
    // A removed node's place goes to the member holding the fewest replicas.
    let out = es(&c, 1, &["cluster", "remove-node", "4"]);
    assert!(out.contains("node 4 removed") && out.contains("members now 1,2,3"), "{out}");
    for p in 0..4u64 {
        let seen = partition_seen(&c, 1, "placed", p).expect("a partition");
        assert!(!ids(&seen["assigned"]).contains(&4), "partition {p}: {seen}");
        assert_eq!(ids(&seen["assigned"]).len(), 2, "partition {p} keeps two replicas: {seen}");
    }
    c.nodes.remove(&4);
    let (_, offsets) = c.produce_via(&[1, 2, 3], "placed", &["after-removal".to_owned()]);
    assert_eq!(offsets, [n], "the next offset after every acknowledged one");
}

/// Creates `spread`: three partitions, one replica each (round-robin, so each node
/// holds one).
fn create_spread(c: &Cluster) {
    let body = json!({"name": "spread", "partitions": 3, "replication_factor": 1});
    eventually(ELECTION_WAIT, "creating the topic", || match c.node(1).post("/topics", &body).status {
        201 | 409 => Some(()),
        421 | 500 | 503 | 504 => None,
        other => panic!("creating the topic: {other}"),
    });
}

/// A group's lag and an offset reset are computed on the group coordinator,
/// which need not replicate the group's partitions: for one placed elsewhere it
/// asks a replica for the partition's ends (before, it read its own empty copy:
/// "latest" reset a group to offset 0).
#[test]
fn lag_and_offset_resets_on_the_coordinator_read_partitions_placed_elsewhere() {
    let c = Cluster::start(3);
    create_spread(&c);
    // One replica per partition, round-robin: two of the three live off the coordinator.
    for p in 0..3u64 {
        let records: Vec<Value> =
            (0..(p + 1) * 10).map(|i| json!({"value": format!("v{i}"), "partition": p})).collect();
        let body = json!({ "records": records });
        eventually(ELECTION_WAIT, &format!("producing to partition {p}"), || {
            c.nodes.values().any(|b| b.post("/topics/spread/records", &body).status == 200).then_some(())
        });
    }
    let coordinator =
        eventually(ELECTION_WAIT, "a coordinator", || c.node(1).get("/cluster").body["coordinator"].as_u64());
    let off_coordinator = (0..3u64)
        .filter(|p| {
            let seen = c.node(coordinator).get("/cluster").body;
            let partitions = seen["partitions"].as_array().cloned().unwrap_or_default();
            !partitions.iter().any(|q| {
                q["topic"] == "spread" && q["partition"] == *p && ids(&q["replicas"]).contains(&coordinator)
            })
        })
        .count();
    assert!(off_coordinator >= 2, "{off_coordinator} partitions off the coordinator");
    let b = c.node(coordinator);
    let reset = |to: &str| {
        let r = b.post("/groups/g-spread/reset-offsets", &json!({"topic": "spread", "to": to}));
        assert_eq!(r.status, 200, "{to}: {:?}", r.body);
        let offsets = r.body["offsets"].as_array().unwrap().iter().map(|o| o["offset"].as_u64().unwrap());
        offsets.collect::<Vec<u64>>()
    };
    let described = || {
        let r = b.get("/groups/g-spread");
        assert_eq!(r.status, 200, "{:?}", r.body);
        let parts = r.body["partitions"].as_array().unwrap().clone();
        parts
            .iter()
            .map(|p| (p["high_watermark"].as_u64().unwrap(), p["lag"].as_u64().unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(reset("latest"), vec![10, 20, 30]);
    assert_eq!(described(), vec![(10, 0), (20, 0), (30, 0)]);
    assert_eq!(reset("earliest"), vec![0, 0, 0]);
    assert_eq!(described(), vec![(10, 10), (20, 20), (30, 30)]);
}

/// The simple HTTP consumer session reads every partition assigned to its member
/// through the node its client talks to, placed there or not: partitions on
/// other nodes are read from a replica there (`cluster/reads.rs`). Every record
/// comes once, later records arrive too, and leaving commits what was delivered.
#[test]
fn an_http_consumer_session_reads_partitions_placed_on_other_nodes() {
    let c = Cluster::start(3);
    create_spread(&c);
    let produce = |p: u64, values: Vec<String>| {
        let records: Vec<Value> = values.iter().map(|v| json!({"value": v, "partition": p})).collect();
        let body = json!({ "records": records });
        eventually(ELECTION_WAIT, &format!("producing to partition {p}"), || {
            c.nodes.values().any(|b| b.post("/topics/spread/records", &body).status == 200).then_some(())
        });
    };
    for p in 0..3u64 {
        produce(p, (0..(p + 1) * 10).map(|i| format!("p{p}-v{i}")).collect());
    }
    // One replica per partition: node 1 holds one of them at most.
    let here = (0..3u64)
        .filter(|p| partition_seen(&c, 1, "spread", *p).is_some_and(|v| ids(&v["replicas"]) == [1]))
        .count();
    assert!(here <= 1, "{here} partitions on node 1");
    let b = c.node(1);
    let joined = b.post("/groups/s/members", &json!({"topics": ["spread"], "session_timeout_ms": 10000}));
    assert_eq!(joined.status, 201, "{:?}", joined.body);
    let member = joined.body["member_id"].as_str().unwrap().to_owned();
    let poll = || {
        let r = b.get(&format!("/groups/s/members/{member}/records?wait_ms=2000&max_records=25"));
        // A replica briefly unreachable is retried by the next poll.
        if [503, 504].contains(&r.status) {
            return Vec::new();
        }
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["records"].as_array().unwrap().clone()
    };
    let mut seen: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let take = |records: Vec<Value>, seen: &mut BTreeMap<(u64, u64), String>| {
        for r in records {
            let key = (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap());
            let value = r["value"].as_str().unwrap().to_owned();
            assert!(seen.insert(key, value).is_none(), "{key:?} delivered twice");
        }
    };
    eventually(Duration::from_secs(30), "every record through node 1", || {
        take(poll(), &mut seen);
        (seen.len() >= 60).then_some(())
    });
    assert_eq!(seen.len(), 60);
    for ((p, o), v) in &seen {
        assert_eq!(v, &format!("p{p}-v{o}"));
    }
    // Records written after the member caught up arrive too, from whichever node
    // holds them.
    for p in 0..3u64 {
        produce(p, vec![format!("late-{p}")]);
    }
    eventually(Duration::from_secs(30), "the late records", || {
        take(poll(), &mut seen);
        (seen.len() >= 63).then_some(())
    });
    assert_eq!(b.delete(&format!("/groups/s/members/{member}")).status, 204);
    let v = b.get("/groups/s/offsets").body;
    let total: u64 = v["offsets"].as_array().unwrap().iter().map(|o| o["offset"].as_u64().unwrap()).sum();
    assert_eq!(total, 63, "leaving committed everything delivered: {v}");
}

/// An HTTP produce spanning partitions that different nodes lead is refused whole:
/// `421 not_leader` and nothing written, not even to the partition the asked node
/// leads, so the es CLI may resend the request to the leader the 421 names.
#[test]
fn a_produce_spanning_partitions_led_elsewhere_is_refused_whole() {
    let c = Cluster::start(3);
    let body = json!({"name": "across", "partitions": 3, "replication_factor": 3});
    eventually(ELECTION_WAIT, "creating the topic", || match c.node(1).post("/topics", &body).status {
        201 | 409 => Some(()),
        421 | 500 | 503 | 504 => None,
        other => panic!("creating the topic: {other}"),
    });
    // The leader of partition 0, once each node leads one partition (balanced, so
    // the balancer moves nothing more), as that node itself sees it.
    let leaders_seen_by = |id: u64| -> Option<Vec<u64>> {
        (0..3).map(|p| partition_seen(&c, id, "across", p).and_then(|v| v["leader"].as_u64())).collect()
    };
    let asked = eventually(ELECTION_WAIT, "one partition led by each node", || {
        let leaders = leaders_seen_by(1)?;
        let mut sorted = leaders.clone();
        sorted.sort_unstable();
        (sorted == [1, 2, 3] && leaders_seen_by(leaders[0])? == leaders).then_some(leaders[0])
    });
    let led = [0u64];
    let records: Vec<Value> = (0..3).map(|p| json!({"value": format!("v{p}"), "partition": p})).collect();
    let r = c.node(asked).post("/topics/across/records", &json!({ "records": records }));
    assert_eq!((r.status, r.code()), (421, "not_leader"), "{:?}", r.body);
    for p in led {
        let one = json!({"records": [{"value": "marker", "partition": p}]});
        let r = c.node(asked).post("/topics/across/records", &one);
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["offsets"][0]["offset"], 0, "partition {p}: the refused request wrote nothing");
    }
}

/// Rack-aware placement: nodes 1 and 2 in rack r1, 3 and 4 in r2; a topic of four
/// partitions with two replicas each has a replica in each rack (round-robin over
/// the ids, as without racks, would put partition 0 on nodes 1 and 2, both in r1).
/// Node 2 remembers the racks it heard: restarted while node 4 is down, it still
/// places a new topic over both racks.
#[test]
fn a_partitions_replicas_are_placed_in_different_racks() {
    let mut c = Cluster::new(4, &[], &[]);
    let rack_of = |id: u64| format!("r{}", id.div_ceil(2));
    for id in 1..=4u64 {
        c.env = vec![("ES_CLUSTER_RACK".into(), rack_of(id))];
        c.start_node(id);
    }
    for id in 1..=4 {
        eventually(ELECTION_WAIT, "every rack known", || {
            let nodes = c.node(id).get("/cluster").body["nodes"].clone();
            (nodes.as_array()?.iter().filter(|n| n["rack"].is_string()).count() == 4).then_some(())
        });
    }
    spread_over_racks(&c, "spread");

    c.kill9(4);
    c.kill9(2);
    c.env = vec![("ES_CLUSTER_RACK".into(), rack_of(2))];
    c.start_node(2);
    spread_over_racks(&c, "spread-again");
}

/// Creates `topic` (4 partitions, 2 replicas each) on node 2, which plans it, and
/// checks each partition has a replica in each rack.
fn spread_over_racks(c: &Cluster, topic: &str) {
    eventually(ELECTION_WAIT, "creating the topic", || {
        let r = c.node(2).post("/topics", &json!({"name": topic, "partitions": 4, "replication_factor": 2}));
        match r.status {
            201 | 409 => Some(()),
            421 | 500 | 503 | 504 => None,
            other => panic!("creating {topic}: {other} {:?}", r.body),
        }
    });
    for p in 0..4u64 {
        let seen = eventually(ELECTION_WAIT, "the placement", || partition_seen(c, 2, topic, p));
        let assigned = ids(&seen["assigned"]);
        assert_eq!(assigned.len(), 2, "{seen}");
        assert_ne!(assigned[0].div_ceil(2), assigned[1].div_ceil(2), "{topic} {p} in one rack: {seen}");
    }
}

/// Records of `topic` node `b` handed to consumers (`es_records_fetched_total`).
fn records_fetched(b: &es_tests::broker::Broker, topic: &str) -> u64 {
    let text = b.get("/metrics").body.as_str().map(str::to_owned).unwrap_or_default();
    let series = format!("es_records_fetched_total{{topic=\"{topic}\"}}");
    text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |v| v.trim().parse().unwrap_or(0))
}

/// Follower fetching (KIP-392): each node in a rack of its own (`cluster.rack`),
/// listed in Metadata; a Java consumer whose `client.rack` is a follower's is sent
/// there by the leader (`preferred_read_replica`) and reads every record from that
/// follower, those written before and those written while it reads; so does a
/// librdkafka consumer (confluent-kafka). The leader hands them none.
#[test]
fn a_kafka_consumer_reads_from_the_replica_in_its_rack() {
    let mut c = Cluster::new(3, &["--cluster-leader-balance-ms", "0"], &[]);
    for id in 1..=3 {
        c.env = vec![("ES_CLUSTER_RACK".into(), format!("r{id}"))];
        c.start_node(id);
    }
    // Each node learns the others' racks with their addresses, over the peer links.
    for id in 1..=3 {
        eventually(ELECTION_WAIT, "every node's rack known", || {
            let nodes = c.node(id).get("/cluster").body["nodes"].clone();
            let racks: Vec<String> =
                nodes.as_array()?.iter().filter_map(|n| Some(n["rack"].as_str()?.to_owned())).collect();
            (racks == ["r1", "r2", "r3"]).then_some(())
        });
    }
    c.create_topic_anywhere("racked");
    let early: Vec<String> = (0..50).map(|i| format!("early-{i}")).collect();
    let (leader, _) = c.produce_anywhere("racked", &early);
    let near = (1..=3).find(|id| *id != leader).unwrap();
    let bootstrap: Vec<String> = c.nodes.values().map(|b| b.kafka_addr.clone()).collect();
    let rack = format!("r{near}");
    let mut cmd = std::process::Command::new("java");
    cmd.args(["-Xmx256m", "-cp", es_tests::peers::java_classpath(), "es.kafka.Scenarios"]);
    cmd.args(["rack", &bootstrap.join(","), "racked", &rack, "50"]);
    let out = es_tests::peers::run(&mut cmd, None, Duration::from_secs(180), "java Scenarios rack");
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result:\n{out}"));
    let r: Value = serde_json::from_str(line).unwrap();
    assert_eq!(r["racks"], "1=r1,2=r2,3=r3", "{r}");
    assert_eq!((r["consumed"].as_u64(), &r["offsets_dense"]), (Some(100), &json!(true)), "{r}");
    assert_eq!(r["last_value"], "late-49", "{r}");
    assert!(c.node(near).kafka_answered("fetch") > 0, "node {near} (rack {rack}) served no fetch");
    assert!(records_fetched(c.node(near), "racked") >= 100, "node {near} served the records");
    assert_eq!(records_fetched(c.node(leader), "racked"), 0, "the leader sent the consumer to its rack");

    // librdkafka follows the leader's pointer too.
    let before = records_fetched(c.node(near), "racked");
    let (ok, out) = es_tests::python::run_script(
        "kafka_rack.py",
        &[&bootstrap.join(","), "racked", &rack, "100"],
        Duration::from_secs(120),
    );
    assert!(ok, "kafka_rack.py failed:\n{out}");
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result:\n{out}"));
    let r: Value = serde_json::from_str(line).unwrap();
    assert_eq!((r["consumed"].as_u64(), &r["offsets_dense"]), (Some(100), &json!(true)), "{r}");
    assert!(records_fetched(c.node(near), "racked") >= before + 100, "node {near} served librdkafka");
    assert_eq!(records_fetched(c.node(leader), "racked"), 0, "the leader sent librdkafka to its rack");

    // On the wire: the leader names the replica for an offset it holds and answers
    // one past its high watermark itself (so a consumer resets rather than going
    // back and forth); a follower refuses consumers before Fetch v11 and serves
    // them from v11.
    let (at_leader, at_near) = (&c.node(leader).kafka_addr, &c.node(near).kafka_addr);
    assert_eq!(raw_fetch(at_leader, 12, 0, &rack), (0, near as i32, 0), "sent to node {near}");
    assert_eq!(raw_fetch(at_leader, 12, 1_000, &rack).0, 1, "OFFSET_OUT_OF_RANGE from the leader");
    assert_eq!(raw_fetch(at_near, 10, 0, "").0, 6, "NOT_LEADER_OR_FOLLOWER before v11");
    let served = raw_fetch(at_near, 12, 0, "");
    assert_eq!((served.0, served.1), (0, -1));
    assert!(served.2 > 0, "the follower served records");
}

/// One Fetch of partition 0 of `racked` at `offset` from a consumer in `rack`:
/// (error code, preferred read replica, bytes of records).
fn raw_fetch(addr: &str, version: i16, offset: i64, rack: &str) -> (i16, i32, usize) {
    fetch_naming(addr, version, "racked", offset, rack, -1)
}

/// [`raw_fetch`] of `topic`, naming `epoch` as the partition's current leader
/// epoch (-1: none).
fn fetch_naming(
    addr: &str,
    version: i16,
    topic: &str,
    offset: i64,
    rack: &str,
    epoch: i32,
) -> (i16, i32, usize) {
    let mut conn = es_tests::kafka_wire::KafkaConn::connect(addr).unwrap();
    let r = conn.call(version, &consumer_fetch(topic, offset, epoch, rack, 0)).unwrap();
    let p = &r.responses[0].partitions[0];
    (p.error_code, p.preferred_read_replica.0, p.records.as_ref().map_or(0, |b| b.len()))
}

/// A Fetch v12 of partition 0 of `topic` at `offset` naming `epoch` that waits up
/// to `wait_ms` for a byte: its error code and how long it took.
fn parked_fetch(addr: &str, topic: &str, offset: i64, epoch: i32, wait_ms: i32) -> (i16, Duration) {
    let mut conn = es_tests::kafka_wire::KafkaConn::connect(addr).unwrap();
    let started = std::time::Instant::now();
    let r = conn.call(12, &consumer_fetch(topic, offset, epoch, "", wait_ms)).unwrap();
    (r.responses[0].partitions[0].error_code, started.elapsed())
}

/// A consumer's Fetch of partition 0 of `topic` at `offset`, naming `epoch` as its
/// current leader epoch (-1: none) and `rack` as its own, waiting up to `wait_ms`
/// for a byte.
fn consumer_fetch(
    topic: &str,
    offset: i64,
    epoch: i32,
    rack: &str,
    wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
    let partition = FetchPartition::default()
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
        .with_current_leader_epoch(epoch);
    let topic =
        FetchTopic::default().with_topic(TopicName(topic.to_owned().into())).with_partitions(vec![partition]);
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic])
        .with_rack_id(rack.to_owned().into())
}

/// Partition 0 of `topic` in Metadata v12 from `addr`: (leader id, leader epoch).
fn metadata_leader(addr: &str, topic: &str) -> (i32, i32) {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    let mut conn = es_tests::kafka_wire::KafkaConn::connect(addr).unwrap();
    let t = MetadataRequestTopic::default().with_name(Some(TopicName(topic.to_owned().into())));
    let r = conn.call(12, &MetadataRequest::default().with_topics(Some(vec![t]))).unwrap();
    let p = &r.topics[0].partitions[0];
    (p.leader_id.0, p.leader_epoch)
}

/// ListOffsets v7 (latest) of partition 0 of `topic` naming `epoch`: (error code, offset).
fn latest_naming(addr: &str, topic: &str, epoch: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    let mut conn = es_tests::kafka_wire::KafkaConn::connect(addr).unwrap();
    let p = ListOffsetsPartition::default().with_timestamp(-1).with_current_leader_epoch(epoch);
    let t =
        ListOffsetsTopic::default().with_name(TopicName(topic.to_owned().into())).with_partitions(vec![p]);
    let r = conn
        .call(7, &ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![t]))
        .unwrap();
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// OffsetForLeaderEpoch v4 of partition 0 of `topic` for `epoch`, naming `current`:
/// the error code.
fn epoch_end_naming(addr: &str, topic: &str, current: i32, epoch: i32) -> i16 {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{OffsetForLeaderEpochRequest, TopicName};
    let mut conn = es_tests::kafka_wire::KafkaConn::connect(addr).unwrap();
    let p = OffsetForLeaderPartition::default().with_current_leader_epoch(current).with_leader_epoch(epoch);
    let t = OffsetForLeaderTopic::default()
        .with_topic(TopicName(topic.to_owned().into()))
        .with_partitions(vec![p]);
    let r = conn.call(4, &OffsetForLeaderEpochRequest::default().with_topics(vec![t])).unwrap();
    r.topics[0].partitions[0].error_code
}

/// KIP-320 on reads: a Kafka consumer names the leader epoch its metadata gave it
/// (Fetch from v9, ListOffsets from v4, OffsetForLeaderEpoch); a replica whose
/// epoch is newer answers FENCED_LEADER_EPOCH (74), one whose epoch is older
/// UNKNOWN_LEADER_EPOCH (76), as Kafka's `Partition.checkCurrentLeaderEpoch`
/// does, before any leadership check; both make the client refresh its metadata.
/// After a leader transfer the old epoch is fenced on every replica and the new
/// one read. ListOffsets is the leader's (NOT_LEADER_OR_FOLLOWER, 6, on a follower).
#[test]
fn kafka_reads_naming_another_leader_epoch_are_refused_until_the_metadata_is_fresh() {
    let c = Cluster::start_unbalanced(3);
    c.create_topic_anywhere("epochs");
    let (leader, _) = c.produce_anywhere("epochs", &["a".to_owned(), "b".to_owned()]);
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let (at_leader, at_follower) = (c.node(leader).kafka_addr.clone(), c.node(follower).kafka_addr.clone());
    let (named, epoch) = metadata_leader(&at_leader, "epochs");
    assert_eq!(named, leader as i32);
    assert!(epoch > 0, "a Raft term: {epoch}");

    let code = |addr: &str, epoch: i32| fetch_naming(addr, 12, "epochs", 0, "", epoch).0;
    // Acknowledged at commit; the high watermark that lets readers see it follows.
    eventually(ELECTION_WAIT, "the leader serving the records", || {
        let (error, _, bytes) = fetch_naming(&at_leader, 12, "epochs", 0, "", epoch);
        (error == 0 && bytes > 0).then_some(())
    });
    assert_eq!((code(&at_leader, epoch - 1), code(&at_leader, epoch + 1)), (74, 76));
    assert_eq!(code(&at_leader, -1), 0, "no epoch named: not checked");
    // Follower fetching (v11+) checks the follower's own epoch, the same term.
    eventually(ELECTION_WAIT, "the follower serving the records", || {
        let (error, _, bytes) = fetch_naming(&at_follower, 12, "epochs", 0, "", epoch);
        (error == 0 && bytes > 0).then_some(())
    });
    assert_eq!((code(&at_follower, epoch - 1), code(&at_follower, epoch + 1)), (74, 76));

    assert_eq!(latest_naming(&at_leader, "epochs", epoch), (0, 2));
    assert_eq!(latest_naming(&at_leader, "epochs", epoch - 1).0, 74);
    assert_eq!(latest_naming(&at_leader, "epochs", epoch + 1).0, 76);
    assert_eq!(latest_naming(&at_follower, "epochs", epoch).0, 6, "ListOffsets is the leader's");
    assert_eq!(epoch_end_naming(&at_leader, "epochs", epoch, epoch), 0);
    assert_eq!(epoch_end_naming(&at_leader, "epochs", epoch - 1, epoch), 74);
    assert_eq!(epoch_end_naming(&at_leader, "epochs", epoch + 1, epoch), 76);

    // A consumer parked on the leader at the log's end (nothing to read yet) is
    // answered as soon as the leadership moves, as Kafka's delayed fetch is, not
    // when its wait ends.
    let parked = {
        let addr = at_leader.clone();
        std::thread::spawn(move || parked_fetch(&addr, "epochs", 2, epoch, 30_000))
    };
    eventually(ELECTION_WAIT, "the fetch parked on the leader", || {
        (c.node(leader).get("/readyz").body["long_polls"].as_u64()? > 0).then_some(())
    });

    // A new leader, a new epoch: the old one is stale everywhere.
    let r = c.node(leader).post("/cluster/partitions/epochs/0/leader", &json!({"to": follower}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let (error, waited) = parked.join().unwrap();
    assert_eq!(error, 74, "the parked fetch's epoch is stale on the old leader");
    assert!(waited < Duration::from_secs(15), "answered at the move, not after 30 s: {waited:?}");
    // The old leader answered once it saw the new one lead; the new leader's own
    // view follows within a moment.
    let newer = eventually(ELECTION_WAIT, "the new leader naming itself", || {
        let (named, newer) = metadata_leader(&at_follower, "epochs");
        (named == follower as i32).then_some(newer)
    });
    assert!(newer > epoch, "{epoch} -> {newer}");
    assert_eq!(code(&at_follower, epoch), 74, "the old epoch fenced on the new leader");
    assert_eq!(code(&at_follower, newer), 0);
    assert_eq!(latest_naming(&at_follower, "epochs", newer), (0, 2));
    eventually(ELECTION_WAIT, "the old leader following in the new epoch", || {
        (code(&at_leader, newer) == 0).then_some(())
    });
    assert_eq!(code(&at_leader, epoch), 74, "and on the old leader");
}
