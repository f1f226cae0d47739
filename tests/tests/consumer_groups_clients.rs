//! Consumer groups through the binary protocol (es-client) and the `es` CLI against
//! the real es-broker: typed fencing errors, durable commits, `es group` admin and
//! `es consume --group`. Every wait is bounded.

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_client::{Client, ClientOptions};
use es_protocol::{ErrorCode, GroupOffset};
use es_tests::broker::{Broker, es_bin};
use serde_json::json;

fn offset(partition: u32, offset: u64) -> GroupOffset {
    GroupOffset { topic: "orders".into(), partition, offset, metadata: "meta".into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_members_are_fenced_and_commits_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", 4);
    let c = Arc::new(Client::connect(&b.binary_addr, ClientOptions::default()).await.unwrap());
    let a = c.join_group("g", "", &["orders"], 10_000).await.unwrap();
    let sa = c.sync_group("g", &a.member_id, a.generation).await.unwrap();
    assert_eq!(sa.assignment.len(), 4);
    c.commit_offsets("g", &a.member_id, a.generation, vec![offset(0, 0)]).await.unwrap();
    let m2 = c.join_group("g", "", &["orders"], 10_000).await.unwrap();
    assert!(m2.generation > a.generation);
    let stale = c.commit_offsets("g", &a.member_id, a.generation, vec![offset(0, 1)]).await.unwrap_err();
    assert_eq!(stale.code(), Some(ErrorCode::IllegalGeneration), "{stale}");
    let hb = c.heartbeat("g", &a.member_id, a.generation).await.unwrap_err();
    assert_eq!(hb.code(), Some(ErrorCode::RebalanceInProgress));
    let unknown = c.heartbeat("g", "nobody", 1).await.unwrap_err();
    assert_eq!(unknown.code(), Some(ErrorCode::UnknownMember));
    // Rejoin, sync: `a` keeps two partitions and revokes two; commit, heartbeat releases.
    let a2 = c.join_group("g", &a.member_id, &["orders"], 10_000).await.unwrap();
    let s = c.sync_group("g", &a.member_id, a2.generation).await.unwrap();
    assert_eq!((s.assignment.len(), s.revoking.len()), (2, 2));
    c.commit_offsets("g", &a.member_id, a2.generation, vec![offset(0, 0), offset(1, 0)]).await.unwrap();
    let released = c.heartbeat("g", &a.member_id, a2.generation).await.unwrap_err();
    assert_eq!(released.code(), Some(ErrorCode::RebalanceInProgress));
    let j = c.join_group("g", &m2.member_id, &["orders"], 10_000).await.unwrap();
    let s2 = c.sync_group("g", &m2.member_id, j.generation).await.unwrap();
    assert_eq!(s2.assignment.len(), 2);
    let fetched = c.fetch_offsets("g").await.unwrap();
    assert_eq!(fetched.len(), 2);
    c.leave_group("g", &a.member_id).await.unwrap();
    c.leave_group("g", &m2.member_id).await.unwrap();
}

/// Runs `es` against the broker; bounded in time.
fn es(url: &str, args: &[&str]) -> Output {
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", url)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning es");
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

fn ok(url: &str, args: &[&str]) -> String {
    let out = es(url, args);
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_consumes_as_a_group_and_administers_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", 3);
    let records: Vec<_> = (0..9)
        .map(|i| json!({"key": format!("k{i}"), "value": format!("v{i}"), "partition": i % 3}))
        .collect();
    assert_eq!(b.post("/topics/orders/records", &json!({ "records": records })).status, 200);
    let out = ok(&b.url, &["consume", "--topic", "orders", "--group", "cli", "--max-records", "9"]);
    assert_eq!(out.lines().count(), 9, "{out}");
    let described = ok(&b.url, &["group", "describe", "--group", "cli"]);
    assert!(described.contains("state Empty"), "{described}");
    assert!(described.contains("kind es"), "{described}");
    assert!(
        described
            .lines()
            .filter(|l| l.starts_with("orders"))
            .all(|l| l.split_whitespace().nth(4) == Some("0")),
        "{described}"
    );
    assert!(ok(&b.url, &["group", "list"]).contains("cli"));
    // Nothing new: a second consume reads nothing; after a reset it reads all again.
    let again = ok(&b.url, &["consume", "--topic", "orders", "--group", "cli"]);
    assert_eq!(again.lines().count(), 0, "{again}");
    ok(&b.url, &["group", "reset-offsets", "--group", "cli", "--topic", "orders", "--to-earliest"]);
    let replay = ok(&b.url, &["consume", "--topic", "orders", "--group", "cli", "--max-records", "9"]);
    assert_eq!(replay.lines().count(), 9);
    ok(&b.url, &["group", "delete", "--group", "cli"]);
    let gone = es(&b.url, &["group", "describe", "--group", "cli"]);
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("group_not_found"));
}
