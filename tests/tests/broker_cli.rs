//! Black-box tests of the `es` CLI against the real es-broker: topic commands,
//! produce from flags and stdin, consume formats, offsets, and failures that say
//! what to do and exit non-zero.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, es_bin};
use serde_json::Value;

/// Runs `es` against `url` with optional stdin; bounded in time.
fn es(url: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", url)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning es");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("es {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
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
