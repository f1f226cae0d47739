//! The binary protocol against the real es-broker: the es-client round trip,
//! pipelining order, long-poll fetch, gzip, idempotent retries across kill -9, and
//! hostile frames that must close only their own connection.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_client::{Client, ClientOptions, Consumer, Producer, ProducerOptions};
use es_core::batch::{self, Compression};
use es_core::{ProducerInfo, Record};
use es_protocol::{ErrorCode, OffsetSpec, Request, Response};
use es_tests::broker::Broker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_secs(20);

async fn client(b: &Broker) -> Arc<Client> {
    Arc::new(Client::connect(&b.binary_addr, ClientOptions::default()).await.expect("connecting"))
}

fn batch_of(values: &[&str], producer: ProducerInfo) -> Bytes {
    let records: Vec<Record> = values.iter().map(|v| Record::from_value(v.to_string())).collect();
    Bytes::from(batch::encode(&records, 1_000, producer).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_produce_fetch_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("orders", 2, vec![("retention.ms".into(), "-1".into())]).await.unwrap();
    let err = c.create_topic("orders", 2, vec![]).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::TopicExists));
    assert!(c.list_topics().await.unwrap().iter().any(|t| t.name == "orders" && t.partitions == 2));
    let p = c.produce("orders", 1, batch_of(&["a", "b", "c"], ProducerInfo::NONE)).await.unwrap();
    assert_eq!((p.base_offset, p.last_offset, p.duplicate, p.findings.len()), (0, 2, false, 0));
    let d = c.describe_topic("orders").await.unwrap();
    assert_eq!(d.partitions[1].high_watermark, 3);
    assert!(d.configs.iter().any(|(k, v)| k == "retention.ms" && v == "-1"));
    assert_eq!(c.list_offsets("orders", 1, OffsetSpec::Latest).await.unwrap(), Some(3));
    assert_eq!(c.list_offsets("orders", 1, OffsetSpec::Timestamp(999)).await.unwrap(), Some(0));
    assert_eq!(c.list_offsets("orders", 1, OffsetSpec::Timestamp(5_000)).await.unwrap(), None);
    let mut consumer = Consumer::new(c.clone());
    consumer.seek("orders", 1, 1);
    let got = consumer.poll().await.unwrap();
    let values: Vec<&[u8]> = got.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, vec![&b"b"[..], b"c"]);
    assert_eq!(consumer.position("orders", 1), Some(3));
    // Typed errors, not dropped connections.
    let e = c.produce("nope", 0, batch_of(&["x"], ProducerInfo::NONE)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnknownTopic));
    let e = c.produce("orders", 9, batch_of(&["x"], ProducerInfo::NONE)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnknownPartition));
    let mut corrupt = batch_of(&["x"], ProducerInfo::NONE).to_vec();
    *corrupt.last_mut().unwrap() ^= 1;
    let e = c.produce("orders", 0, Bytes::from(corrupt)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidBatch));
    // A transactional batch (attribute bit 4) is refused whole: es has no
    // transactions, so storing it would hand consumers uncommitted records.
    let plain = batch_of(&["t"], ProducerInfo::NONE);
    let mut header = es_core::BatchHeader::parse(&plain, 1 << 20).unwrap();
    header.attributes |= 0x10;
    let txn = batch::encode_like(&header, [(0, &Record::from_value("t"))]).unwrap();
    let before = c.describe_topic("orders").await.unwrap().partitions[0].high_watermark;
    let e = c.produce("orders", 0, Bytes::from(txn)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidBatch), "{e}");
    assert!(e.to_string().contains("transactional"), "{e}");
    assert_eq!(c.describe_topic("orders").await.unwrap().partitions[0].high_watermark, before);
    let mut far = Consumer::new(c.clone());
    far.seek("orders", 1, 99);
    assert_eq!(far.poll().await.unwrap_err().code(), Some(ErrorCode::OffsetOutOfRange));
    c.delete_topic("orders").await.unwrap();
    assert_eq!(c.describe_topic("orders").await.unwrap_err().code(), Some(ErrorCode::UnknownTopic));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produces_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("p", 1, vec![]).await.unwrap();
    let mut pending = Vec::new();
    for i in 0..64 {
        let batch = batch_of(&[&format!("{i}-0"), &format!("{i}-1")], ProducerInfo::NONE);
        pending.push(c.produce_pipelined("p", 0, batch).await.unwrap());
    }
    for (i, p) in pending.into_iter().enumerate() {
        let p = tokio::time::timeout(TIMEOUT, p).await.unwrap().unwrap();
        assert_eq!(
            (p.base_offset, p.last_offset),
            (2 * i as u64, 2 * i as u64 + 1),
            "request {i} kept its place"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_fetch_returns_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("lp", 1, vec![]).await.unwrap();
    let mut consumer = Consumer::new(c.clone());
    consumer.max_wait_ms = 10_000;
    consumer.seek("lp", 0, 0);
    let started = std::time::Instant::now();
    let waiter = tokio::spawn(async move { consumer.poll().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.produce("lp", 0, batch_of(&["wake"], ProducerInfo::NONE)).await.unwrap();
    let got = tokio::time::timeout(TIMEOUT, waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(got.len(), 1);
    assert!(started.elapsed() < Duration::from_secs(5), "woke at {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_batches_and_the_batching_producer() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("gz", 3, vec![]).await.unwrap();
    let options =
        ProducerOptions { compression: Compression::Gzip, linger_ms: 2, ..ProducerOptions::default() };
    let producer = Producer::new(c.clone(), options).await.unwrap();
    let mut sends = Vec::new();
    for i in 0..300 {
        let p = producer.clone();
        let key = format!("user-{}", i % 17);
        sends.push(tokio::spawn(async move {
            p.send("gz", None, Record::keyed(key.clone(), format!("{key}:{i}"))).await.map(|m| (key, m))
        }));
    }
    let mut per_partition = std::collections::HashMap::new();
    for s in sends {
        let (key, meta) = tokio::time::timeout(TIMEOUT, s).await.unwrap().unwrap().unwrap();
        assert_eq!(meta.partition, es_core::partitioner::partition_for_key(key.as_bytes(), 3));
        *per_partition.entry(meta.partition).or_insert(0u64) += 1;
    }
    let mut total = 0;
    for (p, n) in per_partition {
        assert_eq!(c.list_offsets("gz", p, OffsetSpec::Latest).await.unwrap(), Some(n));
        let mut consumer = Consumer::new(c.clone());
        consumer.seek("gz", p, 0);
        let mut got = 0;
        while got < n {
            got += consumer.poll().await.unwrap().len() as u64;
        }
        total += got;
    }
    assert_eq!(total, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retry_after_kill_9_is_not_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("idem", 1, vec![]).await.unwrap();
    let (pid, epoch) = c.init_producer_id().await.unwrap();
    let producer = |seq| ProducerInfo { producer_id: pid, producer_epoch: epoch, base_sequence: seq };
    c.produce("idem", 0, batch_of(&["one", "two"], producer(0))).await.unwrap();
    // The broker acknowledged (so it is on disk), then died before the client saw it.
    let lost = batch_of(&["three"], producer(2));
    let base = c.produce("idem", 0, lost.clone()).await.unwrap().base_offset;
    b.kill9();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    let retry = c.produce("idem", 0, lost).await.unwrap();
    let (retry_base, duplicate) = (retry.base_offset, retry.duplicate);
    assert!(duplicate, "the retry is recognised");
    assert_eq!(retry_base, base, "and answered with the original offset");
    assert_eq!(c.list_offsets("idem", 0, OffsetSpec::Latest).await.unwrap(), Some(3));
    let gap = c.produce("idem", 0, batch_of(&["x"], producer(9))).await.unwrap_err();
    assert_eq!(gap.code(), Some(ErrorCode::OutOfOrderSequence));
    let (other, _) = c.init_producer_id().await.unwrap();
    assert_ne!(other, pid, "producer ids are never reused across restarts");
}

/// Sends raw bytes and returns what the broker answered before closing.
async fn raw_exchange(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(TIMEOUT, s.read_to_end(&mut out))
        .await
        .expect("the broker closes the connection")
        .ok();
    out
}

fn first_error(bytes: &[u8]) -> ErrorCode {
    let mut buf = bytes::BytesMut::from(bytes);
    let frame = es_protocol::decode_frame(&mut buf, usize::MAX).unwrap().expect("a whole response frame");
    match Response::decode(&frame).unwrap() {
        Response::Error { code, .. } => code,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let c = client(&b).await;
    c.create_topic("safe", 1, vec![]).await.unwrap();
    // An oversized length, garbage, a request before Hello, a truncated body.
    let answer = raw_exchange(&b.binary_addr, &[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).await;
    assert_eq!(first_error(&answer), ErrorCode::Malformed);
    let answer = raw_exchange(&b.binary_addr, &[0, 0, 0, 6, 0, 0, 0, 1, 0x55, 0]).await;
    assert_eq!(first_error(&answer), ErrorCode::UnknownOp);
    let mut early = Vec::new();
    Request::ListTopics.encode(1, &mut early);
    assert_eq!(first_error(&raw_exchange(&b.binary_addr, &early).await), ErrorCode::UnsupportedVersion);
    let mut hello = Vec::new();
    Request::Hello { version_min: 1, version_max: 1, client: "raw".into() }.encode(1, &mut hello);
    let mut truncated = Vec::new();
    Request::DescribeTopic { name: "safe".into() }.encode(2, &mut truncated);
    truncated[3] -= 2;
    truncated.truncate(truncated.len() - 2);
    let answer = raw_exchange(&b.binary_addr, &[hello, truncated].concat()).await;
    assert!(answer.len() > 10, "a Hello answer and then an error");
    let mut rest = bytes::BytesMut::from(&answer[..]);
    es_protocol::decode_frame(&mut rest, usize::MAX).unwrap().unwrap();
    assert_eq!(first_error(&rest), ErrorCode::Malformed);
    // A client that stops mid-frame and hangs up harms nobody.
    {
        let mut s = TcpStream::connect(&b.binary_addr).await.unwrap();
        s.write_all(&[0, 0, 1, 0, 0]).await.unwrap();
    }
    // The good connection never noticed.
    let base = c.produce("safe", 0, batch_of(&["still here"], ProducerInfo::NONE)).await.unwrap().base_offset;
    assert_eq!(base, 0);
    let v =
        c.produce_pipelined("safe", 0, Bytes::from_static(b"not a batch")).await.unwrap().await.unwrap_err();
    assert_eq!(v.code(), Some(ErrorCode::InvalidBatch));
    // And the batch limit is enforced with a typed error.
    let big = vec![Record::from_value(vec![7u8; 900 * 1024]); 12];
    let big =
        batch::compress(&batch::encode(&big, 0, ProducerInfo::NONE).unwrap(), Compression::None).unwrap();
    let e = c.produce("safe", 0, Bytes::from(big)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BatchTooLarge));
}
