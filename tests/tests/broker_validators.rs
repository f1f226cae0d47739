//! Record validators bound to topics, against the real es-broker: the built-in
//! plugins on good and bad data, each failure policy, hostile plugins (which fail
//! their own topic's batches under its policy and harm nothing else), plugin
//! management, hot swap of a plugin version under load, persistence across
//! kill -9, the binary protocol path and the CLI.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use es_tests::broker::{Broker, Client, Resp, es_bin};
use serde_json::{Value, json};

fn guest(name: &str) -> Vec<u8> {
    let path = PathBuf::from(es_plugin_host::GUEST_WASM_DIR).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "expected {status} {code}, got {:?}", r.body);
    assert_eq!(r.code(), code, "{:?}", r.body);
}

fn bind(b: &Broker, topic: &str, validators: Value) -> Resp {
    b.put(&format!("/topics/{topic}/validators"), &json!({ "validators": validators }))
}

fn bind_ok(b: &Broker, topic: &str, validators: Value) {
    let r = bind(b, topic, validators);
    assert_eq!(r.status, 200, "binding validators to {topic}: {:?}", r.body);
}

fn produce(b: &Broker, topic: &str, records: Value) -> Resp {
    b.post(&format!("/topics/{topic}/records"), &json!({ "records": records }))
}

fn high_watermarks(b: &Broker, topic: &str) -> u64 {
    let r = b.get(&format!("/topics/{topic}"));
    r.body["partitions"].as_array().unwrap().iter().map(|p| p["high_watermark"].as_u64().unwrap()).sum()
}

/// Every record of a topic (all partitions), as (key, value, headers).
fn consume_all(b: &Broker, topic: &str) -> Vec<Value> {
    let partitions = b.get(&format!("/topics/{topic}")).body["partition_count"].as_u64().unwrap();
    let mut out = Vec::new();
    for p in 0..partitions {
        let r = b.get(&format!("/topics/{topic}/partitions/{p}/records?offset=earliest&max_records=10000"));
        assert_eq!(r.status, 200, "{:?}", r.body);
        out.extend(r.body["records"].as_array().unwrap().iter().cloned());
    }
    out
}

fn violations(r: &Resp) -> Vec<(u64, String, String)> {
    let list = if r.status == 200 { &r.body["violations"] } else { &r.body["error"]["violations"] };
    list.as_array()
        .map(|v| {
            v.iter()
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
                    (f["index"].as_u64().unwrap(), s("code"), s("outcome"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn builtin_validators_accept_good_records_and_refuse_bad_ones_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    for t in ["keyed", "json", "avro"] {
        b.create_topic(t, 2);
    }
    bind_ok(
        &b,
        "keyed",
        json!([{"plugin": "rules", "config": {"key.required": "true", "value.format": "json"}}]),
    );
    let schema = json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}});
    bind_ok(&b, "json", json!([{"plugin": "json-schema", "config": {"schema": schema.to_string()}}]));
    let avro = json!({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]});
    bind_ok(&b, "avro", json!([{"plugin": "avro", "config": {"schema": avro.to_string()}}]));

    // rules: good records are written; one bad record refuses the whole request.
    let r = produce(&b, "keyed", json!([{"key": "a", "value": "{\"x\":1}"}, {"key": "b", "value": "[]"}]));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = produce(
        &b,
        "keyed",
        json!([{"key": "a", "value": "{}"}, {"value": "{}"}, {"key": "c", "value": "not json"}]),
    );
    assert_error(&r, 422, "validation_failed");
    assert_eq!(
        violations(&r),
        vec![(1, "key-required".into(), "rejected".into()), (2, "value-not-json".into(), "rejected".into())]
    );
    assert_eq!(high_watermarks(&b, "keyed"), 2, "a refused request writes nothing");

    // json-schema
    assert_eq!(produce(&b, "json", json!([{"value": "{\"id\": 7}"}])).status, 200);
    let r = produce(&b, "json", json!([{"value": "{\"id\": 7}"}, {"value": "{\"id\": \"seven\"}"}]));
    assert_error(&r, 422, "validation_failed");
    assert_eq!(violations(&r).iter().map(|v| v.0).collect::<Vec<_>>(), vec![1]);
    assert_eq!(high_watermarks(&b, "json"), 1);

    // avro: a string "ab" is zigzag length 4 then the bytes.
    let good = BASE64.encode([4u8, b'a', b'b']);
    // A string cut short by the end of the value.
    let bad = BASE64.encode([4u8, b'a']);
    let body = |values: &[&str]| json!({"encoding": "base64", "records": values.iter().map(|v| json!({"value": v})).collect::<Vec<_>>()});
    assert_eq!(b.post("/topics/avro/records", &body(&[&good])).status, 200);
    let r = b.post("/topics/avro/records", &body(&[&good, &bad]));
    assert_error(&r, 422, "validation_failed");
    assert_eq!(high_watermarks(&b, "avro"), 1);

    // A configuration the plugin refuses is refused at bind time, with its reason,
    // as the caller's config error (not a bad plugin).
    let r = bind(&b, "json", json!([{"plugin": "json-schema", "config": {"schema": "{not json"}}]));
    assert_error(&r, 400, "invalid_config");
    assert!(r.body["error"]["message"].as_str().unwrap().contains("json-schema"), "{:?}", r.body);
    // ...and the old binding stays in force.
    assert_error(&produce(&b, "json", json!([{"value": "{}"}])), 422, "validation_failed");
}

#[test]
fn failure_policies_reject_dead_letter_and_warn() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    for t in ["dl", "warned", "dlq"] {
        b.create_topic(t, 1);
    }
    let rules = |policy: &str| {
        let mut v = json!({"plugin": "rules", "config": {"key.required": "true"}, "on_failure": policy});
        if policy == "dead-letter" {
            v["dead_letter_topic"] = json!("dlq");
        }
        json!([v])
    };
    // dead-letter: bad records go to the dead-letter topic with the reason; good ones are written.
    bind_ok(&b, "dl", rules("dead-letter"));
    let r = produce(
        &b,
        "dl",
        json!([{"key": "k", "value": "good"}, {"value": "bad"}, {"key": "k2", "value": "good2"}]),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["offsets"][0]["offset"], 0);
    assert_eq!(r.body["offsets"][2]["offset"], 1);
    assert_eq!(r.body["offsets"][1]["topic"], "dlq");
    assert_eq!(violations(&r), vec![(1, "key-required".into(), "dead-lettered".into())]);
    let written: Vec<Value> = consume_all(&b, "dl").iter().map(|r| r["value"].clone()).collect();
    assert_eq!(written, vec![json!("good"), json!("good2")]);
    let dead = consume_all(&b, "dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["value"], "bad");
    let headers: BTreeMap<String, Value> = dead[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["key"].as_str().unwrap().to_owned(), h["value"].clone()))
        .collect();
    assert_eq!(headers["es.dlq.topic"], "dl");
    assert_eq!(headers["es.dlq.plugin"], "rules");
    assert_eq!(headers["es.dlq.code"], "key-required");
    assert!(headers["es.dlq.reason"].as_str().unwrap().contains("no key"));

    // An idempotent batch is written whole or not at all: no dead-lettering.
    let producer = b.post("/producers", &json!({})).body;
    let r = b.post(
        "/topics/dl/records",
        &json!({"records": [{"key": "k", "value": "x"}, {"value": "y"}],
                "producer": {"id": producer["producer_id"], "epoch": producer["epoch"], "sequence": 0}}),
    );
    assert_error(&r, 422, "validation_failed");

    // warn: everything is written, the findings come back and are counted.
    bind_ok(&b, "warned", rules("warn"));
    let r = produce(&b, "warned", json!([{"value": "a"}, {"key": "k", "value": "b"}]));
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(violations(&r), vec![(0, "key-required".into(), "warned".into())]);
    assert_eq!(high_watermarks(&b, "warned"), 2);
    let described = b.get("/topics/warned/validators").body;
    assert_eq!(described["validators"][0]["warned"], 1, "{described}");

    // Bad bindings are refused with the reason.
    let r = bind(&b, "dl", json!([{"plugin": "rules", "on_failure": "dead-letter"}]));
    assert_error(&r, 400, "invalid_request");
    let r =
        bind(&b, "dl", json!([{"plugin": "rules", "on_failure": "dead-letter", "dead_letter_topic": "dl"}]));
    assert_error(&r, 400, "invalid_request");
    let r = bind(
        &b,
        "dl",
        json!([{"plugin": "rules", "on_failure": "dead-letter", "dead_letter_topic": "nope"}]),
    );
    assert_error(&r, 404, "topic_not_found");
    assert_error(&bind(&b, "dl", json!([{"plugin": "nope"}])), 404, "plugin_not_found");
    assert_error(&bind(&b, "nope", json!([])), 404, "topic_not_found");
    assert_error(&bind(&b, "dl", json!([{"plugin": "rules", "on_failure": "sometimes"}])), 400, "bad_json");
    // A dead-letter topic in use cannot be deleted.
    assert_error(&b.delete("/topics/dlq"), 409, "topic_in_use");
    // Unbinding makes the topic accept anything again.
    bind_ok(&b, "dl", json!([]));
    assert_eq!(produce(&b, "dl", json!([{"value": "no key"}])).status, 200);
    assert_eq!(b.delete("/topics/dlq").status, 204);
}

#[test]
fn hostile_plugins_fail_their_topic_under_its_policy_and_harm_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let r = b.post_bytes("/plugins/hostile", &guest("es_fixture_hostile"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    b.create_topic("plain", 1);
    b.create_topic("dlq", 1);
    // The memory bomb gets a deadline long enough to reach its memory cap.
    let r = b.post_bytes("/plugins/hostile-slow?call_deadline_ms=5000", &guest("es_fixture_hostile"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let cases = [
        ("loop", "hostile", "deadline"),
        ("bomb", "hostile-slow", "memory"),
        ("trap", "hostile", "trapped"),
        ("recurse", "hostile", "trapped"),
        ("garbage", "hostile", "invalid result"),
    ];
    for (mode, plugin, expect) in cases {
        let topic = format!("hostile-{mode}");
        b.create_topic(&topic, 1);
        bind_ok(&b, &topic, json!([{"plugin": plugin, "config": {"mode": mode}}]));
        let r = produce(&b, &topic, json!([{"value": "x"}, {"value": "y"}]));
        assert_error(&r, 503, "plugin_failed");
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(plugin) && message.contains(&topic) && message.contains(expect),
            "{message}"
        );
        assert_eq!(high_watermarks(&b, &topic), 0, "nothing written under reject");

        // Under dead-letter the whole batch goes to the dead-letter topic...
        let dl = json!([{"plugin": plugin, "config": {"mode": mode}, "on_failure": "dead-letter", "dead_letter_topic": "dlq"}]);
        bind_ok(&b, &topic, dl);
        let before = high_watermarks(&b, "dlq");
        let r = produce(&b, &topic, json!([{"value": "x"}]));
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(violations(&r)[0].1, "plugin-failed");
        assert_eq!(high_watermarks(&b, "dlq"), before + 1);
        // ...and under warn it is written.
        bind_ok(&b, &topic, json!([{"plugin": plugin, "config": {"mode": mode}, "on_failure": "warn"}]));
        assert_eq!(produce(&b, &topic, json!([{"value": "x"}])).status, 200);
        assert_eq!(high_watermarks(&b, &topic), 1);

        // The broker and other topics are unaffected.
        let r = produce(&b, "plain", json!([{"value": mode}]));
        assert_eq!(r.status, 200, "after {mode}: {:?}", r.body);
        assert_eq!(b.get("/healthz").status, 200);
    }
    let values: Vec<Value> = consume_all(&b, "plain").iter().map(|r| r["value"].clone()).collect();
    assert_eq!(values, vec![json!("loop"), json!("bomb"), json!("trap"), json!("recurse"), json!("garbage")]);
}

#[test]
fn plugin_management_refuses_bad_components_and_removing_bound_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let r = b.post_bytes("/plugins/x", b"definitely not wasm");
    assert_error(&r, 400, "invalid_plugin");
    assert!(r.body["error"]["message"].as_str().unwrap().contains("not a WebAssembly component"));
    let r = b.post_bytes("/plugins/x", b"\0asm\x01\0\0\0");
    assert_error(&r, 400, "invalid_plugin");
    assert!(r.body["error"]["message"].as_str().unwrap().contains("core module"), "{:?}", r.body);
    let r = b.post_bytes("/plugins/fs", &guest("es_fixture_fs_reader"));
    assert_error(&r, 400, "invalid_plugin");
    assert!(r.body["error"]["message"].as_str().unwrap().contains("filesystem"), "{:?}", r.body);
    assert_error(&b.post_bytes("/plugins/rules", &guest("es_fixture_hostile")), 400, "invalid_request");
    assert_error(&b.post_bytes("/plugins/a%2Fb", &guest("es_fixture_hostile")), 400, "invalid_request");
    assert_error(&b.post_bytes("/plugins/x?bogus=1", &guest("es_fixture_hostile")), 400, "invalid_request");

    let hostile = guest("es_fixture_hostile");
    let r = b.post_bytes("/plugins/mine?config.mode=ok&call_deadline_ms=50", &hostile);
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["world"], "record-validator");
    assert_eq!(r.body["default_config"]["mode"], "ok");
    assert_eq!(r.body["limits"]["call_deadline_ms"], 50);
    // The same component again is a no-op; another one under the name needs replace.
    assert_eq!(b.post_bytes("/plugins/mine?config.mode=ok&call_deadline_ms=50", &hostile).status, 200);
    let rules = es_plugin_host::builtin::RULES;
    assert_error(&b.post_bytes("/plugins/mine", rules), 409, "plugin_already_exists");

    let listed: Vec<String> = b.get("/plugins").body["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, vec!["avro", "json-schema", "mine", "rules", "schema-registry"]);
    b.create_topic("t", 1);
    bind_ok(&b, "t", json!([{"plugin": "mine"}]));
    assert_eq!(b.get("/plugins/mine").body["bound_to"], json!(["t"]));
    assert_error(&b.delete("/plugins/mine"), 409, "plugin_in_use");
    assert_error(&b.delete("/plugins/rules"), 400, "invalid_request");
    assert_error(&b.delete("/plugins/nope"), 404, "plugin_not_found");
    assert_error(&b.get("/plugins/nope"), 404, "plugin_not_found");
    bind_ok(&b, "t", json!([]));
    assert_eq!(b.delete("/plugins/mine").status, 204);
    assert_error(&b.get("/plugins/mine"), 404, "plugin_not_found");
    let blobs = std::fs::read_dir(dir.path().join("plugins/blobs")).unwrap().count();
    assert_eq!(blobs, 0, "a removed plugin's component is deleted");
}

#[test]
fn replacing_a_plugin_swaps_bound_topics_under_load_without_dropping_or_duplicating() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("swap", 3);
    // Two different components that both accept everything.
    let versions = [guest("es_fixture_hostile"), es_plugin_host::builtin::RULES.to_vec()];
    assert_eq!(b.post_bytes("/plugins/gate", &versions[0]).status, 201);
    bind_ok(&b, "swap", json!([{"plugin": "gate"}]));
    let first_sha = b.get("/topics/swap/validators").body["validators"][0]["sha256"].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let client = Client::new(&b.url);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut i = 0;
                while (!stop.load(Ordering::Relaxed) || i < 20) && Instant::now() < deadline {
                    let records: Vec<Value> = (0..10)
                        .map(|j| json!({"key": format!("w{w}-{i}-{j}"), "value": format!("w{w}-{i}-{j}")}))
                        .collect();
                    let r = client
                        .try_post("/topics/swap/records", &json!({ "records": records }))
                        .expect("broker reachable");
                    assert_eq!(r.status, 200, "writer {w} request {i}: {:?}", r.body);
                    sent.extend((0..10).map(|j| format!("w{w}-{i}-{j}")));
                    i += 1;
                }
                sent
            })
        })
        .collect();
    for round in 0..5 {
        std::thread::sleep(Duration::from_millis(50));
        let r = b.post_bytes("/plugins/gate?replace=true", &versions[(round + 1) % 2]);
        assert_eq!(r.status, 200, "replace {round}: {:?}", r.body);
        assert_eq!(r.body["bound_to"], json!(["swap"]));
    }
    stop.store(true, Ordering::Relaxed);
    let mut sent: Vec<String> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let mut written: Vec<String> =
        consume_all(&b, "swap").iter().map(|r| r["value"].as_str().unwrap().to_owned()).collect();
    sent.sort();
    written.sort();
    assert_eq!(written.len(), sent.len(), "every acknowledged record written exactly once");
    assert_eq!(written, sent);
    // Five replacements: on the second version.
    let now = b.get("/topics/swap/validators").body["validators"][0]["sha256"].clone();
    assert_ne!(now, first_sha);
}

#[test]
fn uploads_and_bindings_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    assert_eq!(b.post_bytes("/plugins/mine?config.mode=ok", &guest("es_fixture_hostile")).status, 201);
    b.create_topic("t", 1);
    b.create_topic("dlq", 1);
    bind_ok(
        &b,
        "t",
        json!([{"plugin": "mine"}, {"plugin": "rules", "config": {"key.required": "true"},
                "on_failure": "dead-letter", "dead_letter_topic": "dlq"}]),
    );
    b.kill9();
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/plugins/mine").body["default_config"]["mode"], "ok");
    let bound = b.get("/topics/t/validators").body;
    assert_eq!(bound["validators"][1]["plugin"], "rules", "{bound}");
    assert_eq!(bound["validators"][1]["dead_letter_topic"], "dlq");
    let r = produce(&b, "t", json!([{"value": "no key"}]));
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["offsets"][0]["topic"], "dlq");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_produce_runs_the_validators() {
    use es_core::{ProducerInfo, Record, batch};
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("bin", 1);
    b.create_topic("dlq", 1);
    bind_ok(&b, "bin", json!([{"plugin": "rules", "config": {"key.required": "true"}}]));
    let client = std::sync::Arc::new(
        es_client::Client::connect(&b.binary_addr, es_client::ClientOptions::default()).await.unwrap(),
    );
    let keyed = |k: Option<&str>, v: &str| Record {
        key: k.map(|k| bytes::Bytes::from(k.to_owned())),
        value: Some(bytes::Bytes::from(v.to_owned())),
        ..Record::default()
    };
    let encode =
        |records: &[Record]| bytes::Bytes::from(batch::encode(records, 1_000, ProducerInfo::NONE).unwrap());
    client.produce("bin", 0, encode(&[keyed(Some("a"), "1")])).await.unwrap();
    let e = client.produce("bin", 0, encode(&[keyed(Some("a"), "2"), keyed(None, "3")])).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("ValidationFailed") && text.contains("record 1") && text.contains("key-required"),
        "{text}"
    );
    assert_eq!(high_watermarks(&b, "bin"), 1);

    bind_ok(
        &b,
        "bin",
        json!([{"plugin": "rules", "config": {"key.required": "true"}, "on_failure": "dead-letter", "dead_letter_topic": "dlq"}]),
    );
    let p = client
        .produce("bin", 0, encode(&[keyed(None, "x"), keyed(Some("b"), "4"), keyed(Some("c"), "5")]))
        .await
        .unwrap();
    assert_eq!((p.base_offset, p.last_offset), (1, 2), "offsets cover the records written");
    assert_eq!(high_watermarks(&b, "dlq"), 1);
    // The answer says which record went where, and why.
    let [f] = &p.findings[..] else { panic!("one finding expected: {:?}", p.findings) };
    assert_eq!((f.index, f.plugin.as_str(), f.code.as_str()), (0, "rules", "key-required"));
    let d = f.dead_letter.as_ref().expect("the record was dead-lettered");
    assert_eq!((d.topic.as_str(), d.offset), ("dlq", 0));

    // The batching producer gives each record its own place: the dead-lettered one in
    // the dead-letter topic, the others at the partition's next offsets in order.
    // (Not idempotent: an idempotent batch holding a dead letter is refused whole.)
    let options = es_client::ProducerOptions { idempotent: false, ..es_client::ProducerOptions::default() };
    let producer = es_client::Producer::new(client.clone(), options).await.unwrap();
    let mut sends = Vec::new();
    for r in [keyed(Some("e"), "7"), keyed(None, "lost"), keyed(Some("f"), "8")] {
        sends.push(producer.enqueue("bin", Some(0), r).await.unwrap());
    }
    let mut placed = Vec::new();
    for s in sends {
        placed.push(s.await.unwrap());
    }
    let places: Vec<_> = placed.iter().map(|m| (m.topic.as_str(), m.offset, m.dead_lettered())).collect();
    assert_eq!(places, [("bin", 3, false), ("dlq", 1, true), ("bin", 4, false)]);

    // A gzip batch is checked on its decompressed records.
    let plain = batch::encode(&[keyed(None, "y"), keyed(Some("d"), "6")], 1_000, ProducerInfo::NONE).unwrap();
    let gzip = batch::compress(&plain, batch::Compression::Gzip).unwrap();
    let p = client.produce("bin", 0, bytes::Bytes::from(gzip)).await.unwrap();
    assert_eq!((p.base_offset, p.last_offset), (5, 5));
    assert_eq!(high_watermarks(&b, "dlq"), 3);
    // A malformed batch is refused as one, before any plugin sees it, and nothing
    // is written anywhere.
    let mut bad = batch::encode(&[keyed(None, "z")], 1_000, ProducerInfo::NONE).unwrap();
    let last_byte = bad.len() - 1;
    bad[last_byte] ^= 0xff;
    let e = client.produce("bin", 0, bytes::Bytes::from(bad)).await.unwrap_err();
    assert_eq!(e.code(), Some(es_protocol::ErrorCode::InvalidBatch), "{e}");
    assert_eq!((high_watermarks(&b, "bin"), high_watermarks(&b, "dlq")), (6, 3));
}

#[test]
fn cli_manages_plugins_and_binds_validators() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let es = |args: &[&str]| {
        let out = Command::new(es_bin()).args(args).env("ES_BROKER", &b.url).output().expect("running es");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let wasm = dir.path().join("mine.wasm");
    std::fs::write(&wasm, guest("es_fixture_hostile")).unwrap();
    let (ok, out) = es(&["plugin", "add", wasm.to_str().unwrap(), "--name", "mine", "--config", "mode=ok"]);
    assert!(ok, "{out}");
    assert!(out.contains("stored plugin mine"), "{out}");
    let (ok, out) = es(&["plugin", "list"]);
    assert!(ok && out.contains("mine") && out.contains("built-in"), "{out}");
    b.create_topic("orders", 1);
    let schema = dir.path().join("order.json");
    std::fs::write(&schema, r#"{"type": "object", "required": ["id"]}"#).unwrap();
    let schema_arg = format!("schema=@{}", schema.display());
    let (ok, out) =
        es(&["topic", "alter", "orders", "--validator", "json-schema", "--validator-config", &schema_arg]);
    assert!(ok, "{out}");
    assert!(out.contains("json-schema"), "{out}");
    let (ok, out) = es(&["produce", "--topic", "orders", "--value", "{\"id\": 1}"]);
    assert!(ok, "{out}");
    let (ok, out) = es(&["produce", "--topic", "orders", "--value", "{}"]);
    assert!(!ok && out.contains("validation_failed"), "{out}");
    let (ok, out) = es(&["plugin", "describe", "json-schema"]);
    assert!(ok && out.contains("orders"), "{out}");
    let (ok, out) = es(&["topic", "alter", "orders", "--no-validators"]);
    assert!(ok && out.contains("no validators"), "{out}");
    let (ok, out) = es(&["plugin", "remove", "mine"]);
    assert!(ok, "{out}");
}

/// Confluent's wire format: magic byte 0, the schema id, the payload.
fn framed(id: u64, payload: &[u8]) -> String {
    let mut bytes = vec![0u8];
    bytes.extend_from_slice(&(id as u32).to_be_bytes());
    bytes.extend_from_slice(payload);
    BASE64.encode(bytes)
}

#[test]
fn the_schema_registry_validator_enforces_registered_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("users", 2);
    let register = |subject: &str, schema: Value| {
        let r = b.post(&format!("/registry/subjects/{subject}/versions"), &schema);
        assert_eq!(r.status, 200, "registering under {subject}: {:?}", r.body);
        r.body["id"].as_u64().unwrap()
    };
    let v1 = json!({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]});
    let id1 = register("users-value", json!({"schema": v1.to_string()}));
    let other = register("other-value", json!({"schema": "{\"type\": \"string\"}"}));
    bind_ok(&b, "users", json!([{"plugin": "schema-registry"}]));
    let send = |values: &[String]| {
        let records: Vec<Value> = values.iter().map(|v| json!({"value": v})).collect();
        b.post("/topics/users/records", &json!({"encoding": "base64", "records": records}))
    };
    // "ab" as an Avro string: zigzag length 4, then the bytes.
    assert_eq!(send(&[framed(id1, &[4, b'a', b'b'])]).status, 200);
    let r = send(&[
        framed(id1, &[4, b'a', b'b']),
        framed(other, &[2, b'x']),
        BASE64.encode(b"plain text"),
        framed(id1, &[4, b'a']),
    ]);
    assert_error(&r, 422, "validation_failed");
    let codes: Vec<String> = violations(&r).into_iter().map(|(_, code, _)| code).collect();
    assert_eq!(codes, vec!["schema-not-allowed", "wire-format", "avro-decode"], "{:?}", r.body);
    assert_eq!(high_watermarks(&b, "users"), 1);

    // A new version is accepted from the next produce on, without rebinding.
    let v2 = json!({"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]});
    let id2 = register("users-value", json!({"schema": v2.to_string()}));
    assert_ne!(id1, id2);
    assert_eq!(send(&[framed(id2, &[4, b'a', b'b', 42])]).status, 200);
    // Unknown binding keys are refused at bind time.
    let r = bind(&b, "users", json!([{"plugin": "schema-registry", "config": {"nope": "1"}}]));
    assert_error(&r, 400, "invalid_config");
}

#[test]
fn schema_compat_checkers_can_be_uploaded_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let r = b.post_bytes("/plugins/my-avro", es_plugin_host::builtin::AVRO_COMPAT);
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["world"], "schema-compat");
    assert_eq!(r.body["supports"], json!(["AVRO"]));
    // A checker cannot be bound to a topic as a validator.
    b.create_topic("t", 1);
    assert_error(&bind(&b, "t", json!([{"plugin": "my-avro"}])), 400, "invalid_request");
    // The registry judges AVRO with it, and again with the built-in once it is removed.
    let schema = |fields: Value| json!({"schema": json!({"type": "record", "name": "R", "fields": fields}).to_string()});
    let register = |body: &Value| b.post("/registry/subjects/r-value/versions", body);
    assert_eq!(register(&schema(json!([{"name": "a", "type": "int"}]))).status, 200);
    let incompatible = schema(json!([{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]));
    assert_eq!(register(&incompatible).status, 409, "a new field without a default breaks BACKWARD");
    assert_eq!(b.delete("/plugins/my-avro").status, 204);
    assert_eq!(register(&incompatible).status, 409);
    let fine = schema(json!([{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1}]));
    assert_eq!(register(&fine).status, 200);
}

#[test]
fn shadow_validators_run_and_count_but_never_enforce() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("trial", 1);
    let r = b.post_bytes("/plugins/hostile", &guest("es_fixture_hostile"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    // An enforcing validator next to a shadow one: only the first decides.
    bind_ok(
        &b,
        "trial",
        json!([
            {"plugin": "rules", "config": {"value.max.bytes": "10"}},
            {"plugin": "rules", "config": {"key.required": "true"}, "mode": "shadow"},
            {"plugin": "hostile", "config": {"mode": "trap"}, "mode": "shadow"},
        ]),
    );
    let described = b.get("/topics/trial/validators").body;
    let modes: Vec<Value> =
        described["validators"].as_array().unwrap().iter().map(|v| v["mode"].clone()).collect();
    assert_eq!(modes, vec![Value::Null, json!("shadow"), json!("shadow")], "{described}");

    // Unkeyed records would be refused by the shadow binding, and the trapping
    // shadow plugin fails every batch: both are only counted.
    let r = produce(&b, "trial", json!([{"value": "a"}, {"value": "b"}, {"key": "k", "value": "c"}]));
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(violations(&r).is_empty(), "shadow verdicts are not reported as findings: {:?}", r.body);
    assert_eq!(high_watermarks(&b, "trial"), 3);
    // The enforcing binding still refuses.
    assert_error(
        &produce(&b, "trial", json!([{"key": "k", "value": "far too long a value"}])),
        422,
        "validation_failed",
    );

    let described = b.get("/topics/trial/validators").body;
    let v = &described["validators"];
    assert_eq!((v[1]["batches"].as_u64(), v[1]["rejected"].as_u64()), (Some(2), Some(2)), "{described}");
    assert_eq!(v[2]["plugin_failures"], 2, "{described}");
    assert_eq!(v[0]["rejected"], 1, "{described}");

    // The mode survives a restart, and the CLI shows it.
    drop(b);
    let b = Broker::start(dir.path());
    let out =
        Command::new(es_bin()).args(["--broker", &b.url, "topic", "validators", "trial"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("MODE") && text.matches("shadow").count() == 2, "{text}");
    let r = produce(&b, "trial", json!([{"value": "d"}]));
    assert_eq!(r.status, 200, "{:?}", r.body);
}
