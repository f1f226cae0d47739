//! Real Kafka clients against the real es-broker's Kafka listener (`--bind-kafka
//! 127.0.0.1:0`): kcat (librdkafka, Debian) and confluent-kafka (librdkafka 2.16,
//! tests/python/kafka_confluent.py) for metadata, admin, byte-identical round trips
//! with every codec and an idempotent producer, offsets by timestamp, oversized and
//! refused records; records crossing between kcat and `es produce`/`es consume`;
//! and raw frames for KIP-511 and a hostile frame followed by a liveness check.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use es_tests::broker::{Broker, es_bin};
use es_tests::python::run_script;
use serde_json::{Value, json};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `cmd` with `stdin`, killed after [`CLIENT_TIMEOUT`] (what it printed is kept).
fn run(cmd: &mut Command, stdin: &str) -> Output {
    let what = format!("{cmd:?}");
    es_tests::peers::output_within(cmd, Some(stdin.as_bytes()), CLIENT_TIMEOUT, &what).0
}

fn kcat(b: &Broker, args: &[&str], stdin: &str) -> Output {
    let out = run(es_tests::peers::kcat().arg("-b").arg(&b.kafka_addr).args(args), stdin);
    assert!(out.status.success(), "kcat {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn es(b: &Broker, args: &[&str]) -> String {
    let out = run(Command::new(es_bin()).args(["--broker", &b.url]).args(args), "");
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON lines a client script printed.
fn script(b: &Broker, args: &[&str]) -> Vec<Value> {
    es_tests::python::python();
    let mut all = vec![b.kafka_addr.as_str()];
    all.extend_from_slice(args);
    let (ok, output) = run_script("kafka_confluent.py", &all, SCRIPT_TIMEOUT);
    assert!(ok, "kafka_confluent.py {args:?} failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    output.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn kcat_metadata_names_the_advertised_node_and_the_topics() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", 3);
    let out = kcat(&b, &["-L", "-J"], "");
    let md: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (host, port) = b.kafka_addr.rsplit_once(':').unwrap();
    assert_eq!(md["brokers"][0]["name"], json!(format!("{host}:{port}")), "{md}");
    let topics = md["topics"].as_array().unwrap();
    let orders = topics.iter().find(|t| t["topic"] == "orders").expect("orders listed");
    assert_eq!(orders["partitions"].as_array().unwrap().len(), 3);
    assert!(topics.iter().all(|t| !t["topic"].as_str().unwrap().starts_with("__es_")), "{md}");
}

#[test]
fn records_cross_between_kcat_and_the_es_cli() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("cross", 1);
    kcat(&b, &["-P", "-t", "cross", "-p", "0", "-K", ":"], "k1:from kcat\nk2:second\n");
    let consumed = es(&b, &["consume", "cross", "--format", "json"]);
    assert!(consumed.contains("from kcat") && consumed.contains("second"), "{consumed}");
    es(&b, &["produce", "cross", "--key", "k3", "--value", "from es"]);
    let out = kcat(&b, &["-C", "-t", "cross", "-p", "0", "-o", "beginning", "-e", "-f", "%o %k=%s\n"], "");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, "0 k1=from kcat\n1 k2=second\n2 k3=from es\n");
}

/// The codec of every batch stored in `topic`'s partition 0 (read from its segment
/// files after the broker stopped: what is on disk, not what a fetch says).
fn stored_codecs(data: &std::path::Path, topic: &str) -> Vec<es_core::Compression> {
    let dir = data.join(format!("partitions/{topic}-0"));
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    let mut out = vec![];
    for segment in segments {
        let bytes = std::fs::read(&segment).unwrap();
        let mut at = 0;
        while let Ok(h) = es_core::BatchHeader::parse(&bytes[at..], usize::MAX) {
            out.push(h.compression().unwrap());
            at += h.total_len();
        }
    }
    out
}

/// `compression.type` set on a topic: whatever codec kcat sends, the broker stores
/// the topic's, and the records read back unchanged (Kafka's broker-side
/// recompression); `producer` keeps the producer's codec.
#[test]
fn a_topics_compression_type_recompresses_what_producers_send() {
    use es_core::Compression;
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    for (topic, setting) in [("squeezed", "zstd"), ("plain", "uncompressed"), ("as-sent", "producer")] {
        let body = json!({"name": topic, "partitions": 1, "config": {"compression.type": setting}});
        assert_eq!(b.post("/topics", &body).status, 201, "{topic}");
        // Values that compress (librdkafka sends a batch plain when gzip would not shrink it).
        let values: Vec<String> =
            (1..=3).map(|i| format!("k{i}:{}", format!("value {i} ").repeat(60))).collect();
        let input = values.iter().map(|v| format!("{v}\n")).collect::<String>();
        kcat(&b, &["-P", "-t", topic, "-p", "0", "-z", "gzip", "-K", ":"], &input);
        let out = kcat(&b, &["-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %k:%s\n"], "");
        let want: String = values.iter().enumerate().map(|(i, v)| format!("{i} {v}\n")).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{topic}");
    }
    b.signal("TERM");
    assert!(b.wait_exit(Duration::from_secs(30)).success());
    let all = |c: Compression, got: Vec<Compression>| !got.is_empty() && got.iter().all(|g| *g == c);
    assert!(all(Compression::Zstd, stored_codecs(dir.path(), "squeezed")));
    assert!(all(Compression::None, stored_codecs(dir.path(), "plain")));
    assert!(all(Compression::Gzip, stored_codecs(dir.path(), "as-sent")));
}

#[test]
fn confluent_admin_creates_describes_alters_grows_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let got = script(&b, &["admin"]);
    let r = &got[0];
    assert_eq!(r["created"], json!({"t-admin": null}), "{r}");
    assert_eq!(r["again"], json!({"t-admin": "TOPIC_ALREADY_EXISTS"}), "{r}");
    assert_eq!((r["partitions"].as_u64(), r["partitions_after"].as_u64()), (Some(3), Some(5)), "{r}");
    assert_eq!((r["retention"].as_str(), r["cleanup"].as_str()), (Some("3600000"), Some("delete")), "{r}");
    assert_eq!(r["retention_after"], "7200000", "{r}");
    // AlterConfigs replaced the whole config: retention back to its default.
    assert_eq!(
        (r["replaced"].clone(), r["replaced_to"].clone()),
        (json!([null]), json!(["compact", true])),
        "{r}"
    );
    // No auth: every operation Kafka supports, as Kafka without an authorizer.
    let topic_ops =
        ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"];
    assert_eq!(r["topic_ops"], json!(topic_ops), "{r}");
    let cluster_ops = [
        "ALTER",
        "ALTER_CONFIGS",
        "CLUSTER_ACTION",
        "CREATE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE",
    ];
    assert_eq!(r["cluster_ops"], json!(cluster_ops), "{r}");
    assert_eq!(r["unknown"], json!({"t-bad": "INVALID_CONFIG"}), "{r}");
    assert_eq!((r["deleted"].clone(), r["gone"].clone()), (json!({"t-admin": null}), json!(true)), "{r}");
    assert_eq!(r["missing"], json!({"t-never": "UNKNOWN_TOPIC_OR_PART"}), "{r}");
    assert_eq!((r["nodes"].as_u64(), r["controller"].as_i64()), (Some(1), Some(0)), "{r}");
}

#[test]
fn confluent_round_trips_are_byte_identical_with_every_codec() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let got = script(&b, &["roundtrip"]);
    assert_eq!(got.len(), 5, "{got:?}");
    for r in &got {
        assert_eq!(r["left"], 0, "{r}");
        let reports = r["reports"].as_array().unwrap();
        assert!(reports.iter().all(|d| d[0].is_null()), "{r}");
        assert!(r["same"].as_bool().unwrap(), "{r}");
        assert_eq!(r["offsets"], json!([0, 1, 2, 3]), "{r}");
        assert_eq!((r["by_time"].as_i64(), r["future"].as_i64()), (Some(0), Some(-1)), "{r}");
        assert_eq!((r["low"].as_i64(), r["high"].as_i64()), (Some(0), Some(4)), "{r}");
        // librdkafka's TIMESTAMP_CREATE_TIME.
        assert_eq!(r["ts_types"], json!([1]), "{r}");
    }
    // The idempotent producer's batches were stored as sent: es reads them back too.
    let consumed = es(&b, &["consume", "t-rt-zstd", "--format", "json"]);
    assert!(consumed.contains("no key"), "{consumed}");
}

#[test]
fn confluent_oversized_records_fail_at_once_with_message_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let r = &script(&b, &["oversized"])[0];
    assert_eq!(r["errors"], json!(["MSG_SIZE_TOO_LARGE"]), "{r}");
    assert!(r["seconds"].as_f64().unwrap() < 10.0, "retried instead of failing: {r}");
}

#[test]
fn confluent_validator_refusals_are_invalid_record_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("checked", 1);
    let bind = json!({"validators": [{"plugin": "rules", "config": {"key.required": "true"}}]});
    let r = b.put("/topics/checked/validators", &bind);
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = &script(&b, &["refused", "checked"])[0];
    // librdkafka reports the code only; the broker's error_message is in its debug log.
    assert_eq!(r["errors"][0][0], "INVALID_RECORD", "{r}");
    assert!(r["seconds"].as_f64().unwrap() < 10.0, "retried instead of failing: {r}");
}

/// A request frame: size, header v1 (key, version, correlation id, client id), body.
fn frame(key: i16, version: i16, correlation: i32, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&correlation.to_be_bytes());
    f.extend_from_slice(&2i16.to_be_bytes());
    f.extend_from_slice(b"es");
    f.extend_from_slice(body);
    let mut out = (f.len() as i32).to_be_bytes().to_vec();
    out.extend(f);
    out
}

fn connect(b: &Broker) -> TcpStream {
    let s = TcpStream::connect(&b.kafka_addr).unwrap();
    s.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    s
}

/// Reads one response frame (without its size prefix).
fn response(s: &mut TcpStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

#[test]
fn api_versions_newer_than_es_gets_the_kip_511_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let mut s = connect(&b);
    s.write_all(&frame(18, 99, 7, &[])).unwrap();
    let r = response(&mut s);
    assert_eq!(i32::from_be_bytes(r[0..4].try_into().unwrap()), 7, "correlation id");
    assert_eq!(i16::from_be_bytes(r[4..6].try_into().unwrap()), 35, "UNSUPPORTED_VERSION");
    let count = i32::from_be_bytes(r[6..10].try_into().unwrap());
    assert_eq!(count, 1, "only ApiVersions' own range");
    assert_eq!(i16::from_be_bytes(r[10..12].try_into().unwrap()), 18);
    // v0 then answers the served APIs on the same connection.
    s.write_all(&frame(18, 0, 8, &[])).unwrap();
    let r = response(&mut s);
    assert_eq!(i16::from_be_bytes(r[4..6].try_into().unwrap()), 0);
    assert!(i32::from_be_bytes(r[6..10].try_into().unwrap()) > 5, "the served APIs");
}

#[test]
fn a_hostile_frame_closes_only_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let mut other = connect(&b);
    let mut s = connect(&b);
    // Metadata v1 claiming 2^31-1 topics in a 4-byte body.
    s.write_all(&frame(3, 1, 1, &i32::MAX.to_be_bytes())).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "the connection is closed, with no answer");
    // Garbage too large to be a frame.
    let mut s = connect(&b);
    s.write_all(&[0x7f, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
    assert_eq!(s.read(&mut buf).unwrap(), 0);
    // The broker and the other connection still serve.
    other.write_all(&frame(18, 0, 9, &[])).unwrap();
    assert_eq!(i32::from_be_bytes(response(&mut other)[0..4].try_into().unwrap()), 9);
    b.create_topic("alive", 1);
    let out = kcat(&b, &["-L", "-t", "alive"], "");
    assert!(String::from_utf8_lossy(&out.stdout).contains("alive"));
}

#[test]
fn the_readme_python_snippet_runs_as_written() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("## Kafka clients").expect("README has a Kafka clients section")..];
    let start = section.find("```python\n").expect("a Python block") + "```python\n".len();
    let code = &section[start..start + section[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let script = dir.path().join("snippet.py");
    std::fs::write(&script, code.replace("127.0.0.1:9092", &b.kafka_addr)).unwrap();
    let out = run(Command::new(es_tests::python::python()).arg(&script), "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), "b'hello'");
}

#[test]
fn kafka_python_round_trips_with_its_default_idempotent_producer() {
    es_tests::python::python();
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let (ok, output) = run_script("kafka_python_client.py", &[&b.kafka_addr], SCRIPT_TIMEOUT);
    assert!(ok, "kafka_python_client.py failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    let lines: Vec<Value> = output.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(lines.len(), 3, "{output}");
    for r in &lines[..2] {
        assert_eq!(r["offsets"], json!([0, 1, 2]), "{r}");
        assert!(r["same"].as_bool().unwrap(), "{r}");
        assert_eq!((r["by_time"].as_i64(), r["end"].as_i64()), (Some(0), Some(3)), "{r}");
    }
    assert_eq!(lines[2]["deleted"], true, "{output}");
}

#[test]
fn acks_0_produces_get_no_response_and_land() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("fire", 1);
    // A stray response to an acks=0 produce would shift librdkafka's correlation ids
    // and fail the metadata exchange that follows on the same connection.
    let out = kcat(&b, &["-P", "-t", "fire", "-p", "0", "-X", "acks=0", "-X", "debug=protocol"], "a\nb\nc\n");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("unknown CorrId"), "{log}");
    let read = kcat(&b, &["-C", "-t", "fire", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"], "");
    assert_eq!(String::from_utf8(read.stdout).unwrap(), "a\nb\nc\n");
}
