//! Black-box durability of the real es-broker across restarts: graceful shutdown,
//! kill -9 in the middle of produce, torn tails, and interrupted topic creation.
//! Every acknowledged record must be there afterwards, with its offset and value.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, Client};
use serde_json::json;

const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// (partition, offset) -> value of every acknowledged record.
type Acked = BTreeMap<(u64, u64), String>;

/// Produces from `threads` writers until `stop` is set or the broker stops
/// answering; returns every record the broker acknowledged.
fn produce_until_stopped(
    url: &str,
    threads: usize,
    stop: Arc<AtomicBool>,
    progress: Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<Acked>> {
    (0..threads)
        .map(|t| {
            let client = Client::new(url);
            let stop = stop.clone();
            let progress = progress.clone();
            std::thread::spawn(move || {
                let mut acked = Acked::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let values: Vec<String> = (0..5).map(|j| format!("w{t}-{i}-{j}")).collect();
                    let records: Vec<_> = values.iter().map(|v| json!({"key": v, "value": v})).collect();
                    let Some(r) = client.try_post("/topics/d/records", &json!({ "records": records })) else {
                        break;
                    };
                    if r.status != 200 {
                        break;
                    }
                    progress.fetch_add(values.len(), Ordering::Relaxed);
                    for (o, v) in r.body["offsets"].as_array().unwrap().iter().zip(values) {
                        let key = (o["partition"].as_u64().unwrap(), o["offset"].as_u64().unwrap());
                        assert!(acked.insert(key, v).is_none(), "offset {key:?} acknowledged twice");
                    }
                }
                acked
            })
        })
        .collect()
}

/// Waits (bounded) until the producers have `count` acknowledgements, so a crash
/// always lands in the middle of real traffic even on a slow, busy machine.
fn wait_for_acks(progress: &AtomicUsize, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while progress.load(Ordering::Relaxed) < count {
        assert!(
            Instant::now() < deadline,
            "producers got only {} acknowledgements in 30 s",
            progress.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn join_all(handles: Vec<std::thread::JoinHandle<Acked>>) -> Acked {
    let mut all = Acked::new();
    for h in handles {
        for (k, v) in h.join().unwrap() {
            assert!(all.insert(k, v).is_none(), "offset {k:?} acknowledged to two writers");
        }
    }
    all
}

/// Every record of every partition of `topic`, read to the high watermark.
fn read_all(b: &Broker, topic: &str) -> Acked {
    let partitions = b.get(&format!("/topics/{topic}")).body["partition_count"].as_u64().unwrap();
    let mut out = Acked::new();
    for p in 0..partitions {
        let mut offset = 0;
        loop {
            let r =
                b.get(&format!("/topics/{topic}/partitions/{p}/records?offset={offset}&max_records=10000"));
            assert_eq!(r.status, 200, "{:?}", r.body);
            for rec in r.body["records"].as_array().unwrap() {
                let o = rec["offset"].as_u64().unwrap();
                out.insert((p, o), rec["value"].as_str().unwrap().to_owned());
            }
            let next = r.body["next_offset"].as_u64().unwrap();
            if next >= r.body["high_watermark"].as_u64().unwrap() {
                break;
            }
            offset = next;
        }
    }
    out
}

fn assert_all_present(acked: &Acked, found: &Acked) {
    assert!(!acked.is_empty(), "the producers got no acknowledgement at all");
    eprintln!("checking {} acknowledged records against {} found", acked.len(), found.len());
    for (k, v) in acked {
        assert_eq!(found.get(k), Some(v), "acknowledged record at {k:?} is missing or changed");
    }
}

#[test]
fn restart_keeps_topics_config_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let r = b.post("/topics", &json!({"name": "keep", "partitions": 3, "config": {"retention.ms": 123456}}));
    assert_eq!(r.status, 201);
    let records: Vec<_> =
        (0..50).map(|i| json!({"key": format!("k{i}"), "value": format!("v{i}")})).collect();
    assert_eq!(b.post("/topics/keep/records", &json!({ "records": records })).status, 200);
    let before = read_all(&b, "keep");
    assert_eq!(before.len(), 50);
    b.signal("TERM");
    assert!(b.wait_exit(EXIT_TIMEOUT).success(), "stderr:\n{}", b.stderr());
    b.wait_for_stderr("shut down cleanly");

    let b = Broker::start(dir.path());
    assert_eq!(read_all(&b, "keep"), before);
    assert_eq!(b.get("/topics/keep/config").body["config"]["retention.ms"], 123456);
    // Appends continue after the recovered offsets.
    let r = b.post("/topics/keep/records", &json!({"records": [{"value": "after", "partition": 0}]}));
    let expected = before.keys().filter(|(p, _)| *p == 0).count() as u64;
    assert_eq!(r.body["offsets"][0]["offset"], expected);
}

#[test]
fn kill_9_mid_produce_keeps_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Acked::new();
    for round in 0..3 {
        let mut b = Broker::start(dir.path());
        if round == 0 {
            b.create_topic("d", 3);
        } else {
            assert_all_present(&acked, &read_all(&b, "d"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(AtomicUsize::new(0));
        let handles = produce_until_stopped(&b.url, 4, stop.clone(), progress.clone());
        wait_for_acks(&progress, 200);
        std::thread::sleep(Duration::from_millis(100 + round * 150));
        b.kill9();
        stop.store(true, Ordering::Relaxed);
        for (k, v) in join_all(handles) {
            assert!(acked.insert(k, v).is_none(), "offset {k:?} reused after a crash");
        }
    }
    let b = Broker::start(dir.path());
    assert_all_present(&acked, &read_all(&b, "d"));
}

#[test]
fn graceful_shutdown_under_load_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("d", 2);
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicUsize::new(0));
    let handles = produce_until_stopped(&b.url, 4, stop.clone(), progress.clone());
    wait_for_acks(&progress, 200);
    std::thread::sleep(Duration::from_millis(200));
    b.signal("TERM");
    let status = b.wait_exit(EXIT_TIMEOUT);
    stop.store(true, Ordering::Relaxed);
    let acked = join_all(handles);
    assert!(status.success(), "exit {status:?}; stderr:\n{}", b.stderr());

    let b = Broker::start(dir.path());
    // The summary line follows every recovery line.
    b.wait_for_stderr("recovered");
    assert!(!b.stderr().contains("trimmed"), "a clean shutdown left a torn tail:\n{}", b.stderr());
    assert_all_present(&acked, &read_all(&b, "d"));
}

#[test]
fn shutdown_wakes_long_polls_and_exits_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("lp", 1);
    let client = Client::new(&b.url);
    let poller = std::thread::spawn(move || client.get("/topics/lp/partitions/0/records?wait_ms=30000"));
    wait_until_parked(&b);
    let t = Instant::now();
    b.signal("INT");
    let status = b.wait_exit(EXIT_TIMEOUT);
    assert!(status.success());
    assert!(t.elapsed() < Duration::from_secs(5), "shutdown took {:?}", t.elapsed());
    let r = poller.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body["records"], json!([]));
}

/// Waits (bounded) until the broker reports a parked long poll.
fn wait_until_parked(b: &Broker) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.get("/readyz").body["long_polls"].as_u64().unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the long poll never parked");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A produce that reaches the broker while shutdown drains is refused, as over
/// the binary protocol, instead of being written after the drain began.
#[test]
fn a_produce_arriving_while_shutdown_drains_is_refused() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("late", 1);
    let body = r#"{"records": [{"value": "after the signal"}]}"#;
    let addr = b.url.trim_start_matches("http://").to_owned();
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    let (head, tail) = body.split_at(10);
    write!(
        slow,
        "POST /topics/late/records HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{head}",
        body.len()
    )
    .unwrap();
    slow.flush().unwrap();
    // A full round trip on another connection: the slow request's headers are in.
    assert_eq!(b.get("/readyz").status, 200);
    b.signal("TERM");
    b.wait_for_stderr("shutting down");
    slow.write_all(tail.as_bytes()).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("shutting_down"), "{answer}");
    assert!(b.wait_exit(EXIT_TIMEOUT).success());
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/topics/late").body["partitions"][0]["high_watermark"], 0);
}

#[test]
fn recovery_trims_a_torn_tail_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("torn", 1);
    let records: Vec<_> = (0..10).map(|i| json!({"value": format!("v{i}")})).collect();
    assert_eq!(b.post("/topics/torn/records", &json!({ "records": records })).status, 200);
    b.kill9();
    // A write the crash cut short: bytes after the last whole batch.
    let segment = dir.path().join("partitions/torn-0/00000000000000000000.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&segment).unwrap();
    f.write_all(&[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x01, 0x00, 0xde, 0xad])
        .unwrap();
    drop(f);
    let b = Broker::start(dir.path());
    b.wait_for_stderr("trimmed");
    let all = read_all(&b, "torn");
    assert_eq!(all.len(), 10);
    let r = b.post("/topics/torn/records", &json!({"records": [{"value": "next"}]}));
    assert_eq!(r.body["offsets"][0]["offset"], 10);
}

#[test]
fn a_half_created_topic_never_appears() {
    let dir = tempfile::tempdir().unwrap();
    // What a crash in the middle of a create leaves: partition directories and a
    // temp metadata file, but no metadata file.
    std::fs::create_dir_all(dir.path().join("partitions/ghost-0")).unwrap();
    std::fs::create_dir_all(dir.path().join("topics")).unwrap();
    std::fs::write(dir.path().join("topics/ghost.json.tmp"), b"{\"name\":").unwrap();
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/topics").body["topics"], json!([]));
    assert_eq!(b.get("/topics/ghost").status, 404);
    assert!(!dir.path().join("partitions/ghost-0").exists());
    assert!(!dir.path().join("topics/ghost.json.tmp").exists());
    b.wait_for_stderr("ghost-0");
    b.create_topic("ghost", 1);
    assert_eq!(b.get("/topics/ghost/partitions/0/records").body["high_watermark"], 0);
}

#[test]
fn longest_topic_name_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let name = "n".repeat(249);
    let mut b = Broker::start(dir.path());
    b.create_topic(&name, 2);
    let r = b.patch(&format!("/topics/{name}/config"), &json!({"config": {"retention.ms": 1000}}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = b.post(&format!("/topics/{name}/records"), &json!({"records": [{"value": "v", "partition": 1}]}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    b.signal("TERM");
    assert!(b.wait_exit(EXIT_TIMEOUT).success());
    let b = Broker::start(dir.path());
    assert_eq!(read_all(&b, &name).len(), 1);
}

#[test]
fn a_second_signal_exits_at_once_while_a_request_is_in_flight() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.create_topic("slow", 1);
    // A produce whose body never finishes arriving keeps graceful shutdown waiting.
    let addr = b.url.trim_start_matches("http://").to_owned();
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        slow,
        "POST /topics/slow/records HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"records\""
    )
    .unwrap();
    slow.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    b.signal("TERM");
    // The second signal goes only once the first was taken, so the two never merge.
    b.wait_for_stderr("send the signal again");
    let t = Instant::now();
    b.signal("TERM");
    let status = b.wait_exit(EXIT_TIMEOUT);
    assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
    assert_eq!(status.code(), Some(130), "stderr:\n{}", b.stderr());
    b.wait_for_stderr("second signal");
}

#[test]
fn topic_admin_survives_kill_9_at_any_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let client = Client::new(&b.url);
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicUsize::new(0));
    let admin = {
        let (stop, progress) = (stop.clone(), progress.clone());
        std::thread::spawn(move || {
            let (mut created, mut deleted) = (Vec::new(), Vec::new());
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let name = format!("t{i}");
                let body = json!({"name": name, "partitions": 4, "config": {"retention.ms": 1000 + i}});
                match client.try_post("/topics", &body) {
                    Some(r) if r.status == 201 => created.push(name),
                    _ => break,
                }
                // Delete every third topic again, so deletes are in flight too.
                if i % 3 == 0 {
                    let name = created.pop().unwrap();
                    match client.try_delete(&format!("/topics/{name}")) {
                        Some(r) if r.status == 204 => deleted.push(name),
                        // The crash hit this delete: the topic may or may not exist
                        // now, so it is neither acknowledged as created nor deleted.
                        _ => break,
                    }
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
            (created, deleted)
        })
    };
    wait_for_acks(&progress, 20);
    b.kill9();
    stop.store(true, Ordering::Relaxed);
    let (created, deleted) = admin.join().unwrap();

    let b = Broker::start(dir.path());
    let listed: Vec<String> = b.get("/topics").body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for name in &created {
        assert!(listed.contains(name), "acknowledged topic {name} is missing");
    }
    for name in &deleted {
        assert!(!listed.contains(name), "deleted topic {name} came back");
    }
    // Whatever is listed (including a create the crash cut short after its
    // metadata was written) is whole: every partition reads and takes writes.
    for name in &listed {
        let d = b.get(&format!("/topics/{name}"));
        assert_eq!(d.body["partition_count"], 4, "{name}: {:?}", d.body);
        let i: i64 = name[1..].parse().unwrap();
        assert_eq!(d.body["config"]["retention.ms"], 1000 + i);
        for p in 0..4 {
            let r = b.post(
                &format!("/topics/{name}/records"),
                &json!({"records": [{"value": "x", "partition": p}]}),
            );
            assert_eq!(r.status, 200, "{name}/{p}: {:?}", r.body);
        }
    }
    // The broker's own internal topics (committed offsets) are not listed.
    let dirs = std::fs::read_dir(dir.path().join("partitions"))
        .unwrap()
        .map(Result::unwrap)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // The broker's internal topics and the journal are not topics' partitions.
            e.file_type().unwrap().is_dir() && !name.starts_with("__es_") && name != "journal"
        })
        .count();
    assert_eq!(dirs, listed.len() * 4, "partition directories no topic owns survived the restart");
}

#[test]
fn a_data_directory_of_the_old_batch_format_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    // What a broker of the old layout left: a partition whose first batch has magic 1
    // at byte 24, and no FORMAT marker.
    let partition = dir.path().join("partitions/old-0");
    std::fs::create_dir_all(&partition).unwrap();
    let mut batch = vec![0u8; 80];
    batch[24] = 1;
    std::fs::write(partition.join("00000000000000000000.log"), &batch).unwrap();
    let mut child = std::process::Command::new(es_tests::broker::broker_bin())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("es-broker kept running on an old-format data directory");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("magic 1") && stderr.contains("move the directory away or delete it"),
        "{stderr}"
    );
    assert!(partition.join("00000000000000000000.log").exists(), "nothing is deleted");
}
