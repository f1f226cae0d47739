//! The Python rows and kcat of the Kafka client matrix, diffed against Apache Kafka:
//! confluent-kafka 2.16.1 (librdkafka 2.16), kafka-python 3.0.12 and kcat (Debian,
//! on the system's librdkafka) run the scenarios of `tests/python/kafka_scenarios.py`,
//! the ground the Java client, franz-go and the rdkafka crate cover, and every field
//! they observe on es is compared with what the same scenario observed on a real
//! Apache Kafka 4.4.0 broker (`tests/kafka-clients/observed/kafka-4.4.0-{confluent,
//! kafka-python,kcat}-*.json`, written by `capture_the_apache_kafka_reference`, run by
//! hand; see tests/kafka-clients/README.md).
//!
//! The Python clients come from the venv of `tests/python/requirements.txt`.

use std::time::Duration;

use es_tests::broker::Broker;
use es_tests::peers::{assert_same_as_kafka, clients_dir, kafka_reference};
use es_tests::python::run_script;
use serde_json::Value;

/// The codecs each client can send from the venv: librdkafka (confluent-kafka's wheel
/// and Debian's kcat) has all five; kafka-python needs extra packages for snappy, lz4
/// and zstd, which the venv does not install, and has gzip from the standard library.
const LIBRDKAFKA_CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const KAFKA_PYTHON_CODECS: [&str; 2] = ["none", "gzip"];
/// One scenario run (its own waits are bounded by 60 s each).
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Runs one scenario of `client` and parses the observation on its last line.
fn scenario(client: &str, args: &[&str]) -> Value {
    let all: Vec<&str> = ["--client", client].iter().copied().chain(args.iter().copied()).collect();
    let (ok, output) = run_script("kafka_scenarios.py", &all, RUN_LIMIT);
    assert!(ok, "kafka_scenarios.py {all:?} failed:\n{output}");
    // stdout and stderr share the log: the observation is the last JSON line.
    let line = output.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| {
        panic!("kafka_scenarios.py {all:?} printed no observation:\n{output}");
    });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn codecs(client: &str) -> &'static [&'static str] {
    if client == "kafka-python" { &KAFKA_PYTHON_CODECS } else { &LIBRDKAFKA_CODECS }
}

/// What Apache Kafka 4.4.0 observed for `client`'s `scenario`.
fn reference(client: &str, scenario: &str) -> Value {
    kafka_reference(&format!("kafka-4.4.0-{client}-{scenario}"))
}

/// Every codec's round trip on a fresh es, each against the one reference.
fn round_trips_as_on_kafka(client: &str) {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let kafka = reference(client, "roundtrip");
    for codec in codecs(client) {
        let seen = scenario(client, &["roundtrip", &b.kafka_addr, client, codec]);
        assert_same_as_kafka(&format!("{client} ({codec})"), &seen, &kafka);
    }
}

fn group_as_on_kafka(client: &str) {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let seen = scenario(client, &["group", &b.kafka_addr, client]);
    assert_same_as_kafka(&format!("{client} group"), &seen, &reference(client, "group"));
}

/// Create 3 partitions, grow to 4, list, describe the topic and the cluster (with
/// authorized operations); the idempotent producer (acks=all) with each
/// codec: placement, an oversized record, the consistent_random partitioner's choice
/// for 12 keys; partition 0 read back byte-identical; timestamp type, watermarks,
/// offsets for a fixed and a future timestamp; delete.
#[test]
fn confluent_round_trips_with_every_codec_as_on_kafka() {
    round_trips_as_on_kafka("confluent");
}

/// Two members divide 6 partitions (range), described while Stable (assignor, member
/// ids and hosts, shares, authorized operations); 60 records read once with a
/// synchronous commit each; committed offsets, list, state after, delete.
#[test]
fn confluent_consumer_group_divides_partitions_as_on_kafka() {
    group_as_on_kafka("confluent");
}

/// The same round trip with kafka-python's default idempotent producer (murmur2
/// partitioner, as Java's), with no codec and gzip.
#[test]
fn kafka_python_round_trips_with_its_codecs_as_on_kafka() {
    round_trips_as_on_kafka("kafka-python");
}

/// The same group, with kafka-python's consumers and its admin's group calls.
#[test]
fn kafka_python_consumer_group_divides_partitions_as_on_kafka() {
    group_as_on_kafka("kafka-python");
}

/// kcat: `-L -J` metadata of a topic (node id, address and topic named); `-P` from
/// stdin (keys, duplicate headers, a header without a value, `-Z` nulls, empty key
/// and value) and from files (invalid UTF-8, a PNG) with each codec; an oversized
/// file refused by the broker; keyed records placed by librdkafka's partitioner;
/// `-C -J` reading it all back byte-identical with offsets and timestamp types;
/// `-Q` offsets for timestamps and the end.
#[test]
fn kcat_round_trips_with_every_codec_as_on_kafka() {
    round_trips_as_on_kafka("kcat");
}

/// One `kcat -G` member reads 60 records of 6 partitions to their end and commits on
/// close; the group's committed offsets and state after.
#[test]
fn kcat_group_member_reads_and_commits_as_on_kafka() {
    group_as_on_kafka("kcat");
}

/// Writes the reference documents from a real Apache Kafka broker at
/// `ES_REFERENCE_KAFKA` (see tests/kafka-clients/README.md), checking that every
/// codec observed the same as the first.
#[test]
#[ignore = "run by hand against Apache Kafka: ES_REFERENCE_KAFKA=127.0.0.1:19192"]
fn capture_the_apache_kafka_reference() {
    let (bootstrap, stamp) = es_tests::peers::reference_capture();
    for client in ["confluent", "kafka-python", "kcat"] {
        let prefix = format!("{client}-{stamp}");
        let [first, rest @ ..] = codecs(client) else { unreachable!() };
        let roundtrip = scenario(client, &["roundtrip", &bootstrap, &prefix, first]);
        for codec in rest {
            let other = scenario(client, &["roundtrip", &bootstrap, &prefix, codec]);
            assert_same_as_kafka(&format!("Apache Kafka, {client} {codec} vs {first}"), &other, &roundtrip);
        }
        let group = scenario(client, &["group", &bootstrap, &prefix]);
        for (name, doc) in [("roundtrip", roundtrip), ("group", group)] {
            let path = clients_dir().join("observed").join(format!("kafka-4.4.0-{client}-{name}.json"));
            std::fs::write(&path, format!("{}\n", serde_json::to_string_pretty(&doc).unwrap())).unwrap();
        }
    }
}
