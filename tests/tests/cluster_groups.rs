//! The broker's internal partitions replicated across a three-node cluster
//! (docs/cluster.md): a Kafka consumer group's committed offsets survive the
//! SIGKILL of its coordinator (the leader of `__es_offsets`), and so does its
//! membership (no rebalance; also across a single broker's restart), and the schema
//! registry is readable on every node, writable through any (a follower forwards
//! to the leader of `__es_schemas`) and intact after its leader is killed.

use std::time::Duration;

use es_tests::broker::{Broker, Client, Resp};
use es_tests::cluster::{Cluster, ELECTION_WAIT, eventually, free_port};
use serde_json::{Value, json};

/// Creates a one-partition topic and waits until every node has it.
fn create_topic(c: &Cluster, topic: &str) {
    eventually(ELECTION_WAIT, "creating the topic", || {
        let r = c.node(1).post("/topics", &json!({"name": topic, "partitions": 1}));
        match r.status {
            201 | 409 => Some(()),
            421 | 500 | 503 => None,
            other => panic!("creating {topic}: {other} {:?}", r.body),
        }
    });
    for (id, b) in &c.nodes {
        eventually(ELECTION_WAIT, &format!("{topic} on node {id}"), || {
            (b.get(&format!("/topics/{topic}")).status == 200).then_some(())
        });
    }
}

/// Produces `count` records to partition 0 through whichever node leads it.
fn produce(c: &Cluster, topic: &str, count: usize) {
    let records: Vec<Value> = (0..count).map(|i| json!({"value": format!("v{i}"), "partition": 0})).collect();
    let body = json!({ "records": records });
    eventually(ELECTION_WAIT, "a leader taking the produce", || {
        c.nodes
            .values()
            .any(|b| b.post(&format!("/topics/{topic}/records"), &body).status == 200)
            .then_some(())
    });
}

/// The node that coordinates groups now and the offset `group` committed for
/// partition 0 of `topic` there; every other live node answers 421.
fn coordinator(c: &Cluster, group: &str, topic: &str) -> (u64, Option<u64>) {
    eventually(ELECTION_WAIT, "a group coordinator", || {
        let answers: Vec<(u64, Resp)> =
            c.nodes.iter().map(|(id, b)| (*id, b.get(&format!("/groups/{group}/offsets")))).collect();
        let serving: Vec<&(u64, Resp)> = answers.iter().filter(|(_, a)| a.status == 200).collect();
        let [(id, answer)] = serving.as_slice() else { return None };
        let others_refuse = answers.iter().filter(|(i, _)| i != id).all(|(_, a)| a.status == 421);
        others_refuse.then(|| {
            let offsets = answer.body["offsets"].as_array().cloned().unwrap_or_default();
            let committed = offsets.iter().find(|o| o["topic"] == topic && o["partition"] == 0);
            (*id, committed.and_then(|o| o["offset"].as_u64()))
        })
    })
}

/// One run of the consumer script: (offsets seen in order, last committed offset).
fn consume(c: &Cluster, topic: &str, group: &str, count: usize) -> (Vec<u64>, u64) {
    let args = [c.bootstrap(), topic.to_owned(), group.to_owned(), count.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out) = es_tests::python::run_script("kafka_group_failover.py", &args, Duration::from_secs(180));
    assert!(ok, "kafka_group_failover.py failed:\n{out}");
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result:\n{out}"));
    let r: Value = serde_json::from_str(line).unwrap();
    eprintln!("consumer run: committed {} errors {}", r["committed"], r["errors"]);
    let seen: Vec<u64> = r["seen"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
    (seen, r["committed"].as_u64().unwrap_or_else(|| panic!("nothing committed: {r}")))
}

/// A Kafka group commits through the coordinator, the coordinator is SIGKILLed,
/// and the next member resumes on the new coordinator exactly at the last commit:
/// nothing delivered again beyond it, nothing skipped.
#[test]
fn a_kafka_group_resumes_from_its_commits_after_the_coordinator_is_killed() {
    let mut c = Cluster::start(3);
    create_topic(&c, "events");
    produce(&c, "events", 300);

    let (first, committed) = consume(&c, "events", "g1", 120);
    assert_eq!(first, (0..120).collect::<Vec<u64>>(), "the first member reads from the start, in order");
    assert_eq!(committed, 120);
    let (old, at_old) = coordinator(&c, "g1", "events");
    assert_eq!(at_old, Some(120), "the coordinator (node {old}) answers the commit");

    c.kill9(old);
    let (new, at_new) = coordinator(&c, "g1", "events");
    assert_ne!(new, old);
    assert_eq!(at_new, Some(120), "the new coordinator (node {new}) loaded the commit from the log");

    let (rest, committed) = consume(&c, "events", "g1", 180);
    assert_eq!(rest, (120..300).collect::<Vec<u64>>(), "resumed exactly at the commit");
    assert_eq!(committed, 300);
    assert_eq!(coordinator(&c, "g1", "events"), (new, Some(300)));
}

/// The group as the first of `nodes` that serves it describes it (the
/// coordinator): (state, generation, member ids).
fn described(nodes: &[&Broker], group: &str) -> (String, i64, Vec<String>) {
    eventually(ELECTION_WAIT, "the coordinator describing the group", || {
        let answer = nodes.iter().map(|b| b.get(&format!("/groups/{group}"))).find(|r| r.status == 200)?;
        let b = &answer.body;
        let members =
            b["members"].as_array()?.iter().filter_map(|m| m["member_id"].as_str().map(str::to_owned));
        Some((b["state"].as_str()?.to_owned(), b["generation"].as_i64()?, members.collect()))
    })
}

fn live(c: &Cluster) -> Vec<&Broker> {
    c.live().map(|(_, b)| b).collect()
}

/// The member script's run (kafka_group_failover.py, COUNT 200) after the fault:
/// every record read once, in order; one assignment, no revocation, no loss; the
/// member id the group held before the fault.
fn kept_membership(script: es_tests::python::Script, member: &str) {
    let (ok, out) = script.finish(Duration::from_secs(180));
    assert!(ok, "kafka_group_failover.py failed:\n{out}");
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no result:\n{out}"));
    let r: Value = serde_json::from_str(line).unwrap();
    eprintln!(
        "member run: assigned {} revoked {} lost {} errors {}",
        r["assigned"], r["revoked"], r["lost"], r["errors"]
    );
    let seen: Vec<u64> = r["seen"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap()).collect();
    assert_eq!(seen, (0..200).collect::<Vec<u64>>(), "every record once, in order");
    let calls = (r["assigned"].as_u64(), r["revoked"].as_u64(), r["lost"].as_u64());
    assert_eq!(calls, (Some(1), Some(0), Some(0)), "no rebalance: {r}");
    assert_eq!(r["members"]["first"].as_str(), Some(member), "{r}");
    assert_eq!(r["members"]["last"].as_str(), Some(member), "{r}");
}

/// A Kafka consumer keeps its membership through a coordinator kill (Kafka's
/// design: the group's record is in the offsets log, and the new coordinator
/// loads it): the member heartbeats on in its generation at the new coordinator.
#[test]
fn a_kafka_group_member_keeps_its_generation_when_the_coordinator_is_killed() {
    let mut c = Cluster::start(3);
    create_topic(&c, "stays");
    produce(&c, "stays", 100);
    let script = es_tests::python::spawn_script(
        "kafka_group_failover.py",
        &[&c.bootstrap(), "stays", "g-stays", "200"],
    );
    let old = eventually(Duration::from_secs(90), "the member committing its first 100 records", || {
        let (id, committed) = coordinator(&c, "g-stays", "stays");
        (committed == Some(100)).then_some(id)
    });
    let (state, generation, members) = described(&live(&c), "g-stays");
    assert_eq!((state.as_str(), members.len()), ("Stable", 1), "{members:?}");

    c.kill9(old);
    let (new, _) = coordinator(&c, "g-stays", "stays");
    assert_ne!(new, old);
    let loaded = described(&live(&c), "g-stays");
    assert_eq!(loaded, (state, generation, members.clone()), "loaded from the log");
    produce(&c, "stays", 100);
    kept_membership(script, &members[0]);
    // Its close left the group: empty, one generation on (as Kafka's).
    let (state, at, left) = described(&live(&c), "g-stays");
    assert_eq!((state.as_str(), at, left.len()), ("Empty", generation + 1, 0));
}

/// A single broker killed with SIGKILL and restarted on the same addresses loads
/// the group's record too: its member goes on without a rebalance.
#[test]
fn a_kafka_group_member_keeps_its_generation_across_a_single_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port(), free_port()].map(|p| format!("127.0.0.1:{p}"));
    let start = || {
        let mut cmd = std::process::Command::new(es_tests::broker::broker_bin());
        cmd.arg("--data-dir")
            .arg(dir.path())
            .env("ES_PLUGIN_CACHE_DIR", es_tests::broker::shared_plugin_cache());
        cmd.args(["--bind", &ports[0], "--bind-binary", &ports[1], "--bind-kafka", &ports[2]]);
        Broker::spawn(cmd, dir.path())
    };
    let mut b = start();
    b.create_topic("stays", 1);
    let records = |from: usize| json!({"records": (from..from + 100).map(|i| json!({"value": format!("v{i}")})).collect::<Vec<_>>()});
    assert_eq!(b.post("/topics/stays/records", &records(0)).status, 200);
    let script =
        es_tests::python::spawn_script("kafka_group_failover.py", &[&ports[2], "stays", "g-stays", "200"]);
    eventually(Duration::from_secs(90), "the member committing its first 100 records", || {
        let offsets = b.get("/groups/g-stays/offsets").body["offsets"].clone();
        (offsets[0]["offset"].as_u64() == Some(100)).then_some(())
    });
    let before = described(&[&b], "g-stays");
    assert_eq!((before.0.as_str(), before.2.len()), ("Stable", 1), "{before:?}");

    b.kill9();
    let b = start();
    assert_eq!(described(&[&b], "g-stays"), before, "loaded from the log at start");
    assert_eq!(b.post("/topics/stays/records", &records(100)).status, 200);
    kept_membership(script, &before.2[0]);
}

/// Registers `schema` under `subject` on node `id`: (schema id, the leader's id
/// when the node forwarded the write, from `es-registry-leader`).
fn register(c: &Cluster, id: u64, subject: &str, schema: &str) -> (u64, Option<u64>) {
    let body = json!({ "schema": schema }).to_string();
    let client = Client::new(&c.node(id).url);
    eventually(ELECTION_WAIT, &format!("registering {subject} on node {id}"), || {
        let (r, headers) = client.send_full("POST", &format!("/registry/subjects/{subject}/versions"), &body);
        let leader = headers.iter().find(|(k, _)| k == "es-registry-leader").map(|(_, v)| v.parse().unwrap());
        match r.status {
            200 => Some((r.body["id"].as_u64().unwrap(), leader)),
            // Mid-election: no leader to forward to, or a leader still loading.
            421 | 500 | 503 => None,
            other => panic!("registering {subject} on node {id}: {other} {:?}", r.body),
        }
    })
}

/// Waits until node `id` serves version 1 of `subject` with schema id `schema_id`.
fn readable(b: &Broker, id: u64, subject: &str, schema_id: u64) {
    eventually(ELECTION_WAIT, &format!("{subject} on node {id}"), || {
        let r = b.get(&format!("/registry/subjects/{subject}/versions/1"));
        (r.status == 200 && r.body["id"].as_u64() == Some(schema_id)).then_some(())
    });
}

/// A schema registered through any node (followers forward to the leader) is
/// readable on every node, and still there, with its id, after the node that
/// led the registry is killed; the survivors take new registrations.
#[test]
fn the_schema_registry_is_replicated_and_survives_its_leader() {
    let mut c = Cluster::start(3);
    let mut registered = Vec::new();
    let mut leaders = std::collections::BTreeSet::new();
    for id in 1..=3u64 {
        let subject = format!("s{id}-value");
        let schema = format!(r#"{{"type":"record","name":"R{id}","fields":[{{"name":"f","type":"int"}}]}}"#);
        let (schema_id, forwarded_to) = register(&c, id, &subject, &schema);
        leaders.insert(forwarded_to.unwrap_or(id));
        registered.push((subject, schema_id));
    }
    assert_eq!(leaders.len(), 1, "one leader took every write: {leaders:?}");
    let leader = *leaders.first().unwrap();
    let ids: std::collections::BTreeSet<u64> = registered.iter().map(|(_, i)| *i).collect();
    assert_eq!(ids.len(), 3, "three schemas, three ids, whichever node took them: {registered:?}");
    for (id, b) in &c.nodes {
        for (subject, schema_id) in &registered {
            readable(b, *id, subject, *schema_id);
        }
    }

    // The two followers forwarded their writes; now kill the leader.
    c.kill9(leader);
    for (id, b) in &c.nodes {
        for (subject, schema_id) in &registered {
            readable(b, *id, subject, *schema_id);
        }
    }
    let survivor = *c.nodes.keys().next().unwrap();
    let (late, _) = register(&c, survivor, "late-value", "\"string\"");
    assert!(!ids.contains(&late), "a new schema gets a new id after the failover");
    for (id, b) in &c.nodes {
        readable(b, *id, "late-value", late);
    }
}
