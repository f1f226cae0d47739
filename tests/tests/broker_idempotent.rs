//! Idempotent producers over HTTP against the real es-broker: a retried batch is
//! written once and answered with the original offsets, even across kill -9; gaps
//! and fenced epochs are typed errors.

use es_tests::broker::Broker;
use serde_json::{Value, json};

fn produce(b: &Broker, id: i64, epoch: i64, sequence: i64, values: &[&str]) -> (u16, Value) {
    let records: Vec<Value> = values.iter().map(|v| json!({"value": v, "partition": 0})).collect();
    let body = json!({"records": records, "producer": {"id": id, "epoch": epoch, "sequence": sequence}});
    let r = b.post("/topics/idem/records", &body);
    (r.status, r.body)
}

fn offsets(body: &Value) -> Vec<u64> {
    body["offsets"].as_array().unwrap().iter().map(|o| o["offset"].as_u64().unwrap()).collect()
}

#[test]
fn http_retries_are_written_once_even_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("idem", 2);
    let p = b.post("/producers", &json!({}));
    assert_eq!(p.status, 201, "{:?}", p.body);
    let id = p.body["producer_id"].as_i64().unwrap();
    let epoch = p.body["epoch"].as_i64().unwrap();

    let (status, first) = produce(&b, id, epoch, 0, &["a", "b"]);
    assert_eq!(status, 200, "{first:?}");
    assert_eq!((offsets(&first), first["duplicate"].as_bool()), (vec![0, 1], Some(false)));
    let (status, again) = produce(&b, id, epoch, 0, &["a", "b"]);
    assert_eq!(status, 200);
    assert_eq!((offsets(&again), again["duplicate"].as_bool()), (vec![0, 1], Some(true)));

    let (status, gap) = produce(&b, id, epoch, 5, &["x"]);
    assert_eq!(status, 409);
    assert_eq!(gap["error"]["code"], "out_of_order_sequence");

    let two = json!({"records": [{"value": "x", "partition": 0}, {"value": "y", "partition": 1}],
                     "producer": {"id": id, "epoch": epoch, "sequence": 2}});
    let r = b.post("/topics/idem/records", &two);
    assert_eq!((r.status, r.body["error"]["code"].as_str()), (400, Some("invalid_request")));

    // Acknowledged, then the broker dies before the client hears back; the retry
    // after the restart must not write the batch twice.
    let (status, third) = produce(&b, id, epoch, 2, &["c"]);
    assert_eq!(status, 200);
    b.kill9();
    let b = Broker::start(dir.path());
    let (status, retry) = produce(&b, id, epoch, 2, &["c"]);
    assert_eq!(status, 200, "{retry:?}");
    assert_eq!((offsets(&retry), retry["duplicate"].as_bool()), (offsets(&third), Some(true)));
    let end = b.get("/topics/idem/offsets");
    assert_eq!(end.body["partitions"][0]["latest"], 3, "{:?}", end.body);
    let p2 = b.post("/producers", &json!({}));
    assert_ne!(p2.body["producer_id"].as_i64().unwrap(), id, "ids are never reused after a restart");
}
