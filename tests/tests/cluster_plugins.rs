//! Plugins and validator bindings in a three-node cluster (docs/cluster.md,
//! "Plugins and validators in a cluster"): a plugin uploaded on one node and bound
//! through another validates produces on every node; a node that was down during
//! the upload fetches the blob from a peer when it comes back and enforces the
//! validator; removing the binding and the plugin removes the blob everywhere.

use es_tests::broker::{Broker, Resp};
use es_tests::cluster::{Cluster, ELECTION_WAIT, eventually};
use serde_json::{Value, json};

/// Good and bad values for both validators here: `rules` with `value.format =
/// json` and `json-schema` with an object schema.
const GOOD: &str = "{\"ok\": true}";
const BAD: &str = "not json";

/// The blob files in a node's plugin store.
fn blobs(b: &Broker) -> Vec<String> {
    let dir = b.data_dir.join("plugins/blobs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.retain(|n| !n.ends_with(".tmp"));
    names.sort();
    names
}

fn produce(b: &Broker, topic: &str, value: &str) -> Resp {
    b.post(&format!("/topics/{topic}/records"), &json!({"records": [{"value": value, "partition": 0}]}))
}

/// Retries a cluster-wide change through node `id` while the answer is a
/// transient one (no leader yet, a blob still on its way); answers the last.
fn change(c: &Cluster, id: u64, what: &str, mut call: impl FnMut(&Broker) -> Resp) -> Resp {
    eventually(ELECTION_WAIT, what, || {
        let r = call(c.node(id));
        (![421, 500, 503, 504].contains(&r.status)).then_some(r)
    })
}

/// Uploads `wasm` as plugin `name` through node `id`; answers its sha256.
fn upload(c: &Cluster, id: u64, name: &str, wasm: &[u8]) -> String {
    let r = change(c, id, &format!("uploading {name}"), |b| b.post_bytes(&format!("/plugins/{name}"), wasm));
    assert_eq!(r.status, 201, "uploading {name}: {:?}", r.body);
    r.body["sha256"].as_str().unwrap().to_owned()
}

fn bind(c: &Cluster, id: u64, topic: &str, validators: Value) {
    let r = change(c, id, &format!("binding {topic}"), |b| {
        b.put(&format!("/topics/{topic}/validators"), &json!({ "validators": validators }))
    });
    assert_eq!(r.status, 200, "binding {topic}: {:?}", r.body);
}

/// Waits until node `id` runs `plugin` (version `sha256`, loaded) on `topic`.
fn wait_bound(c: &Cluster, id: u64, topic: &str, plugin: &str, sha256: &str) {
    eventually(ELECTION_WAIT, &format!("node {id} binding {plugin} to {topic}"), || {
        let r = c.node(id).get(&format!("/topics/{topic}/validators"));
        let links = r.body["validators"].as_array()?.clone();
        let loaded = links.iter().any(|l| l["plugin"] == plugin && l["sha256"] == sha256);
        (loaded && links.iter().all(|l| l.get("load_error").is_none_or(Value::is_null))).then_some(())
    });
}

/// Node `id` refuses a bad record on `topic` (answering 503 plugin_unavailable,
/// never a write, while the blob is on its way) and lets a good one through
/// validation (written, or 421 from a follower, which validates before routing).
fn enforces(c: &Cluster, id: u64, topic: &str) {
    let r = eventually(ELECTION_WAIT, &format!("node {id} validating {topic}"), || {
        let r = produce(c.node(id), topic, BAD);
        if r.status == 503 {
            assert_eq!(r.code(), "plugin_unavailable", "{:?}", r.body);
            return None;
        }
        Some(r)
    });
    assert_eq!(r.status, 422, "node {id} must refuse a bad record on {topic}: {:?}", r.body);
    assert_eq!(r.code(), "validation_failed", "{:?}", r.body);
    let r = produce(c.node(id), topic, GOOD);
    assert!([200, 421].contains(&r.status), "node {id}, a good record on {topic}: {:?}", r.body);
}

#[test]
fn plugins_and_bindings_replicate_and_a_late_node_fetches_the_blob() {
    let mut c = Cluster::start(3);
    c.create_topic_anywhere("orders");

    // Upload on node 1, bind through node 2: every node holds the blob and runs it.
    let sha = upload(&c, 1, "gate", es_plugin_host::builtin::RULES);
    bind(&c, 2, "orders", json!([{"plugin": "gate", "config": {"value.format": "json"}}]));
    for id in 1..=3 {
        wait_bound(&c, id, "orders", "gate", &sha);
        assert_eq!(blobs(c.node(id)), vec![format!("{sha}.wasm")], "node {id}'s blobs");
    }
    enforces(&c, 3, "orders");
    let (_, offsets) = c.produce_anywhere("orders", &[GOOD.to_owned()]);
    assert_eq!(offsets.len(), 1, "a good record is written");

    // Node 3 is down while a second plugin is uploaded and bound; when it comes
    // back it applies both, fetches the blob from a peer and enforces it.
    c.create_topic_anywhere("strict");
    c.kill9(3);
    let r = change(&c, 1, "uploading the same name again", |b| {
        b.post_bytes("/plugins/gate", es_plugin_host::builtin::JSON_SCHEMA)
    });
    assert_eq!(r.status, 409, "a different plugin of a taken name: {:?}", r.body);
    assert_eq!(r.code(), "plugin_already_exists");
    let sha2 = upload(&c, 2, "gate2", es_plugin_host::builtin::JSON_SCHEMA);
    assert_ne!(sha2, sha, "another component, so node 3 must fetch it");
    let schema = json!({"type": "object"}).to_string();
    bind(&c, 1, "strict", json!([{"plugin": "gate2", "config": {"schema": schema}}]));
    c.start_node(3);
    wait_bound(&c, 3, "strict", "gate2", &sha2);
    enforces(&c, 3, "strict");
    enforces(&c, 3, "orders");
    let log = c.node(3).wait_for_stderr("plugin component arrived from a peer");
    assert!(log.contains(&sha2), "node 3 fetched gate2's blob from a peer:\n{log}");
    assert_eq!(blobs(c.node(3)).len(), 2, "node 3 holds both blobs");

    // A bound plugin cannot be removed; unbound, it goes from every node.
    let r = change(&c, 3, "removing a bound plugin", |b| b.delete("/plugins/gate"));
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.code(), "plugin_in_use");
    for topic in ["orders", "strict"] {
        bind(&c, 2, topic, json!([]));
    }
    for name in ["gate", "gate2"] {
        let r = change(&c, 3, &format!("removing {name}"), |b| b.delete(&format!("/plugins/{name}")));
        assert_eq!(r.status, 204, "removing {name}: {:?}", r.body);
    }
    for id in 1..=3 {
        eventually(ELECTION_WAIT, &format!("node {id} removing the plugins"), || {
            let gone =
                ["gate", "gate2"].iter().all(|n| c.node(id).get(&format!("/plugins/{n}")).status == 404);
            (gone && blobs(c.node(id)).is_empty()).then_some(())
        });
        // Unbound: a record no validator would take is written (or routed).
        let r = produce(c.node(id), "orders", BAD);
        assert!([200, 421].contains(&r.status), "node {id}: {:?}", r.body);
    }
}
