//! ListOffsets (1-8) and OffsetForLeaderEpoch (2-4). Offsets resolve once, in the
//! service (Kafka's -1 latest, -2 earliest, a timestamp: the first record at or
//! after it). A timestamp lookup answers the found record's own timestamp, as Kafka
//! does (the Java client refuses a negative one). -3 (KIP-734) is the first record
//! holding the greatest timestamp, answered with that timestamp.
//!
//! A partition's leader answers ListOffsets (NOT_LEADER_OR_FOLLOWER elsewhere),
//! except to Kafka's debugging consumer (replica id -2), which any replica
//! answers, as Kafka does. From v4 a `current_leader_epoch` other than the
//! replica's is refused as it is on a fetch (KIP-320).

use es_core::batch::BatchView;
use es_kafka::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use es_kafka::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use es_kafka::kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use super::Ctx;
use super::error::{code, kafka_code};
use super::fetch::named_epoch;
use crate::service::Principal;
use crate::service::error::{BrokerError, Result};
use crate::service::fetch::{FetchPartition, FetchRequest, Replicas};
use crate::service::offsets::{EpochEnd, OffsetSpec};

/// Kafka's "earliest local" spec (KIP-405).
const EARLIEST_LOCAL: i64 = -4;

/// The replica id of Kafka's debugging consumer, which any replica answers.
const DEBUGGING_REPLICA_ID: i32 = -2;

/// Which replica answers a lookup, and the leader epoch the client named.
#[derive(Clone, Copy)]
struct Lookup {
    from: Replicas,
    leader_epoch: Option<i32>,
}

pub async fn list_offsets(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let from = if req.replica_id.0 == DEBUGGING_REPLICA_ID { Replicas::Any } else { Replicas::Leader };
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let base = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            let at = Lookup { from, leader_epoch: named_epoch(p.current_leader_epoch) };
            let answer = match lookup(ctx, who, t.name.as_str(), p.partition_index, p.timestamp, at).await {
                Ok(Some((offset, timestamp))) => {
                    // kafka-protocol refuses to encode a field the version lacks unless
                    // it holds its default: the leader epoch exists from v4.
                    let epoch = match version >= 4 {
                        true => offset_epoch(ctx, who, t.name.as_str(), p.partition_index, offset),
                        false => -1,
                    };
                    base.with_offset(offset as i64).with_timestamp(timestamp).with_leader_epoch(epoch)
                }
                // No record at or after the timestamp: Kafka's "no offset".
                Ok(None) => base.with_offset(-1).with_timestamp(-1).with_leader_epoch(-1),
                Err(e) => base
                    .with_error_code(kafka_code(&e))
                    .with_offset(-1)
                    .with_timestamp(-1)
                    .with_leader_epoch(-1),
            };
            parts.push(answer);
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(t.name).with_partitions(parts));
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// The leader epoch of the batch holding `offset` (-1 if it cannot be told).
fn offset_epoch(ctx: &Ctx, who: &Principal, topic: &str, partition: i32, offset: u64) -> i32 {
    let Ok(partition) = u32::try_from(partition) else { return -1 };
    ctx.service.offset_epoch(who, topic, partition, offset).map_or(-1, |e| e.0)
}

/// One partition's (offset, timestamp) for a ListOffsets timestamp.
async fn lookup(
    ctx: &Ctx,
    who: &Principal,
    topic: &str,
    partition: i32,
    ts: i64,
    at: Lookup,
) -> Result<Option<(u64, i64)>> {
    let partition = u32::try_from(partition).map_err(|_| BrokerError::PartitionNotFound {
        topic: topic.to_owned(),
        partition: 0,
        count: 0,
    })?;
    let spec = match ts {
        // Every segment es serves is local: earliest local is earliest.
        EARLIEST_LOCAL => OffsetSpec::Earliest,
        ts => OffsetSpec::from_timestamp(ts)?,
    };
    let Some(offset) = ctx.service.list_offset(who, topic, partition, spec, at.from, at.leader_epoch).await?
    else {
        return Ok(None);
    };
    let timestamp = match spec {
        OffsetSpec::Timestamp(_) | OffsetSpec::MaxTimestamp => {
            record_timestamp(ctx, who, topic, partition, offset, at.from).await?
        }
        OffsetSpec::Earliest | OffsetSpec::Latest => -1,
    };
    Ok(Some((offset, timestamp)))
}

/// The timestamp of the record at `offset`: one read of the batch holding it.
async fn record_timestamp(
    ctx: &Ctx,
    who: &Principal,
    topic: &str,
    partition: u32,
    offset: u64,
    from: Replicas,
) -> Result<i64> {
    let at = FetchPartition { topic: topic.to_owned(), partition, offset, max_bytes: 1, leader_epoch: None };
    let req = FetchRequest { partitions: vec![at], max_wait_ms: 0, min_bytes: 0, max_bytes: 1, from };
    let read =
        ctx.service.fetch(who, req).await?.pop().ok_or_else(|| BrokerError::Internal("no read".into()))??;
    let invalid =
        |e: es_core::CodecError| BrokerError::Internal(format!("a stored batch does not decode: {e}"));
    let view = BatchView::parse(&read.data, read.data.len()).map_err(invalid)?;
    let records = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD).map_err(invalid)?;
    for r in records.iter() {
        let r = r.map_err(invalid)?;
        if r.offset == offset {
            return Ok(r.timestamp);
        }
    }
    Ok(view.header.max_timestamp)
}

/// OffsetForLeaderEpoch 2-4, from each partition's leader-epoch record (Kafka's
/// leader-epoch cache): where the asked epoch ends. A consumer validates its
/// position with it after a leader change (KIP-320), so the answer is the log's
/// own history, clamped to the high watermark; a stale `current_leader_epoch` is
/// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, a follower
/// NOT_LEADER_OR_FOLLOWER.
pub fn offset_for_leader_epoch(
    ctx: &Ctx,
    who: &Principal,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                let base = EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1);
                let Ok(partition) = u32::try_from(p.partition) else {
                    return base.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION);
                };
                let answer = ctx.service.epoch_end_offset(
                    who,
                    t.topic.as_str(),
                    partition,
                    named_epoch(p.current_leader_epoch),
                    p.leader_epoch,
                );
                match answer {
                    Ok(EpochEnd::At { epoch, end_offset }) => {
                        base.with_leader_epoch(epoch).with_end_offset(end_offset as i64)
                    }
                    Ok(EpochEnd::Undefined) => base,
                    Err(e) => base.with_error_code(kafka_code(&e)),
                }
            })
            .collect();
        topics.push(OffsetForLeaderTopicResult::default().with_topic(t.topic).with_partitions(parts));
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
