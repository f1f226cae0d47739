//! Black-box tests of the `es` CLI against the real es-broker: topic commands,
//! produce from flags, files and stdin (text, base64, other delimiters), consume
//! formats, groups, offsets, validators' outcomes, and failures that say what to
//! do and exit non-zero.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use es_tests::broker::{Broker, es_bin};
use serde_json::Value;

/// Runs `es` against `url` with optional stdin; bounded in time.
fn es(url: &str, args: &[&str], stdin: Option<&str>) -> Output {
    es_bytes(url, args, stdin.map(str::as_bytes))
}

/// Runs `es` with stdin as bytes; bounded in time.
fn es_bytes(url: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(es_bin());
    cmd.env("ES_BROKER", url).args(args);
    es_tests::peers::output(&mut cmd, stdin, Duration::from_secs(30), &format!("es {args:?}"))
}

fn ok(url: &str, args: &[&str], stdin: Option<&str>) -> String {
    let out = es(url, args, stdin);
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_quickstart() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    let out = ok(
        u,
        &["topic", "create", "--name", "orders", "--partitions", "2", "--config", "retention.ms=60000"],
        None,
    );
    assert!(out.contains("created topic orders"), "{out}");
    assert!(ok(u, &["topic", "list"], None).contains("orders"));
    let list: Value = serde_json::from_str(&ok(u, &["--json", "topic", "list"], None)).unwrap();
    assert_eq!(list["topics"][0]["partition_count"], 2);
    let described = ok(u, &["topic", "describe", "--name", "orders"], None);
    assert!(described.contains("HIGH WATERMARK") && described.contains("60000"), "{described}");

    let out =
        ok(u, &["produce", "--topic", "orders", "--key", "k1", "--value", "hello", "--partition", "0"], None);
    assert!(out.contains("partition 0 at offset 0"), "{out}");
    let out = ok(
        u,
        &["produce", "--topic", "orders", "--key-separator", ":", "--partition", "1", "--batch-size", "2"],
        Some("a:1\nb:2\nc:3:x\n"),
    );
    assert!(out.contains("wrote 3 records"), "{out}");

    let kv = ok(u, &["consume", "--topic", "orders", "--partition", "0", "--offset", "0"], None);
    assert_eq!(kv, "k1\thello\n");
    let raw = ok(u, &["consume", "--topic", "orders", "--partition", "1", "--format", "raw"], None);
    assert_eq!(raw, "1\n2\n3:x\n");
    let all = ok(u, &["consume", "--topic", "orders", "--from-beginning", "--format", "json"], None);
    let lines: Vec<Value> = all.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert!(lines.iter().any(|l| l["key"] == "c" && l["value"] == "3:x" && l["partition"] == 1));
    let two = ok(u, &["consume", "--topic", "orders", "--max-records", "2"], None);
    assert_eq!(two.lines().count(), 2);

    let offsets = ok(u, &["offsets", "--topic", "orders"], None);
    assert!(offsets.contains("EARLIEST"), "{offsets}");
    let o: Value = serde_json::from_str(&ok(u, &["--json", "offsets", "--topic", "orders"], None)).unwrap();
    assert_eq!(o["partitions"][1]["latest"], 3);

    let altered = ok(u, &["topic", "alter", "--name", "orders", "--config", "retention.ms=120000"], None);
    assert!(altered.contains("120000"), "{altered}");
    assert!(ok(u, &["topic", "delete", "--name", "orders"], None).contains("deleted"));
    assert_eq!(b.get("/topics/orders").status, 404);
}

#[test]
fn cli_follow_prints_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("f", 2);
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", &b.url)
        .args(["consume", "--topic", "f", "--follow", "--format", "raw", "--max-records", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    ok(&b.url, &["produce", "--topic", "f", "--value", "one", "--partition", "0"], None);
    ok(&b.url, &["produce", "--topic", "f", "--value", "two", "--partition", "1"], None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("es consume --follow did not stop after --max-records");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let mut lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, vec!["one", "two"]);
}

#[test]
fn cli_failures_explain_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let out = es(&b.url, &["consume", "--topic", "nope"], None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist") && err.contains("es topic list"), "{err}");

    let out = es(&b.url, &["topic", "create", "--name", "x", "--config", "retention.ms"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("KEY=VALUE"));

    let out = es("http://127.0.0.1:1", &["topic", "list"], None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the broker") && err.contains("ES_BROKER"), "{err}");
}

#[test]
fn cli_produce_sends_typed_lines_without_waiting_for_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("typed", 1);
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", &b.url)
        .args(["produce", "--topic", "typed"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"first line\n").unwrap();
    stdin.flush().unwrap();
    let hw = |b: &Broker| b.get("/topics/typed").body["partitions"][0]["high_watermark"].clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while hw(&b) != 1 {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a typed line was not sent while stdin stayed open");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stdin.write_all(b"second line\n").unwrap();
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("es produce did not exit at end of input");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("wrote 2 records"));
    assert_eq!(hw(&b), 2);
}

fn fails(url: &str, args: &[&str], stdin: Option<&str>) -> String {
    let out = es(url, args, stdin);
    assert!(
        !out.status.success(),
        "es {args:?} should fail; it printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Binds `rules` with `value.max.bytes=5` to `topic`, under `policy`.
fn bind_max_value(u: &str, topic: &str, policy: &[&str]) {
    let mut args =
        vec!["topic", "alter", topic, "--validator", "rules", "--validator-config", "value.max.bytes=5"];
    args.extend_from_slice(policy);
    ok(u, &args, None);
}

#[test]
fn cli_says_where_dead_lettered_records_went_and_prints_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("pv", 1);
    b.create_topic("pv-dlq", 1);
    bind_max_value(u, "pv", &["--on-failure", "dead-letter", "--dead-letter-topic", "pv-dlq"]);
    let out = ok(u, &["produce", "pv", "--value", "far too long"], None);
    assert!(
        out.contains("dead-lettered to pv-dlq partition 0 at offset 0") && out.contains("value-too-large"),
        "{out}"
    );
    let out = es(u, &["produce", "pv"], Some("ok\nmuch too long\nhi\n"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("wrote 2 records to pv; dead-lettered 1 record to pv-dlq"), "{stdout}");
    assert!(stderr.contains("record 1 dead-lettered to pv-dlq partition 0 at offset 1"), "{stderr}");

    b.create_topic("pw", 1);
    bind_max_value(u, "pw", &["--on-failure", "warn"]);
    let out = es(u, &["produce", "pw", "--value", "far too long"], None);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("wrote to pw partition 0 at offset 0"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: record 0: rules (value-too-large)"), "{stderr}");
}

#[test]
fn cli_json_produce_refusal_lists_every_violation() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("pr", 1);
    bind_max_value(u, "pr", &[]);
    let out = es(
        u,
        &["--json", "produce", "pr", "--batch-size", "10"],
        Some("ok\nmuch too long\nhi\nalso too long\n"),
    );
    assert!(!out.status.success());
    let body: Value = serde_json::from_slice(&out.stdout).expect("--json prints the broker's error as JSON");
    assert_eq!(body["error"]["code"], "validation_failed");
    assert_eq!(body["error"]["violations"].as_array().unwrap().len(), 2, "{body}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("record 1: rejected") && stderr.contains("record 3: rejected"), "{stderr}");
    // A later batch's violations are numbered from the input's start.
    let err = fails(u, &["produce", "pr", "--batch-size", "2"], Some("ok\nhi\nyes\nmuch too long\n"));
    assert!(err.contains("record 3: rejected"), "{err}");
}

#[test]
fn cli_group_consumer_leaves_its_group_and_commits_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("g", 4);
    for i in 0..4 {
        ok(&b.url, &["produce", "g", "--value", &format!("v{i}"), "--partition", &i.to_string()], None);
    }
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", &b.url)
        .args(["consume", "g", "--group", "g1", "--follow", "--format", "raw"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 4 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((line, _)) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("the group consumer printed only {seen:?}");
            }
        }
    }
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("es consume --group did not stop within 5 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(130), "exit code after SIGINT");
    // Left at once (not after the 10 s session timeout), with what it printed committed.
    let g = b.get("/groups/g1").body;
    assert_eq!(g["state"], "Empty", "{g}");
    let committed: u64 =
        g["partitions"].as_array().unwrap().iter().map(|p| p["committed"].as_u64().unwrap_or(0)).sum();
    assert_eq!(committed, 4, "{g}");
}

#[test]
fn cli_group_consume_honours_format_and_separator() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("gf", 1);
    ok(u, &["produce", "gf", "--key", "k", "--value", "v", "--header", "h=1"], None);
    let raw = ok(u, &["consume", "gf", "--group", "a", "--format", "raw"], None);
    assert_eq!(raw, "v\n");
    let kv = ok(u, &["consume", "gf", "--group", "b", "--key-separator", "=", "--print-headers"], None);
    assert_eq!(kv, "h=1=k=v\n");
    let b64 =
        ok(u, &["consume", "gf", "--group", "c", "--format", "base64", "--session-timeout-ms", "6000"], None);
    assert_eq!(b64, "dg==\n");
}

#[test]
fn cli_produces_and_consumes_binary_data() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("bin", 1);
    // An Avro-like value: a length byte that is 0x0a, a NUL and invalid UTF-8.
    let value: Vec<u8> = vec![0x0a, b'h', 0x00, 0xff, 0x0a];
    let file = dir.path().join("v.bin");
    std::fs::write(&file, &value).unwrap();
    ok(
        u,
        &["produce", "bin", "--value-file", file.to_str().unwrap(), "--key-file", file.to_str().unwrap()],
        None,
    );
    let lines = format!("{}\n{}\n", B64.encode(&value), B64.encode(b"plain"));
    let out = ok(u, &["produce", "bin", "--encoding", "base64"], Some(&lines));
    assert!(out.contains("wrote 2 records to bin"), "{out}");
    let nul = es_bytes(u, &["produce", "bin", "--delimiter", "\\0"], Some(b"a\nb\0c\0"));
    assert!(nul.status.success(), "{}", String::from_utf8_lossy(&nul.stderr));
    let stdin_whole = es_bytes(u, &["produce", "bin", "--value-file", "-"], Some(&value));
    assert!(stdin_whole.status.success());
    let got = ok(u, &["consume", "bin", "--format", "base64"], None);
    let want: Vec<String> =
        [&value[..], &value, b"plain", b"a\nb", b"c", &value].iter().map(|v| B64.encode(v)).collect();
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
    let json = ok(u, &["consume", "bin", "--max-records", "1", "--format", "json"], None);
    let first: Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(B64.decode(first["key"].as_str().unwrap()).unwrap(), value);
    let err = fails(u, &["produce", "bin", "--encoding", "base64"], Some("not base64!\n"));
    assert!(err.contains("stdin record 0") && err.contains("base64"), "{err}");
}

#[test]
fn cli_schema_type_follows_the_file_and_the_subject() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    let json_schema = dir.path().join("order.json");
    std::fs::write(&json_schema, r#"{"type":"object","properties":{"id":{"type":"integer"}}}"#).unwrap();
    let out = ok(u, &["schema", "register", "orders-json", json_schema.to_str().unwrap()], None);
    assert!(out.contains("version 1"), "{out}");
    let v = b.get("/registry/subjects/orders-json/versions/latest").body;
    assert_eq!(v["schemaType"], "JSON", "{v}");
    // The subject's type wins for a file with another extension.
    let other = dir.path().join("order-v2.txt");
    std::fs::write(&other, r#"{"type":"object","properties":{"id":{"type":"integer"}}}"#).unwrap();
    assert_eq!(
        ok(u, &["schema", "check", "orders-json", other.to_str().unwrap()], None).trim(),
        "compatible"
    );
    let proto = dir.path().join("order.proto");
    std::fs::write(&proto, "syntax = \"proto3\";\nmessage Order { int64 id = 1; }\n").unwrap();
    ok(u, &["schema", "register", "orders-proto", proto.to_str().unwrap()], None);
    assert_eq!(b.get("/registry/subjects/orders-proto/versions/latest").body["schemaType"], "PROTOBUF");
}

#[test]
fn cli_explains_a_server_that_is_not_es_and_accepts_a_bare_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::Read;
        for stream in listener.incoming().take(1) {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ =
                stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let err = fails(&format!("http://{addr}"), &["topic", "list"], None);
    assert!(err.contains("not an es broker") && !err.contains("null"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let bare = b.url.trim_start_matches("http://");
    let out = Command::new(es_bin()).args(["--broker", bare, "topic", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn cli_takes_every_object_positionally_or_by_flag() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    let out = ok(u, &["topic", "create", "one"], None);
    assert!(out.contains("created topic one with 1 partition\n"), "{out}");
    ok(u, &["topic", "create", "--topic", "two", "--partitions", "2"], None);
    assert!(ok(u, &["topic", "describe", "one"], None).contains("topic one (1 partition)"));
    assert!(ok(u, &["topic", "describe", "--name", "two"], None).contains("(2 partitions)"));
    assert!(ok(u, &["topic", "validators", "--name", "one"], None).contains("no validators"));
    assert!(ok(u, &["plugin", "describe", "--name", "rules"], None).contains("rules"));
    assert!(ok(u, &["plugin", "describe", "rules"], None).contains("rules"));
    ok(u, &["produce", "one", "--value", "x"], None);
    ok(u, &["produce", "--topic", "one", "--value", "y"], None);
    assert_eq!(ok(u, &["consume", "one", "--format", "raw"], None), "x\ny\n");
    assert!(ok(u, &["offsets", "one"], None).contains("EARLIEST"));
    ok(u, &["consume", "one", "--group", "gp"], None);
    assert!(ok(u, &["group", "describe", "gp"], None).contains("group gp"));
    assert!(ok(u, &["group", "describe", "--group", "gp"], None).contains("group gp"));
    let err = fails(u, &["topic", "describe", "one", "--name", "two"], None);
    assert!(err.contains("cannot be used with"), "{err}");
    let help = ok(u, &["produce", "--help"], None);
    assert!(help.contains("--topic <TOPIC>") && help.contains("The topic"), "{help}");
}

#[test]
fn cli_topic_alter_and_validator_flags_say_what_they_mean() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("t", 1);
    let err = fails(u, &["topic", "alter", "t"], None);
    assert!(err.contains("--validator") && err.contains("--config") && err.contains("--partitions"), "{err}");
    let err =
        fails(u, &["topic", "alter", "t", "--validator", "rules", "--validator-config", "other:k=v"], None);
    assert!(err.contains("\"other\"") && err.contains("not one of the --validator plugins"), "{err}");
    // A plugin's config error names the key and the plugin's keys, with no topic-settings hint.
    let err = fails(
        u,
        &["topic", "alter", "t", "--validator", "rules", "--validator-config", "value.max=10"],
        None,
    );
    assert!(
        err.contains("value.max") && err.contains("value.max.bytes") && err.contains("invalid_config"),
        "{err}"
    );
    assert!(!err.contains("retention.ms") && err.contains("es plugin describe rules"), "{err}");
    let err = fails(u, &["topic", "alter", "t", "--config", "retention.ms=abc"], None);
    assert!(err.contains("retention.ms takes an integer") && err.contains("es topic describe"), "{err}");
    ok(
        u,
        &["topic", "alter", "t", "--validator", "rules", "--validator-config", "rules:key.required=true"],
        None,
    );
    let described = ok(u, &["topic", "describe", "t"], None);
    assert!(described.contains("VALIDATOR") && described.contains("rules"), "{described}");
    let table = ok(u, &["topic", "validators", "t"], None);
    assert!(table.contains("BATCHES") && table.contains("REJECTED"), "{table}");
    let d: Value = serde_json::from_str(&ok(u, &["--json", "topic", "describe", "t"], None)).unwrap();
    assert_eq!(d["validators"][0]["plugin"], "rules");

    b.create_topic("small", 1);
    ok(u, &["topic", "alter", "small", "--config", "max.message.bytes=100"], None);
    let err = fails(u, &["produce", "small", "--value", &"x".repeat(200)], None);
    assert!(err.contains("max.message.bytes") && !err.contains("--batch-size"), "{err}");
}

#[test]
fn cli_reset_to_an_offset_past_the_end_says_where_it_went() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("r", 1);
    ok(u, &["produce", "r"], Some("a\nb\nc\n"));
    ok(u, &["consume", "r", "--group", "rg"], None);
    let out = es(u, &["group", "reset-offsets", "rg", "--topic", "r", "--to-offset", "999"], None);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no offset 999") && stderr.contains("set to 3"), "{stderr}");
}

#[test]
fn cli_consume_from_a_timestamp_and_with_headers() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("ts", 1);
    let at = |ts: i64, v: &str| {
        let r =
            b.post("/topics/ts/records", &serde_json::json!({"records": [{"value": v, "timestamp": ts}]}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    };
    at(1000, "old");
    at(5000, "new");
    assert_eq!(ok(u, &["consume", "ts", "--timestamp", "3000", "--format", "raw"], None), "new\n");
    ok(u, &["produce", "ts", "--key", "k", "--value", "v", "--header", "a=1", "--header", "b=2"], None);
    let out = ok(u, &["consume", "ts", "--offset", "2", "--print-headers"], None);
    assert_eq!(out, "a=1,b=2\tk\tv\n");
}

#[test]
fn cli_follow_shows_each_partition_within_one_wake_up() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("lat", 4);
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", &b.url)
        .args(["consume", "lat", "--follow", "--format", "raw"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    // Let every partition's poll start from the end before the first record.
    std::thread::sleep(Duration::from_millis(1500));
    let c = es_tests::broker::Client::new(&b.url);
    let mut latencies = Vec::new();
    for round in 0..8u32 {
        let sent = Instant::now();
        let body =
            serde_json::json!({"records": [{"value": format!("r{round}"), "partition": (round * 3) % 4}]});
        assert_eq!(c.try_post("/topics/lat/records", &body).map(|r| r.status), Some(200));
        let (line, seen) = rx.recv_timeout(Duration::from_secs(10)).expect("the follower printed the record");
        assert_eq!(line, format!("r{round}"));
        latencies.push(seen - sent);
    }
    let _ = child.kill();
    let _ = child.wait();
    latencies.sort();
    // Each record lands on the partition polled longest ago (0, 3, 2, 1, ...): polling
    // the partitions in turn showed it after 250-520 ms (median ~500); at once, a few ms.
    assert!(latencies[4] < Duration::from_millis(250), "median produce-to-display {latencies:?}");
}

#[test]
fn cli_re_uploading_the_same_plugin_says_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    let wasm = std::path::Path::new(es_plugin_host::GUEST_WASM_DIR).join("es_fixture_hostile.wasm");
    let file = dir.path().join("p.wasm");
    std::fs::copy(&wasm, &file).unwrap();
    let first = ok(u, &["plugin", "add", file.to_str().unwrap(), "--name", "p"], None);
    assert!(first.starts_with("stored plugin p"), "{first}");
    let again = ok(u, &["plugin", "add", file.to_str().unwrap(), "--name", "p"], None);
    assert!(again.starts_with("unchanged: plugin p"), "{again}");
}

#[test]
fn cli_topic_alter_partitions_grows_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("grow", 1);
    let out = ok(u, &["topic", "alter", "grow", "--partitions", "3"], None);
    assert!(out.contains("now has 3 partitions"), "{out}");
    assert_eq!(b.get("/topics/grow").body["partition_count"], 3);
    let err = fails(u, &["topic", "alter", "grow", "--partitions", "2"], None);
    assert!(err.contains("grow") || err.contains("shrink"), "{err}");
}

/// The lines a child prints on stdout, each with when it arrived, read on a thread
/// so a test can wait for them with a deadline.
fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<(String, Instant)> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send((line, Instant::now()));
        }
    });
    rx
}

/// Runs `es` under a pseudo-terminal (util-linux `script`), as a user at a shell would.
fn es_on_a_tty(b: &Broker, args: &[&str]) -> Output {
    let line = std::iter::once(es_bin().display().to_string())
        .chain(args.iter().map(|a| (*a).to_owned()))
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("ES_BROKER", &b.url)
        .env("ES_BROKER_BINARY", &b.binary_addr)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning script (util-linux)");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "es {args:?} under a tty did not finish within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn cli_says_no_records_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let u = b.url.as_str();
    b.create_topic("empty", 2);
    let piped = es(u, &["consume", "empty"], None);
    assert!(piped.status.success() && piped.stdout.is_empty() && piped.stderr.is_empty(), "{piped:?}");
    let tty = es_on_a_tty(&b, &["consume", "empty"]);
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success() && shown.contains("no records"), "{tty:?}");
    let tty = es_on_a_tty(&b, &["consume", "empty", "--protocol", "binary"]);
    assert!(String::from_utf8_lossy(&tty.stdout).contains("no records"), "{tty:?}");
}
