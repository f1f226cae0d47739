//! More unmodified Kafka clients against the real es-broker's Kafka listener:
//! KafkaJS 2.2.4 (Node), Sarama 1.61.1 and segmentio/kafka-go 0.4.51 (Go, the
//! program of `tests/kafka-clients/go`) and aiokafka 0.14.0 (Python, in the tests'
//! venv). Each runs one scenario: produce (idempotent where the client supports
//! it, acks=all) to a 3-partition topic, consume with a group and commit, restart
//! the broker, produce more, and a new member of the same group resumes exactly
//! after the commit: nothing read twice, nothing missed. The stored batches show
//! whether the producer was idempotent.
//!
//! Needs Node with npm, Go and Python (the machine's requirements, see README.md);
//! KafkaJS, the Go modules and aiokafka are downloaded once and cached under
//! ~/.cache/es.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use es_client::{Client as EsClient, ClientOptions};
use es_protocol::FetchPartition;
use es_tests::broker::Broker;
use es_tests::peers::{cache_dir, clients_dir, go_binary, run};
use serde_json::Value;

/// One client program run: joining a group waits out the initial rebalance delay.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Records per produce step.
const COUNT: usize = 10;

#[derive(Debug, Clone, Copy)]
enum Client {
    KafkaJs,
    Sarama,
    KafkaGo,
    AioKafka,
}

/// KafkaJS installed once per machine (`tests/kafka-clients/node/package.json`,
/// pinned; npm's cache under ~/.cache/es/npm): its `node_modules`.
fn kafkajs_modules() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = cache_dir().join("node-kafkajs-2.2.4");
        std::fs::create_dir_all(&dir).expect("creating the KafkaJS directory");
        let manifest = clients_dir().join("node/package.json");
        std::fs::copy(&manifest, dir.join("package.json")).expect("copying package.json");
        if !dir.join("node_modules/kafkajs/package.json").exists() {
            run(
                Command::new("npm")
                    .current_dir(&dir)
                    .args(["install", "--no-audit", "--no-fund", "--cache"])
                    .arg(cache_dir().join("npm")),
                None,
                Duration::from_secs(600),
                "npm install (tests/kafka-clients/node)",
            );
        }
        dir.join("node_modules")
    })
}

/// Runs one step of `client`'s scenario; the JSON line it printed last.
fn step(client: Client, args: &[&str]) -> Value {
    let what = format!("{client:?} {args:?}");
    let out = match client {
        Client::KafkaJs => run(
            Command::new("node")
                .env("NODE_PATH", kafkajs_modules())
                .arg(clients_dir().join("node/kafkajs.js"))
                .args(args),
            None,
            CLIENT_TIMEOUT,
            &what,
        ),
        Client::Sarama | Client::KafkaGo => {
            let prefix = if matches!(client, Client::Sarama) { "sarama" } else { "kafkago" };
            let scenario = format!("{prefix}-{}", args[0]);
            run(Command::new(go_binary()).arg(&scenario).args(&args[1..]), None, CLIENT_TIMEOUT, &what)
        }
        Client::AioKafka => {
            let (ok, output) = es_tests::python::run_script("kafka_aiokafka.py", args, CLIENT_TIMEOUT);
            assert!(ok, "{what} failed:\n{output}");
            output
        }
    };
    let last = out.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok());
    last.unwrap_or_else(|| panic!("{what} printed no JSON line:\n{out}"))
}

fn produce(client: Client, b: &Broker, topic: &str, from: usize) {
    let r = step(client, &["produce", &b.kafka_addr, topic, &from.to_string(), &COUNT.to_string()]);
    assert_eq!(r["produced"], COUNT, "{client:?}: {r}");
    let idempotent = !matches!(client, Client::KafkaGo);
    assert_eq!(r["idempotent"], idempotent, "{client:?}: {r}");
}

/// The values one group member read before committing and leaving.
fn consume(client: Client, b: &Broker, topic: &str, group: &str) -> Vec<String> {
    let r = step(client, &["consume", &b.kafka_addr, topic, group, &COUNT.to_string()]);
    let values = r["values"].as_array().unwrap_or_else(|| panic!("{client:?}: {r}"));
    values.iter().map(|v| v.as_str().expect("string values").to_owned()).collect()
}

/// The producer ids of every batch es stored in `topic`, read back over the binary
/// protocol: what the client's producer really sent, not what it says it did.
fn stored_producer_ids(b: &Broker, topic: &str, partitions: u32) -> BTreeSet<i64> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let connect = EsClient::connect(&b.binary_addr, ClientOptions::default());
        let client = tokio::time::timeout(EXIT_TIMEOUT, connect).await.expect("connecting in time").unwrap();
        let mut ids = BTreeSet::new();
        for partition in 0..partitions {
            let part = FetchPartition { topic: topic.to_owned(), partition, offset: 0, max_bytes: 1 << 20 };
            let fetch = client.fetch(0, 1 << 20, vec![part]);
            let results = tokio::time::timeout(EXIT_TIMEOUT, fetch).await.expect("a fetch in time").unwrap();
            let mut rest = &results[0].data[..];
            while !rest.is_empty() {
                let h = es_core::BatchHeader::parse(rest, usize::MAX).unwrap();
                ids.insert(h.producer.producer_id);
                rest = &rest[h.total_len()..];
            }
        }
        ids
    })
}

fn values(from: usize) -> BTreeSet<String> {
    (from..from + COUNT).map(|i| format!("v{i}")).collect()
}

fn assert_read_once(client: Client, got: &[String], from: usize, b: &Broker) {
    let set: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(set.len(), got.len(), "{client:?} read a record twice: {got:?}");
    assert_eq!(set, values(from), "{client:?} read {got:?}; broker stderr:\n{}", b.stderr());
}

/// Produce, consume and commit; restart the broker; produce more; the group resumes.
fn resume_after_restart(client: Client, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = (format!("{name}-orders"), format!("{name}-group"));
    let mut b = Broker::start(dir.path());
    b.create_topic(&topic, 3);
    produce(client, &b, &topic, 0);
    assert_read_once(client, &consume(client, &b, &topic, &group), 0, &b);

    b.signal("TERM");
    assert!(b.wait_exit(EXIT_TIMEOUT).success(), "stderr:\n{}", b.stderr());
    drop(b);
    let b = Broker::start(dir.path());
    produce(client, &b, &topic, COUNT);
    // The commit survived the restart: the new member starts after it.
    assert_read_once(client, &consume(client, &b, &topic, &group), COUNT, &b);

    // Idempotent clients' batches carry the ids InitProducerId gave them (one per
    // producer process); kafka-go's carry none.
    let ids = stored_producer_ids(&b, &topic, 3);
    if matches!(client, Client::KafkaGo) {
        assert_eq!(ids, BTreeSet::from([-1]), "{client:?}");
    } else {
        assert!(
            !ids.is_empty() && ids.iter().all(|&id| id >= 0),
            "{client:?} sent batches without a producer id: {ids:?}"
        );
    }
}

#[test]
fn kafkajs_group_resumes_after_its_commit_across_a_restart() {
    resume_after_restart(Client::KafkaJs, "kafkajs");
}

#[test]
fn sarama_group_resumes_after_its_commit_across_a_restart() {
    resume_after_restart(Client::Sarama, "sarama");
}

#[test]
fn kafka_go_group_resumes_after_its_commit_across_a_restart() {
    resume_after_restart(Client::KafkaGo, "kafkago");
}

#[test]
fn aiokafka_group_resumes_after_its_commit_across_a_restart() {
    resume_after_restart(Client::AioKafka, "aiokafka");
}
