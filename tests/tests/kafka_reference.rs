//! Unmodified Kafka clients against es's Kafka listener, diffed against Apache Kafka:
//! the Apache Kafka Java client 4.4.0 (producer with default idempotence and acks=all,
//! consumer, AdminClient) and franz-go run the scenarios of `tests/kafka-clients/`, and
//! every field they observe on es is compared with what the same scenario observed on
//! a real Apache Kafka 4.4.0 broker (`tests/kafka-clients/observed/`).
//!
//! Needs Java 17 + Maven and Go (the machine's requirements, see README.md); the jars
//! and modules are downloaded once and cached under ~/.cache/es.

use std::process::Command;
use std::time::Duration;

use es_tests::broker::Broker;
use es_tests::peers::{assert_same_as_kafka, go_binary, java_classpath, kafka_reference, run};
use serde_json::Value;

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

fn java(args: &[&str]) -> Value {
    let out = run(
        Command::new("java").args(["-Xmx256m", "-cp", java_classpath(), "es.kafka.Scenarios"]).args(args),
        None,
        Duration::from_secs(180),
        &format!("java Scenarios {args:?}"),
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("java printed no JSON ({e}): {out}"))
}

fn franz(args: &[&str]) -> Value {
    let out = run(
        Command::new(go_binary()).args(args),
        None,
        Duration::from_secs(180),
        &format!("franz-go {args:?}"),
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("franz-go printed no JSON ({e}): {out}"))
}

/// What Apache Kafka 4.4.0 observed for `name`.
fn reference(name: &str) -> Value {
    kafka_reference(&format!("kafka-4.4.0-{name}"))
}

#[test]
fn java_client_round_trips_with_every_codec_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let kafka = reference("java-roundtrip");
    for codec in CODECS {
        let seen = java(&["roundtrip", &b.kafka_addr, &format!("java-{codec}"), codec]);
        assert_same_as_kafka(&format!("java ({codec})"), &seen, &kafka);
    }
}

#[test]
fn java_consumer_group_divides_partitions_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let seen = java(&["group", &b.kafka_addr, "java-group"]);
    assert_same_as_kafka("java group", &seen, &reference("java-group"));
}

/// The AdminClient's authorized operations (topic, cluster, group) with no auth,
/// as on Kafka without an authorizer (every operation the resource type supports),
/// and its DescribeLogDirs.
#[test]
fn java_admin_describes_operations_and_log_dirs_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let seen = java(&["admin", &b.kafka_addr, "java-admin"]);
    assert_same_as_kafka("java admin", &seen, &reference("java-admin"));
    assert!(b.kafka_answered("describe_log_dirs") > 0, "the AdminClient sent DescribeLogDirs");
}

/// A Java consumer seeking to a position with its leader epoch validates it with
/// OffsetForLeaderEpoch (KIP-320) before fetching, and reads on from there.
#[test]
fn java_consumer_validates_positions_by_leader_epoch_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let seen = java(&["epochs", &b.kafka_addr, "java-epochs"]);
    assert_same_as_kafka("java epochs", &seen, &reference("java-epochs"));
    assert!(b.kafka_answered("offset_for_leader_epoch") >= 2, "the consumer validated both positions");
}

#[test]
fn franz_go_round_trips_with_every_codec_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let kafka = reference("franz-go-roundtrip");
    for codec in CODECS {
        let seen = franz(&["roundtrip", &b.kafka_addr, &format!("franz-{codec}"), codec]);
        assert_same_as_kafka(&format!("franz-go ({codec})"), &seen, &kafka);
    }
}

#[test]
fn franz_go_consumer_group_divides_partitions_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let seen = franz(&["group", &b.kafka_addr, "franz-group"]);
    assert_same_as_kafka("franz-go group", &seen, &reference("franz-go-group"));
}
