//! Fetch (4-16): stored batches served as stored, whole, at least one even over
//! `max_bytes` (KIP-74); records are never null (librdkafka fails a whole response
//! on a null); the long poll is the service's. No fetch sessions: session id 0
//! tells clients to send full fetches. Topics are named by id from v13. A fetch
//! over its key's quota is served in full and answered with `throttle_time_ms`;
//! the connection is then muted for as long (KIP-219).
//!
//! Follower fetching (KIP-392): before v11 only a partition's leader serves it
//! (NOT_LEADER_OR_FOLLOWER elsewhere); from v11 any replica serves consumers up to
//! its high watermark, and a leader asked by a consumer that names its rack
//! (`rack_id`, the client's `client.rack`) from another rack answers a partition
//! with no records and `preferred_read_replica` set to an in-sync replica in that
//! rack when there is one (`cluster/racks.rs`); otherwise it is -1.
//!
//! From v9 a partition names the leader epoch the consumer knows it by
//! (`current_leader_epoch`, KIP-320): a replica whose epoch is newer answers
//! FENCED_LEADER_EPOCH (the consumer's metadata is stale), one whose epoch is
//! older UNKNOWN_LEADER_EPOCH (the replica has not caught up); both are retried
//! after a metadata refresh.

use es_kafka::kafka_protocol::messages::fetch_request::FetchTopic;
use es_kafka::kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use es_kafka::kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use es_log::ReadResult;
use uuid::Uuid;

use super::Ctx;
use super::error::{code, kafka_code};
use super::throttle::Mute;
use crate::limits::WAIT_MS_MAX;
use crate::service::error::BrokerError;
use crate::service::fetch::{self, FetchPartition, ReadElsewhere, Replicas};
use crate::service::{Call, Principal, authz};

/// One requested partition: where its answer goes, and what to read (or why not).
struct Slot {
    topic: usize,
    index: i32,
    read: Todo,
}

enum Todo {
    Read(FetchPartition),
    Failed(i16),
    /// Read on another replica (KIP-392).
    Elsewhere(ReadElsewhere),
}

/// From this version a follower serves consumers and the consumer's rack is sent.
const FOLLOWER_FETCH_VERSION: i16 = 11;

pub async fn fetch(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: FetchRequest,
    mute: &Mute,
) -> FetchResponse {
    let rack = (version >= FOLLOWER_FETCH_VERSION).then(|| req.rack_id.as_str()).filter(|r| !r.is_empty());
    let mut topics: Vec<FetchableTopicResponse> = Vec::with_capacity(req.topics.len());
    let mut slots = Vec::new();
    let auth = ctx.service.registry().auth();
    for t in &req.topics {
        let name = resolve(ctx, t);
        // Authorized before the partition's shape is checked, so a refused topic is
        // refused whatever offset is asked; a refused id answers as an unknown one.
        let refused = name.as_deref().filter(|n| !authz::may_topic(auth, who, Call::Fetch, n)).map(|_| {
            if t.topic_id != Uuid::nil() { code::UNKNOWN_TOPIC_ID } else { code::TOPIC_AUTHORIZATION_FAILED }
        });
        for p in &t.partitions {
            let read = match refused.map_or_else(|| target(&name, p), Err) {
                Err(c) => Todo::Failed(c),
                Ok(at) => match rack.and_then(|r| ctx.service.preferred_read_replica(&at, r)) {
                    Some(elsewhere) => Todo::Elsewhere(elsewhere),
                    None => Todo::Read(at),
                },
            };
            slots.push(Slot { topic: topics.len(), index: p.partition, read });
        }
        let topic = TopicName(t.topic.0.clone());
        topics.push(FetchableTopicResponse::default().with_topic(topic).with_topic_id(t.topic_id));
    }
    let reads: Vec<FetchPartition> = slots
        .iter()
        .filter_map(|s| match &s.read {
            Todo::Read(at) => Some(at.clone()),
            Todo::Failed(_) | Todo::Elsewhere(_) => None,
        })
        .collect();
    // A consumer sent elsewhere is told at once, as Kafka does: no long poll then.
    let at_once = slots.iter().any(|s| matches!(s.read, Todo::Elsewhere(_)));
    // A refusal of the whole fetch (its shape) answers every partition with its code.
    let (mut results, whole) = match read(ctx, who, &req, reads, version, at_once).await {
        Ok(r) => (r.into_iter(), None),
        Err(e) => (Vec::new().into_iter(), Some(kafka_code(&e))),
    };
    for slot in slots {
        let data = match (slot.read, whole) {
            (Todo::Failed(c), _) | (Todo::Read(_), Some(c)) => failed(slot.index, c),
            (Todo::Elsewhere(e), _) => elsewhere(slot.index, e),
            (Todo::Read(_), None) => match results.next() {
                Some(Ok(read)) => served(slot.index, read),
                Some(Err(e)) => from_error(slot.index, &e),
                None => failed(slot.index, code::UNKNOWN_SERVER_ERROR),
            },
        };
        topics[slot.topic].partitions.push(data);
    }
    let throttle = ctx.service.throttle_ms(who, crate::service::quota::Direction::Fetch);
    mute.hold(throttle);
    FetchResponse::default().with_responses(topics).with_throttle_time_ms(throttle_field(throttle))
}

/// A throttle as the i32 Kafka's `throttle_time_ms` fields hold.
pub(super) fn throttle_field(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// The service's long poll over every readable partition (none: nothing to wait for).
async fn read(
    ctx: &Ctx,
    who: &Principal,
    req: &FetchRequest,
    reads: Vec<FetchPartition>,
    version: i16,
    at_once: bool,
) -> crate::service::Result<fetch::Fetched> {
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    // A client's wait beyond the broker's bound is shortened, not refused: the answer
    // comes sooner than it allowed, which every client handles.
    let wait = if at_once { 0 } else { u64::try_from(req.max_wait_ms).unwrap_or(0).min(WAIT_MS_MAX) };
    let shape = fetch::FetchRequest {
        partitions: reads,
        max_wait_ms: wait,
        min_bytes: usize::try_from(req.min_bytes).unwrap_or(0),
        max_bytes: usize::try_from(req.max_bytes).unwrap_or(0).max(1),
        from: match version < FOLLOWER_FETCH_VERSION {
            true => Replicas::Leader,
            false => Replicas::Led,
        },
    };
    ctx.service.fetch(who, shape).await
}

/// The topic's name: as given, or (v13+) from its id; `None` for an unknown id.
fn resolve(ctx: &Ctx, t: &FetchTopic) -> Option<String> {
    if t.topic_id != Uuid::nil() {
        return ctx.service.topic_name_by_id(t.topic_id.into_bytes());
    }
    Some(t.topic.as_str().to_owned())
}

fn target(
    name: &Option<String>,
    p: &es_kafka::kafka_protocol::messages::fetch_request::FetchPartition,
) -> Result<FetchPartition, i16> {
    let name = name.clone().ok_or(code::UNKNOWN_TOPIC_ID)?;
    let partition = u32::try_from(p.partition).map_err(|_| code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let offset = u64::try_from(p.fetch_offset).map_err(|_| code::OFFSET_OUT_OF_RANGE)?;
    let max_bytes = usize::try_from(p.partition_max_bytes).unwrap_or(0).max(1);
    let leader_epoch = named_epoch(p.current_leader_epoch);
    Ok(FetchPartition { topic: name, partition, offset, max_bytes, leader_epoch })
}

/// A request's `current_leader_epoch`: -1 (its default, and all a version
/// without the field carries) names none.
pub(super) fn named_epoch(epoch: i32) -> Option<i32> {
    (epoch >= 0).then_some(epoch)
}

fn base(index: i32) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_preferred_read_replica(BrokerId(-1))
        .with_aborted_transactions(Some(Vec::new()))
        .with_records(Some(bytes::Bytes::new()))
}

/// A partition's answer with its watermarks: no transactions, so everything
/// durable is stable (last stable offset = high watermark).
fn with_ends(index: i32, high_watermark: u64, log_start: u64) -> PartitionData {
    let hw = high_watermark as i64;
    base(index).with_high_watermark(hw).with_last_stable_offset(hw).with_log_start_offset(log_start as i64)
}

fn served(index: i32, read: ReadResult) -> PartitionData {
    with_ends(index, read.high_watermark, read.log_start_offset).with_records(Some(read.data))
}

/// Sent to another replica: no records, the leader's watermarks (as Kafka answers).
fn elsewhere(index: i32, e: ReadElsewhere) -> PartitionData {
    with_ends(index, e.high_watermark, e.log_start)
        .with_preferred_read_replica(BrokerId(super::metadata::node_id(e.node)))
}

fn failed(index: i32, error: i16) -> PartitionData {
    base(index)
        .with_error_code(error)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
}

fn from_error(index: i32, e: &BrokerError) -> PartitionData {
    if let BrokerError::OffsetOutOfRange { log_start, high_watermark, .. } = e {
        return with_ends(index, *high_watermark, *log_start).with_error_code(code::OFFSET_OUT_OF_RANGE);
    }
    failed(index, kafka_code(e))
}
