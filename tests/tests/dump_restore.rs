//! es-tools dump and restore against the real broker: records produced over HTTP
//! and the binary protocol (plain and gzip, several segments) come back identical
//! from a broker started on the restored directory; a running broker's directory is
//! refused with the lock message; and docs/operations.md's "Backup and restore"
//! block runs here as written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use es_client::{Client, ClientOptions};
use es_core::batch::{self, Compression};
use es_core::{Header, ProducerInfo, Record};
use es_tests::broker::{Broker, output_text as text, tools};
use serde_json::{Value, json};

const TOPIC: &str = "orders";
const PARTITIONS: u32 = 3;
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Consume pages per partition before the test gives up (bounds the loop).
const PAGES_MAX: usize = 1000;

/// Small segments (4 KiB), so partitions hold several sealed segments.
fn create_topic(b: &Broker) {
    let body = json!({"name": TOPIC, "partitions": PARTITIONS, "config": {"segment.bytes": 4096}});
    let r = b.post("/topics", &body);
    assert_eq!(r.status, 201, "{:?}", r.body);
}

fn produce_http(b: &Broker) {
    for round in 0..40 {
        let records: Vec<Value> = (0..10)
            .map(|i| {
                json!({"key": format!("k{round}-{i}"), "value": format!("http value {round} {i} {}", "x".repeat(i * 20)),
                       "headers": [{"key": "round", "value": round.to_string()}]})
            })
            .collect();
        let r = b.post(&format!("/topics/{TOPIC}/records"), &json!({"records": records}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    // Binary-safe bytes, a null value and an empty one, by base64.
    let r = b.post(
        &format!("/topics/{TOPIC}/records"),
        &json!({"encoding": "base64", "records": [
            {"key": "AAEC/w==", "value": "//79AA==", "partition": 0},
            {"key": "dG9tYg==", "value": null, "partition": 1},
            {"value": "", "partition": 2}]}),
    );
    assert_eq!(r.status, 200, "{:?}", r.body);
}

fn produce_binary(b: &Broker) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = Client::connect(&b.binary_addr, ClientOptions::default()).await.expect("connecting");
        for (n, compression) in
            [Compression::None, Compression::Gzip].into_iter().cycle().take(12).enumerate()
        {
            let records: Vec<Record> = (0..25)
                .map(|i| Record {
                    key: Some(Bytes::from(format!("bin-{n}-{i}"))),
                    value: Some(Bytes::from(vec![(i * 7) as u8; 30 + i])),
                    headers: vec![Header { key: "n".into(), value: Some(Bytes::from(n.to_string())) }],
                    timestamp: Some(1_700_000_000_000 + i as i64),
                })
                .collect();
            let plain = batch::encode(&records, 1_700_000_000_000, ProducerInfo::NONE).unwrap();
            let bytes = batch::compress(&plain, compression).unwrap();
            client
                .produce(TOPIC, (n % PARTITIONS as usize) as u32, Bytes::from(bytes))
                .await
                .expect("producing");
        }
    });
}

/// Every record of every partition, as the broker serves them (base64, with
/// offsets, timestamps, keys, values and headers).
fn all_records(b: &Broker) -> Vec<Value> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        let mut offset = 0u64;
        for _ in 0..PAGES_MAX {
            let r = b.get(&format!(
                "/topics/{TOPIC}/partitions/{p}/records?offset={offset}&encoding=base64&max_records=10000"
            ));
            assert_eq!(r.status, 200, "{:?}", r.body);
            out.extend(
                r.body["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|rec| json!({"partition": p, "record": rec})),
            );
            offset = r.body["next_offset"].as_u64().unwrap();
            if offset >= r.body["high_watermark"].as_u64().unwrap() {
                break;
            }
        }
    }
    out
}

fn stop(b: &mut Broker) {
    b.signal("TERM");
    assert!(b.wait_exit(STOP_TIMEOUT).success(), "the broker did not stop cleanly");
}

/// A stopped broker's data directory with records in it, and those records.
fn populated(dir: &Path) -> (PathBuf, Vec<Value>, Value) {
    let data = dir.join("data");
    let mut b = Broker::start(&data);
    create_topic(&b);
    produce_http(&b);
    produce_binary(&b);
    let records = all_records(&b);
    assert!(records.len() > 700, "{} records", records.len());
    let described = b.get(&format!("/topics/{TOPIC}")).body;
    let running = tools(&["dump", "--data-dir", "data", "--out", "while-running.tar"], dir);
    assert_eq!(running.status.code(), Some(1), "{}", text(&running));
    assert!(
        text(&running).contains("in use: a running broker holds its LOCK. Stop the broker"),
        "{}",
        text(&running)
    );
    assert!(!dir.join("while-running.tar").exists() && !dir.join("while-running.tar.partial").exists());
    stop(&mut b);
    (data, records, described)
}

fn segments(data: &Path) -> usize {
    let p = data.join(format!("partitions/{TOPIC}-0"));
    std::fs::read_dir(p)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
        .count()
}

#[test]
fn a_restored_directory_serves_every_record_identically() {
    let dir = tempfile::tempdir().unwrap();
    let (data, records, described) = populated(dir.path());
    assert!(segments(&data) > 2, "the partition rolled: {} segments", segments(&data));
    let out = tools(&["dump", "--data-dir", "data", "--out", "backup.tar"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{PARTITIONS} partition(s)")) || text(&out).contains("partition(s)")
    );
    let verify =
        tools(&["restore", "--archive", "backup.tar", "--data-dir", "restored", "--verify-only"], dir.path());
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(!dir.path().join("restored").exists(), "--verify-only wrote the target");
    let restore = tools(&["restore", "--archive", "backup.tar", "--data-dir", "restored"], dir.path());
    assert!(restore.status.success(), "{}", text(&restore));
    let mut b = Broker::start(&dir.path().join("restored"));
    assert_eq!(all_records(&b), records, "the restored broker serves other records");
    let over_running = tools(&["restore", "--archive", "backup.tar", "--data-dir", "restored"], dir.path());
    assert_eq!(over_running.status.code(), Some(1), "{}", text(&over_running));
    assert!(
        text(&over_running).contains("holds its LOCK")
            && text(&over_running).contains("nothing was replaced")
    );
    let again = b.get(&format!("/topics/{TOPIC}")).body;
    assert_eq!(again, described, "the topic's metadata and offsets differ");
    stop(&mut b);
}

#[test]
fn a_tampered_archive_is_refused_and_the_live_directory_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _, _) = populated(dir.path());
    let out = tools(&["dump", "--data-dir", "data", "--out", "backup.tar"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let mut bytes = std::fs::read(dir.path().join("backup.tar")).unwrap();
    let needle = b"http value 39 9";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("a record's bytes in the archive");
    bytes[at] ^= 0x20;
    std::fs::write(dir.path().join("tampered.tar"), &bytes).unwrap();
    let before = std::fs::read_dir(&data).unwrap().count();
    let refused = tools(&["restore", "--archive", "tampered.tar", "--data-dir", "data"], dir.path());
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let message = text(&refused);
    // The batch check runs as the bytes stream, the hash at the file's end: a flipped
    // record byte fails its batch's CRC first.
    assert!(message.contains(&format!("refused partitions/{TOPIC}-")), "{message}");
    assert!(message.contains("crc mismatch") || message.contains("sha256"), "{message}");
    assert!(message.contains("nothing was replaced"), "{message}");
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), before);
    let beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!beside.iter().any(|n| n.contains(".restore-") || n.contains(".bak-")), "{beside:?}");
}

#[test]
fn the_operations_guide_backup_block_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_, records, _) = populated(dir.path());
    let block = es_tests::walkthrough::block("docs/operations.md", "## Backup and restore\n");
    let walk = es_tests::walkthrough::script(&block, &[]);
    let out = walk.run(dir.path(), &[], Duration::from_secs(120));
    let kept = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("data.bak-"))
        .count();
    assert_eq!(kept, 1, "restoring over ./data keeps the old one:\n{out}");
    let mut b = Broker::start(&dir.path().join("data"));
    assert_eq!(all_records(&b), records);
    stop(&mut b);
}

fn journal_files(data: &Path) -> usize {
    let dir = data.join("partitions/journal");
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".journal")).count()
        })
        .unwrap_or(0)
}

#[test]
fn a_journal_left_by_kill_9_is_refused_then_replayed_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut b = Broker::start_with(&data, &["--journal-enabled", "true"]);
    create_topic(&b);
    produce_http(&b);
    let acknowledged = all_records(&b);
    b.kill9();
    assert!(journal_files(&data) > 0, "kill -9 left no journal file");
    let refused = tools(&["dump", "--data-dir", "data", "--out", "backup.tar"], dir.path());
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("a crash left unreplayed") && text(&refused).contains("--replay-journal")
    );
    assert!(!dir.path().join("backup.tar").exists());
    let out = tools(&["dump", "--data-dir", "data", "--out", "backup.tar", "--replay-journal"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("replayed the journal first"), "{}", text(&out));
    assert_eq!(journal_files(&data), 0, "the replay removes the journal files");
    let restore = tools(&["restore", "--archive", "backup.tar", "--data-dir", "restored"], dir.path());
    assert!(restore.status.success(), "{}", text(&restore));
    let mut b = Broker::start(&dir.path().join("restored"));
    assert_eq!(all_records(&b), acknowledged, "an acknowledged record is missing from the restored copy");
    stop(&mut b);
}
