//! One set of scenarios run against every front end (HTTP and the binary
//! protocol, later Kafka) through a small `FrontEnd` trait, so parity is tested
//! rather than hoped for: produce and consume, offsets, typed errors, refusal of
//! internal topics, dead letters (nothing written on refusal) and long-poll
//! limits. Each front end gets its own topics on one real es-broker.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use es_client::{Client, ClientOptions};
use es_core::batch;
use es_core::{ProducerInfo, Record};
use es_protocol::{ErrorCode, FetchPartition, OffsetSpec};
use es_tests::broker::Broker;
use serde_json::{Value, json};

/// A refusal, named as HTTP names it (binary codes are translated).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refused(String);

/// What a produce answered: offsets of the records written to the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Produced {
    /// `None` when no record was written to the partition itself.
    range: Option<(u64, u64)>,
}

/// One protocol's view of the broker, reduced to what the scenarios compare.
trait FrontEnd {
    fn name(&self) -> &'static str;
    /// Produces `(key, value)` records to one partition of `topic` in one request.
    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        records: &[(Option<&str>, String)],
    ) -> Result<Produced, Refused>;
    /// Values from `offset`, waiting up to `wait_ms` when there are none yet.
    async fn consume(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        wait_ms: u64,
    ) -> Result<Vec<String>, Refused>;
    async fn offset(&self, topic: &str, partition: u32, spec: OffsetSpec) -> Result<Option<u64>, Refused>;
}

struct Http<'a>(&'a Broker);
struct Binary(Client);

impl FrontEnd for Http<'_> {
    fn name(&self) -> &'static str {
        "http"
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        records: &[(Option<&str>, String)],
    ) -> Result<Produced, Refused> {
        let records: Vec<Value> =
            records.iter().map(|(k, v)| json!({"key": k, "value": v, "partition": partition})).collect();
        let r = self.0.post(&format!("/topics/{topic}/records"), &json!({ "records": records }));
        if r.status != 200 {
            return Err(Refused(r.code().to_owned()));
        }
        let here: Vec<u64> = r.body["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o.get("topic").is_none())
            .map(|o| o["offset"].as_u64().unwrap())
            .collect();
        Ok(Produced { range: here.first().map(|first| (*first, *here.last().unwrap())) })
    }

    async fn consume(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        wait_ms: u64,
    ) -> Result<Vec<String>, Refused> {
        let r = self.0.get(&format!(
            "/topics/{topic}/partitions/{partition}/records?offset={offset}&wait_ms={wait_ms}"
        ));
        if r.status != 200 {
            return Err(Refused(r.code().to_owned()));
        }
        Ok(r.body["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["value"].as_str().unwrap().to_owned())
            .collect())
    }

    async fn offset(&self, topic: &str, partition: u32, spec: OffsetSpec) -> Result<Option<u64>, Refused> {
        let query = match spec {
            OffsetSpec::Timestamp(ts) => format!("?timestamp={ts}"),
            OffsetSpec::Earliest | OffsetSpec::Latest => String::new(),
        };
        let r = self.0.get(&format!("/topics/{topic}/offsets{query}"));
        if r.status != 200 {
            return Err(Refused(r.code().to_owned()));
        }
        let p = &r.body["partitions"][partition as usize];
        Ok(match spec {
            OffsetSpec::Earliest => p["earliest"].as_u64(),
            OffsetSpec::Latest => p["latest"].as_u64(),
            OffsetSpec::Timestamp(_) => p["timestamp_offset"].as_u64(),
        })
    }
}

/// Binary codes under the names HTTP gives the same refusals.
fn http_name(code: Option<ErrorCode>) -> String {
    let name = match code {
        Some(ErrorCode::UnknownTopic) => "topic_not_found",
        Some(ErrorCode::UnknownPartition) => "partition_not_found",
        Some(ErrorCode::InvalidRequest) => "invalid_request",
        Some(ErrorCode::InternalTopic) => "internal_topic",
        Some(ErrorCode::RecordTooLarge) => "record_too_large",
        Some(ErrorCode::BatchTooLarge) => "batch_too_large",
        Some(ErrorCode::OffsetOutOfRange) => "offset_out_of_range",
        Some(ErrorCode::ShuttingDown) => "shutting_down",
        Some(ErrorCode::ValidationFailed) => "validation_failed",
        other => return format!("{other:?}"),
    };
    name.to_owned()
}

impl FrontEnd for Binary {
    fn name(&self) -> &'static str {
        "binary"
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        records: &[(Option<&str>, String)],
    ) -> Result<Produced, Refused> {
        let records: Vec<Record> = records
            .iter()
            .map(|(k, v)| Record {
                key: k.map(|k| Bytes::from(k.to_owned())),
                value: Some(Bytes::from(v.clone())),
                ..Record::default()
            })
            .collect();
        let batch = Bytes::from(batch::encode(&records, 1_000, ProducerInfo::NONE).unwrap());
        let answer =
            self.0.produce(topic, partition, batch).await.map_err(|e| Refused(http_name(e.code())))?;
        let (base, last) = (answer.base_offset, answer.last_offset);
        // An empty range (last = base - 1) says nothing was written here.
        Ok(Produced { range: (last.wrapping_add(1) != base).then_some((base, last)) })
    }

    async fn consume(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        wait_ms: u64,
    ) -> Result<Vec<String>, Refused> {
        let part = FetchPartition { topic: topic.to_owned(), partition, offset, max_bytes: 1 << 20 };
        let wait = u32::try_from(wait_ms).unwrap_or(u32::MAX);
        let mut results =
            self.0.fetch(wait, 1 << 20, vec![part]).await.map_err(|e| Refused(http_name(e.code())))?;
        let result = results.remove(0);
        if result.error != ErrorCode::None {
            return Err(Refused(http_name(Some(result.error))));
        }
        let mut out = Vec::new();
        let mut rest: &[u8] = &result.data;
        while !rest.is_empty() {
            let view = batch::BatchView::parse(rest, usize::MAX).unwrap();
            for r in view.plain_records(64 << 20).unwrap().iter() {
                let r = r.unwrap();
                if r.offset >= offset {
                    out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
                }
            }
            rest = &rest[view.bytes().len()..];
        }
        Ok(out)
    }

    async fn offset(&self, topic: &str, partition: u32, spec: OffsetSpec) -> Result<Option<u64>, Refused> {
        self.0.list_offsets(topic, partition, spec).await.map_err(|e| Refused(http_name(e.code())))
    }
}

fn values(n: usize, prefix: &str) -> Vec<(Option<&'static str>, String)> {
    (0..n).map(|i| (None, format!("{prefix}{i}"))).collect()
}

async fn binary(b: &Broker) -> Binary {
    Binary(Client::connect(&b.binary_addr, ClientOptions::default()).await.expect("connecting"))
}

fn topic(b: &Broker, f: &impl FrontEnd, name: &str, partitions: u32) -> String {
    let name = format!("{}-{name}", f.name());
    b.create_topic(&name, partitions);
    name
}

async fn produce_and_consume(b: &Broker, f: &impl FrontEnd) {
    let t = topic(b, f, "round-trip", 2);
    let p = f.produce(&t, 1, &values(3, "v")).await.unwrap();
    assert_eq!(p.range, Some((0, 2)), "{}", f.name());
    assert_eq!(f.consume(&t, 1, 1, 0).await.unwrap(), vec!["v1", "v2"], "{}", f.name());
    assert_eq!(f.consume(&t, 0, 0, 0).await.unwrap(), Vec::<String>::new(), "{}", f.name());
}

async fn offsets(b: &Broker, f: &impl FrontEnd) {
    let t = topic(b, f, "offsets", 1);
    f.produce(&t, 0, &values(2, "o")).await.unwrap();
    assert_eq!(f.offset(&t, 0, OffsetSpec::Earliest).await.unwrap(), Some(0), "{}", f.name());
    assert_eq!(f.offset(&t, 0, OffsetSpec::Latest).await.unwrap(), Some(2), "{}", f.name());
    // Kafka's ListOffsets: the first offset at or after the timestamp, none when
    // every record is older. Binary records carry timestamp 1000; HTTP's now.
    assert_eq!(f.offset(&t, 0, OffsetSpec::Timestamp(0)).await.unwrap(), Some(0), "{}", f.name());
    assert_eq!(f.offset(&t, 0, OffsetSpec::Timestamp(i64::MAX / 2)).await.unwrap(), None, "{}", f.name());
}

async fn errors(b: &Broker, f: &impl FrontEnd) {
    // `max.message.bytes` limits the batch and so each record in it, as Kafka's does.
    let t = format!("{}-errors", f.name());
    let r = b.post("/topics", &json!({"name": t, "partitions": 1, "config": {"max.message.bytes": 65536}}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    fn refused<T>(code: &str) -> Result<T, Refused> {
        Err(Refused(code.to_owned()))
    }
    assert_eq!(f.produce("nope", 0, &values(1, "x")).await, refused("topic_not_found"), "{}", f.name());
    assert_eq!(f.produce(&t, 7, &values(1, "x")).await, refused("partition_not_found"), "{}", f.name());
    // Over the topic's limit but inside the request limit: typed on both.
    let big = vec![(None, "x".repeat(65536 + 1))];
    assert_eq!(f.produce(&t, 0, &big).await, refused("record_too_large"), "{}", f.name());
    // A wait above the maximum is the same error on both, never silently clamped.
    assert_eq!(f.consume(&t, 0, 0, 60_001).await, refused("invalid_request"), "{}", f.name());
    assert_eq!(f.consume(&t, 0, 5, 0).await, refused("offset_out_of_range"), "{}", f.name());
    assert_eq!(f.offset(&t, 0, OffsetSpec::Latest).await.unwrap(), Some(0), "nothing was written");
}

async fn internal_topics_refuse_writes(b: &Broker, f: &impl FrontEnd) {
    for internal in ["__es_offsets", "__es_schemas"] {
        let garbage = vec![(Some("garbage"), "x".to_owned())];
        assert_eq!(
            f.produce(internal, 0, &garbage).await,
            Err(Refused("internal_topic".into())),
            "{} {internal}",
            f.name()
        );
    }
    let _ = b;
}

/// Binds `rules` (key required) with dead-lettering to `dlq` on `topic`.
fn dead_letter_to(b: &Broker, topic: &str, dlq: &str) {
    let bind = json!({"validators": [{"plugin": "rules", "config": {"key.required": "true"},
        "on_failure": "dead-letter", "dead_letter_topic": dlq}]});
    let r = b.put(&format!("/topics/{topic}/validators"), &bind);
    assert_eq!(r.status, 200, "{:?}", r.body);
}

fn high_watermarks(b: &Broker, topic: &str) -> Vec<u64> {
    let d = b.get(&format!("/topics/{topic}"));
    d.body["partitions"].as_array().unwrap().iter().map(|p| p["high_watermark"].as_u64().unwrap()).collect()
}

async fn dead_letters(b: &Broker, f: &impl FrontEnd) {
    let t = topic(b, f, "dl", 1);
    let dlq = topic(b, f, "dlq", 3);
    dead_letter_to(b, &t, &dlq);
    // Every record dead-lettered: nothing on the topic, an empty range, and the
    // unkeyed dead letters share one partition (one batch), on every protocol.
    let p = f.produce(&t, 0, &values(3, "bad")).await.unwrap();
    assert_eq!(p.range, None, "{}", f.name());
    let mut hws = high_watermarks(b, &dlq);
    hws.sort();
    assert_eq!(hws, vec![0, 0, 3], "{}: one partition holds the request's dead letters", f.name());
    // Mixed: the good records are written in order, the bad one is not.
    let mixed =
        vec![(Some("k"), "good".to_owned()), (None, "bad".to_owned()), (Some("k2"), "good2".to_owned())];
    assert_eq!(f.produce(&t, 0, &mixed).await.unwrap().range, Some((0, 1)), "{}", f.name());
    assert_eq!(f.consume(&t, 0, 0, 0).await.unwrap(), vec!["good", "good2"], "{}", f.name());
}

async fn refused_dead_letters_write_nothing(b: &Broker, f: &impl FrontEnd) {
    let t = topic(b, f, "dl-refused", 1);
    let dlq = format!("{}-dlq-small", f.name());
    let r = b.post("/topics", &json!({"name": dlq, "partitions": 1, "config": {"max.message.bytes": 700}}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    dead_letter_to(b, &t, &dlq);
    // The first dead letter fits the dead-letter topic; with the second (and its
    // es.dlq.* headers) the batch does not: the request is refused whole.
    let records = vec![(Some("k"), "good".to_owned()), (None, "small".to_owned()), (None, "y".repeat(450))];
    assert_eq!(f.produce(&t, 0, &records).await, Err(Refused("batch_too_large".into())), "{}", f.name());
    assert_eq!(high_watermarks(b, &t), vec![0], "{}: nothing written to the topic", f.name());
    assert_eq!(high_watermarks(b, &dlq), vec![0], "{}: nothing written to the dead-letter topic", f.name());
}

async fn long_poll_returns_when_data_arrives(b: &Broker, f: &impl FrontEnd) {
    let t = topic(b, f, "poll", 1);
    let http = es_tests::broker::Client::new(&b.url);
    let path = format!("/topics/{t}/records");
    // Produces once the consume below is parked (the broker counts parked polls
    // in /readyz), so the wake-up is what is tested, not a race with a sleep.
    let producer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while http.get("/readyz").body["long_polls"].as_u64().unwrap_or(0) == 0 {
            assert!(Instant::now() < deadline, "the poll never parked");
            std::thread::sleep(Duration::from_millis(2));
        }
        http.try_post(&path, &json!({"records": [{"value": "late0", "partition": 0}]})).unwrap()
    });
    let started = Instant::now();
    let got = f.consume(&t, 0, 0, 20_000).await;
    assert_eq!(producer.join().unwrap().status, 200);
    assert_eq!(got.unwrap(), vec!["late0"], "{}", f.name());
    assert!(started.elapsed() < Duration::from_secs(15), "{}", f.name());
}

macro_rules! scenario {
    ($name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let dir = tempfile::tempdir().unwrap();
            let b = Broker::start(dir.path());
            super::$name(&b, &Http(&b)).await;
            super::$name(&b, &binary(&b).await).await;
        }
    };
}

mod parity {
    use super::*;

    scenario!(produce_and_consume);
    scenario!(offsets);
    scenario!(errors);
    scenario!(internal_topics_refuse_writes);
    scenario!(dead_letters);
    scenario!(refused_dead_letters_write_nothing);
    scenario!(long_poll_returns_when_data_arrives);
}

/// One client write to an internal topic used to brick the next start ("the
/// committed-offsets log holds an unreadable record at offset 0").
#[test]
fn a_refused_internal_write_leaves_the_broker_restartable() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let r = b.post("/topics/__es_offsets/records", &json!({"records": [{"key": "garbage", "value": "x"}]}));
    assert_eq!((r.status, r.code()), (403, "internal_topic"), "{:?}", r.body);
    let value = BASE64.encode("x");
    let r = b.post(
        "/topics/__es_schemas/records",
        &json!({"encoding": "base64", "records": [{"key": value, "value": value}]}),
    );
    assert_eq!((r.status, r.code()), (403, "internal_topic"), "{:?}", r.body);
    b.signal("TERM");
    assert!(b.wait_exit(Duration::from_secs(20)).success());
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/readyz").status, 200);
}
