//! Apache Kafka's own command-line tools against es's Kafka listener, unchanged:
//! kafka-topics, kafka-configs, kafka-console-producer and -consumer and
//! kafka-consumer-groups (the classes their shell scripts run, from kafka-tools 4.4.0).
//! What they do is checked on es's side too (HTTP API and the `es` CLI): one topic,
//! one set of offsets and groups, whatever the protocol.

use std::process::Command;
use std::time::Duration;

use es_tests::broker::{Broker, es_bin};
use es_tests::peers::{kafka_tool, run};

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const CONFIGS: &str = "org.apache.kafka.tools.ConfigCommand";
const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
const DELETE_RECORDS: &str = "org.apache.kafka.tools.DeleteRecordsCommand";
const GET_OFFSETS: &str = "org.apache.kafka.tools.GetOffsetShell";
const TRANSACTIONS: &str = "org.apache.kafka.tools.TransactionsCommand";
const LOG_DIRS: &str = "org.apache.kafka.tools.LogDirsCommand";

fn es(b: &Broker, args: &[&str]) -> String {
    run(Command::new(es_bin()).env("ES_BROKER", &b.url).args(args), None, Duration::from_secs(30), "es")
}

#[test]
fn kafka_topics_and_kafka_configs_manage_es_topics() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let bs = ["--bootstrap-server", b.kafka_addr.as_str()];
    let topics = |args: &[&str]| kafka_tool(TOPICS, &[&bs[..], args].concat(), None);

    let out = topics(&["--create", "--topic", "tools", "--partitions", "3"]);
    assert!(out.contains("Created topic tools."), "{out}");
    assert!(topics(&["--list"]).lines().any(|l| l == "tools"));
    let described = topics(&["--describe", "--topic", "tools"]);
    assert!(described.contains("PartitionCount: 3") && described.contains("TopicId:"), "{described}");
    topics(&["--alter", "--topic", "tools", "--partitions", "4"]);
    assert!(topics(&["--describe", "--topic", "tools"]).contains("PartitionCount: 4"));
    let http = b.get("/topics/tools");
    assert_eq!(http.body["partitions"].as_array().map(Vec::len), Some(4), "{:?}", http.body);

    let configs =
        |args: &[&str]| kafka_tool(CONFIGS, &[&bs[..], &["--entity-type", "topics"], args].concat(), None);
    let out = configs(&["--entity-name", "tools", "--alter", "--add-config", "retention.ms=12345"]);
    assert!(out.contains("Completed updating config for topic tools."), "{out}");
    let out = configs(&["--entity-name", "tools", "--describe"]);
    assert!(out.contains("retention.ms=12345"), "{out}");
    let http = b.get("/topics/tools");
    assert_eq!(http.body["config"]["retention.ms"], 12345, "{:?}", http.body);
    // The broker-side codec, as on Kafka.
    let out = configs(&["--entity-name", "tools", "--alter", "--add-config", "compression.type=zstd"]);
    assert!(out.contains("Completed updating config for topic tools."), "{out}");
    assert!(configs(&["--entity-name", "tools", "--describe"]).contains("compression.type=zstd"));
    assert_eq!(b.get("/topics/tools").body["config"]["compression.type"], "zstd");

    let out = topics(&["--delete", "--topic", "tools"]);
    assert!(!out.contains("Error"), "{out}");
    assert_eq!(b.get("/topics/tools").status, 404);
}

#[test]
fn console_producer_consumer_and_consumer_groups_share_es_records_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("lines", 2);
    let bs = ["--bootstrap-server", b.kafka_addr.as_str()];
    let produce = [
        &bs[..],
        &["--topic", "lines", "--reader-property", "parse.key=true", "--reader-property", "key.separator=:"],
    ]
    .concat();
    kafka_tool(PRODUCER, &produce, Some(b"k1:v1\nk2:v2\nk3:v3\n"));

    let consume = [
        &bs[..],
        &["--topic", "lines", "--from-beginning", "--max-messages", "3", "--group", "cg"],
        &["--formatter-property", "print.key=true"],
    ]
    .concat();
    let mut read: Vec<String> = kafka_tool(CONSUMER, &consume, None).lines().map(str::to_owned).collect();
    read.sort();
    assert_eq!(read, ["k1\tv1", "k2\tv2", "k3\tv3"]);

    // The records are es's: the es CLI reads what the Kafka producer wrote.
    let mut values: Vec<String> = es(&b, &["consume", "lines", "--format", "json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["value"].as_str().unwrap().to_owned())
        .collect();
    values.sort();
    assert_eq!(values, ["v1", "v2", "v3"]);

    // The group's committed offsets, through Kafka's tool and through es.
    let groups = |args: &[&str]| kafka_tool(GROUPS, &[&bs[..], args].concat(), None);
    assert!(groups(&["--list"]).lines().any(|l| l.trim() == "cg"));
    let described = groups(&["--describe", "--group", "cg"]);
    let committed: u64 = described
        .lines()
        .filter(|l| l.starts_with("cg "))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum();
    assert_eq!(committed, 3, "{described}");
    let es_view = es(&b, &["group", "describe", "cg"]);
    assert!(es_view.contains("lines"), "{es_view}");
    // OffsetDelete: the group has no members now, so its offsets of `lines` can go.
    let out = groups(&["--delete-offsets", "--group", "cg", "--topic", "lines"]);
    assert!(out.contains("Request succeeded for deleting offsets from group cg."), "{out}");
    let left = b.get("/groups/cg/offsets");
    assert!(!left.body.to_string().contains("\"lines\""), "{:?}", left.body);
    let out = groups(&["--delete", "--group", "cg"]);
    assert!(out.contains("Deletion of requested consumer groups ('cg') was successful."), "{out}");
}

#[test]
fn delete_records_get_offsets_and_describe_producers_work_through_kafkas_tools() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let bs = ["--bootstrap-server", b.kafka_addr.as_str()];

    // The record with the greatest timestamp (KIP-734), by GetOffsetShell --time -3.
    b.create_topic("stamped", 1);
    let records: Vec<serde_json::Value> = [1000, 5000, 3000]
        .iter()
        .map(|t| serde_json::json!({"value": "v", "partition": 0, "timestamp": t}))
        .collect();
    assert_eq!(b.post("/topics/stamped/records", &serde_json::json!({ "records": records })).status, 200);
    let offsets = |topic: &str, time: &str| {
        kafka_tool(GET_OFFSETS, &[&bs[..], &["--topic", topic, "--time", time]].concat(), None)
    };
    assert_eq!(offsets("stamped", "-3").trim(), "stamped:0:1");
    assert_eq!(offsets("stamped", "max-timestamp").trim(), "stamped:0:1");

    // The console producer is idempotent by default: DescribeProducers lists it.
    b.create_topic("lines", 1);
    kafka_tool(PRODUCER, &[&bs[..], &["--topic", "lines"]].concat(), Some(b"a\nb\nc\nd\n"));
    let described = kafka_tool(
        TRANSACTIONS,
        &[&bs[..], &["describe-producers", "--topic", "lines", "--partition", "0"]].concat(),
        None,
    );
    let row: Vec<&str> = described.lines().nth(1).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    assert!(row.len() >= 5, "one producer row: {described}");
    assert!(row[0].parse::<i64>().unwrap() >= 0, "a real producer id: {described}");
    assert_eq!(row[3], "3", "four records: the last sequence is 3: {described}");

    // kafka-log-dirs (DescribeLogDirs): the partition, sized, in the broker's one dir.
    let dirs = kafka_tool(LOG_DIRS, &[&bs[..], &["--describe", "--topic-list", "lines"]].concat(), None);
    let json = dirs.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON: {dirs}"));
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let partitions = &v["brokers"][0]["logDirs"][0]["partitions"];
    assert_eq!(partitions[0]["partition"], "lines-0", "{v}");
    assert!(partitions[0]["size"].as_u64().is_some_and(|s| s > 0), "{v}");

    // DeleteRecords: the log start moves, durably, and earlier offsets are gone.
    let plan = dir.path().join("delete.json");
    std::fs::write(&plan, r#"{"version":1,"partitions":[{"topic":"lines","partition":0,"offset":2}]}"#)
        .unwrap();
    let out = kafka_tool(
        DELETE_RECORDS,
        &[&bs[..], &["--offset-json-file", plan.to_str().unwrap()]].concat(),
        None,
    );
    assert!(out.contains("partition: lines-0\tlow_watermark: 2"), "{out}");
    assert_eq!(offsets("lines", "-2").trim(), "lines:0:2");
    assert_eq!(b.get("/topics/lines/partitions/0/records?offset=1").status, 416);
    let read = b.get("/topics/lines/partitions/0/records?offset=2").body;
    assert_eq!(read["records"][0]["value"], "c", "{read}");
    let mut b = b;
    b.signal("TERM");
    b.wait_exit(Duration::from_secs(30));
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/topics/lines/offsets").body["partitions"][0]["earliest"], 2, "kept across a restart");
    let bs = ["--bootstrap-server", b.kafka_addr.as_str()];
    // Internal topics are the broker's: deleting their records is refused.
    let internal = dir.path().join("internal.json");
    std::fs::write(
        &internal,
        r#"{"version":1,"partitions":[{"topic":"__es_offsets","partition":0,"offset":-1}]}"#,
    )
    .unwrap();
    let out = kafka_tool(
        DELETE_RECORDS,
        &[&bs[..], &["--offset-json-file", internal.to_str().unwrap()]].concat(),
        None,
    );
    assert!(out.contains("error"), "{out}");
}
