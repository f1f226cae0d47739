//! Changing a cluster's members (docs/cluster.md, "Adding, removing and replacing
//! a node"): a failed node replaced under load with `es cluster add-node` and
//! `remove-node`, a running node removed, a removed id refused.

use std::time::Duration;

use es_tests::cluster::{Cluster, ELECTION_WAIT, IdempotentLoad, consume_all, eventually, every_node_serves};
use serde_json::{Value, json};

/// Each live node's replicas of `topic`'s partition 0, as its `GET /cluster` shows.
fn replicas_seen(c: &Cluster, topic: &str) -> Vec<(u64, Vec<u64>)> {
    c.live()
        .map(|(id, b)| {
            let r = b.get("/cluster");
            let replicas = r.body["partitions"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["topic"] == topic && p["partition"] == 0).cloned())
                .map(|p| p["replicas"].as_array().unwrap().iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            (*id, replicas)
        })
        .collect()
}

fn es_cluster(c: &Cluster, asked: u64, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(es_tests::broker::es_bin());
    cmd.args(["--broker", &c.node(asked).url, "cluster"]).args(args);
    es_tests::peers::run(&mut cmd, None, Duration::from_secs(30), "es cluster")
}

/// Replacing a failed node (issue 17's matrix): node 3 is killed under an
/// idempotent es-client load; node 4 starts with `--cluster-join` and `es cluster
/// add-node` makes it a member (holding no partition yet), and `es cluster
/// remove-node 3` moves the dead node's place to node 4: the group copies its log
/// to node 4 and takes it as a voter in a joint change with the dead node. Every acknowledged record is on
/// nodes 1, 2 and 4 at its offset; a topic created afterwards has them as its
/// replicas; node 3's id is refused if added again; and node 1, restarted with its
/// original `--cluster-peers` (1, 2, 3), comes back knowing node 4 from its members
/// file and catches up. Last, running node 2 is removed: it closes its
/// partitions and refuses writes, and nodes 1 and 4 carry on as the replicas.
#[test]
fn a_failed_node_is_replaced_under_load_and_nothing_is_lost() {
    let mut c = Cluster::new(4, &["--cluster-leader-balance-ms", "0"], &[]);
    for id in 1..=3 {
        c.start_node_listing(id, &[1, 2, 3], &[]);
    }
    c.create_topic_via(&[1, 2, 3], "replaced");
    c.produce_via(&[1, 2, 3], "replaced", &["warm-up".to_owned()]);
    let before = eventually(ELECTION_WAIT, "replicas 1,2,3", || {
        let seen = replicas_seen(&c, "replaced");
        seen.iter().all(|(_, r)| *r == [1, 2, 3]).then_some(seen)
    });
    assert_eq!(before.len(), 3);

    let load = IdempotentLoad::start(c.node(1).binary_addr.clone(), "replaced");
    eventually(ELECTION_WAIT, "records flowing", || {
        (consume_all(c.node(1), "replaced").len() > 20).then_some(())
    });
    c.kill9(3);
    c.start_node_listing(4, &[1, 2, 3, 4], &["--cluster-join"]);
    let peer4 = c.peer_addr(4);
    let out = es_cluster(&c, 2, &["add-node", "4", "--peer", &peer4]);
    assert!(out.contains("node 4 added") && out.contains("members now 1,2,3,4"), "{out}");
    // A new member holds no placed partition until one moves to it.
    assert!(out.contains("node 4 replicates 0"), "{out}");
    eventually(ELECTION_WAIT, "partition 0 still on 1,2,3 in every node's view", || {
        replicas_seen(&c, "replaced").iter().all(|(_, r)| *r == [1, 2, 3]).then_some(())
    });
    // Removing node 3 moves its place to node 4, the member holding the fewest.
    let out = es_cluster(&c, 4, &["remove-node", "3"]);
    assert!(out.contains("node 3 removed") && out.contains("members now 1,2,4"), "{out}");
    assert!(out.contains("every partition is on its assigned replicas (1); node 3 replicates 0"), "{out}");
    eventually(ELECTION_WAIT * 2, "node 3 dropped everywhere", || {
        let seen = replicas_seen(&c, "replaced");
        seen.iter().all(|(_, r)| *r == [1, 2, 4]).then_some(())
    });
    // Its id may not come back; a bad address is refused before anything is written.
    let again = c.node(1).post("/cluster/nodes", &json!({"id": 3, "peer": c.peer_addr(3)}));
    assert_eq!((again.status, again.code()), (400, "invalid_request"), "{:?}", again.body);
    let bad = c.node(1).post("/cluster/nodes", &json!({"id": 5, "peer": "nowhere"}));
    assert_eq!((bad.status, bad.code()), (400, "invalid_request"), "{:?}", bad.body);

    let mut acked = load.stop();
    acked.insert(0, "warm-up".to_owned());
    let n = acked.len() as u64;
    assert_eq!(acked.keys().copied().collect::<Vec<_>>(), (0..n).collect::<Vec<_>>(), "dense offsets");
    every_node_serves(&c, "replaced", &acked, "every acknowledged record");
    // A topic created now is replicated by the members.
    c.create_topic_via(&[1, 2, 4], "after");
    eventually(ELECTION_WAIT, "the new topic on 1,2,4", || {
        let seen = replicas_seen(&c, "after");
        seen.iter().all(|(_, r)| *r == [1, 2, 4]).then_some(())
    });

    // Node 1 restarts with the flags it was first started with.
    c.kill9(1);
    c.start_node_listing(1, &[1, 2, 3], &[]);
    let r = c.node(1).get("/cluster");
    let members: Vec<u64> =
        r.body["members"].as_array().unwrap().iter().filter_map(|m| m["id"].as_u64()).collect();
    assert_eq!(members, [1, 2, 4], "{:?}", r.body);
    let (_, offsets) = c.produce_via(&[1, 2, 4], "replaced", &["after-restart".to_owned()]);
    acked.insert(offsets[0], "after-restart".to_owned());
    every_node_serves(&c, "replaced", &acked, "every record after node 1's restart");

    // A running node removed: it closes its partitions (and says so), the others
    // carry on with 1 and 4 as every partition's replicas.
    let out = es_cluster(&c, 2, &["remove-node", "2"]);
    assert!(out.contains("node 2 removed") && out.contains("members now 1,4"), "{out}");
    assert!(out.contains("asked node 2 itself"), "{out}");
    let gone = c.nodes.remove(&2).expect("node 2");
    eventually(ELECTION_WAIT * 2, "node 2 dropped everywhere", || {
        let seen = replicas_seen(&c, "replaced");
        seen.iter().all(|(_, r)| *r == [1, 4]).then_some(())
    });
    let (_, offsets) = c.produce_via(&[1, 4], "replaced", &["after-removal".to_owned()]);
    acked.insert(offsets[0], "after-removal".to_owned());
    let refused =
        gone.post("/topics/replaced/records", &json!({"records": [{"value": "late", "partition": 0}]}));
    assert_ne!(refused.status, 200, "a removed node took a write: {:?}", refused.body);
    drop(gone);
    // Restarted on its data directory, the removed node refuses to start.
    let out = std::process::Command::new(es_tests::broker::broker_bin())
        .args(["--data-dir", c.root.path().join("node2").to_str().unwrap(), "--node-id", "2"])
        .args(["--cluster-peers", &c.peers, "--cluster-secret-file", c.secret.to_str().unwrap()])
        .args(["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("node 2 was removed from its cluster"), "{stderr}");
    every_node_serves(&c, "replaced", &acked, "every record after node 2 left");
}

/// The topics `b` lists, sorted.
fn topics_of(b: &es_tests::broker::Broker) -> Vec<String> {
    let mut names: Vec<String> = b.get("/topics").body["topics"]
        .as_array()
        .map(|ts| ts.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// The first offset node `id`'s metadata log still holds (its oldest segment's base).
fn metadata_log_start(c: &Cluster, id: u64) -> u64 {
    let dir = c.root.path().join(format!("node{id}/partitions/__es_cluster_metadata"));
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".log")?.parse::<u64>().ok())
                .min()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// The metadata log is kept by size (`cluster.metadata_retention_bytes`, tiny
/// here, with tiny segments): each node purges commands it applied. Node 3, down
/// while the log was purged, and node 4, added afterwards, both find their next
/// command gone from the leader's log; each installs the registry from a peer
/// (topics created, deleted and altered meanwhile) and then applies the log on
/// from there (a topic created afterwards).
#[test]
fn nodes_behind_the_purged_metadata_log_install_the_registry_from_a_peer() {
    let flags = [
        "--cluster-leader-balance-ms",
        "0",
        "--housekeeping-interval-ms",
        "200",
        "--cluster-metadata-segment-bytes",
        "8192",
        "--cluster-metadata-retention-bytes",
        "8192",
    ];
    let mut c = Cluster::new(4, &flags, &[]);
    for id in 1..=3 {
        c.start_node_listing(id, &[1, 2, 3], &[]);
    }
    c.create_topic_via(&[1, 2, 3], "early");
    // Each node's internal topics are its own; an install leaves them alone.
    let internal_id = |c: &Cluster| {
        let path = c.root.path().join("node3/topics/__es_offsets.json");
        let meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta["topic_id"].clone()
    };
    let offsets_id = internal_id(&c);
    assert!(offsets_id.is_string(), "{offsets_id}");
    c.kill9(3);
    for i in 0..40 {
        c.create_topic_via(&[1, 2], &format!("grow-{i:02}"));
    }
    for i in 0..10 {
        let r = c.node(1).delete(&format!("/topics/grow-{i:02}"));
        assert_eq!(r.status, 204, "deleting grow-{i:02}: {:?}", r.body);
    }
    let r = c.node(2).patch("/topics/early/config", &json!({"config": {"retention.ms": 3_600_000}}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let starts = eventually(Duration::from_secs(60), "both live nodes purging their metadata log", || {
        let starts = [metadata_log_start(&c, 1), metadata_log_start(&c, 2)];
        starts.iter().all(|s| *s > 0).then_some(starts)
    });
    let mut expected: Vec<String> = (10..40).map(|i| format!("grow-{i:02}")).collect();
    expected.push("early".to_owned());
    expected.sort();
    assert_eq!(topics_of(c.node(1)), expected);

    c.start_node_listing(3, &[1, 2, 3], &[]);
    eventually(ELECTION_WAIT * 4, "node 3 listing the topics as they stand", || {
        (topics_of(c.node(3)) == expected).then_some(())
    });
    assert_eq!(internal_id(&c), offsets_id, "node 3's __es_offsets was recreated");
    let config = c.node(3).get("/topics/early/config");
    assert_eq!(config.body["config"]["retention.ms"], 3_600_000, "{:?}", config.body);

    c.start_node_listing(4, &[1, 2, 3, 4], &["--cluster-join"]);
    let peer4 = c.peer_addr(4);
    let out = es_cluster(&c, 1, &["add-node", "4", "--peer", &peer4]);
    assert!(out.contains("node 4 added"), "{out}");
    eventually(ELECTION_WAIT * 4, "node 4 listing the topics", || {
        (topics_of(c.node(4)) == expected).then_some(())
    });
    // The log goes on from the image: a later command reaches both.
    c.create_topic_via(&[1, 2], "after");
    expected.push("after".to_owned());
    expected.sort();
    for id in [3, 4] {
        eventually(ELECTION_WAIT, "a topic created after the install", || {
            (topics_of(c.node(id)) == expected).then_some(())
        });
    }
    // Node 3's log started over at the snapshot (at its first append since).
    assert!(
        metadata_log_start(&c, 3) > 0,
        "node 3's log starts over at the leader's snapshot (leader's at {starts:?})"
    );
}
