//! A minimal Kafka-protocol client for the benchmark, on the `kafka-protocol` crate:
//! size-prefixed frames over one TCP connection, fixed API versions checked against
//! the broker's ApiVersions once, and the four calls the benchmark needs (create
//! topics, wait for their leaders, produce, fetch). Every read and write is bounded
//! by [`IO_TIMEOUT`], so a silent broker fails the row instead of hanging it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, FetchRequest, FetchResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Bound on connecting and on every frame read or written.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response frame accepted (a fetch answers at most a few MiB here).
const MAX_FRAME: usize = 64 << 20;
/// The versions spoken: flexible versions both es and Apache Kafka 4.x serve, with
/// topics by name (Fetch 13+ and Produce 13 name topics by id).
pub const PRODUCE_VERSION: i16 = 9;
pub const FETCH_VERSION: i16 = 12;
const METADATA_VERSION: i16 = 9;
const CREATE_TOPICS_VERSION: i16 = 5;
const DELETE_TOPICS_VERSION: i16 = 4;
const API_VERSIONS_VERSION: i16 = 3;
/// Kafka's NONE and TOPIC_ALREADY_EXISTS error codes.
const NO_ERROR: i16 = 0;
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: a
/// partition just created, not served yet.
const RETRIABLE: [i16; 3] = [3, 5, 6];
const CLIENT_ID: &str = "es-bench";

/// The request frame of `body` (size prefix, header of the API's version, body).
pub fn frame<R: Encodable + HeaderVersion>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    body: &R,
) -> Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from(CLIENT_ID)));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, R::header_version(version)).context("encoding a request header")?;
    body.encode(&mut buf, version).context("encoding a request")?;
    let size = i32::try_from(buf.len() - 4).context("a request larger than 2 GiB")?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Decodes a response frame (without its size prefix): its correlation id and body.
pub fn decode_response<R: Decodable + HeaderVersion>(mut frame: Bytes, version: i16) -> Result<(i32, R)> {
    let header =
        ResponseHeader::decode(&mut frame, R::header_version(version)).context("a response header")?;
    let body = R::decode(&mut frame, version).context("a response body")?;
    Ok((header.correlation_id, body))
}

/// Writes one frame, bounded.
pub async fn write_frame(w: &mut OwnedWriteHalf, frame: &[u8]) -> Result<()> {
    tokio::time::timeout(IO_TIMEOUT, w.write_all(frame))
        .await
        .map_err(|_| anyhow!("writing a request timed out after {IO_TIMEOUT:?}"))?
        .context("writing a request")
}

/// Reads one frame's body, bounded.
pub async fn read_frame(r: &mut OwnedReadHalf) -> Result<Bytes> {
    let read = async {
        let size = r.read_u32().await.context("reading a response size")? as usize;
        ensure!(size <= MAX_FRAME, "a {size}-byte response frame (cap {MAX_FRAME})");
        let mut body = vec![0u8; size];
        r.read_exact(&mut body).await.context("reading a response")?;
        Ok(Bytes::from(body))
    };
    tokio::time::timeout(IO_TIMEOUT, read).await.map_err(|_| anyhow!("no response within {IO_TIMEOUT:?}"))?
}

/// One connection answering one request at a time.
pub struct Conn {
    pub read: OwnedReadHalf,
    pub write: OwnedWriteHalf,
    next_correlation: i32,
}

impl Conn {
    /// Connects and checks that the broker serves the versions spoken here.
    pub async fn connect(addr: &str) -> Result<Conn> {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connecting to kafka://{addr} timed out"))?
            .with_context(|| format!("connecting to kafka://{addr}"))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let (read, write) = stream.into_split();
        let mut conn = Conn { read, write, next_correlation: 1 };
        conn.check_versions().await.with_context(|| format!("kafka://{addr}"))?;
        Ok(conn)
    }

    /// A fresh correlation id.
    pub fn next_id(&mut self) -> i32 {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        self.next_correlation
    }

    async fn call<Q, R>(&mut self, key: ApiKey, version: i16, body: &Q) -> Result<R>
    where
        Q: Encodable + HeaderVersion,
        R: Decodable + HeaderVersion,
    {
        let id = self.next_id();
        write_frame(&mut self.write, &frame(key, version, id, body)?).await?;
        let (got, resp) = decode_response::<R>(read_frame(&mut self.read).await?, version)?;
        ensure!(got == id, "response {got} to request {id}");
        Ok(resp)
    }

    async fn check_versions(&mut self) -> Result<()> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from(CLIENT_ID))
            .with_client_software_version(StrBytes::from(env!("CARGO_PKG_VERSION")));
        let resp: ApiVersionsResponse = self.call(ApiKey::ApiVersions, API_VERSIONS_VERSION, &req).await?;
        ensure!(resp.error_code == NO_ERROR, "ApiVersions answered error {}", resp.error_code);
        for (key, v) in [
            (ApiKey::Produce, PRODUCE_VERSION),
            (ApiKey::Fetch, FETCH_VERSION),
            (ApiKey::Metadata, METADATA_VERSION),
            (ApiKey::CreateTopics, CREATE_TOPICS_VERSION),
            (ApiKey::DeleteTopics, DELETE_TOPICS_VERSION),
        ] {
            let served = resp.api_keys.iter().find(|a| a.api_key == key as i16);
            let ok = served.is_some_and(|a| (a.min_version..=a.max_version).contains(&v));
            ensure!(ok, "the broker does not serve {key:?} v{v}");
        }
        Ok(())
    }

    /// Creates `topic` (an existing one is fine) with `configs`, then waits until
    /// every partition has a leader (Apache Kafka elects them asynchronously).
    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: usize,
        configs: &[(&str, &str)],
    ) -> Result<()> {
        let configs = configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string((*k).to_owned()))
                    .with_value(Some(StrBytes::from_string((*v).to_owned())))
            })
            .collect();
        let t = CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions as i32)
            .with_replication_factor(1)
            .with_configs(configs);
        let req = CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(30_000);
        let resp: CreateTopicsResponse = self.call(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &req).await?;
        let r = resp.topics.first().context("CreateTopics answered no topic")?;
        if r.error_code != NO_ERROR && r.error_code != TOPIC_ALREADY_EXISTS {
            bail!("creating {topic}: error {} {:?}", r.error_code, r.error_message.as_deref());
        }
        self.wait_for_leaders(topic, partitions).await
    }

    /// Sends `batch` to every partition of `topic` until each takes it: Apache
    /// Kafka's metadata names a leader a moment before that broker serves the
    /// partition (NOT_LEADER_OR_FOLLOWER meanwhile), and a client retries those.
    pub async fn wait_writable(&mut self, topic: &str, partitions: usize, batch: &Bytes) -> Result<()> {
        let deadline = Instant::now() + IO_TIMEOUT;
        for p in 0..partitions as i32 {
            loop {
                let req = produce_request(topic, p, batch.clone());
                let resp: ProduceResponse = self.call(ApiKey::Produce, PRODUCE_VERSION, &req).await?;
                let code =
                    resp.responses.first().and_then(|t| t.partition_responses.first()).map(|r| r.error_code);
                match code {
                    Some(NO_ERROR) => break,
                    Some(c) if RETRIABLE.contains(&c) && Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    _ => bail!("{topic}-{p} does not take a produce: {:?}", produce_error(&resp)),
                }
            }
        }
        Ok(())
    }

    /// Deletes `topic` (Apache Kafka removes its files a minute later,
    /// `log.segment.delete.delay.ms`).
    pub async fn delete_topic(&mut self, topic: &str) -> Result<()> {
        let req = DeleteTopicsRequest::default().with_topic_names(vec![name(topic)]).with_timeout_ms(30_000);
        let resp: DeleteTopicsResponse = self.call(ApiKey::DeleteTopics, DELETE_TOPICS_VERSION, &req).await?;
        let r = resp.responses.first().context("DeleteTopics answered no topic")?;
        ensure!(
            r.error_code == NO_ERROR,
            "deleting {topic}: error {} {:?}",
            r.error_code,
            r.error_message.as_deref()
        );
        Ok(())
    }

    async fn wait_for_leaders(&mut self, topic: &str, partitions: usize) -> Result<()> {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let req = MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(topic)))]));
            let resp: MetadataResponse = self.call(ApiKey::Metadata, METADATA_VERSION, &req).await?;
            let ready = resp.topics.first().is_some_and(|t| {
                t.error_code == NO_ERROR
                    && t.partitions.len() == partitions
                    && t.partitions.iter().all(|p| p.error_code == NO_ERROR && p.leader_id.0 >= 0)
            });
            if ready {
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "{topic}'s partitions have no leader after {IO_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fetches `topic`-0 from `offset`: the records bytes and the high watermark.
    pub async fn fetch(
        &mut self,
        topic: &str,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
    ) -> Result<(Bytes, i64)> {
        let p = FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(max_bytes)
            .with_log_start_offset(-1)
            .with_current_leader_epoch(-1)
            .with_last_fetched_epoch(-1);
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![p])]);
        let resp: FetchResponse = self.call(ApiKey::Fetch, FETCH_VERSION, &req).await?;
        ensure!(resp.error_code == NO_ERROR, "fetch answered error {}", resp.error_code);
        let part = resp
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .context("a fetch answer without the partition")?;
        ensure!(part.error_code == NO_ERROR, "fetching {topic}-0 at {offset}: error {}", part.error_code);
        Ok((part.records.unwrap_or_default(), part.high_watermark))
    }
}

/// A Produce request of one batch to one partition, acks=all.
pub fn produce_request(topic: &str, partition: i32, batch: Bytes) -> ProduceRequest {
    let data = PartitionProduceData::default().with_index(partition).with_records(Some(batch));
    let t = TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![data]);
    ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![t])
}

/// The partition error of a Produce response (one topic, one partition), or none.
pub fn produce_error(resp: &ProduceResponse) -> Option<String> {
    let Some(p) = resp.responses.first().and_then(|t| t.partition_responses.first()) else {
        return Some("a produce answer without the partition".to_owned());
    };
    (p.error_code != NO_ERROR)
        .then(|| format!("produce error {} {:?}", p.error_code, p.error_message.as_deref()))
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Counts whole batches in fetched `records` at or after `from`; returns (records,
/// the offset after the last whole batch). A batch cut at the fetch size is left
/// for the next fetch, as a Kafka client does.
pub fn count_batches(mut records: &[u8], from: i64) -> Result<(u64, i64)> {
    let mut count = 0u64;
    let mut next = from;
    while records.len() >= es_core::BatchHeader::LEN {
        let h = es_core::BatchHeader::parse(records, usize::MAX).context("a fetched batch header")?;
        if records.len() < h.total_len() {
            break;
        }
        let end = h.next_offset() as i64;
        if end > from {
            count += u64::from(h.record_count);
        }
        next = next.max(end);
        records.advance(h.total_len());
    }
    Ok((count, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_produce_frame_decodes_as_the_broker_would() {
        let batch = Bytes::from_static(b"0123456789");
        let f = frame(ApiKey::Produce, PRODUCE_VERSION, 7, &produce_request("t", 3, batch.clone())).unwrap();
        let mut body = f.slice(4..);
        assert_eq!(i32::from_be_bytes(f[..4].try_into().unwrap()) as usize, body.len());
        let h = RequestHeader::decode(&mut body, ProduceRequest::header_version(PRODUCE_VERSION)).unwrap();
        assert_eq!((h.request_api_key, h.correlation_id), (ApiKey::Produce as i16, 7));
        let req = ProduceRequest::decode(&mut body, PRODUCE_VERSION).unwrap();
        assert_eq!(req.acks, -1);
        let p = &req.topic_data[0].partition_data[0];
        assert_eq!((p.index, p.records.clone()), (3, Some(batch)));
    }

    #[test]
    fn batches_cut_at_the_fetch_size_wait_for_the_next_fetch() {
        let records: Vec<es_core::Record> =
            (0..3).map(|_| es_core::Record::from_value(Bytes::from_static(b"v"))).collect();
        let one = es_core::batch::encode(&records, 0, es_core::ProducerInfo::NONE).unwrap();
        let mut two = one.clone();
        let mut second = one.clone();
        // A second batch at offset 3, cut short.
        second[..8].copy_from_slice(&3i64.to_be_bytes());
        two.extend_from_slice(&second[..second.len() - 1]);
        assert_eq!(count_batches(&two, 0).unwrap(), (3, 3));
        two.push(*second.last().unwrap());
        assert_eq!(count_batches(&two, 0).unwrap(), (6, 6));
        // Records before the fetch offset in the first batch are not the reader's.
        assert_eq!(count_batches(&two, 3).unwrap(), (3, 6));
    }
}
