//! Data routes: produce (acknowledged only after fsync), consume by offset or
//! timestamp with long-poll, and offset lookups.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use es_core::{Header, LeaderEpoch, Record, RecordView};
use es_log::{LogError, PartitionLog};
use es_plugin_host::PackedBatch;

use super::{ApiJson, ApiPath, ApiQuery, AppState, blocking};
use crate::api::{
    self, ConsumeQuery, ConsumeResponse, ConsumedRecord, Encoding, ErrorBody, OffsetsQuery, OffsetsResponse,
    PartitionOffsets, ProduceRecord, ProduceRequest, ProduceResponse, ProducerIdResponse, RecordOffset,
    WireHeader,
};
use crate::error::{Result, ServerError};
use crate::limits;
use crate::partitioner;
use crate::plugins::binding::{Checked, Finding, Outcome, dead_letter_record};
use crate::registry::Topic;

/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

#[utoipa::path(post, path = "/topics/{topic}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = ProduceRequest,
    responses(
        (status = 200, description = "Every record is on disk", body = ProduceResponse),
        (status = 400, description = "bad_json, bad_encoding, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 409, description = "out_of_order_sequence, producer_fenced: an idempotent producer's batch is out of sequence or its epoch is stale", body = ErrorBody),
        (status = 413, description = "batch_too_large, record_too_large, request_too_large", body = ErrorBody),
        (status = 422, description = "validation_failed: the topic's validators refused records; nothing was written", body = ErrorBody),
        (status = 503, description = "shutting_down, overloaded, plugin_failed", body = ErrorBody)))]
pub async fn produce(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<ProduceRequest>,
) -> Result<Json<ProduceResponse>> {
    let topic = state.registry.topic(&name)?;
    if req.records.is_empty() {
        return Err(ServerError::InvalidRequest("records must hold at least one record".into()));
    }
    if req.records.len() > limits::PRODUCE_RECORDS_MAX {
        return Err(ServerError::InvalidRequest(format!(
            "a produce request holds at most {} records; got {}",
            limits::PRODUCE_RECORDS_MAX,
            req.records.len()
        )));
    }
    let producer = req.producer;
    let groups = assign_partitions(&topic, req)?;
    check_sizes(&topic, &groups)?;
    if producer.is_some() && groups.len() > 1 {
        return Err(ServerError::InvalidRequest(
            "an idempotent produce writes one batch to one partition: give every record the same partition \
             (or keys that map to one)"
                .into(),
        ));
    }
    let count = groups.values().map(Vec::len).sum();
    let (groups, dead, violations) = validate(&state, &topic, &name, groups, producer.is_some()).await?;
    // Append every group before awaiting any, so the partitions' fsyncs overlap.
    let mut pending = Vec::new();
    for (partition, group) in &groups {
        let records: Vec<Record> = group.iter().map(|(_, r)| r.clone()).collect();
        let log = topic.partition(u64::from(*partition))?;
        let info = producer.map_or(es_core::ProducerInfo::NONE, |p| es_core::ProducerInfo {
            producer_id: p.id,
            producer_epoch: p.epoch,
            base_sequence: p.sequence,
        });
        pending.push((None, *partition, group, log.append_records_as(&records, info, EPOCH)?));
    }
    for (dlq, partition, group) in &dead {
        let records: Vec<Record> = group.iter().map(|(_, r)| r.clone()).collect();
        let log = state.registry.topic(dlq)?.partition(u64::from(*partition))?.clone();
        pending.push((Some(dlq.clone()), *partition, group, log.append_records(&records, EPOCH)?));
    }
    let mut offsets: Vec<Option<RecordOffset>> = (0..count).map(|_| None).collect();
    let mut duplicate = false;
    for (topic, partition, group, append) in pending {
        let appended = append.durable().await?;
        duplicate |= appended.duplicate;
        for (i, (index, _)) in group.iter().enumerate() {
            let offset = appended.base_offset + i as u64;
            offsets[*index] = Some(RecordOffset { partition, offset, topic: topic.clone() });
        }
    }
    let offsets = offsets.into_iter().map(|o| o.expect("every record was appended")).collect();
    Ok(Json(ProduceResponse { offsets, violations, duplicate }))
}

/// Records bound for dead-letter topics: (topic, partition, records with their
/// request indexes).
type DeadLetters = Vec<(String, u32, Vec<(usize, Record)>)>;

/// Runs the topic's validators on every partition's records before anything is
/// appended (validation never waits on, or holds up, a flush). Refusals fail the
/// whole request; dead-lettered records move out of `groups` into their
/// dead-letter topic's batch, carrying the reason in headers.
async fn validate(
    state: &AppState,
    topic: &Arc<Topic>,
    name: &str,
    mut groups: Groups,
    idempotent: bool,
) -> Result<(Groups, DeadLetters, Vec<Finding>)> {
    let chain = state.registry.validators(topic).await;
    if chain.is_empty() {
        return Ok((groups, Vec::new(), Vec::new()));
    }
    let mut checked = Checked::default();
    let topic_name: Arc<str> = Arc::from(name);
    // Every partition's batch is packed here and checked on the blocking pool,
    // all partitions at once.
    let mut checks = Vec::with_capacity(groups.len());
    for (partition, group) in &groups {
        let packed = PackedBatch::from_records(group.iter().map(|(_, r)| r))
            .map_err(|e| ServerError::InvalidRequest(e.to_string()))?;
        let indexes = group.iter().map(|(i, _)| *i).collect();
        checks.push(tokio::spawn(chain.clone().check(topic_name.clone(), *partition, packed, indexes)));
    }
    for check in checks {
        let reason = |e: tokio::task::JoinError| format!("the validation task failed: {e}");
        let decided = check.await.map_err(|e| ServerError::PluginFailed {
            topic: name.to_owned(),
            plugin: "-".into(),
            reason: reason(e),
        })?;
        checked.merge(decided);
    }
    if let Some((plugin, reason)) = checked.plugin_failure {
        return Err(ServerError::PluginFailed { topic: name.to_owned(), plugin, reason });
    }
    if checked.refuses() {
        return Err(ServerError::ValidationFailed { topic: name.to_owned(), findings: checked.findings });
    }
    let dead_lettered = checked.dead_lettered();
    if idempotent && !dead_lettered.is_empty() {
        return Err(ServerError::ValidationFailed {
            topic: name.to_owned(),
            findings: checked
                .findings
                .into_iter()
                .map(|f| Finding { outcome: Outcome::Rejected, dead_letter_topic: None, ..f })
                .collect(),
        });
    }
    let mut dead: BTreeMap<(String, u32), Vec<(usize, Record)>> = BTreeMap::new();
    let mut sticky = BTreeMap::new();
    for (partition, group) in &mut groups {
        let kept = std::mem::take(group);
        for (index, record) in kept {
            let Some(finding) = dead_lettered.get(&index) else {
                group.push((index, record));
                continue;
            };
            let dlq_name = finding.dead_letter_topic.clone().expect("dead-letter findings name their topic");
            let dlq = state.registry.topic(&dlq_name)?;
            let dlq_partition = match record.key.as_deref() {
                Some(key) => partitioner::partition_for_key(key, dlq.partition_count()),
                None => *sticky.entry(dlq_name.clone()).or_insert_with(|| dlq.sticky_partition()),
            };
            let out = dead_letter_record(&record, name, *partition, finding);
            dead.entry((dlq_name, dlq_partition)).or_default().push((index, out));
        }
    }
    groups.retain(|_, group| !group.is_empty());
    let kept = checked.findings.into_iter().filter(|f| f.outcome != Outcome::Rejected).collect();
    Ok((groups, dead.into_iter().map(|((t, p), g)| (t, p, g)).collect(), kept))
}

/// Records grouped by partition, each with its index in the request.
type Groups = BTreeMap<u32, Vec<(usize, Record)>>;

/// Decodes every record and picks its partition: explicit, else by key (murmur2),
/// else one partition for all unkeyed records of this batch.
fn assign_partitions(topic: &Topic, req: ProduceRequest) -> Result<Groups> {
    let count = topic.partition_count();
    let mut sticky = None;
    let mut groups = Groups::new();
    for (index, wire) in req.records.into_iter().enumerate() {
        let explicit = wire.partition;
        let record = decode_record(req.encoding, index, wire)?;
        let partition = match (explicit, record.key.as_deref()) {
            (Some(p), _) => {
                topic.partition(u64::from(p))?;
                p
            }
            (None, Some(key)) => partitioner::partition_for_key(key, count),
            (None, None) => *sticky.get_or_insert_with(|| topic.sticky_partition()),
        };
        groups.entry(partition).or_default().push((index, record));
    }
    Ok(groups)
}

fn decode_record(encoding: Encoding, index: usize, wire: ProduceRecord) -> Result<Record> {
    if wire.timestamp.is_some_and(|t| t < 0) {
        return Err(ServerError::InvalidRequest(format!(
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
        return Err(ServerError::InvalidRequest(format!(
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

/// Refuses oversized records and batches before anything is written, so a request
/// spanning partitions is never half-written because one group was too large.
fn check_sizes(topic: &Topic, groups: &Groups) -> Result<()> {
    let config = topic.config().to_log_config()?;
    for (partition, group) in groups {
        let mut batch_size = es_core::BatchHeader::LEN;
        for (index, r) in group {
            let size = r.payload_len();
            if size > config.record_bytes_max {
                return Err(ServerError::RecordTooLarge {
                    index: *index,
                    size,
                    max: config.record_bytes_max,
                });
            }
            batch_size += r.encoded_len();
        }
        if batch_size > config.batch_bytes_max {
            return Err(ServerError::BatchTooLarge {
                partition: *partition,
                size: batch_size,
                max: config.batch_bytes_max,
            });
        }
    }
    Ok(())
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
    ApiPath((name, partition)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<ConsumeQuery>,
) -> Result<Json<ConsumeResponse>> {
    let topic = state.registry.topic(&name)?;
    let partition = parse_partition(&partition)?;
    let log = topic.partition(u64::from(partition))?.clone();
    let max_records =
        bounded("max_records", q.max_records, limits::CONSUME_RECORDS_DEFAULT, limits::CONSUME_RECORDS_MAX)?;
    let max_bytes =
        bounded("max_bytes", q.max_bytes, limits::CONSUME_BYTES_DEFAULT, limits::CONSUME_BYTES_MAX)?;
    let wait_ms = q.wait_ms.unwrap_or(0);
    if wait_ms > limits::WAIT_MS_MAX {
        return Err(ServerError::InvalidRequest(format!(
            "wait_ms is at most {}; got {wait_ms}",
            limits::WAIT_MS_MAX
        )));
    }
    let offset = resolve_offset(&log, partition, &q).await?;
    if wait_ms > 0 && offset >= log.high_watermark() {
        wait_for_data(&log, offset, wait_ms, state.shutdown.clone()).await;
    }
    let reader = log.clone();
    let read = blocking(move || Ok(reader.read(offset, max_bytes)))
        .await?
        .map_err(|e| out_of_range(e, partition))?;
    let encoding = q.encoding.unwrap_or_default();
    let mut records = Vec::new();
    let mut next_offset = offset;
    'batches: for batch in read.batches() {
        // Batches may be stored gzip-compressed (binary protocol); decode them here.
        let plain = batch
            .plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)
            .map_err(|e| ServerError::Internal(format!("unreadable batch: {e}")))?;
        for r in plain.iter() {
            let r = r.map_err(|e| ServerError::Internal(format!("unreadable record: {e}")))?;
            if r.offset < offset {
                continue;
            }
            if records.len() == max_records {
                break 'batches;
            }
            next_offset = r.offset + 1;
            records.push(to_wire(&r, encoding));
        }
        // Compaction can leave offset gaps at a batch's end; skip past them.
        next_offset = next_offset.max(batch.header.next_offset());
    }
    Ok(Json(ConsumeResponse {
        topic: name,
        partition,
        records,
        next_offset,
        high_watermark: read.high_watermark,
        log_start_offset: read.log_start_offset,
    }))
}

fn parse_partition(text: &str) -> Result<u32> {
    text.parse().map_err(|_| {
        ServerError::InvalidRequest(format!("partition must be a non-negative integer; got {text:?}"))
    })
}

fn bounded(what: &str, value: Option<usize>, default: usize, max: usize) -> Result<usize> {
    let v = value.unwrap_or(default);
    if !(1..=max).contains(&v) {
        return Err(ServerError::InvalidRequest(format!("{what} must be between 1 and {max}; got {v}")));
    }
    Ok(v)
}

/// The starting offset: a number, `earliest`, `latest`, or the first record at or
/// after a timestamp; a number outside the log is `offset_out_of_range`.
async fn resolve_offset(log: &Arc<PartitionLog>, partition: u32, q: &ConsumeQuery) -> Result<u64> {
    let info = log.info();
    if let Some(ts) = q.timestamp {
        if q.offset.is_some() {
            return Err(ServerError::InvalidRequest("give offset or timestamp, not both".into()));
        }
        let log = log.clone();
        let found = blocking(move || Ok(log.offset_for_timestamp(ts)?)).await?;
        return Ok(found.unwrap_or(info.high_watermark).max(info.log_start_offset));
    }
    let offset = match q.offset.as_deref().unwrap_or("earliest") {
        "earliest" => info.log_start_offset,
        "latest" => info.high_watermark,
        text => text.parse().map_err(|_| {
            ServerError::InvalidRequest(format!(
                "offset must be earliest, latest or a non-negative integer; got {text:?}"
            ))
        })?,
    };
    if offset < info.log_start_offset || offset > info.high_watermark {
        return Err(ServerError::OffsetOutOfRange {
            partition,
            requested: offset,
            log_start: info.log_start_offset,
            high_watermark: info.high_watermark,
        });
    }
    Ok(offset)
}

/// Long poll: returns once the high watermark passes `offset`, the wait ends, or
/// shutdown begins, whichever is first.
async fn wait_for_data(
    log: &PartitionLog,
    offset: u64,
    wait_ms: u64,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut hw = log.subscribe();
    let arrived = async move {
        let _ = hw.wait_for(|h| *h > offset).await;
    };
    let stopping = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    let _ = tokio::time::timeout(Duration::from_millis(wait_ms), async {
        tokio::select! {
            () = arrived => {}
            () = stopping => {}
        }
    })
    .await;
}

fn out_of_range(e: LogError, partition: u32) -> ServerError {
    match e {
        LogError::OffsetOutOfRange { requested, log_start, high_watermark } => {
            ServerError::OffsetOutOfRange { partition, requested, log_start, high_watermark }
        }
        other => other.into(),
    }
}

/// A record as JSON; falls back to base64 when any field is not valid UTF-8, so
/// bytes are never mangled.
/// A record as the HTTP API returns it: UTF-8 when every field is and the
/// client prefers it, base64 otherwise.
pub(super) fn to_wire(r: &RecordView<'_>, preferred: Encoding) -> ConsumedRecord {
    let mut fields =
        r.key.iter().chain(r.value.iter()).chain(r.headers.iter().filter_map(|(_, v)| v.as_ref()));
    let encoding = if preferred == Encoding::Utf8 && fields.all(|f| std::str::from_utf8(f).is_ok()) {
        Encoding::Utf8
    } else {
        Encoding::Base64
    };
    ConsumedRecord {
        offset: r.offset,
        timestamp: r.timestamp,
        encoding,
        key: r.key.map(|k| api::encode(encoding, k)),
        value: r.value.map(|v| api::encode(encoding, v)),
        headers: r
            .headers
            .iter()
            .map(|(k, v)| WireHeader { key: (*k).to_owned(), value: v.map(|v| api::encode(encoding, v)) })
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
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<OffsetsQuery>,
) -> Result<Json<OffsetsResponse>> {
    let topic = state.registry.topic(&name)?;
    let partitions = blocking(move || {
        let mut out = Vec::new();
        for (i, log) in topic.partitions.iter().enumerate() {
            let info = log.info();
            let timestamp_offset = match q.timestamp {
                Some(ts) => Some(log.offset_for_timestamp(ts)?.unwrap_or(info.high_watermark)),
                None => None,
            };
            out.push(PartitionOffsets {
                partition: i as u32,
                earliest: info.log_start_offset,
                latest: info.high_watermark,
                timestamp_offset,
            });
        }
        Ok(out)
    })
    .await?;
    Ok(Json(OffsetsResponse { topic: name, partitions }))
}

#[utoipa::path(post, path = "/producers", tag = "records",
    responses(
        (status = 201, description = "A new idempotent producer id, durable", body = ProducerIdResponse),
        (status = 503, description = "shutting_down, overloaded", body = ErrorBody)))]
pub async fn init_producer(
    State(state): State<AppState>,
) -> Result<(axum::http::StatusCode, Json<ProducerIdResponse>)> {
    let registry = state.registry.clone();
    let (producer_id, epoch) = blocking(move || registry.allocate_producer_id()).await?;
    Ok((axum::http::StatusCode::CREATED, Json(ProducerIdResponse { producer_id, epoch })))
}
