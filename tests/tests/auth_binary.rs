//! Auth over the binary protocol and the `es key` CLI against the real broker:
//! the Authenticate step, grants and ownership on every op, denied looking like
//! missing, a producer id bound to its key, revocation on an open connection.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_client::{Client, ClientError, ClientOptions};
use es_core::{ProducerInfo, Record};
use es_protocol::{ErrorCode, FetchPartition, GroupRequest, Request, Response};
use es_tests::broker::{self, Broker};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

fn start(dir: &std::path::Path) -> Broker {
    Broker::start_env(dir, &["--auth"], &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
}

async fn connect(b: &Broker, key: Option<&str>) -> Result<Arc<Client>, ClientError> {
    let options = ClientOptions { api_key: key.map(str::to_owned), retries: 0, ..ClientOptions::default() };
    Ok(Arc::new(Client::connect(&b.binary_addr, options).await?))
}

fn make_key(b: &Broker, name: &str, grants: &[&str]) -> String {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let r = admin.post("/keys", &json!({"name": name, "grants": grants}));
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["key"].as_str().unwrap().to_owned()
}

fn batch(value: &str, producer: ProducerInfo) -> Bytes {
    Bytes::from(es_core::batch::encode(&[Record::from_value(value.to_owned())], 1_000, producer).unwrap())
}

fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Broker { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_authenticate_grants_ownership_and_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path());
    let admin = connect(&b, Some(ADMIN)).await.unwrap();
    admin.create_topic("ops.secret", 1, vec![]).await.unwrap();
    admin.produce("ops.secret", 0, batch("canary", ProducerInfo::NONE)).await.unwrap();

    let anon = connect(&b, None).await.unwrap();
    assert_eq!(refusal(anon.list_topics().await).0, ErrorCode::Unauthenticated);
    let wrong = ADMIN.replace("AAAA", "AAAB");
    assert_eq!(refusal(connect(&b, Some(&wrong)).await).0, ErrorCode::Unauthenticated);

    let grants = ["topic:prefixed:billing.:admin", "group:prefixed:billing.:read"];
    let billing_key = make_key(&b, "billing", &grants);
    let billing = connect(&b, Some(&billing_key)).await.unwrap();
    let rival = connect(&b, Some(&make_key(&b, "rival", &grants))).await.unwrap();
    billing.create_topic("billing.b", 1, vec![]).await.unwrap();
    billing.produce("billing.b", 0, batch("mine", ProducerInfo::NONE)).await.unwrap();
    let names: Vec<String> = billing.list_topics().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["billing.b"]);

    // Denied is missing, op by op (the message names the topic; nothing else differs).
    let same = |a: (ErrorCode, String), b: (ErrorCode, String)| {
        assert_eq!((a.0, a.1.replace("ops.secret", "N")), (b.0, b.1.replace("ops.none", "N")));
        assert_eq!(a.0, ErrorCode::UnknownTopic);
    };
    same(
        refusal(billing.produce("ops.secret", 0, batch("x", ProducerInfo::NONE)).await),
        refusal(billing.produce("ops.none", 0, batch("x", ProducerInfo::NONE)).await),
    );
    same(
        refusal(billing.describe_topic("ops.secret").await),
        refusal(billing.describe_topic("ops.none").await),
    );
    same(refusal(billing.delete_topic("ops.secret").await), refusal(billing.delete_topic("ops.none").await));
    let spec = es_protocol::OffsetSpec::Latest;
    same(
        refusal(billing.list_offsets("ops.secret", 0, spec).await),
        refusal(billing.list_offsets("ops.none", 0, spec).await),
    );
    let fetch = |topic: &str| Request::Fetch {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        partitions: vec![FetchPartition { topic: topic.into(), partition: 0, offset: 0, max_bytes: 1 << 20 }],
    };
    match billing.call(fetch("ops.secret")).await.unwrap() {
        Response::Fetch { partitions } => {
            assert_eq!(partitions[0].error, ErrorCode::UnknownTopic);
            assert!(partitions[0].data.is_empty(), "no canary bytes leak");
        }
        other => panic!("{other:?}"),
    }

    // Groups: the first key to join owns the group; the rival is refused.
    let join = |group: &str| {
        Request::Group(GroupRequest::Join {
            group: group.into(),
            member_id: String::new(),
            client_id: "t".into(),
            topics: vec!["billing.b".into()],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
        })
    };
    assert!(matches!(billing.call(join("billing.g")).await.unwrap(), Response::Group(_)));
    let taken = refusal(rival.call(join("billing.g")).await);
    let outside = refusal(billing.call(join("ops.g")).await);
    assert_eq!(taken.0, outside.0);
    let offsets = Request::Group(GroupRequest::OffsetFetch { group: "billing.g".into() });
    assert_eq!(refusal(rival.call(offsets).await).0, taken.0);

    // A producer id belongs to the key it was issued to.
    let (pid, epoch) = billing.init_producer_id().await.unwrap();
    let theirs = ProducerInfo { producer_id: pid, producer_epoch: epoch, base_sequence: 0 };
    let stolen = refusal(rival.produce("billing.b", 0, batch("stolen", theirs)).await);
    assert_eq!(stolen.0, ErrorCode::UnknownProducerId);
    billing.produce("billing.b", 0, batch("own id", theirs)).await.unwrap();

    // Revoke: the open connection is refused on its next request, within a second.
    let id = &billing_key[3..19];
    let r = broker::Client::with_key(&b.url, ADMIN).delete(&format!("/keys/{id}"));
    assert_eq!(r.status, 200);
    let started = Instant::now();
    let after = refusal(billing.produce("billing.b", 0, batch("late", ProducerInfo::NONE)).await);
    assert_eq!(after.0, ErrorCode::Unauthenticated);
    assert!(started.elapsed() < Duration::from_secs(1));
    let p = FetchPartition { topic: "ops.secret".into(), partition: 0, offset: 0, max_bytes: 1 << 20 };
    let canary = admin.fetch(0, 1 << 20, vec![p]).await.unwrap();
    assert!(!canary[0].data.is_empty(), "the victim's canary is intact");
}

fn es(b: &Broker, key: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(broker::es_bin());
    cmd.env("ES_BROKER", &b.url).env("ES_BROKER_BINARY", &b.binary_addr).env_remove("ES_API_KEY");
    if let Some(key) = key {
        cmd.env("ES_API_KEY", key);
    }
    cmd.args(args);
    es_tests::peers::output(&mut cmd, None, Duration::from_secs(30), &format!("es {args:?}"))
}

#[test]
fn es_key_commands() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path());
    let generated = String::from_utf8(es(&b, None, &["key", "generate"]).stdout).unwrap();
    assert!(generated.trim().starts_with("es_") && generated.trim().len() == 63, "{generated}");
    let out = es(
        &b,
        Some(ADMIN),
        &[
            "--json",
            "key",
            "create",
            "--name",
            "ci",
            "--grant",
            "topic:prefixed:ci.:admin",
            "--produce-bytes-per-s",
            "9000000",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = made["key"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["quota"], json!({"produce_bytes_per_s": 9_000_000}));
    let quota = |args: &[&str]| {
        let out = es(&b, Some(ADMIN), &[&["key", "quota", id.as_str()][..], args].concat());
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (set, shown) = quota(&["--fetch-bytes-per-s", "1000000", "--requests-per-s", "500"]);
    assert!(set && shown.contains("quota:   produce default, fetch 1000000 B/s, requests 500 /s"), "{shown}");
    assert!(!quota(&["--requests-per-s", "0"]).0, "a zero rate is refused before it is sent");
    let (cleared, shown) = quota(&[]);
    assert!(
        cleared && shown.contains("quota:   produce default, fetch default, requests default"),
        "{shown}"
    );
    let listed = String::from_utf8(es(&b, Some(ADMIN), &["key", "list"]).stdout).unwrap();
    assert!(
        listed.contains(&id) && listed.contains("topic:prefixed:ci.:admin") && !listed.contains(&key[20..])
    );
    assert!(es(&b, Some(&key), &["topic", "create", "ci.t"]).status.success());
    let produced = es(&b, Some(&key), &["produce", "ci.t", "--value", "v", "--protocol", "binary"]);
    assert!(produced.status.success(), "{}", String::from_utf8_lossy(&produced.stderr));
    let denied = es(&b, None, &["topic", "list"]);
    assert!(!denied.status.success());
    assert!(String::from_utf8_lossy(&denied.stderr).contains("unauthenticated") || !denied.stderr.is_empty());
    let rotated = es(&b, Some(ADMIN), &["--json", "key", "rotate", &id]);
    let new_key =
        serde_json::from_slice::<Value>(&rotated.stdout).unwrap()["key"].as_str().unwrap().to_owned();
    assert!(!es(&b, Some(&key), &["topic", "list"]).status.success(), "the old secret stops");
    assert!(es(&b, Some(&new_key), &["topic", "list"]).status.success());
    assert!(es(&b, Some(ADMIN), &["key", "revoke", &id]).status.success());
    let described = String::from_utf8(es(&b, Some(ADMIN), &["key", "describe", &id]).stdout).unwrap();
    assert!(described.contains("revoked"), "{described}");
    assert!(!es(&b, Some(&new_key), &["topic", "list"]).status.success());
    assert!(!b.stderr().contains(&new_key[20..]) && !b.stderr().contains(&key[20..]));
}

/// Reads a 4 kB record as `reader` until refused; checks the refusal is the typed
/// throttle and that `other` still reads.
async fn a_reader_is_throttled_and_another_is_not(b: &Broker, reader: &str, other: &str) {
    let admin = connect(b, Some(ADMIN)).await.unwrap();
    admin.create_topic("q", 1, vec![]).await.unwrap();
    admin.produce("q", 0, batch(&"x".repeat(4_000), ProducerInfo::NONE)).await.unwrap();
    let (reader, other) = (connect(b, Some(reader)).await.unwrap(), connect(b, Some(other)).await.unwrap());
    let part = || vec![FetchPartition { topic: "q".into(), partition: 0, offset: 0, max_bytes: 1 << 20 }];
    let mut throttled = None;
    for _ in 0..10 {
        match reader.fetch(0, 1 << 20, part()).await {
            Ok(read) => assert!(!read[0].data.is_empty()),
            Err(e) => {
                throttled = Some(e);
                break;
            }
        }
    }
    let (code, message) = refusal::<()>(Err(throttled.expect("the reader was never throttled")));
    assert_eq!(code, ErrorCode::Throttled, "{message}");
    assert!(message.contains("retry after"), "{message}");
    for _ in 0..10 {
        assert!(other.fetch(0, 1 << 20, part()).await.is_ok(), "another key keeps its own quota");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_quota_throttles_over_binary_with_a_typed_code() {
    let dir = tempfile::tempdir().unwrap();
    // 1 kB/s, 10 s of burst: a 4 kB record read a few times puts the key in debt.
    let env = [("ES_AUTH_BOOTSTRAP_KEY", ADMIN)];
    let b = Broker::start_env(dir.path(), &["--auth", "--quota-fetch-bytes-per-s", "1000"], &env);
    let reader = make_key(&b, "reader", &["topic:literal:q:read"]);
    // The other key's own quota is far above the default, so ten reads never reach it.
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let body = json!({"name": "other", "grants": ["topic:literal:q:read"], "quota": {"fetch_bytes_per_s": 10_000_000}});
    let other = admin.post("/keys", &body).body["key"].as_str().unwrap().to_owned();
    a_reader_is_throttled_and_another_is_not(&b, &reader, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_own_fetch_quota_throttles_over_binary_without_a_default() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path());
    let (reader, other) =
        (make_key(&b, "reader", &["topic:literal:q:read"]), make_key(&b, "other", &["topic:literal:q:read"]));
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let id = &reader[3..19];
    let set = admin.put(&format!("/keys/{id}/quota"), &json!({"fetch_bytes_per_s": 1000}));
    assert_eq!(set.status, 200, "{}", set.body);
    a_reader_is_throttled_and_another_is_not(&b, &reader, &other).await;
}
