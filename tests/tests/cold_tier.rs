//! The S3 cold tier through the real es-broker against two real S3 peers:
//! moto_server (from the tests' venv, tests/python/requirements.txt) and s3s-fs (the
//! release pinned in `es_tests::s3s`, installed by `.ci/run`; it checks SigV4
//! signatures, moto does not). On each: records produced, segments forced cold by
//! retention, consumed back from the bucket after a restart with a one-byte cache;
//! `es topic describe` shows local and cold; `config print` never shows the secret
//! key; doctor probes the store; deleting the topic deletes its objects; the
//! operations walkthrough runs as written.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use es_log::{ColdStore, S3Config, S3Store};
use es_tests::broker::{Broker, broker_bin};
use es_tests::s3s::S3sFs;
use serde_json::{Value, json};

const SECRET: &str = "not-a-real-secret-0123";

struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One S3 peer with the bucket `cold`, stopped on drop.
enum Peer {
    Moto(Moto),
    S3sFs(S3sFs),
}

impl Peer {
    fn port(&self) -> u16 {
        match self {
            Peer::Moto(m) => m.port,
            Peer::S3sFs(s) => s.port,
        }
    }
}

/// Runs `case` against moto, then against s3s-fs (each started for it alone).
fn each_peer(case: impl Fn(&Peer)) {
    eprintln!("== on moto_server");
    case(&Peer::Moto(start_moto()));
    eprintln!("== on s3s-fs {}", es_tests::s3s::VERSION);
    let s3s = S3sFs::start("testing", SECRET);
    s3s.create_bucket("cold");
    case(&Peer::S3sFs(s3s));
}

fn start_moto() -> Moto {
    let bin = es_tests::python::python().parent().unwrap().join("moto_server");
    assert!(
        bin.exists(),
        "{} is missing: tests/python/requirements.txt installs moto[server]",
        bin.display()
    );
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Moto { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto_server did not listen within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // moto checks no signature: a plain PUT creates the bucket.
    let r = ureq::put(&format!("http://127.0.0.1:{port}/cold")).send_empty().unwrap();
    assert_eq!(r.status(), 200);
    moto
}

/// The broker's cold settings as flags, and the credentials as env variables.
fn cold_args(port: u16) -> Vec<String> {
    let endpoint = format!("http://127.0.0.1:{port}");
    [
        "--cold-backend",
        "s3",
        "--cold-bucket",
        "cold",
        "--cold-prefix",
        "bb",
        "--cold-endpoint",
        &endpoint,
        "--cold-path-style",
        "--cold-allow-http",
        "--cold-cache-bytes",
        "1",
        "--cold-op-timeout-ms",
        "5000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

const CREDENTIALS: [(&str, &str); 2] =
    [("ES_COLD_ACCESS_KEY_ID", "testing"), ("ES_COLD_SECRET_ACCESS_KEY", SECRET)];

fn start(dir: &Path, port: u16) -> Broker {
    let mut args = cold_args(port);
    args.extend(["--housekeeping-interval-ms".into(), "50".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start_env(dir, &args, &CREDENTIALS)
}

fn bucket(port: u16) -> S3Store {
    S3Store::new(S3Config {
        bucket: "cold".into(),
        prefix: "bb".into(),
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        region: "us-east-1".into(),
        access_key_id: Some("testing".into()),
        secret_access_key: Some(SECRET.into()),
        path_style: true,
        allow_http: true,
        part_size: 5 << 20,
        op_timeout: Duration::from_secs(10),
        ..S3Config::default()
    })
    .unwrap()
}

/// Runs a command to its end, at most 60 s.
fn bounded(cmd: &mut Command) -> std::process::Output {
    es_tests::peers::output(cmd, None, Duration::from_secs(60), &format!("{cmd:?}"))
}

fn fill(b: &Broker, topic: &str, batches: usize) {
    for i in 0..batches {
        let records: Vec<Value> =
            (0..10).map(|j| json!({"value": format!("{:0>100}", i * 10 + j), "partition": 0})).collect();
        let r = b.post(&format!("/topics/{topic}/records"), &json!({ "records": records }));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
}

fn offsets(b: &Broker, topic: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = b.get(&format!("/topics/{topic}/partitions/0/records?offset={offset}&max_records=7"));
        assert_eq!(r.status, 200, "{:?}", r.body);
        out.extend(r.body["records"].as_array().unwrap().iter().map(|r| r["offset"].as_u64().unwrap()));
        offset = r.body["next_offset"].as_u64().unwrap();
        if offset >= r.body["high_watermark"].as_u64().unwrap() {
            return out;
        }
    }
}

fn wait_cold(b: &Broker, topic: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = b.get(&format!("/topics/{topic}")).body["partitions"][0].clone();
        if p["cold_segment_count"].as_u64().unwrap_or(0) >= 2 {
            return p;
        }
        assert!(Instant::now() < deadline, "no segment reached the cold tier: {p:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn segments_go_to_the_bucket_and_read_back_after_a_restart() {
    each_peer(segments_go_to_the_bucket_and_read_back);
}

fn segments_go_to_the_bucket_and_read_back(peer: &Peer) {
    let port = peer.port();
    let dir = tempfile::tempdir().unwrap();
    let mut b = start(dir.path(), port);
    let config = json!({"segment.bytes": 4096, "retention.ms": 1, "cold.tier.enable": true});
    let r = b.post("/topics", &json!({"name": "c", "config": config}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    fill(&b, "c", 30);
    let p = wait_cold(&b, "c");
    assert!(p["cold_size_bytes"].as_u64().unwrap() > 0, "{p:?}");
    assert_eq!(p["log_start_offset"], 0, "cold data is still the log's");
    let objects = bucket(port).list("c-0/").unwrap();
    assert!(objects.iter().any(|o| o.key == "c-0/manifest"), "{objects:?}");
    assert!(objects.iter().filter(|o| o.key.ends_with(".log")).count() >= 2, "{objects:?}");
    assert_eq!(offsets(&b, "c"), (0..300).collect::<Vec<u64>>());
    // `es topic describe` shows what is local and what is cold.
    let mut es = Command::new(es_tests::broker::es_bin());
    es.env("ES_BROKER", &b.url).args(["topic", "describe", "c"]);
    let described = bounded(&mut es);
    let described = String::from_utf8_lossy(&described.stdout);
    assert!(described.contains("COLD SEGMENTS") && described.contains("LOCAL BYTES"), "{described}");
    // A restart: the cold segments come back from the manifest, their data from the
    // bucket (the one-byte cache keeps one segment).
    b.signal("TERM");
    b.wait_exit(Duration::from_secs(30));
    let b = start(dir.path(), port);
    assert!(b.get("/topics/c").body["partitions"][0]["cold_segment_count"].as_u64().unwrap() >= 2);
    assert_eq!(offsets(&b, "c"), (0..300).collect::<Vec<u64>>());
    // Deleting the topic deletes its objects.
    assert_eq!(b.delete("/topics/c").status, 204);
    assert!(bucket(port).list("c-0/").unwrap().is_empty());
}

/// docs/operations.md's cold-tier walkthrough, run as written (`# prints: TEXT`
/// must show in the output) against a broker on each peer.
#[test]
fn the_cold_tier_walkthrough_runs_as_written() {
    each_peer(the_walkthrough_runs);
}

fn the_walkthrough_runs(peer: &Peer) {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), peer.port());
    let doc = std::fs::read_to_string(es_tests::walkthrough::repo().join("docs/operations.md")).unwrap();
    // The section's own walkthrough (the page has another under its first heading).
    let section = &doc[doc.find("\n## Cold tier").expect("the section")..];
    let at = section.find("\n### Walkthrough").expect("the walkthrough");
    let block = es_tests::walkthrough::block_of(&section[at..]);
    let walk = es_tests::walkthrough::script(&block, &[]);
    assert!(!walk.expected.is_empty());
    walk.run(dir.path(), &[("ES_BROKER", &b.url)], Duration::from_secs(60));
}

/// Runs `es-broker SUB --data-dir DATA` with the cold settings for `port` and
/// `credentials` in its environment: its exit code and stdout.
fn broker_run(sub: &[&str], data: &Path, port: u16, credentials: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(broker_bin());
    cmd.args(sub).arg("--data-dir").arg(data).args(cold_args(port)).envs(credentials.iter().copied());
    let out = bounded(&mut cmd);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cold_check(json: &str) -> Value {
    let v: Value = serde_json::from_str(json).unwrap();
    v["checks"].as_array().unwrap().iter().find(|c| c["check"] == "cold").cloned().unwrap()
}

#[test]
fn config_print_masks_the_secret_and_doctor_probes_the_store() {
    each_peer(|peer| {
        let dir = tempfile::tempdir().unwrap();
        let (code, printed) = broker_run(&["config", "print"], dir.path(), peer.port(), &CREDENTIALS);
        assert_eq!(code, Some(0), "{printed}");
        assert!(printed.contains("ES_COLD_SECRET_ACCESS_KEY") && !printed.contains(SECRET), "{printed}");
        let (_, report) = broker_run(&["doctor", "--json"], dir.path(), peer.port(), &CREDENTIALS);
        assert_eq!(cold_check(&report)["status"], "ok", "{report}");
        assert!(bucket(peer.port()).list("doctor/").unwrap().is_empty(), "the probe object is deleted");
        if let Peer::S3sFs(_) = peer {
            // s3s-fs checks signatures: a wrong secret fails the check and says what to do.
            let wrong = [CREDENTIALS[0], ("ES_COLD_SECRET_ACCESS_KEY", "not-the-secret")];
            let (code, report) = broker_run(&["doctor", "--json"], dir.path(), peer.port(), &wrong);
            let check = cold_check(&report);
            assert_eq!((code, check["status"].as_str()), (Some(2), Some("fail")), "{report}");
            assert!(check["fix"].as_str().unwrap().contains("credentials"), "{check}");
        }
    });
    // A store nobody listens on: doctor fails the check and says what to do.
    let dir = tempfile::tempdir().unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, report) = broker_run(&["doctor", "--json"], dir.path(), closed, &CREDENTIALS);
    let check = cold_check(&report);
    assert_eq!((code, check["status"].as_str()), (Some(2), Some("fail")), "{report}");
    assert!(check["fix"].as_str().unwrap().contains("cold.endpoint"), "{check}");
}

#[test]
fn unsafe_cold_settings_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let validate = |extra: &[&str]| {
        let mut cmd = Command::new(broker_bin());
        let out = bounded(cmd.args(["config", "validate", "--data-dir", data]).args(extra));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
        )
    };
    let (code, text) = validate(&["--cold-backend", "s3"]);
    assert_ne!(code, Some(0));
    assert!(text.contains("cold.bucket is not set"), "{text}");
    let (code, text) = validate(&["--cold-dir", data, "--cold-retention-ms", "3600000"]);
    assert_ne!(code, Some(0));
    assert!(
        text.contains("--cold-retention-ms") && text.contains("shorter than the local retention"),
        "{text}"
    );
    let (code, text) =
        validate(&["--cold-backend", "s3", "--cold-bucket", "b", "--cold-part-size-bytes", "1024"]);
    assert_ne!(code, Some(0));
    assert!(text.contains("--cold-part-size-bytes"), "{text}");
    let (code, text) = validate(&["--cold-backend", "tape"]);
    assert_ne!(code, Some(0));
    assert!(text.contains("not a cold-tier backend"), "{text}");
}
