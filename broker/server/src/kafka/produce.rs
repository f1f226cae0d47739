//! Produce (3-11; v0-2 refused by the codec). Each partition's records are the
//! client's batches as received: split at batch boundaries, appended in frame order
//! before the next frame is read, and acknowledged once durable. The fsync waits of
//! one connection's produces overlap; a wait longer than the request's `timeout_ms`
//! answers REQUEST_TIMED_OUT (the batch may still be written, as with Kafka). acks=0
//! gets no response at all. A produce over its key's quota is appended all the
//! same and answered with `throttle_time_ms`; the connection is muted for that long
//! (KIP-219), acks=0 included.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_core::batch::BatchHeader;
use es_kafka::Header;
use es_kafka::kafka_protocol::messages::produce_request::TopicProduceData;
use es_kafka::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use es_kafka::kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use tokio::time::Instant;
use uuid::Uuid;

use super::dispatch::{Pending, Reply, ready, reply};
use super::error::{code, kafka_code};
use super::throttle::Mute;
use super::{Ctx, sb};
use crate::service::error::BrokerError;
use crate::service::produce::{PartitionBatch, PendingProduce, ProduceAck};
use crate::service::{Principal, Service};

/// One partition's outcome so far: refused, or its appends (one per batch) to await.
enum Started {
    Failed(i16, String, Vec<BatchIndexAndErrorMessage>),
    Appended(Vec<PendingProduce>),
}

/// One partition of the request, in request order.
struct Part {
    index: i32,
    started: Started,
}

/// One topic of the request: its name as the client gave it (or its id, v13).
struct TopicParts {
    name: TopicName,
    id: Uuid,
    parts: Vec<Part>,
}

/// Phase one: every append of the request, in frame order. Returns the reply's task.
pub async fn begin(
    ctx: &Arc<Ctx>,
    header: Header,
    req: ProduceRequest,
    who: Principal,
    mute: &Mute,
) -> Pending {
    let acks = req.acks;
    let bad_acks = !matches!(acks, -1..=1);
    let mut topics = Vec::with_capacity(req.topic_data.len());
    for t in req.topic_data {
        topics.push(begin_topic(&ctx.service, &who, t, bad_acks).await);
    }
    // Charged as the appends began: mute now, before the next frame is read.
    let throttle = ctx.service.throttle_ms(&who, crate::service::quota::Direction::Produce);
    mute.hold(throttle);
    if acks == 0 {
        // Nothing to answer; the appends still complete (and are durable) on their own.
        tokio::spawn(finish(topics, None));
        return ready(Reply::Nothing);
    }
    let timeout = u64::try_from(req.timeout_ms).ok().filter(|&ms| ms > 0).map(Duration::from_millis);
    let version = header.api_version;
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let deadline = timeout.map(|t| Instant::now() + t);
        let responses = finish(topics, deadline).await;
        let response = ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(super::fetch::throttle_field(throttle));
        super::fenced::last_if(super::fenced::in_produce(&ctx, &response), reply(&header, version, &response))
    })
}

async fn begin_topic(svc: &Service, who: &Principal, t: TopicProduceData, bad_acks: bool) -> TopicParts {
    // Produce v13 names topics by id only.
    let name = if t.name.is_empty() {
        svc.topic_name_by_id(t.topic_id.into_bytes())
    } else {
        Some(t.name.as_str().to_owned())
    };
    let mut parts = Vec::with_capacity(t.partition_data.len());
    for p in t.partition_data {
        let started = match (&name, bad_acks) {
            (_, true) => {
                Started::Failed(code::INVALID_REQUIRED_ACKS, "acks must be -1, 0 or 1".into(), vec![])
            }
            (None, false) => Started::Failed(code::UNKNOWN_TOPIC_ID, "no topic has this id".into(), vec![]),
            (Some(name), false) => begin_partition(svc, who, name, p.index, p.records).await,
        };
        parts.push(Part { index: p.index, started });
    }
    TopicParts { name: t.name, id: t.topic_id, parts }
}

/// Appends one partition's batches in order; the first refusal stops it.
async fn begin_partition(
    svc: &Service,
    who: &Principal,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
) -> Started {
    let Ok(partition) = u32::try_from(index) else {
        return Started::Failed(code::UNKNOWN_TOPIC_OR_PARTITION, format!("no partition {index}"), vec![]);
    };
    let batches = match split_batches(records.unwrap_or_default()) {
        Ok(b) => b,
        Err(message) => return Started::Failed(code::INVALID_RECORD, message, vec![]),
    };
    let mut pending = Vec::with_capacity(batches.len());
    for batch in batches {
        // The log takes an owned buffer: this is the one copy of the client's bytes.
        let one = PartitionBatch { partition, batch: batch.to_vec(), ids: None };
        match svc.produce(who, topic, vec![one]).await {
            Ok(p) => pending.push(p),
            Err(e) => return failed(&e),
        }
    }
    Started::Appended(pending)
}

/// A refusal with Kafka's code and message.
fn failed(e: &BrokerError) -> Started {
    Started::Failed(kafka_code(e), e.to_string(), record_errors(e))
}

/// The records a refusal names: validator findings, or the one oversized record.
fn record_errors(e: &BrokerError) -> Vec<BatchIndexAndErrorMessage> {
    let one = |index: usize, message: String| {
        BatchIndexAndErrorMessage::default()
            .with_batch_index(i32::try_from(index).unwrap_or(i32::MAX))
            .with_batch_index_error_message(Some(sb(message)))
    };
    if let BrokerError::ValidationFailed { findings, .. } = e {
        return findings
            .iter()
            .map(|f| one(f.index, format!("{} ({}): {}", f.plugin, f.code, f.reason)))
            .collect();
    }
    if let BrokerError::RecordTooLarge { index, .. } = e {
        return vec![one(*index, e.to_string())];
    }
    Vec::new()
}

/// Splits a records field into its v2 batches (zero-copy slices). Empty or
/// malformed input is refused with the codec's reason.
fn split_batches(mut records: Bytes) -> Result<Vec<Bytes>, String> {
    if records.is_empty() {
        return Err("the partition's records are empty: send at least one record batch".into());
    }
    let mut out = Vec::new();
    while !records.is_empty() {
        let header = BatchHeader::parse(&records, es_core::limits::BATCH_BYTES_MAX_HARD)
            .map_err(|e| format!("invalid record batch: {e} (es accepts only v2 record batches, magic 2)"))?;
        let len = header.total_len();
        if len > records.len() {
            return Err(format!("the record batch claims {len} bytes; {} were sent", records.len()));
        }
        out.push(records.split_to(len));
    }
    Ok(out)
}

/// Phase two: awaits each partition's appends, within `deadline` when there is one.
async fn finish(topics: Vec<TopicParts>, deadline: Option<Instant>) -> Vec<TopicProduceResponse> {
    let mut out = Vec::with_capacity(topics.len());
    for t in topics {
        let mut parts = Vec::with_capacity(t.parts.len());
        for p in t.parts {
            parts.push(answer(p, deadline).await);
        }
        out.push(
            TopicProduceResponse::default()
                .with_name(t.name)
                .with_topic_id(t.id)
                .with_partition_responses(parts),
        );
    }
    out
}

async fn answer(part: Part, deadline: Option<Instant>) -> PartitionProduceResponse {
    let base = PartitionProduceResponse::default()
        .with_index(part.index)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1);
    let pending = match part.started {
        Started::Failed(error, message, record_errors) => {
            return base
                .with_error_code(error)
                .with_error_message(Some(sb(message)))
                .with_record_errors(record_errors)
                .with_base_offset(-1);
        }
        Started::Appended(p) => p,
    };
    let mut first = None;
    for p in pending {
        let acked = match deadline {
            Some(d) => tokio::time::timeout_at(d, p.durable()).await,
            None => Ok(p.durable().await),
        };
        let ack = match acked {
            Err(_) => {
                let message =
                    "the batch was not durable within the request's timeout_ms; it may still be written";
                return base
                    .with_error_code(code::REQUEST_TIMED_OUT)
                    .with_error_message(Some(sb(message)))
                    .with_base_offset(-1);
            }
            Ok(Err(e)) => {
                return base
                    .with_error_code(kafka_code(&e))
                    .with_error_message(Some(sb(e.to_string())))
                    .with_base_offset(-1);
            }
            Ok(Ok(ack)) => ack,
        };
        first.get_or_insert(base_offset(&ack));
    }
    base.with_base_offset(first.unwrap_or(-1))
}

/// The offset of the batch's first record; when every record went to a dead-letter
/// topic, the partition's high watermark when the batch was planned.
fn base_offset(ack: &ProduceAck) -> i64 {
    ack.partitions.first().map_or(-1, |p| match p.written {
        Some(a) => a.base_offset as i64,
        None => p.high_watermark as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_core::{ProducerInfo, Record};

    fn batch(values: &[&str]) -> Vec<u8> {
        let records: Vec<Record> = values.iter().map(|v| Record::from_value(v.to_string())).collect();
        es_core::batch::encode(&records, 1_000, ProducerInfo::NONE).unwrap()
    }

    #[test]
    fn records_split_at_batch_boundaries_without_copying() {
        let (a, b) = (batch(&["a"]), batch(&["b", "c"]));
        let both = Bytes::from([a.clone(), b.clone()].concat());
        let split = split_batches(both.clone()).unwrap();
        assert_eq!(split.len(), 2);
        assert_eq!((&split[0][..], &split[1][..]), (&a[..], &b[..]));
        assert_eq!(split[0].as_ptr(), both.as_ptr(), "a slice of the frame, not a copy");
    }

    #[test]
    fn empty_truncated_and_old_format_records_are_refused() {
        assert!(split_batches(Bytes::new()).is_err());
        let a = batch(&["a"]);
        assert!(split_batches(Bytes::from(a[..a.len() - 1].to_vec())).is_err());
        let garbage = vec![0u8; BatchHeader::LEN];
        assert!(split_batches(Bytes::from(garbage)).unwrap_err().contains("magic 2"));
    }

    #[test]
    fn validator_refusals_carry_record_errors() {
        use crate::plugins::binding::{Finding, Outcome};
        let finding = Finding {
            index: 3,
            plugin: "rules".into(),
            code: "key-required".into(),
            reason: "no key".into(),
            outcome: Outcome::Rejected,
            dead_letter_topic: None,
        };
        let e = BrokerError::ValidationFailed { topic: "t".into(), findings: vec![finding] };
        let Started::Failed(error, message, errors) = failed(&e) else { panic!("not a refusal") };
        assert_eq!(error, code::INVALID_RECORD);
        assert!(message.contains("failed validation"), "{message}");
        assert_eq!(errors[0].batch_index, 3);
        assert!(errors[0].batch_index_error_message.as_deref().unwrap().contains("key-required"));
    }
}
