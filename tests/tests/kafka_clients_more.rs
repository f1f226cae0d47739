//! More unmodified Kafka clients against the real es-broker's Kafka listener:
//! KafkaJS 2.2.4 (Node), Sarama 1.61.1 and segmentio/kafka-go 0.4.51 (Go, the
//! program of `tests/kafka-clients/go`) and aiokafka 0.14.0 (Python, in the tests'
//! venv). Each runs one scenario: produce (idempotent where the client supports
//! it, acks=all) keyed records with a header to a 3-partition topic, consume with a
//! group and commit, restart the broker, produce more, and a new member of the same
//! group resumes exactly after the commit: nothing read twice, nothing missed. The
//! stored batches show whether the producer was idempotent.
//!
//! Every step reports what the client observed (where each record landed, each
//! record read with its headers and timestamp, the group's committed offsets as the
//! client fetches them after the commit); the test folds the steps into one flat
//! document and compares it field by field with what the same scenario observed on
//! Apache Kafka 4.4.0, restart included
//! (`tests/kafka-clients/observed/kafka-4.4.0-<client>-resume.json`, captured by
//! `capture_the_apache_kafka_reference`, run by hand). Partitions are the client's
//! own partitioner's choice for the keys, so they, and the offsets, are the same on
//! both brokers.
//!
//! Needs Node with npm, Go and Python (the machine's requirements, see README.md);
//! KafkaJS, the Go modules and aiokafka are downloaded once and cached under
//! ~/.cache/es.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use es_client::{Client as EsClient, ClientOptions};
use es_protocol::FetchPartition;
use es_tests::broker::Broker;
use es_tests::peers::{
    assert_same_as_kafka, cache_dir, clients_dir, go_binary, kafka_reference, kafka_tool, run,
};
use serde_json::{Value, json};

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

impl Client {
    const ALL: [Client; 4] = [Client::KafkaJs, Client::Sarama, Client::KafkaGo, Client::AioKafka];

    /// The client's name in topic names and in its reference document's name.
    fn name(self) -> &'static str {
        match self {
            Client::KafkaJs => "kafkajs",
            Client::Sarama => "sarama",
            Client::KafkaGo => "kafkago",
            Client::AioKafka => "aiokafka",
        }
    }
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

/// A broker the scenario runs against: es here, or the reference Apache Kafka when
/// capturing.
trait Target {
    fn addr(&self) -> String;
    fn create_topic(&self, topic: &str, partitions: u32);
    /// Stops the broker cleanly and starts it again on the same data.
    fn restart(&mut self);
    /// What helps explain a failure (es's stderr).
    fn context(&self) -> String;
}

struct Es {
    dir: tempfile::TempDir,
    broker: Broker,
}

impl Es {
    fn start() -> Es {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::start(dir.path());
        Es { dir, broker }
    }
}

impl Target for Es {
    fn addr(&self) -> String {
        self.broker.kafka_addr.clone()
    }

    fn create_topic(&self, topic: &str, partitions: u32) {
        self.broker.create_topic(topic, partitions);
    }

    fn restart(&mut self) {
        self.broker.signal("TERM");
        let status = self.broker.wait_exit(EXIT_TIMEOUT);
        assert!(status.success(), "stderr:\n{}", self.broker.stderr());
        self.broker = Broker::start(self.dir.path());
    }

    fn context(&self) -> String {
        format!("broker stderr:\n{}", self.broker.stderr())
    }
}

fn produce(client: Client, t: &dyn Target, topic: &str, from: usize) -> Value {
    let r = step(client, &["produce", &t.addr(), topic, &from.to_string(), &COUNT.to_string()]);
    assert_eq!(r["produced"], COUNT, "{client:?}: {r}");
    let idempotent = !matches!(client, Client::KafkaGo);
    assert_eq!(r["idempotent"], idempotent, "{client:?}: {r}");
    r
}

/// What one group member reported after reading COUNT records, committing and leaving.
fn consume(client: Client, t: &dyn Target, topic: &str, group: &str) -> Value {
    step(client, &["consume", &t.addr(), topic, group, &COUNT.to_string()])
}

/// The values one group member read.
fn read_values(client: Client, r: &Value) -> Vec<String> {
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

fn assert_read_once(client: Client, got: &[String], from: usize, t: &dyn Target) {
    let set: BTreeSet<String> = got.iter().cloned().collect();
    assert_eq!(set.len(), got.len(), "{client:?} read a record twice: {got:?}");
    assert_eq!(set, values(from), "{client:?} read {got:?}; {}", t.context());
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The array `field` of a step's report.
fn list(report: &Value, field: &str) -> Vec<Value> {
    report[field].as_array().unwrap_or_else(|| panic!("no {field} in {report}")).clone()
}

/// Where the producer says each record landed, in the order sent: `k3 1@0`.
fn placed(r: &Value) -> Value {
    let records = list(r, "records");
    json!(
        records
            .iter()
            .map(|x| format!("{} {}@{}", text(&x["key"]), x["partition"], x["offset"]))
            .collect::<Vec<_>>()
    )
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Each record a member read, by partition and offset: `1@0 k3=v3 seq=3 CreateTime
/// ts-in-run`. The timestamp type only where the client exposes it (KafkaJS,
/// aiokafka); the timestamp itself only as whether it falls within the scenario's
/// run (`from_ms..=to_ms`), which a producer-set CreateTime on either broker does.
fn read(r: &Value, from_ms: i64, to_ms: i64) -> Value {
    let mut records = list(r, "records");
    records.sort_by_key(|x| (x["partition"].as_i64(), x["offset"].as_i64()));
    let lines: Vec<String> = records
        .iter()
        .map(|x| {
            let mut line =
                format!("{}@{} {}={}", x["partition"], x["offset"], text(&x["key"]), text(&x["value"]));
            for h in x["headers"].as_array().into_iter().flatten() {
                line.push_str(&format!(" {}={}", text(&h[0]), text(&h[1])));
            }
            if let Some(kind) = x.get("timestamp_type") {
                line.push_str(&format!(" {}", text(kind)));
            }
            match x["timestamp"].as_i64() {
                Some(ms) if (from_ms..=to_ms).contains(&ms) => line.push_str(" ts-in-run"),
                ms => line.push_str(&format!(" ts-outside-run:{ms:?}")),
            }
            line
        })
        .collect();
    json!(lines)
}

/// The group's committed offset per partition as the client fetched it: `0=2, 1=4, 2=4`
/// (-1 where nothing is committed), with an error where the broker gave one.
fn committed(r: &Value) -> Value {
    let mut parts = list(r, "committed");
    parts.sort_by_key(|x| x["partition"].as_i64());
    let shown: Vec<String> = parts
        .iter()
        .map(|x| match x.get("error") {
            Some(e) => format!("{}={} ({})", x["partition"], x["offset"], text(e)),
            None => format!("{}={}", x["partition"], x["offset"]),
        })
        .collect();
    json!(shown.join(", "))
}

/// Produce, consume and commit; restart the broker; produce more; the group resumes.
/// One flat document of what the client observed, comparable across brokers.
fn resume_after_restart(client: Client, t: &mut dyn Target, topic: &str, group: &str) -> Value {
    let from_ms = now_ms();
    t.create_topic(topic, 3);
    let produced_before = produce(client, t, topic, 0);
    let read_before = consume(client, t, topic, group);
    assert_read_once(client, &read_values(client, &read_before), 0, t);

    t.restart();
    let produced_after = produce(client, t, topic, COUNT);
    // The commit survived the restart: the new member starts after it.
    let read_after = consume(client, t, topic, group);
    let mut resumed = read_values(client, &read_after);
    assert_read_once(client, &resumed, COUNT, t);
    resumed.sort();
    let to_ms = now_ms();

    json!({
        "idempotent": produced_before["idempotent"],
        "produced_before_restart": placed(&produced_before),
        "read_before_restart": read(&read_before, from_ms, to_ms),
        "committed_before_restart": committed(&read_before),
        "produced_after_restart": placed(&produced_after),
        "read_after_restart": read(&read_after, from_ms, to_ms),
        "resumed_values": resumed,
        "committed_after_restart": committed(&read_after),
    })
}

/// The scenario on es, compared with Apache Kafka; es's stored batches show whether
/// the producer really was idempotent.
fn resumes_as_on_kafka(client: Client) {
    let name = client.name();
    let mut es = Es::start();
    let topic = format!("{name}-orders");
    let seen = resume_after_restart(client, &mut es, &topic, &format!("{name}-group"));
    assert_same_as_kafka(name, &seen, &kafka_reference(&format!("kafka-4.4.0-{name}-resume")));

    // Idempotent clients' batches carry the ids InitProducerId gave them (one per
    // producer process); kafka-go's carry none.
    let ids = stored_producer_ids(&es.broker, &topic, 3);
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
fn kafkajs_group_resumes_after_its_commit_across_a_restart_as_on_kafka() {
    resumes_as_on_kafka(Client::KafkaJs);
}

#[test]
fn sarama_group_resumes_after_its_commit_across_a_restart_as_on_kafka() {
    resumes_as_on_kafka(Client::Sarama);
}

#[test]
fn kafka_go_group_resumes_after_its_commit_across_a_restart_as_on_kafka() {
    resumes_as_on_kafka(Client::KafkaGo);
}

#[test]
fn aiokafka_group_resumes_after_its_commit_across_a_restart_as_on_kafka() {
    resumes_as_on_kafka(Client::AioKafka);
}

/// The reference Apache Kafka 4.4.0 broker, started by `tests/golden-capture/kafka.sh`
/// in `dir` and listening on `addr`; restarted with the same script.
struct Kafka {
    addr: String,
    dir: PathBuf,
}

impl Kafka {
    fn script(&self, command: &str) {
        let port = self.addr.rsplit(':').next().expect("host:port");
        let script = clients_dir().join("../golden-capture/kafka.sh");
        run(
            Command::new(script)
                .args([command])
                .arg(&self.dir)
                .env("KAFKA_VERSION", es_tests::peers::KAFKA_VERSION)
                .env("KAFKA_PORT", port),
            None,
            Duration::from_secs(180),
            &format!("kafka.sh {command}"),
        );
    }
}

impl Target for Kafka {
    fn addr(&self) -> String {
        self.addr.clone()
    }

    fn create_topic(&self, topic: &str, partitions: u32) {
        let partitions = partitions.to_string();
        let args =
            ["--bootstrap-server", &self.addr, "--create", "--topic", topic, "--partitions", &partitions];
        kafka_tool(
            "org.apache.kafka.tools.TopicCommand",
            &[&args[..], &["--replication-factor", "1"]].concat(),
            None,
        );
    }

    fn restart(&mut self) {
        self.script("stop");
        self.script("start");
    }

    fn context(&self) -> String {
        format!("see {}/server.log", self.dir.display())
    }
}

/// Writes the reference documents from a real Apache Kafka broker at
/// `ES_REFERENCE_KAFKA`, started by `tests/golden-capture/kafka.sh` in
/// `ES_REFERENCE_KAFKA_DIR` (which this restarts; see tests/kafka-clients/README.md):
/// every client runs the scenario `ES_REFERENCE_RUNS` times (default 3), and every
/// run must observe the same.
#[test]
#[ignore = "run by hand against Apache Kafka: ES_REFERENCE_KAFKA=127.0.0.1:19192 ES_REFERENCE_KAFKA_DIR=/tmp/kafka-ref"]
fn capture_the_apache_kafka_reference() {
    let (addr, stamp) = es_tests::peers::reference_capture();
    let dir = std::env::var("ES_REFERENCE_KAFKA_DIR").expect("ES_REFERENCE_KAFKA_DIR=the kafka.sh directory");
    let runs: usize = std::env::var("ES_REFERENCE_RUNS").map_or(3, |n| n.parse().expect("a number of runs"));
    let mut kafka = Kafka { addr, dir: PathBuf::from(dir) };
    for client in Client::ALL {
        let name = client.name();
        let mut first: Option<Value> = None;
        for n in 0..runs {
            let (topic, group) = (format!("{name}-orders-{stamp}-{n}"), format!("{name}-group-{stamp}-{n}"));
            let seen = resume_after_restart(client, &mut kafka, &topic, &group);
            match &first {
                Some(doc) => {
                    assert_same_as_kafka(&format!("Apache Kafka, {name} run {n} vs run 0"), &seen, doc)
                }
                None => first = Some(seen),
            }
        }
        let doc = first.expect("at least one run");
        let path = clients_dir().join("observed").join(format!("kafka-4.4.0-{name}-resume.json"));
        std::fs::write(&path, format!("{}\n", serde_json::to_string_pretty(&doc).unwrap())).unwrap();
    }
}
