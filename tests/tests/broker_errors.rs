//! Black-box error cases against the real es-broker: each failure is a typed JSON
//! error with the right status, malformed requests never get a 5xx, and a refused
//! produce writes nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, Resp, broker_bin};
use serde_json::json;

fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "expected {status} {code}, got {:?}", r.body);
    assert_eq!(r.code(), code, "{:?}", r.body);
    let message = r.body["error"]["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "error without a message: {:?}", r.body);
}

fn high_watermark(b: &Broker, topic: &str, partition: u32) -> u64 {
    b.get(&format!("/topics/{topic}")).body["partitions"][partition as usize]["high_watermark"]
        .as_u64()
        .unwrap()
}

#[test]
fn topic_admin_errors() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("t", 1);
    assert_error(&b.post("/topics", &json!({"name": "t", "partitions": 1})), 409, "topic_already_exists");
    for name in ["", "a/b", "..", "sp ace", &"x".repeat(250)] {
        assert_error(&b.post("/topics", &json!({"name": name})), 400, "invalid_topic_name");
    }
    assert_error(&b.post("/topics", &json!({"name": "z", "partitions": 0})), 400, "invalid_request");
    assert_error(&b.post("/topics", &json!({"name": "z", "config": {"nope": 1}})), 400, "invalid_config");
    assert_error(
        &b.post("/topics", &json!({"name": "z", "config": {"segment.bytes": 10}})),
        400,
        "invalid_config",
    );
    assert_error(
        &b.post("/topics", &json!({"name": "z", "config": {"cold.tier.enable": true}})),
        400,
        "invalid_config",
    );
    // A refused create leaves no trace.
    assert_eq!(b.get("/topics").body["topics"].as_array().unwrap().len(), 1);
    assert_error(&b.get("/topics/missing"), 404, "topic_not_found");
    assert_error(&b.delete("/topics/missing"), 404, "topic_not_found");
    assert_error(&b.patch("/topics/missing/config", &json!({"config": {}})), 404, "topic_not_found");
    assert_error(
        &b.patch("/topics/t/config", &json!({"config": {"retention.ms": "soon"}})),
        400,
        "invalid_config",
    );
    assert_eq!(b.get("/topics/t/config").body["config"]["retention.ms"], 604800000);
    assert_error(
        &b.patch("/topics/t/config", &json!({"config": {"compression.type": "brotli"}})),
        400,
        "invalid_config",
    );
    // A single node has no other node to hand a leadership to.
    assert_error(&b.post("/cluster/partitions/t/0/leader", &json!({"to": 2})), 400, "invalid_request");
    assert_error(&b.post("/cluster/partitions/t/0/leader", &json!({"too": 2})), 400, "bad_json");
}

#[test]
fn produce_and_consume_errors() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("t", 2);
    let one = json!({"records": [{"value": "v"}]});
    assert_error(&b.post("/topics/missing/records", &one), 404, "topic_not_found");
    assert_error(&b.post_raw("/topics/t/records", "{not json"), 400, "bad_json");
    assert_error(&b.post_raw("/topics/t/records", ""), 400, "bad_json");
    assert_error(&b.post("/topics/t/records", &json!({"records": "x"})), 400, "bad_json");
    assert_error(&b.post("/topics/t/records", &json!({"records": []})), 400, "invalid_request");
    assert_error(
        &b.post("/topics/t/records", &json!({"encoding": "base64", "records": [{"value": "***"}]})),
        400,
        "bad_encoding",
    );
    assert_error(
        &b.post("/topics/t/records", &json!({"encoding": "rot13", "records": [{"value": "v"}]})),
        400,
        "bad_json",
    );
    assert_error(
        &b.post("/topics/t/records", &json!({"records": [{"value": "v", "partition": 2}]})),
        404,
        "partition_not_found",
    );
    assert_error(
        &b.post("/topics/t/records", &json!({"records": [{"value": "v", "timestamp": -5}]})),
        400,
        "invalid_request",
    );
    // A bad record anywhere in the batch refuses the whole batch.
    assert_error(
        &b.post(
            "/topics/t/records",
            &json!({"encoding": "base64", "records": [{"value": "dg==", "partition": 0}, {"value": "%%"}]}),
        ),
        400,
        "bad_encoding",
    );
    assert_eq!(high_watermark(&b, "t", 0), 0);

    assert_error(&b.get("/topics/missing/partitions/0/records"), 404, "topic_not_found");
    assert_error(&b.get("/topics/t/partitions/9/records"), 404, "partition_not_found");
    assert_error(&b.get("/topics/t/partitions/x/records"), 400, "invalid_request");
    assert_error(&b.get("/topics/t/partitions/0/records?offset=5"), 416, "offset_out_of_range");
    assert_error(&b.get("/topics/t/partitions/0/records?offset=soon"), 400, "invalid_request");
    assert_error(&b.get("/topics/t/partitions/0/records?max_records=0"), 400, "invalid_request");
    assert_error(&b.get("/topics/t/partitions/0/records?wait_ms=9999999"), 400, "invalid_request");
    assert_error(&b.get("/topics/t/partitions/0/records?offset=0&timestamp=1"), 400, "invalid_request");
    assert_error(&b.get("/topics/t/partitions/0/records?bogus=1"), 400, "invalid_request");
    assert_error(&b.get("/topics/missing/offsets"), 404, "topic_not_found");
    assert_error(&b.get("/no/such/route"), 404, "not_found");
    assert_error(&b.delete("/topics"), 405, "method_not_allowed");
}

#[test]
fn oversized_batches_and_records_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_with(dir.path(), &["--max-request-bytes", "65536"]);
    let r =
        b.post("/topics", &json!({"name": "small", "partitions": 2, "config": {"max.message.bytes": 4096}}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let big = "x".repeat(5000);
    assert_error(
        &b.post("/topics/small/records", &json!({"records": [{"value": big}]})),
        413,
        "record_too_large",
    );
    let records: Vec<_> = (0..10).map(|_| json!({"value": "y".repeat(1000), "partition": 1})).collect();
    let mut with_small = vec![json!({"value": "fits", "partition": 0})];
    with_small.extend(records);
    assert_error(&b.post("/topics/small/records", &json!({ "records": with_small })), 413, "batch_too_large");
    // Nothing was written to either partition.
    assert_eq!(high_watermark(&b, "small", 0), 0);
    assert_eq!(high_watermark(&b, "small", 1), 0);
    let huge = "z".repeat(100_000);
    assert_error(
        &b.post_raw("/topics/small/records", &json!({"records": [{"value": huge}]}).to_string()),
        413,
        "request_too_large",
    );
    assert_eq!(b.post("/topics/small/records", &json!({"records": [{"value": "ok"}]})).status, 200);
}

#[test]
fn malformed_requests_never_get_a_server_error() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("t", 1);
    let bodies = [
        "",
        "null",
        "[]",
        "0",
        "\"s\"",
        "{}",
        "{\"records\": null}",
        "{\"records\": [null]}",
        "{\"records\": [{\"key\": 5}]}",
        "{\"records\": [{\"headers\": {}}]}",
        "{\"records\": [{\"headers\": [{\"value\": \"v\"}]}]}",
        "{\"name\": 5}",
        "{\"config\": []}",
        "\u{0}\u{1}",
        "{\"records\": [{\"partition\": -1}]}",
        "{\"records\": [{\"partition\": 99999999999}]}",
    ];
    let paths = ["/topics", "/topics/t/records", "/topics/t/config"];
    for path in paths {
        for body in bodies {
            let r = if path.ends_with("config") {
                b.patch(path, &serde_json::from_str(body).unwrap_or(json!(body)))
            } else {
                b.post_raw(path, body)
            };
            assert!(r.status < 500, "{path} {body:?} got {} {:?}", r.status, r.body);
            assert!(!r.code().is_empty(), "{path} {body:?}: {:?}", r.body);
        }
    }
    for query in [
        "offset=-1",
        "offset=18446744073709551616",
        "max_bytes=0",
        "max_bytes=x",
        "timestamp=x",
        "encoding=hex",
        "wait_ms=-1",
        "offset=%ff",
    ] {
        let r = b.get(&format!("/topics/t/partitions/0/records?{query}"));
        assert!((400..500).contains(&r.status), "{query} got {} {:?}", r.status, r.body);
        assert!(!r.code().is_empty());
    }
    for path in ["/topics/%ff", "/topics/t/partitions/-1/records", "/topics/t/partitions/99999999999/records"]
    {
        let r = b.get(path);
        assert!((400..500).contains(&r.status), "{path} got {} {:?}", r.status, r.body);
    }
    assert_eq!(b.get("/healthz").status, 200);
}

/// Runs es-broker with `args` and expects it to exit by itself within 20 s.
fn run_to_exit(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = Command::new(broker_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("es-broker {args:?} kept running; stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn non_loopback_bind_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_to_exit(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--bind".as_ref(),
        "0.0.0.0:0".as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("authentication"), "stderr: {stderr}");
    assert!(stderr.contains("loopback"), "stderr: {stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
}

#[test]
fn a_second_broker_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Broker::start(dir.path());
    let out = run_to_exit(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--bind".as_ref(),
        "127.0.0.1:0".as_ref(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already using the data directory"), "stderr: {stderr}");
}

#[test]
fn over_the_in_flight_limit_requests_get_503_and_probes_still_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_with(dir.path(), &["--max-in-flight-requests", "1"]);
    b.create_topic("busy", 1);
    let client = es_tests::broker::Client::new(&b.url);
    // A long poll holds the only slot. Its own request can meet the slot taken by one
    // of the probes below, so it retries until admitted.
    let poller = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = client.get("/topics/busy/partitions/0/records?wait_ms=3000");
            if r.status != 503 || Instant::now() > deadline {
                return r;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let r = b.get("/topics");
        if r.status == 503 {
            break r;
        }
        assert!(Instant::now() < deadline, "never refused: {:?}", r.body);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_error(&refused, 503, "overloaded");
    assert_eq!(b.get("/healthz").status, 200);
    assert_eq!(poller.join().unwrap().status, 200);
    assert_eq!(b.get("/topics").status, 200);
}
