//! The adversarial harness (start): a seeded universe of keys, prefixes, topics
//! with canary records and owned groups, then every tenant attacks every other
//! over HTTP and binary. Every attack must get an explicit refusal (a timeout is
//! a failure), no canary byte may reach an attacker, and every victim's data must
//! be intact at the end. Fixed seed in CI; `ES_HARNESS_SEED=<n>` replays or soaks.
//! Kafka attacks (SASL PLAIN on raw connections) are in `auth_harness/kafka.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_client::{Client, ClientError, ClientOptions};
use es_core::{ProducerInfo, Record};
use es_protocol::{ErrorCode, FetchPartition, GroupRequest, OffsetSpec, Request, Response};
use es_tests::broker::{self, Broker, Resp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "auth_harness/kafka.rs"]
mod kafka;

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const SEED: u64 = 0x5eed_0015;
const TENANTS: usize = 4;
const CALL: Duration = Duration::from_secs(10);

struct Tenant {
    key: String,
    prefix: String,
    topics: Vec<String>,
    group: String,
    canaries: Vec<String>,
    http: broker::Client,
    binary: Arc<Client>,
}

#[derive(Default)]
struct Ledger {
    attacks: BTreeMap<&'static str, usize>,
    breakouts: Vec<String>,
}

impl Ledger {
    /// An HTTP attack: refused explicitly (401, 403, 404, 429) and no canary in the answer.
    fn http(&mut self, kind: &'static str, what: &str, r: &Resp, canaries: &[String]) {
        *self.attacks.entry(kind).or_default() += 1;
        let text = r.body.to_string();
        if !matches!(r.status, 401 | 403 | 404 | 429) {
            self.breakouts.push(format!("{kind}: {what}: {} {text}", r.status));
        }
        if let Some(c) = canaries.iter().find(|c| text.contains(c.as_str())) {
            self.breakouts.push(format!("{kind}: {what}: leaked {c}"));
        }
    }

    /// A binary attack: a broker refusal, never success, a timeout or a lost connection.
    fn binary<T: std::fmt::Debug>(
        &mut self,
        kind: &'static str,
        what: &str,
        r: Option<Result<T, ClientError>>,
    ) {
        *self.attacks.entry(kind).or_default() += 1;
        match r {
            Some(Err(ClientError::Broker { .. })) => {}
            other => self.breakouts.push(format!("{kind}: {what}: {other:?}")),
        }
    }
}

fn seed() -> u64 {
    std::env::var("ES_HARNESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(SEED)
}

fn batch(value: &str, producer: ProducerInfo) -> Bytes {
    Bytes::from(es_core::batch::encode(&[Record::from_value(value.to_owned())], 1_000, producer).unwrap())
}

async fn timed<T>(
    f: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Option<Result<T, ClientError>> {
    tokio::time::timeout(CALL, f).await.ok()
}

async fn universe(b: &Broker, rng: &mut StdRng) -> Vec<Tenant> {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let mut tenants = Vec::new();
    for i in 0..TENANTS {
        let prefix = format!("acct{}{}.", i, rng.random_range(100..999));
        let grants = [format!("topic:prefixed:{prefix}:admin"), format!("group:prefixed:{prefix}:read")];
        let made = admin.post("/keys", &json!({"name": format!("tenant{i}"), "grants": grants}));
        assert_eq!(made.status, 201, "{}", made.body);
        let key = made.body["key"].as_str().unwrap().to_owned();
        let http = broker::Client::with_key(&b.url, &key);
        let options = ClientOptions { api_key: Some(key.clone()), retries: 0, ..ClientOptions::default() };
        let binary = Arc::new(Client::connect(&b.binary_addr, options).await.unwrap());
        let mut topics = Vec::new();
        let mut canaries = Vec::new();
        for t in 0..2 {
            let topic = format!("{prefix}t{t}");
            binary.create_topic(&topic, 1, vec![]).await.unwrap();
            let canary = format!("canary-{}", rng.random::<u64>());
            binary.produce(&topic, 0, batch(&canary, ProducerInfo::NONE)).await.unwrap();
            topics.push(topic);
            canaries.push(canary);
        }
        let group = format!("{prefix}g");
        let join = json!({"topics": [topics[0]], "session_timeout_ms": 30000});
        assert_eq!(http.post(&format!("/groups/{group}/join"), &join).status, 200);
        tenants.push(Tenant { key, prefix, topics, group, canaries, http, binary });
    }
    tenants
}

fn http_attacks(a: &Tenant, v: &Tenant, all: &[String], ledger: &mut Ledger) {
    for t in &v.topics {
        let reads = [
            format!("/topics/{t}/partitions/0/records?offset=earliest"),
            format!("/topics/{t}"),
            format!("/topics/{t}/config"),
            format!("/topics/{t}/offsets"),
            format!("/topics/{t}/validators"),
        ];
        for path in &reads {
            ledger.http("http read/describe", path, &a.http.get(path), all);
        }
        for offset in ["-2", "-1", "0", "9223372036854775807"] {
            let path = format!("/topics/{t}/partitions/0/records?offset={offset}");
            ledger.http("http offset seek", &path, &a.http.get(&path), all);
        }
        let write = json!({"records": [{"value": "attack"}]});
        ledger.http("http write", t, &a.http.post(&format!("/topics/{t}/records"), &write), all);
        ledger.http("http delete", t, &a.http.delete(&format!("/topics/{t}")), all);
        let alter = r#"{"config":{"retention.ms":1}}"#;
        ledger.http("http alter", t, &a.http.send("PATCH", &format!("/topics/{t}/config"), alter), all);
        let more = json!({"count": 4});
        ledger.http("http alter", t, &a.http.post(&format!("/topics/{t}/partitions"), &more), all);
        let schema = json!({"schema": "{\"type\":\"string\"}"});
        let subject = format!("/registry/subjects/{t}-value/versions");
        ledger.http("http schema", &subject, &a.http.post(&subject, &schema), all);
    }
    let g = &v.group;
    let join = json!({"topics": [v.topics[0]], "session_timeout_ms": 30000});
    let member = json!({"member_id": "m", "generation": 1});
    let commit = json!({"member_id": "m", "generation": 1, "offsets": [{"topic": v.topics[0], "partition": 0, "offset": 0}]});
    for (method, path, body) in [
        ("POST", format!("/groups/{g}/join"), join.to_string()),
        ("POST", format!("/groups/{g}/sync"), member.to_string()),
        ("POST", format!("/groups/{g}/heartbeat"), member.to_string()),
        ("POST", format!("/groups/{g}/leave"), member.to_string()),
        ("POST", format!("/groups/{g}/offsets"), commit.to_string()),
        ("GET", format!("/groups/{g}/offsets"), String::new()),
        ("GET", format!("/groups/{g}"), String::new()),
        ("DELETE", format!("/groups/{g}"), String::new()),
        ("POST", format!("/groups/{g}/members"), join.to_string()),
        // Side doors through the attacker's own group into the victim's topic.
        ("POST", format!("/groups/{}/join", a.group), join.to_string()),
        ("POST", format!("/groups/{}/members", a.group), join.to_string()),
        ("POST", format!("/groups/{}/offsets", a.group), commit.to_string()),
        (
            "POST",
            format!("/groups/{}/reset-offsets", a.group),
            json!({"topic": v.topics[0], "to": "latest"}).to_string(),
        ),
    ] {
        ledger.http("http group", &path, &a.http.send(method, &path, &body), all);
    }
}

/// Names that look like the victim's but are not (case, `..`, NUL, homoglyphs,
/// prefix drift) or that try to escape the attacker's own prefix.
fn name_tricks(a: &Tenant, v: &Tenant, all: &[String], ledger: &mut Ledger) {
    let vt = &v.topics[0];
    let stem = v.prefix.trim_end_matches('.');
    let tricks = [
        vt.to_uppercase(),
        format!("{}..{}", a.prefix, vt),
        format!("{}%2F..%2F{}", a.prefix, vt),
        format!("{vt}%00"),
        vt.replacen('a', "\u{0430}", 1),
        format!("{stem}x.t0"),
        stem.to_owned(),
        vt.clone() + ".",
    ];
    for name in &tricks {
        let path = format!("/topics/{name}/partitions/0/records?offset=earliest");
        ledger.http("http name trick", &path, &a.http.get(&path), all);
        if !name.starts_with(&a.prefix) {
            let create = a.http.post("/topics", &json!({"name": name, "partitions": 1}));
            ledger.http("http name trick create", name, &create, all);
        }
    }
}

async fn binary_attacks(a: &Tenant, v: &Tenant, ledger: &mut Ledger) {
    let c = &a.binary;
    for t in &v.topics {
        let fetch = Request::Fetch {
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partitions: vec![FetchPartition {
                topic: t.clone(),
                partition: 0,
                offset: 0,
                max_bytes: 1 << 20,
            }],
        };
        match timed(c.call(fetch)).await {
            Some(Ok(Response::Fetch { partitions })) => {
                *ledger.attacks.entry("binary read").or_default() += 1;
                if partitions.iter().any(|p| p.error == ErrorCode::None || !p.data.is_empty()) {
                    ledger.breakouts.push(format!("binary read: {t}: {partitions:?}"));
                }
            }
            other => ledger.binary("binary read", t, other.map(|r| r.map(|_| ()))),
        }
        ledger.binary("binary write", t, timed(c.produce(t, 0, batch("attack", ProducerInfo::NONE))).await);
        ledger.binary("binary describe", t, timed(c.describe_topic(t)).await);
        ledger.binary("binary delete", t, timed(c.delete_topic(t)).await);
        for spec in [OffsetSpec::Earliest, OffsetSpec::Latest, OffsetSpec::Timestamp(i64::MAX)] {
            ledger.binary("binary offset seek", t, timed(c.list_offsets(t, 0, spec)).await);
        }
    }
    let g = &v.group;
    let join = Request::Group(GroupRequest::Join {
        group: g.clone(),
        member_id: String::new(),
        client_id: "attacker".into(),
        topics: vec![v.topics[0].clone()],
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
    });
    ledger.binary("binary group", g, timed(c.call(join)).await);
    let fetch = Request::Group(GroupRequest::OffsetFetch { group: g.clone() });
    ledger.binary("binary group", g, timed(c.call(fetch)).await);
    let side_door = Request::Group(GroupRequest::Join {
        group: a.group.clone(),
        member_id: String::new(),
        client_id: "attacker".into(),
        topics: vec![v.topics[0].clone()],
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
    });
    ledger.binary("binary group side door", &a.group, timed(c.call(side_door)).await);
    // Another key's producer id.
    let (pid, epoch) = v.binary.init_producer_id().await.unwrap();
    let theirs = ProducerInfo { producer_id: pid, producer_epoch: epoch, base_sequence: 0 };
    let own = &a.topics[0];
    ledger.binary("binary producer id reuse", own, timed(c.produce(own, 0, batch("reuse", theirs))).await);
}

/// Garbage on fresh connections; then the broker must still answer a tenant.
async fn malformed_then_alive(b: &Broker, t: &Tenant, rng: &mut StdRng, ledger: &mut Ledger) {
    for _ in 0..20 {
        let len = rng.random_range(0..64);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if rng.random_bool(0.5) {
            junk.splice(0..0, [0xff, 0xff, 0xff, 0xff]);
        }
        let mut s = tokio::net::TcpStream::connect(&b.binary_addr).await.unwrap();
        let _ = s.write_all(&junk).await;
        let _ = s.shutdown().await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(CALL, s.read_to_end(&mut out)).await;
        *ledger.attacks.entry("malformed frame").or_default() += 1;
        if timed(t.binary.list_topics()).await.is_none_or(|r| r.is_err()) {
            ledger.breakouts.push("liveness: the broker stopped answering after malformed frames".into());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_attacks_find_no_breakout() {
    let seed = seed();
    println!("auth harness seed: {seed} (replay with ES_HARNESS_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let args = ["--auth", "--kafka-allow-plaintext-plain"];
    let b = Broker::start_env(dir.path(), &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)]);
    let tenants = universe(&b, &mut rng).await;
    let canaries: Vec<String> = tenants.iter().flat_map(|t| t.canaries.clone()).collect();
    let ids = topic_ids(&b, &tenants);
    let mut ledger = Ledger::default();
    for a in &tenants {
        let mut kc = kafka::login(&b.kafka_addr, a);
        for (j, v) in tenants.iter().enumerate().filter(|(_, v)| v.prefix != a.prefix) {
            let theirs = &v.canaries;
            http_attacks(a, v, theirs, &mut ledger);
            name_tricks(a, v, theirs, &mut ledger);
            binary_attacks(a, v, &mut ledger).await;
            kafka::topics(&mut kc, a, v, &mut ledger);
            kafka::topic_ids(&mut kc, v, &ids[j], &mut ledger);
            kafka::groups(&mut kc, a, v, &mut ledger);
            let (pid, epoch) = v.binary.init_producer_id().await.unwrap();
            kafka::producer_id(&mut kc, a, pid, epoch, &mut ledger);
        }
        let listed = a.http.get("/topics").body.to_string() + &a.http.get("/groups").body.to_string();
        *ledger.attacks.entry("listing").or_default() += 1;
        for other in tenants.iter().filter(|v| v.prefix != a.prefix) {
            let mut names = other.topics.clone();
            names.push(other.group.clone());
            if names.iter().any(|n| listed.contains(&format!("\"{n}\""))) {
                ledger
                    .breakouts
                    .push(format!("listing: {} sees {}'s topics or groups", a.prefix, other.prefix));
            }
        }
        if let Some(c) = canaries.iter().find(|c| !a.canaries.contains(c) && listed.contains(c.as_str())) {
            ledger.breakouts.push(format!("listing leaked {c}"));
        }
    }
    malformed_then_alive(&b, &tenants[0], &mut rng, &mut ledger).await;
    let mut live = kafka::login(&b.kafka_addr, &tenants[0]);
    kafka::malformed_sasl(&b.kafka_addr, &mut live, &mut rng, &mut ledger);
    kafka::scram_enumeration(&b.kafka_addr, &tenants[1], &mut ledger);
    kafka::sasl_guessing(&b.kafka_addr, &tenants[1], &mut ledger);
    revoke_then_write(&b, &tenants[TENANTS - 1], &mut ledger).await;
    brute_force(&b, &tenants[0], &mut ledger);
    // Every victim still holds exactly its canaries.
    let admin = broker::Client::with_key(&b.url, ADMIN);
    for t in &tenants {
        for (topic, canary) in t.topics.iter().zip(&t.canaries) {
            let r = admin.get(&format!("/topics/{topic}/partitions/0/records?offset=earliest"));
            let records = r.body["records"].as_array().cloned().unwrap_or_default();
            if records.len() != 1 || !r.body.to_string().contains(canary) {
                ledger.breakouts.push(format!("{topic} changed: {}", r.body));
            }
        }
    }
    println!("attacks by kind: {:#?}", ledger.attacks);
    let total: usize = ledger.attacks.values().sum();
    assert!(total > 500, "the harness made only {total} attacks");
    assert!(
        ledger.breakouts.is_empty(),
        "seed {seed}: {} breakouts:\n{}",
        ledger.breakouts.len(),
        ledger.breakouts.join("\n")
    );
}

/// A revoked key is refused on its open connections (binary, Kafka) and over HTTP at once.
async fn revoke_then_write(b: &Broker, t: &Tenant, ledger: &mut Ledger) {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let mut kc = kafka::login(&b.kafka_addr, t);
    assert_eq!(admin.delete(&format!("/keys/{}", &t.key[3..19])).status, 200);
    kafka::revoked_write(&mut kc, t, ledger);
    let own = &t.topics[0];
    let write = json!({"records": [{"value": "after revoke"}]});
    ledger.http("revoke then write", own, &t.http.post(&format!("/topics/{own}/records"), &write), &[]);
    let r = timed(t.binary.produce(own, 0, batch("after revoke", ProducerInfo::NONE))).await;
    ledger.binary("revoke then write", own, r);
}

/// Every tenant's topic ids, as the admin sees them over Kafka (Metadata v12).
fn topic_ids(b: &Broker, tenants: &[Tenant]) -> Vec<Vec<uuid::Uuid>> {
    let mut admin = es_tests::kafka_wire::KafkaConn::login(&b.kafka_addr, ADMIN).unwrap();
    let all = kafka_protocol::messages::MetadataRequest::default().with_topics(None);
    let md = admin.call(12, &all).unwrap();
    let id_of = |name: &str| {
        md.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name)).map(|t| t.topic_id)
    };
    tenants
        .iter()
        .map(|t| t.topics.iter().map(|n| id_of(n).expect("every topic has an id")).collect())
        .collect()
}

/// Guesses from one address are refused, then throttled; a valid key still works.
fn brute_force(b: &Broker, t: &Tenant, ledger: &mut Ledger) {
    for i in 0..40u64 {
        let guess = broker::Client::with_key(&b.url, &format!("{}{:043}", &t.key[..20], i));
        ledger.http("admin brute force", "/keys", &guess.get("/keys"), &[]);
    }
    if t.http.get("/topics").status != 200 {
        ledger.breakouts.push("a valid key was locked out by others' failed guesses".into());
    }
}
