//! `es-tools dump --online` against the real broker: produces keep running while
//! the dump takes its snapshot, and a broker started on the restored archive
//! serves every record acknowledged before the snapshot byte for byte (and nothing
//! but a prefix of the live log); the produce pause the snapshot causes is
//! measured; a snapshot's lease that runs out removes it, and its links outlive
//! retention while it is held; refusals (unauthorized key, no key, a data
//! directory that is not the broker's, a cluster node, the offline dump of a
//! running broker) each say what to do.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, Client, output_text as text, tools};
use es_tests::cluster::eventually;
use serde_json::{Value, json};

const TOPIC: &str = "orders";
const PARTITIONS: u32 = 3;
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Consume pages per partition before the test gives up (bounds the loop).
const PAGES_MAX: usize = 1000;
/// The longest any wait on the broker in these tests may take.
const WAIT: Duration = Duration::from_secs(30);

fn create_topic(b: &Broker, config: Value) {
    let r = b.post("/topics", &json!({"name": TOPIC, "partitions": PARTITIONS, "config": config}));
    assert_eq!(r.status, 201, "{:?}", r.body);
}

/// Every record of one partition as served (base64; offsets, timestamps, keys,
/// values, headers), from offset 0.
fn partition_records(client: &Client, p: u32) -> Vec<Value> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for _ in 0..PAGES_MAX {
        let path = format!(
            "/topics/{TOPIC}/partitions/{p}/records?offset={offset}&encoding=base64&max_records=10000"
        );
        let r = client.get(&path);
        assert_eq!(r.status, 200, "{:?}", r.body);
        out.extend(r.body["records"].as_array().unwrap().iter().cloned());
        offset = r.body["next_offset"].as_u64().unwrap();
        if offset >= r.body["high_watermark"].as_u64().unwrap() {
            return out;
        }
    }
    panic!("partition {p} has more than {PAGES_MAX} pages");
}

/// One acknowledged produce: where its records went and when the answer came.
#[derive(Debug, Clone)]
struct Ack {
    offsets: Vec<(u32, u64)>,
    sent: Instant,
    answered: Instant,
}

/// Produces small batches to every partition until `stop`, recording each answer.
fn producer(url: String, stop: Arc<AtomicBool>, acks: Arc<Mutex<Vec<Ack>>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let client = Client::new(&url);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut round = 0u64;
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let records: Vec<Value> = (0..PARTITIONS)
                .map(|p| json!({"partition": p, "key": format!("k{round}"), "value": format!("v{round} {}", "x".repeat(200))}))
                .collect();
            let sent = Instant::now();
            let r = client.post(&format!("/topics/{TOPIC}/records"), &json!({"records": records}));
            let answered = Instant::now();
            assert_eq!(r.status, 200, "{:?}", r.body);
            let offsets = r.body["offsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["partition"].as_u64().unwrap() as u32, o["offset"].as_u64().unwrap()))
                .collect();
            acks.lock().unwrap().push(Ack { offsets, sent, answered });
            round += 1;
        }
    })
}

fn stop(b: &mut Broker) {
    b.signal("TERM");
    assert!(b.wait_exit(STOP_TIMEOUT).success(), "the broker did not stop cleanly");
}

/// The produce latency figures: the longest answer overall, and the longest among
/// produces in flight while the snapshot was being taken.
fn pauses(acks: &[Ack], from: Instant, to: Instant) -> (Duration, Duration, usize) {
    let latency = |a: &Ack| a.answered - a.sent;
    let overall = acks.iter().map(latency).max().unwrap_or_default();
    let during: Vec<&Ack> = acks.iter().filter(|a| a.answered >= from && a.sent <= to).collect();
    (overall, during.iter().map(|a| latency(a)).max().unwrap_or_default(), during.len())
}

#[test]
fn an_online_dump_under_load_restores_every_record_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(&dir.path().join("data"));
    create_topic(&b, json!({"segment.bytes": 4096}));
    let (stop_flag, acks) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let producing = producer(b.url.clone(), stop_flag.clone(), acks.clone());
    eventually(WAIT, "the producer got going", || (acks.lock().unwrap().len() >= 200).then_some(()));
    let started = Instant::now();
    let acked_before: Vec<Ack> = acks.lock().unwrap().clone();
    let out = tools(
        &["dump", "--online", "--url", &b.url, "--data-dir", "data", "--out", "backup.tar"],
        dir.path(),
    );
    let finished = Instant::now();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("now released"), "{}", text(&out));
    eventually(WAIT, "more produces after the dump", || {
        (acks.lock().unwrap().iter().filter(|a| a.sent > finished).count() >= 20).then_some(())
    });
    stop_flag.store(true, Ordering::Release);
    producing.join().unwrap();
    let all = acks.lock().unwrap().clone();
    let (overall, during, count) = pauses(&all, started, finished);
    println!(
        "produce latency: longest {overall:?} overall, longest {during:?} over the {count} produces in flight \
         during the dump ({:?})",
        finished - started
    );
    assert!(during < Duration::from_secs(2), "a produce waited {during:?} during the snapshot");
    let live = Client::new(&b.url);
    let live_records: Vec<Vec<Value>> = (0..PARTITIONS).map(|p| partition_records(&live, p)).collect();
    assert!(
        !dir.path().join("data/snapshots").read_dir().unwrap().any(|_| true),
        "the snapshot was released"
    );
    stop(&mut b);
    let restore = tools(&["restore", "--archive", "backup.tar", "--data-dir", "restored"], dir.path());
    assert!(restore.status.success(), "{}", text(&restore));
    let mut r = Broker::start(&dir.path().join("restored"));
    let restored = Client::new(&r.url);
    for p in 0..PARTITIONS {
        let got = partition_records(&restored, p);
        // Nothing but the live log's prefix, byte for byte (base64 of key, value,
        // headers, with offsets and timestamps).
        assert_eq!(got[..], live_records[p as usize][..got.len()], "partition {p} differs from the live log");
        let needed = acked_before
            .iter()
            .flat_map(|a| &a.offsets)
            .filter(|(q, _)| *q == p)
            .map(|(_, o)| o + 1)
            .max()
            .unwrap();
        assert!(
            got.len() as u64 >= needed,
            "partition {p}: {} records restored, {needed} acknowledged before",
            got.len()
        );
    }
    stop(&mut r);
}

#[test]
fn a_held_snapshot_outlives_retention_and_its_lease_running_out_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut b = Broker::start_with(&data, &["--housekeeping-interval-ms", "100"]);
    create_topic(&b, json!({"segment.bytes": 4096}));
    for round in 0..20 {
        let records: Vec<Value> = (0..5)
            .map(|i| json!({"partition": 0, "value": format!("r{round}-{i} {}", "y".repeat(300))}))
            .collect();
        assert_eq!(b.post(&format!("/topics/{TOPIC}/records"), &json!({"records": records})).status, 200);
    }
    let taken = b.post("/snapshots", &json!({"lease_ms": 3000}));
    assert_eq!(taken.status, 201, "{:?}", taken.body);
    let id = taken.body["id"].as_str().unwrap().to_owned();
    let snap = data.join(taken.body["dir"].as_str().unwrap());
    let p0 = taken.body["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topic"] == TOPIC && p["partition"] == 0)
        .unwrap()
        .clone();
    assert_eq!(p0["log_end"], 100, "{p0}");
    let first = format!("{:020}.log", p0["segments"][0].as_u64().unwrap());
    let linked = std::fs::read(snap.join("partitions/orders-0").join(&first)).unwrap();
    // Retention deletes every sealed segment of the live partition; the snapshot's stay.
    assert_eq!(
        b.patch(&format!("/topics/{TOPIC}/config"), &json!({"config": {"retention.bytes": 0}})).status,
        200
    );
    eventually(WAIT, "retention deleted the live segment", || {
        (!data.join("partitions/orders-0").join(&first).exists()).then_some(())
    });
    assert_eq!(std::fs::read(snap.join("partitions/orders-0").join(&first)).unwrap(), linked);
    // Renewed, it is still held after its first lease would have ended.
    assert_eq!(b.post(&format!("/snapshots/{id}/lease"), &json!({"lease_ms": 3000})).status, 200);
    let renewed = Instant::now();
    eventually(WAIT, "the lease ran out and the snapshot went", || (!snap.exists()).then_some(()));
    assert!(
        renewed.elapsed() >= Duration::from_millis(2500),
        "removed {:?} after the renewal",
        renewed.elapsed()
    );
    let gone = b.post(&format!("/snapshots/{id}/lease"), &json!({}));
    assert_eq!((gone.status, gone.code()), (404, "snapshot_not_found"), "{:?}", gone.body);
    assert_eq!(b.delete(&format!("/snapshots/{id}")).status, 404);
    // A crash leaves a held snapshot behind, which the next start removes (its
    // lease ended with the process); a clean stop removes the held ones itself.
    let kept = b.post("/snapshots", &json!({}));
    assert_eq!(kept.status, 201, "{:?}", kept.body);
    b.kill9();
    assert!(data.join(kept.body["dir"].as_str().unwrap()).exists());
    let mut b = Broker::start(&data);
    assert!(!data.join("snapshots").exists(), "a start removes an earlier run's snapshots");
    let held = b.post("/snapshots", &json!({}));
    assert_eq!(held.status, 201, "{:?}", held.body);
    let bad = b.post("/snapshots", &json!({"lease_ms": 1}));
    assert_eq!((bad.status, bad.code()), (400, "invalid_request"), "{:?}", bad.body);
    stop(&mut b);
    assert!(!data.join(held.body["dir"].as_str().unwrap()).exists(), "a clean stop ends every lease");
}

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

#[test]
fn keys_without_a_cluster_admin_grant_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start_env(&dir.path().join("data"), &["--auth"], &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)]);
    let admin = Client::with_key(&b.url, ADMIN);
    let made = admin.post("/keys", &json!({"name": "app", "grants": ["topic:literal:orders:admin"]}));
    assert_eq!(made.status, 201, "{:?}", made.body);
    std::fs::write(dir.path().join("app.key"), made.body["key"].as_str().unwrap()).unwrap();
    std::fs::write(dir.path().join("admin.key"), format!("{ADMIN}\n")).unwrap();
    let online = |key: Option<&str>, out: &str| {
        let mut args = vec!["dump", "--online", "--url", &b.url, "--data-dir", "data", "--out", out];
        if let Some(k) = key {
            args.extend(["--key-file", k]);
        }
        tools(&args, dir.path())
    };
    let refused = online(Some("app.key"), "app.tar");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("refused POST /snapshots (HTTP 403"), "{}", text(&refused));
    let anonymous = online(None, "anon.tar");
    assert!(text(&anonymous).contains("(HTTP 401, unauthenticated)"), "{}", text(&anonymous));
    assert!(!dir.path().join("app.tar").exists() && !dir.path().join("anon.tar").exists());
    assert!(
        !dir.path().join("data/snapshots").exists()
            || dir.path().join("data/snapshots").read_dir().unwrap().next().is_none()
    );
    let allowed = online(Some("admin.key"), "admin.tar");
    assert!(allowed.status.success(), "{}", text(&allowed));
    stop(&mut b);
}

#[test]
fn the_wrong_data_dir_and_the_offline_dump_of_a_running_broker_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(&dir.path().join("data"));
    let mut other = Broker::start(&dir.path().join("other"));
    let offline = tools(&["dump", "--data-dir", "data", "--out", "x.tar"], dir.path());
    assert_eq!(offline.status.code(), Some(1), "{}", text(&offline));
    assert!(
        text(&offline).contains("holds its LOCK") && text(&offline).contains("es-tools dump --online"),
        "{}",
        text(&offline)
    );
    // The snapshot is taken by `other`, so it is not under ./data: refused, and released.
    let wrong =
        tools(&["dump", "--online", "--url", &other.url, "--data-dir", "data", "--out", "x.tar"], dir.path());
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(text(&wrong).contains("is --url the broker whose --data-dir this is?"), "{}", text(&wrong));
    assert_eq!(
        dir.path().join("other/snapshots").read_dir().unwrap().count(),
        0,
        "the snapshot was released"
    );
    let no_url = tools(&["dump", "--online", "--data-dir", "data", "--out", "x.tar"], dir.path());
    assert_eq!(no_url.status.code(), Some(2), "{}", text(&no_url));
    assert!(!dir.path().join("x.tar").exists());
    stop(&mut b);
    stop(&mut other);
}

#[test]
fn a_cluster_node_refuses_an_online_snapshot_and_says_what_to_do() {
    let c = es_tests::cluster::Cluster::start(3);
    let node = c.node(1);
    let r = Client::new(&node.url).post("/snapshots", &json!({}));
    assert_eq!((r.status, r.code()), (400, "invalid_request"), "{:?}", r.body);
    assert!(
        r.body["error"]["message"].as_str().unwrap().contains("not available on a cluster node"),
        "{:?}",
        r.body
    );
}

#[test]
fn the_operations_guide_online_block_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(&dir.path().join("data"));
    create_topic(&b, json!({"segment.bytes": 4096}));
    let records: Vec<Value> = (0..50).map(|i| json!({"value": format!("doc {i}")})).collect();
    assert_eq!(b.post(&format!("/topics/{TOPIC}/records"), &json!({"records": records})).status, 200);
    let block = es_tests::walkthrough::block("docs/operations.md", "### Online dump");
    let walk = es_tests::walkthrough::script(&block, &[("http://127.0.0.1:9000", &b.url)]);
    walk.run(dir.path(), &[], Duration::from_secs(120));
    let live = Client::new(&b.url);
    let expected: Vec<Vec<Value>> = (0..PARTITIONS).map(|p| partition_records(&live, p)).collect();
    stop(&mut b);
    let mut r = Broker::start(&dir.path().join("data-copy"));
    let restored = Client::new(&r.url);
    for p in 0..PARTITIONS {
        assert_eq!(partition_records(&restored, p), expected[p as usize], "partition {p}");
    }
    stop(&mut r);
}
