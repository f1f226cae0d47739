//! Black-box retention, cold tier and compaction through the real es-broker: the
//! topic config reaches the log, and consumers see the log start move, tiered data
//! still readable, and compacted partitions with offset gaps read correctly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use es_tests::broker::Broker;
use serde_json::{Value, json};

fn fast_housekeeping(dir: &std::path::Path, extra: &[&str]) -> Broker {
    let mut args = vec!["--housekeeping-interval-ms", "50"];
    args.extend_from_slice(extra);
    Broker::start_with(dir, &args)
}

/// Writes `batches` requests of 10 records of about 100 bytes each to partition 0.
fn fill(b: &Broker, topic: &str, batches: usize, key: impl Fn(usize) -> String) {
    for i in 0..batches {
        let records: Vec<Value> = (0..10)
            .map(
                |j| json!({"key": key(i * 10 + j), "value": format!("{:0>100}", i * 10 + j), "partition": 0}),
            )
            .collect();
        let r = b.post(&format!("/topics/{topic}/records"), &json!({ "records": records }));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
}

/// Polls the topic's description until `done` holds for partition 0 (bounded).
fn wait_until(b: &Broker, topic: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = b.get(&format!("/topics/{topic}"));
        if done(&d.body["partitions"][0]) {
            return d.body["partitions"][0].clone();
        }
        assert!(Instant::now() < deadline, "{what} never happened: {:?}", d.body);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_all(b: &Broker, topic: &str, from: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut offset = from.to_owned();
    loop {
        let r = b.get(&format!("/topics/{topic}/partitions/0/records?offset={offset}&max_records=7"));
        assert_eq!(r.status, 200, "{:?}", r.body);
        out.extend(r.body["records"].as_array().unwrap().iter().cloned());
        let next = r.body["next_offset"].as_u64().unwrap();
        if next >= r.body["high_watermark"].as_u64().unwrap() {
            return out;
        }
        offset = next.to_string();
    }
}

#[test]
fn retention_moves_the_log_start_and_old_offsets_are_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let b = fast_housekeeping(dir.path(), &[]);
    let r = b.post("/topics", &json!({"name": "r", "config": {"segment.bytes": 4096, "retention.ms": 1}}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    fill(&b, "r", 20, |i| format!("k{i}"));
    let p = wait_until(&b, "r", "retention of every sealed segment", |p| {
        // Only the active segment stays, so the log start no longer moves.
        p["segment_count"] == 1 && p["log_start_offset"].as_u64() > Some(0)
    });
    let start = p["log_start_offset"].as_u64().unwrap();
    assert_eq!(p["high_watermark"], 200);
    let old = b.get("/topics/r/partitions/0/records?offset=0");
    assert_eq!(old.status, 416, "{:?}", old.body);
    assert_eq!(old.body["error"]["code"], "offset_out_of_range");
    let earliest = b.get("/topics/r/partitions/0/records?offset=earliest");
    assert_eq!(earliest.body["records"][0]["offset"].as_u64().unwrap(), start);
    let offsets = b.get("/topics/r/offsets");
    assert_eq!(offsets.body["partitions"][0]["earliest"].as_u64().unwrap(), start);
}

#[test]
fn the_cold_tier_keeps_expired_segments_readable() {
    let dir = tempfile::tempdir().unwrap();
    let cold = tempfile::tempdir().unwrap();
    let cold_arg = cold.path().to_str().unwrap().to_owned();
    let b = fast_housekeeping(dir.path(), &["--cold-dir", &cold_arg]);
    let r = b.post(
        "/topics",
        &json!({"name": "c", "config": {"segment.bytes": 4096, "retention.ms": 1, "cold.tier.enable": true}}),
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
    fill(&b, "c", 20, |i| format!("k{i}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let tiered = |p: &std::path::Path| {
        std::fs::read_dir(p.join("c-0"))
            .map(|d| d.filter_map(Result::ok).any(|e| e.path().extension().is_some_and(|x| x == "log")))
            .unwrap_or(false)
    };
    while !tiered(cold.path()) {
        assert!(Instant::now() < deadline, "no segment reached the cold tier");
        std::thread::sleep(Duration::from_millis(50));
    }
    let all = read_all(&b, "c", "0");
    let offsets: Vec<u64> = all.iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<u64>>());
}

#[test]
fn compacted_partitions_keep_the_newest_value_per_key_and_read_across_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let b = fast_housekeeping(dir.path(), &[]);
    let r = b.post(
        "/topics",
        &json!({"name": "k", "config": {"segment.bytes": 4096, "cleanup.policy": "compact"}}),
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
    // 300 records over 5 keys: compaction of sealed segments must drop most of them.
    fill(&b, "k", 30, |i| format!("key{}", i % 5));
    let deadline = Instant::now() + Duration::from_secs(20);
    let records = loop {
        let records = read_all(&b, "k", "earliest");
        if records.len() < 100 {
            break records;
        }
        assert!(Instant::now() < deadline, "compaction never ran: {} records", records.len());
        std::thread::sleep(Duration::from_millis(100));
    };
    let offsets: Vec<u64> = records.iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets out of order: {offsets:?}");
    let mut newest = BTreeMap::new();
    for r in &records {
        newest.insert(r["key"].as_str().unwrap().to_owned(), r["value"].as_str().unwrap().to_owned());
    }
    for k in 0..5 {
        let last = 290 + 5 + k;
        assert_eq!(newest[&format!("key{k}")], format!("{last:0>100}"), "key{k}");
    }
}
