//! Black-box quickstart against the real es-broker: topics, produce, consume,
//! offsets, partitioning, encodings, long-poll, health and the OpenAPI document.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use es_tests::broker::{Broker, Client};
use serde_json::json;

#[test]
fn quickstart_create_produce_consume_delete() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/healthz").status, 200);
    assert_eq!(b.get("/readyz").status, 200);
    // A single node is no cluster member.
    let cluster = b.get("/cluster");
    assert_eq!((cluster.status, &cluster.body["cluster"]), (200, &json!(false)), "{:?}", cluster.body);
    b.create_topic("orders", 2);
    let list = b.get("/topics");
    assert_eq!(list.body["topics"][0]["name"], "orders");
    assert_eq!(list.body["topics"][0]["partition_count"], 2);

    let r = b.post(
        "/topics/orders/records",
        &json!({"records": [
            {"key": "k1", "value": "hello", "headers": [{"key": "h", "value": "v"}]},
            {"value": "to p0", "partition": 0, "timestamp": 1000},
        ]}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let offsets = r.body["offsets"].as_array().unwrap();
    let p = offsets[0]["partition"].as_u64().unwrap();
    assert_eq!(offsets[1]["partition"], 0);

    let c = b.get(&format!("/topics/orders/partitions/{p}/records?offset=earliest"));
    assert_eq!(c.status, 200);
    let rec = c.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "k1")
        .expect("keyed record is in its partition")
        .clone();
    assert_eq!(rec["value"], "hello");
    assert_eq!(rec["encoding"], "utf8");
    assert_eq!(rec["headers"][0], json!({"key": "h", "value": "v"}));

    let p0_offset = offsets[1]["offset"].as_u64().unwrap();
    let c0 = b.get(&format!("/topics/orders/partitions/0/records?offset={p0_offset}&max_records=1"));
    assert_eq!(c0.body["records"][0]["timestamp"], 1000);
    assert_eq!(c0.body["next_offset"], p0_offset + 1);

    let d = b.get("/topics/orders");
    assert_eq!(d.status, 200);
    let hw: u64 =
        d.body["partitions"].as_array().unwrap().iter().map(|p| p["high_watermark"].as_u64().unwrap()).sum();
    assert_eq!(hw, 2);

    let o = b.get("/topics/orders/offsets?timestamp=500");
    assert_eq!(o.body["partitions"][0]["earliest"], 0);
    assert_eq!(o.body["partitions"][0]["timestamp_offset"], 0);

    assert_eq!(b.delete("/topics/orders").status, 204);
    assert_eq!(b.get("/topics/orders").status, 404);
    assert_eq!(b.get("/topics").body["topics"], json!([]));
    // The name is free again, and the new topic starts empty.
    b.create_topic("orders", 1);
    let c = b.get("/topics/orders/partitions/0/records");
    assert_eq!(c.body["records"], json!([]));
    assert_eq!(c.body["high_watermark"], 0);
}

#[test]
fn keys_follow_kafkas_murmur2_and_unkeyed_batches_stick() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("keys", 7);
    // Kafka's UtilsTest: murmur2("21") = -973932308.
    let expected = ((-973_932_308_i32 as u32) & 0x7fff_ffff) % 7;
    let r = b.post(
        "/topics/keys/records",
        &json!({"records": [{"key": "21", "value": "a"}, {"key": "21", "value": "b"}]}),
    );
    for o in r.body["offsets"].as_array().unwrap() {
        assert_eq!(o["partition"], expected);
    }
    let records: Vec<_> = (0..20).map(|i| json!({"value": format!("v{i}")})).collect();
    let r = b.post("/topics/keys/records", &json!({ "records": records }));
    let offsets = r.body["offsets"].as_array().unwrap();
    assert!(offsets.iter().all(|o| o["partition"] == offsets[0]["partition"]));
    let offs: Vec<u64> = offsets.iter().map(|o| o["offset"].as_u64().unwrap()).collect();
    assert!(offs.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn binary_values_round_trip_as_base64() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("bin", 1);
    let raw = [0xff_u8, 0x00, 0xfe, b'a'];
    let r = b.post(
        "/topics/bin/records",
        &json!({"encoding": "base64", "records": [
            {"key": B64.encode(b"k"), "value": B64.encode(raw)},
            {"value": B64.encode("plain")},
            {"key": "bnVsbA==", "value": null},
        ]}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    let c = b.get("/topics/bin/partitions/0/records?offset=0");
    let recs = c.body["records"].as_array().unwrap();
    // Not valid UTF-8: comes back base64 even though utf8 is the default.
    assert_eq!(recs[0]["encoding"], "base64");
    assert_eq!(B64.decode(recs[0]["value"].as_str().unwrap()).unwrap(), raw);
    assert_eq!(B64.decode(recs[0]["key"].as_str().unwrap()).unwrap(), b"k");
    assert_eq!(recs[1]["encoding"], "utf8");
    assert_eq!(recs[1]["value"], "plain");
    assert_eq!(recs[2]["value"], serde_json::Value::Null);
    let c = b.get("/topics/bin/partitions/0/records?offset=1&encoding=base64");
    assert_eq!(c.body["records"][0]["value"], B64.encode("plain"));
}

#[test]
fn consume_positions_limits_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("t", 1);
    for i in 0..10 {
        let r = b.post(
            "/topics/t/records",
            &json!({"records": [{"value": format!("v{i}"), "timestamp": 1000 + i * 100}]}),
        );
        assert_eq!(r.status, 200);
    }
    let c = b.get("/topics/t/partitions/0/records?offset=3&max_records=4");
    let offs: Vec<u64> =
        c.body["records"].as_array().unwrap().iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert_eq!(offs, vec![3, 4, 5, 6]);
    assert_eq!(c.body["next_offset"], 7);
    assert_eq!(c.body["high_watermark"], 10);
    let latest = b.get("/topics/t/partitions/0/records?offset=latest");
    assert_eq!(latest.body["records"], json!([]));
    assert_eq!(latest.body["next_offset"], 10);
    let by_time = b.get("/topics/t/partitions/0/records?timestamp=1450&max_records=1");
    assert_eq!(by_time.body["records"][0]["offset"], 5);
    // A small byte budget still returns at least one whole batch.
    let small = b.get("/topics/t/partitions/0/records?offset=0&max_bytes=1");
    assert_eq!(small.body["records"].as_array().unwrap().len(), 1);
}

#[test]
fn long_poll_wakes_when_data_arrives_and_times_out_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("lp", 1);

    let started = Instant::now();
    let empty = b.get("/topics/lp/partitions/0/records?offset=0&wait_ms=300");
    let waited = started.elapsed();
    assert_eq!(empty.body["records"], json!([]));
    assert!(waited >= Duration::from_millis(250), "returned after {waited:?}");

    let client = Client::new(&b.url);
    let poller = std::thread::spawn(move || {
        let t = Instant::now();
        let r = client.get("/topics/lp/partitions/0/records?offset=0&wait_ms=20000");
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let r = b.post("/topics/lp/records", &json!({"records": [{"value": "wake"}]}));
    assert_eq!(r.status, 200);
    let (resp, elapsed) = poller.join().unwrap();
    assert_eq!(resp.body["records"][0]["value"], "wake");
    assert!(
        elapsed < Duration::from_secs(5),
        "long poll took {elapsed:?}; it should return as soon as data arrives"
    );
}

#[test]
fn alter_config_and_openapi_document() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let r = b.post("/topics", &json!({"name": "cfg", "partitions": 1, "config": {"retention.ms": "60000"}}));
    assert_eq!(r.status, 201);
    assert_eq!(r.body["config"]["retention.ms"], 60000);
    let r = b.patch(
        "/topics/cfg/config",
        &json!({"config": {"segment.bytes": 1048576, "cleanup.policy": "compact"}}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["config"]["segment.bytes"], 1048576);
    assert_eq!(r.body["config"]["retention.ms"], 60000);
    let g = b.get("/topics/cfg/config");
    assert_eq!(g.body["config"]["cleanup.policy"], "compact");

    let doc = b.get("/openapi.json");
    assert_eq!(doc.status, 200);
    let paths = doc.body["paths"].as_object().unwrap();
    for p in [
        "/healthz",
        "/readyz",
        "/openapi.json",
        "/topics",
        "/topics/{topic}",
        "/topics/{topic}/config",
        "/topics/{topic}/records",
        "/topics/{topic}/offsets",
        "/topics/{topic}/partitions/{partition}/records",
    ] {
        assert!(paths.contains_key(p), "openapi.json lacks {p}");
    }
}
