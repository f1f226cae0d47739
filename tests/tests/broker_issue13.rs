//! Issue 13's broker-side items against the real es-broker: no false warning at
//! restart for a `schema-registry` binding (and enforcement still holds), a bad
//! validator config is a config error naming the key, offsets by timestamp with
//! Kafka's meanings over HTTP and binary, unknown producer ids refused on both
//! protocols, and the 422 message in proper English.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use es_client::{Client, ClientOptions};
use es_core::batch;
use es_core::{ProducerInfo, Record};
use es_protocol::{ErrorCode, OffsetSpec};
use es_tests::broker::{Broker, Resp};
use serde_json::{Value, json};

const ORDER: &str = r#"{"type": "object", "required": ["amount"]}"#;

/// Confluent's framing (magic 0, the schema id) of a JSON payload, base64.
fn framed(id: u64, payload: &str) -> String {
    let mut out = vec![0u8];
    out.extend_from_slice(&(id as u32).to_be_bytes());
    out.extend_from_slice(payload.as_bytes());
    BASE64.encode(out)
}

fn send_framed(b: &Broker, topic: &str, values: &[String]) -> Resp {
    let records: Vec<Value> = values.iter().map(|v| json!({"value": v})).collect();
    b.post(&format!("/topics/{topic}/records"), &json!({"encoding": "base64", "records": records}))
}

#[test]
fn a_schema_registry_binding_restarts_without_a_false_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("payments", 1);
    let r =
        b.post("/registry/subjects/payments-value/versions", &json!({"schemaType": "JSON", "schema": ORDER}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["id"].as_u64().unwrap();
    let r = b.put("/topics/payments/validators", &json!({"validators": [{"plugin": "schema-registry"}]}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    b.signal("TERM");
    b.wait_exit(std::time::Duration::from_secs(20));

    let b = Broker::start(dir.path());
    // Recovery lines come before the summary line.
    let stderr = b.wait_for_stderr("es-broker: recovered");
    assert!(!stderr.contains("cannot be loaded"), "a false warning at restart:\n{stderr}");
    assert!(!stderr.contains("not open yet"), "a false warning at restart:\n{stderr}");
    let good = send_framed(&b, "payments", &[framed(id, r#"{"amount": 3}"#)]);
    assert_eq!(good.status, 200, "{:?}", good.body);
    let bad = send_framed(&b, "payments", &[framed(id, r#"{"note": "no amount"}"#)]);
    assert_eq!((bad.status, bad.code()), (422, "validation_failed"), "{:?}", bad.body);
}

#[test]
fn a_bad_validator_config_is_a_config_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("pv", 1);
    let r = b.put(
        "/topics/pv/validators",
        &json!({"validators": [{"plugin": "rules", "config": {"value.max": "10"}}]}),
    );
    assert_eq!((r.status, r.code()), (400, "invalid_config"), "{:?}", r.body);
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("value.max"), "the message names the key: {message}");
}

#[test]
fn validation_failures_are_counted_in_english() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("strict", 1);
    let rules = json!({"validators": [{"plugin": "rules", "config": {"key.required": "true"}}]});
    assert_eq!(b.put("/topics/strict/validators", &rules).status, 200);
    let one = b.post("/topics/strict/records", &json!({"records": [{"value": "a"}]}));
    let message = one.body["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("1 record failed validation"), "{message}");
    assert!(!message.contains("(s)"), "{message}");
    let two = b.post("/topics/strict/records", &json!({"records": [{"value": "a"}, {"value": "b"}]}));
    let message = two.body["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("2 records failed validation"), "{message}");
}

/// A topic with three records at timestamps 1000, 2000, 3000 on partition 0.
fn timed_topic(b: &Broker) {
    b.create_topic("timed", 1);
    let records: Vec<Value> =
        [1000, 2000, 3000].iter().map(|t| json!({"value": "v", "partition": 0, "timestamp": t})).collect();
    let r = b.post("/topics/timed/records", &json!({ "records": records }));
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[test]
fn offsets_by_timestamp_take_kafkas_meanings_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    timed_topic(&b);
    let at = |ts: &str| b.get(&format!("/topics/timed/offsets?timestamp={ts}"));
    assert_eq!(at("2000").body["partitions"][0]["timestamp_offset"], 1);
    let past = at("99999999999999");
    assert_eq!(past.status, 200);
    let p = past.body["partitions"][0].as_object().unwrap();
    assert_eq!(p.get("timestamp_offset"), Some(&Value::Null), "null, not the high watermark: {p:?}");
    assert_eq!(at("-1").body["partitions"][0]["timestamp_offset"], 3, "-1 is latest");
    assert_eq!(at("-2").body["partitions"][0]["timestamp_offset"], 0, "-2 is earliest");
    assert_eq!(at("-3").body["partitions"][0]["timestamp_offset"], 2, "-3 holds the greatest timestamp");
    let bad = at("-4");
    assert_eq!((bad.status, bad.code()), (400, "invalid_request"), "{:?}", bad.body);
    let plain = b.get("/topics/timed/offsets").body;
    assert!(plain["partitions"][0].get("timestamp_offset").is_none(), "absent without timestamp: {plain}");

    let read = |ts: &str| b.get(&format!("/topics/timed/partitions/0/records?timestamp={ts}"));
    let latest = read("-1").body;
    assert_eq!((latest["records"].as_array().unwrap().len(), &latest["next_offset"]), (0, &json!(3)));
    assert_eq!(read("-2").body["records"].as_array().unwrap().len(), 3, "-2 reads from the start");
    assert_eq!(read("2500").body["records"][0]["offset"], 2);
    assert_eq!(read("-7").status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_by_timestamp_take_kafkas_meanings_over_binary() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    timed_topic(&b);
    let c = Client::connect(&b.binary_addr, ClientOptions::default()).await.unwrap();
    let at = |spec| c.list_offsets("timed", 0, spec);
    assert_eq!(at(OffsetSpec::Timestamp(2000)).await.unwrap(), Some(1));
    assert_eq!(at(OffsetSpec::Timestamp(99_999_999_999_999)).await.unwrap(), None);
    assert_eq!(at(OffsetSpec::Timestamp(-1)).await.unwrap(), Some(3), "-1 is latest");
    assert_eq!(at(OffsetSpec::Timestamp(-2)).await.unwrap(), Some(0), "-2 is earliest");
}

fn idempotent(b: &Broker, id: i64, sequence: i64) -> Resp {
    b.post(
        "/topics/idem/records",
        &json!({"records": [{"value": "x", "partition": 0}],
                "producer": {"id": id, "epoch": 0, "sequence": sequence}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_producer_ids_are_refused_on_every_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("idem", 1);
    let r = idempotent(&b, 999, 0);
    assert_eq!((r.status, r.code()), (409, "unknown_producer_id"), "{:?}", r.body);
    let c = Arc::new(Client::connect(&b.binary_addr, ClientOptions::default()).await.unwrap());
    let invented = ProducerInfo { producer_id: 999, producer_epoch: 0, base_sequence: 0 };
    let records = vec![Record::from_value("x".to_string())];
    let batch = Bytes::from(batch::encode(&records, 1_000, invented).unwrap());
    let err = c.produce("idem", 0, batch).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UnknownProducerId));
    assert_eq!(b.get("/topics/idem/offsets").body["partitions"][0]["latest"], 0, "nothing was written");

    // An issued id works, and still does after a restart.
    let id = b.post("/producers", &json!({})).body["producer_id"].as_i64().unwrap();
    assert_eq!(idempotent(&b, id, 0).status, 200);
    drop(c);
    b.kill9();
    let b = Broker::start(dir.path());
    let r = idempotent(&b, id, 1);
    assert_eq!(r.status, 200, "an id issued before the restart is still known: {:?}", r.body);
    // A restart counts its predecessor's whole reserved block as issued (the file
    // keeps only the block's end); an id past it never was.
    let far = id + 100_000;
    assert_eq!(idempotent(&b, far, 0).code(), "unknown_producer_id", "{far} was never issued");
}
