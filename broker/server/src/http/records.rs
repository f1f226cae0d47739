//! Data routes: produce (acknowledged only after fsync), consume by offset or
//! timestamp with long-poll, and offset lookups. Only the JSON shapes live here:
//! the produce pipeline, the long poll and offset resolution are the service's.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use es_core::{Clock, Header, Record, RecordView, SystemClock};
use serde::Serialize;

use super::{ApiJson, ApiPath, ApiQuery, AppState, Caller};
use crate::api::{
    self, ConsumeQuery, ConsumeResponse, ConsumedRecord, Encoding, ErrorBody, OffsetsQuery, OffsetsResponse,
    PartitionOffsets, ProduceRecord, ProduceRequest, ProduceResponse, ProducerIdResponse, RecordOffset,
    WireHeader,
};
use crate::limits;
use crate::service::error::{BrokerError, Result};
use crate::service::fetch::{FetchPartition, FetchRequest, Replicas};
use crate::service::offsets::{OffsetSpec, Start};
use crate::service::produce::{self, PartitionBatch, ProduceTarget};

#[utoipa::path(post, path = "/topics/{topic}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = ProduceRequest,
    responses(
        (status = 200, description = "Every record is on disk", body = ProduceResponse),
        (status = 400, description = "bad_json, bad_encoding, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 403, description = "internal_topic: the broker's internal topics take no client writes", body = ErrorBody),
        (status = 409, description = "out_of_order_sequence, producer_fenced, unknown_producer_id: an idempotent producer's batch is out of sequence, its epoch is stale, or its id was never issued", body = ErrorBody),
        (status = 413, description = "batch_too_large, record_too_large, request_too_large", body = ErrorBody),
        (status = 421, description = "not_leader: in a cluster, this node does not lead every partition of the request; nothing was written: resend it to the leader in the es-leader header", body = ErrorBody),
        (status = 422, description = "validation_failed: the topic's validators refused records; nothing was written", body = ErrorBody),
        (status = 503, description = "shutting_down, overloaded, plugin_failed; leadership_lost: the leader lost its leadership before the write committed, which may or may not be written", body = ErrorBody)))]
pub async fn produce(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<ProduceRequest>,
) -> Result<Json<ProduceResponse>> {
    let principal = who;
    let mut target = state.service.produce_target(&principal, &name)?;
    if req.records.is_empty() {
        return Err(BrokerError::InvalidRequest("records must hold at least one record".into()));
    }
    if req.records.len() > limits::PRODUCE_RECORDS_MAX {
        return Err(BrokerError::InvalidRequest(format!(
            "a produce request holds at most {} records; got {}",
            limits::PRODUCE_RECORDS_MAX,
            req.records.len()
        )));
    }
    let count = req.records.len();
    let batches = encode_batches(&mut target, req)?;
    let ack = state.service.begin_produce(&principal, target, batches).await?.durable().await?;
    let mut offsets: Vec<Option<RecordOffset>> = (0..count).map(|_| None).collect();
    for p in &ack.partitions {
        let Some(written) = p.written else { continue };
        for (i, id) in p.ids.iter().enumerate() {
            let offset = written.base_offset + i as u64;
            offsets[*id] = Some(RecordOffset { partition: p.partition, offset, topic: None });
        }
    }
    for d in &ack.dead_letters {
        offsets[d.id] =
            Some(RecordOffset { partition: d.partition, offset: d.offset, topic: Some(d.topic.clone()) });
    }
    let duplicate = ack.duplicate();
    let offsets =
        offsets.into_iter().map(|o| o.expect("every record was written or dead-lettered")).collect();
    Ok(Json(ProduceResponse { offsets, violations: ack.findings, duplicate }))
}

/// Decodes the JSON records, routes each (explicit partition, key, sticky) and
/// encodes one batch per partition; each record's id is its request index.
fn encode_batches(target: &mut ProduceTarget, req: ProduceRequest) -> Result<Vec<PartitionBatch>> {
    let mut groups: BTreeMap<u32, (Vec<usize>, Vec<Record>)> = BTreeMap::new();
    for (index, wire) in req.records.into_iter().enumerate() {
        let explicit = wire.partition;
        let record = decode_record(req.encoding, index, wire)?;
        let partition = target.route(explicit, record.key.as_deref())?;
        let (ids, records) = groups.entry(partition).or_default();
        ids.push(index);
        records.push(record);
    }
    let producer = req.producer.map_or(es_core::ProducerInfo::NONE, |p| es_core::ProducerInfo {
        producer_id: p.id,
        producer_epoch: p.epoch,
        base_sequence: p.sequence,
    });
    let now = SystemClock.now_ms();
    groups
        .into_iter()
        .map(|(partition, (ids, records))| {
            let batch = produce::encode_as(&records, now, producer)?;
            Ok(PartitionBatch { partition, batch, ids: Some(ids) })
        })
        .collect()
}

fn decode_record(encoding: Encoding, index: usize, wire: ProduceRecord) -> Result<Record> {
    if wire.timestamp.is_some_and(|t| t < 0) {
        return Err(BrokerError::InvalidRequest(format!(
            "record {index}: timestamp must be milliseconds since the epoch (>= 0)"
        )));
    }
    let field = |text: &Option<String>, what: &str| {
        text.as_deref().map(|t| api::decode(encoding, t, || format!("record {index}: {what}"))).transpose()
    };
    let mut headers = Vec::with_capacity(wire.headers.len());
    for h in &wire.headers {
        headers.push(Header { key: h.key.clone(), value: field(&h.value, &format!("header {:?}", h.key))? });
    }
    if headers.len() > es_core::limits::RECORD_HEADERS_MAX {
        return Err(BrokerError::InvalidRequest(format!(
            "record {index}: at most {} headers",
            es_core::limits::RECORD_HEADERS_MAX
        )));
    }
    Ok(Record {
        key: field(&wire.key, "key")?,
        value: field(&wire.value, "value")?,
        headers,
        timestamp: wire.timestamp,
    })
}

#[utoipa::path(get, path = "/topics/{topic}/partitions/{partition}/records", tag = "records",
    params(
        ("topic" = String, Path, description = "Topic name"),
        ("partition" = u32, Path, description = "Partition number"),
        ConsumeQuery),
    responses(
        (status = 200, body = ConsumeResponse),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 416, description = "offset_out_of_range", body = ErrorBody)))]
pub async fn consume(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath((name, partition)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<ConsumeQuery>,
) -> Result<([(axum::http::HeaderName, &'static str); 1], Vec<u8>)> {
    let principal = who;
    let partition = parse_partition(&partition)?;
    let max_records =
        bounded("max_records", q.max_records, limits::CONSUME_RECORDS_DEFAULT, limits::CONSUME_RECORDS_MAX)?;
    let max_bytes =
        bounded("max_bytes", q.max_bytes, limits::CONSUME_BYTES_DEFAULT, limits::CONSUME_BYTES_MAX)?;
    let start = start_of(&q)?;
    let offset = state.service.start_offset(&principal, &name, partition, start).await?;
    let one = FetchPartition { topic: name.clone(), partition, offset, max_bytes, leader_epoch: None };
    let req = FetchRequest {
        partitions: vec![one],
        max_wait_ms: q.wait_ms.unwrap_or(0),
        min_bytes: 1,
        max_bytes,
        from: Replicas::Any,
    };
    let read =
        state.service.fetch(&principal, req).await?.pop().expect("one partition asked, one answered")?;
    let body = consume_body(&name, partition, &read, offset, max_records, q.encoding.unwrap_or_default())?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body))
}

/// The [`ConsumeResponse`] of `read` as JSON, written record by record straight
/// from the batches: text that is UTF-8 is borrowed, never copied into an owned
/// record first (the profile of this route was allocation and a second UTF-8 scan).
fn consume_body(
    topic: &str,
    partition: u32,
    read: &es_log::ReadResult,
    offset: u64,
    max_records: usize,
    encoding: Encoding,
) -> Result<Vec<u8>> {
    use std::io::Write;
    // JSON text of 256-byte values runs about 1.1x the stored bytes in UTF-8.
    let mut out = Vec::with_capacity(read.data.len() + read.data.len() / 4 + 256);
    out.extend_from_slice(b"{\"topic\":");
    serde_json::to_writer(&mut out, topic).expect("writing to a Vec cannot fail");
    write!(out, ",\"partition\":{partition},\"records\":[").expect("writing to a Vec cannot fail");
    let mut first = true;
    let next_offset = decode_read(read, offset, max_records, |r| {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut out, &view(r, encoding)).expect("writing to a Vec cannot fail");
    })?;
    let (hw, start) = (read.high_watermark, read.log_start_offset);
    write!(out, "],\"next_offset\":{next_offset},\"high_watermark\":{hw},\"log_start_offset\":{start}}}")
        .expect("writing to a Vec cannot fail");
    Ok(out)
}

/// Hands the records of `read` from `offset` on to `each`, at most `max_records`
/// (0: none), and returns the offset to read next. Batches may be stored
/// compressed (binary protocol); they are decoded here.
pub(super) fn decode_read(
    read: &es_log::ReadResult,
    offset: u64,
    max_records: usize,
    mut each: impl FnMut(&RecordView<'_>),
) -> Result<u64> {
    let (mut next_offset, mut taken) = (offset, 0);
    'batches: for batch in read.batches() {
        let plain = batch
            .plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)
            .map_err(|e| BrokerError::Internal(format!("unreadable batch: {e}")))?;
        for r in plain.iter() {
            let r = r.map_err(|e| BrokerError::Internal(format!("unreadable record: {e}")))?;
            if r.offset < offset {
                continue;
            }
            if taken == max_records {
                break 'batches;
            }
            next_offset = r.offset + 1;
            taken += 1;
            each(&r);
        }
        // Compaction can leave offset gaps at a batch's end; skip past them.
        next_offset = next_offset.max(batch.header.next_offset());
    }
    Ok(next_offset)
}

pub(crate) fn parse_partition(text: &str) -> Result<u32> {
    text.parse().map_err(|_| {
        BrokerError::InvalidRequest(format!("partition must be a non-negative integer; got {text:?}"))
    })
}

fn bounded(what: &str, value: Option<usize>, default: usize, max: usize) -> Result<usize> {
    let v = value.unwrap_or(default);
    if !(1..=max).contains(&v) {
        return Err(BrokerError::InvalidRequest(format!("{what} must be between 1 and {max}; got {v}")));
    }
    Ok(v)
}

/// The query's starting point: a number, `earliest` (default), `latest`, or a timestamp.
fn start_of(q: &ConsumeQuery) -> Result<Start> {
    if let Some(ts) = q.timestamp {
        if q.offset.is_some() {
            return Err(BrokerError::InvalidRequest("give offset or timestamp, not both".into()));
        }
        return Ok(Start::Spec(OffsetSpec::from_timestamp(ts)?));
    }
    Ok(match q.offset.as_deref().unwrap_or("earliest") {
        "earliest" => Start::Spec(OffsetSpec::Earliest),
        "latest" => Start::Spec(OffsetSpec::Latest),
        text => Start::At(text.parse().map_err(|_| {
            BrokerError::InvalidRequest(format!(
                "offset must be earliest, latest or a non-negative integer; got {text:?}"
            ))
        })?),
    })
}

/// A record as the consume answers write it, borrowing from the batch: UTF-8 when
/// every field is and the client prefers it, base64 otherwise, so bytes are never
/// mangled. Serializes exactly as [`ConsumedRecord`].
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct RecordJson<'a> {
    offset: u64,
    timestamp: i64,
    encoding: Encoding,
    key: Option<Cow<'a, str>>,
    value: Option<Cow<'a, str>>,
    headers: Vec<HeaderJson<'a>>,
}

#[derive(Debug, PartialEq, Serialize)]
struct HeaderJson<'a> {
    key: &'a str,
    value: Option<Cow<'a, str>>,
}

pub(super) fn view<'a>(r: &RecordView<'a>, preferred: Encoding) -> RecordJson<'a> {
    let mut fields =
        r.key.iter().chain(r.value.iter()).chain(r.headers.iter().filter_map(|(_, v)| v.as_ref()));
    let utf8 = preferred == Encoding::Utf8 && fields.all(|f| std::str::from_utf8(f).is_ok());
    let encoding = if utf8 { Encoding::Utf8 } else { Encoding::Base64 };
    let text = |bytes: &'a [u8]| match std::str::from_utf8(bytes) {
        Ok(t) if utf8 => Cow::Borrowed(t),
        _ => Cow::Owned(api::encode(Encoding::Base64, bytes)),
    };
    RecordJson {
        offset: r.offset,
        timestamp: r.timestamp,
        encoding,
        key: r.key.map(text),
        value: r.value.map(text),
        headers: r.headers.iter().map(|&(k, v)| HeaderJson { key: k, value: v.map(text) }).collect(),
    }
}

/// A record as an owned [`ConsumedRecord`] (the group sessions' answers).
pub(super) fn to_wire(r: &RecordView<'_>, preferred: Encoding) -> ConsumedRecord {
    let v = view(r, preferred);
    let owned = |c: Option<Cow<'_, str>>| c.map(Cow::into_owned);
    ConsumedRecord {
        offset: v.offset,
        timestamp: v.timestamp,
        encoding: v.encoding,
        key: owned(v.key),
        value: owned(v.value),
        headers: v
            .headers
            .into_iter()
            .map(|h| WireHeader { key: h.key.to_owned(), value: owned(h.value) })
            .collect(),
    }
}

#[utoipa::path(get, path = "/topics/{topic}/offsets", tag = "records",
    params(("topic" = String, Path, description = "Topic name"), OffsetsQuery),
    responses(
        (status = 200, body = OffsetsResponse),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody)))]
pub async fn offsets(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<OffsetsQuery>,
) -> Result<Json<OffsetsResponse>> {
    let found = state.service.topic_offsets(&who, &name, q.timestamp).await?;
    let partitions = found
        .into_iter()
        .map(|p| PartitionOffsets {
            partition: p.partition,
            earliest: p.earliest,
            latest: p.latest,
            timestamp_offset: p.at_timestamp,
        })
        .collect();
    Ok(Json(OffsetsResponse { topic: name, partitions }))
}

#[utoipa::path(post, path = "/producers", tag = "records",
    responses(
        (status = 201, description = "A new idempotent producer id, durable", body = ProducerIdResponse),
        (status = 503, description = "shutting_down, overloaded", body = ErrorBody)))]
pub async fn init_producer(
    State(state): State<AppState>,
    Caller(who): Caller,
) -> Result<(axum::http::StatusCode, Json<ProducerIdResponse>)> {
    let (producer_id, epoch) = state.service.init_producer_id(&who).await?;
    Ok((axum::http::StatusCode::CREATED, Json(ProducerIdResponse { producer_id, epoch })))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use es_core::{Header, ProducerInfo, Record};
    use serde_json::json;

    use super::*;

    fn read(records: &[Record]) -> es_log::ReadResult {
        let mut batch = es_core::batch::encode(records, 1_000, ProducerInfo::NONE).unwrap();
        es_core::batch::stamp(&mut batch, 7, es_core::LeaderEpoch::UNKNOWN);
        es_log::ReadResult {
            data: Bytes::from(batch),
            high_watermark: 7 + records.len() as u64,
            log_start_offset: 3,
        }
    }

    /// The streamed answer is the document `ConsumeResponse` describes, record for
    /// record: UTF-8 borrowed, base64 for any record with a non-UTF-8 field, nulls
    /// kept, headers in order, the offset window applied.
    #[test]
    fn the_streamed_answer_is_the_documented_shape() {
        let header =
            |k: &str, v: Option<&'static [u8]>| Header { key: k.into(), value: v.map(Bytes::from_static) };
        let records = vec![
            Record::from_value("skipped"),
            Record { key: Some(Bytes::from_static(b"k\"1")), ..Record::from_value("v\n1") },
            Record {
                headers: vec![header("h", Some(b"\xff")), header("n", None)],
                ..Record::from_value("v2")
            },
            Record { value: None, ..Record::from_value("") },
            Record::from_value("over the limit"),
        ];
        let body = consume_body("t", 2, &read(&records), 8, 3, Encoding::Utf8).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let typed: ConsumeResponse = serde_json::from_slice(&body).unwrap();
        assert_eq!(typed.records.len(), 3);
        let ts = doc["records"][0]["timestamp"].clone();
        assert_eq!(
            doc,
            json!({"topic": "t", "partition": 2, "records": [
                {"offset": 8, "timestamp": ts, "encoding": "utf8", "key": "k\"1", "value": "v\n1", "headers": []},
                {"offset": 9, "timestamp": ts, "encoding": "base64", "key": null, "value": "djI=",
                 "headers": [{"key": "h", "value": "/w=="}, {"key": "n", "value": null}]},
                {"offset": 10, "timestamp": ts, "encoding": "utf8", "key": null, "value": null, "headers": []}],
             "next_offset": 11, "high_watermark": 12, "log_start_offset": 3})
        );
        let b64 = consume_body("t", 2, &read(&records[..2]), 8, 10, Encoding::Base64).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&b64).unwrap();
        assert_eq!(doc["records"][0]["key"], "ayIx");
        assert_eq!(doc["records"].as_array().unwrap().len(), 1);
    }
}
