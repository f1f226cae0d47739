//! Applies one binary request to the broker and queues its encoded response.
//! Produces are appended here, in frame order, before the next frame is read; the
//! wait for durability and every other request run in tasks of their own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_log::{LogError, PartitionLog};
use es_protocol::{
    ErrorCode, FetchPartition, FetchResult, ListedTopic, OffsetSpec, Op, PROTOCOL_VERSION,
    PartitionDescription, Request, Response, TopicDescription,
};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::BinaryState;
use crate::error::ServerError;
use crate::limits;
use crate::plugins::binding::{Checked, EncodedCheckError, Outcome, dead_letter_record};
use es_core::{BatchHeader, LeaderEpoch, Record};

/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

type Tx = mpsc::Sender<Vec<u8>>;

pub async fn dispatch(req: Request, id: u32, state: &BinaryState, tx: Tx, slot: OwnedSemaphorePermit) {
    let op = req.op();
    match req {
        Request::Hello { version_min, version_max, .. } => {
            let resp = if (version_min..=version_max).contains(&PROTOCOL_VERSION) {
                Response::Hello {
                    version: PROTOCOL_VERSION,
                    frame_bytes_max: es_protocol::FRAME_BYTES_MAX as u32,
                    in_flight_max: limits::BINARY_IN_FLIGHT_MAX as u32,
                    server: format!("es {}", env!("CARGO_PKG_VERSION")),
                }
            } else {
                error(ErrorCode::UnsupportedVersion, format!("this broker speaks version {PROTOCOL_VERSION}"))
            };
            send(&tx, id, op, resp, slot).await;
        }
        Request::Produce { topic, partition, batch } => {
            // Appended now, in frame order; only the fsync wait runs concurrently.
            match append(state, &topic, partition, batch.to_vec()).await {
                Ok((pending, dead_letters)) => {
                    tokio::spawn(async move {
                        // Dead-lettered records are durable before the answer too.
                        for dlq in dead_letters {
                            if let Err(e) = dlq.durable().await {
                                send(&tx, id, op, log_error(&e), slot).await;
                                return;
                            }
                        }
                        let resp = match pending {
                            None => Response::Produce { base_offset: 0, last_offset: 0, duplicate: false },
                            Some(pending) => match pending.durable().await {
                                Ok(a) => Response::Produce {
                                    base_offset: a.base_offset,
                                    last_offset: a.last_offset,
                                    duplicate: a.duplicate,
                                },
                                Err(e) => log_error(&e),
                            },
                        };
                        send(&tx, id, op, resp, slot).await;
                    });
                }
                Err(resp) => send(&tx, id, op, resp, slot).await,
            }
        }
        Request::Fetch { max_wait_ms, min_bytes, max_bytes, partitions } => {
            let state = state.clone();
            tokio::spawn(async move {
                let resp = fetch(&state, max_wait_ms, min_bytes, max_bytes, partitions).await;
                send(&tx, id, op, resp, slot).await;
            });
        }
        Request::Group(group) => {
            let registry = state.registry.clone();
            tokio::spawn(async move {
                let resp = super::groups::handle(&registry, group).await;
                send(&tx, id, op, resp, slot).await;
            });
        }
        other => {
            let state = state.clone();
            tokio::spawn(async move {
                let resp = tokio::task::spawn_blocking(move || admin(&state, other))
                    .await
                    .unwrap_or_else(|e| error(ErrorCode::Internal, e.to_string()));
                send(&tx, id, op, resp, slot).await;
            });
        }
    }
}

async fn send(tx: &Tx, id: u32, op: Op, resp: Response, slot: OwnedSemaphorePermit) {
    let mut out = Vec::new();
    resp.encode(id, op, &mut out);
    let _ = tx.send(out).await;
    drop(slot);
}

fn error(code: ErrorCode, message: String) -> Response {
    Response::Error { code, message }
}

fn partition(state: &BinaryState, topic: &str, partition: u32) -> Result<Arc<PartitionLog>, Response> {
    let t = state.registry.topic(topic).map_err(|e| server_error(&e))?;
    t.partition(u64::from(partition)).cloned().map_err(|e| server_error(&e))
}

/// Appends one produce batch after the topic's validators (if any) accepted it.
/// Returns the batch's append (none when every record was dead-lettered) and the
/// appends to dead-letter topics.
async fn append(
    state: &BinaryState,
    topic: &str,
    p: u32,
    batch: Vec<u8>,
) -> Result<(Option<es_log::PendingAppend>, Vec<es_log::PendingAppend>), Response> {
    if state.registry.is_shutting_down() {
        return Err(error(ErrorCode::ShuttingDown, "the broker is shutting down".into()));
    }
    let t = state.registry.topic(topic).map_err(|e| server_error(&e))?;
    let log = t.partition(u64::from(p)).map_err(|e| server_error(&e))?;
    let chain = state.registry.validators(&t).await;
    if chain.is_empty() {
        return Ok((Some(log.append(batch, EPOCH).map_err(|e| log_error(&e))?), Vec::new()));
    }
    let batch_bytes_max = log.config().batch_bytes_max;
    let (mut checked, batch) =
        chain.check_encoded(Arc::from(topic), p, batch, batch_bytes_max).await.map_err(|e| match e {
            EncodedCheckError::Invalid(e) => error(ErrorCode::InvalidBatch, e.to_string()),
            EncodedCheckError::Task(reason) => {
                let e = ServerError::PluginFailed { topic: topic.to_owned(), plugin: "-".into(), reason };
                error(ErrorCode::PluginFailed, e.to_string())
            }
        })?;
    let idempotent = BatchHeader::parse(&batch, batch_bytes_max)
        .map_err(|e| error(ErrorCode::InvalidBatch, e.to_string()))?
        .producer
        .producer_id
        >= 0;
    if let Some((plugin, reason)) = checked.plugin_failure.take() {
        let e = ServerError::PluginFailed { topic: topic.to_owned(), plugin, reason };
        return Err(error(ErrorCode::PluginFailed, e.to_string()));
    }
    let dead = checked.dead_lettered();
    if checked.refuses() || (idempotent && !dead.is_empty()) {
        return Err(error(ErrorCode::ValidationFailed, describe_refusal(topic, &checked, idempotent)));
    }
    if dead.is_empty() {
        return Ok((Some(log.append(batch, EPOCH).map_err(|e| log_error(&e))?), Vec::new()));
    }
    // Some records go to dead-letter topics: the rest are written as a new batch,
    // in their order, and the answer's offsets cover only them. Only this rare
    // path decodes the records.
    let records = decode_batch(&batch, batch_bytes_max)?;
    let mut dead_letters = Vec::new();
    for (index, finding) in &dead {
        let dlq_name = finding.dead_letter_topic.as_deref().expect("dead-letter findings name their topic");
        let dlq = state.registry.topic(dlq_name).map_err(|e| server_error(&e))?;
        let dlq_partition = match records[*index].key.as_deref() {
            Some(key) => es_core::partitioner::partition_for_key(key, dlq.partition_count()),
            None => dlq.sticky_partition(),
        };
        let out = dead_letter_record(&records[*index], topic, p, finding);
        let log = dlq.partition(u64::from(dlq_partition)).map_err(|e| server_error(&e))?;
        dead_letters.push(log.append_records(&[out], EPOCH).map_err(|e| log_error(&e))?);
    }
    let kept: Vec<Record> =
        records.iter().enumerate().filter(|(i, _)| !dead.contains_key(i)).map(|(_, r)| r.clone()).collect();
    let pending = if kept.is_empty() {
        None
    } else {
        Some(log.append_records(&kept, EPOCH).map_err(|e| log_error(&e))?)
    };
    Ok((pending, dead_letters))
}

/// The records of a produce batch, owned.
fn decode_batch(batch: &[u8], max: usize) -> Result<Vec<Record>, Response> {
    let invalid = |e: es_core::batch::CodecError| error(ErrorCode::InvalidBatch, e.to_string());
    let view = es_core::batch::BatchView::parse(batch, max).map_err(invalid)?;
    let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD).map_err(invalid)?;
    plain.iter().map(|r| r.map(|r| r.to_record())).collect::<Result<Vec<_>, _>>().map_err(invalid)
}

fn describe_refusal(topic: &str, checked: &Checked, idempotent: bool) -> String {
    let mut text = if idempotent && !checked.refuses() {
        format!(
            "records failed validation on topic {topic:?}; an idempotent batch is written whole, so it was \
             refused instead of dead-lettered:"
        )
    } else {
        format!("records failed validation on topic {topic:?}; nothing was written:")
    };
    for f in checked.findings.iter().filter(|f| idempotent || f.outcome == Outcome::Rejected) {
        text.push_str(&format!(" record {}: {} {}: {};", f.index, f.plugin, f.code, f.reason));
    }
    text
}

async fn fetch(
    state: &BinaryState,
    max_wait_ms: u32,
    min_bytes: u32,
    max_bytes: u32,
    parts: Vec<FetchPartition>,
) -> Response {
    if parts.is_empty() || parts.len() > limits::BINARY_FETCH_PARTITIONS_MAX {
        let msg = format!("a fetch names 1 to {} partitions", limits::BINARY_FETCH_PARTITIONS_MAX);
        return error(ErrorCode::InvalidRequest, msg);
    }
    let wait = Duration::from_millis(u64::from(max_wait_ms).min(limits::WAIT_MS_MAX));
    let deadline = Instant::now() + wait;
    let logs: Vec<Result<Arc<PartitionLog>, Response>> =
        parts.iter().map(|p| partition(state, &p.topic, p.partition)).collect();
    loop {
        let mut watches: Vec<_> = logs.iter().flatten().map(|l| l.subscribe()).collect();
        let results = read_all(&parts, &logs, max_bytes).await;
        let total: usize = results.iter().map(|r| r.data.len()).sum();
        let failed = results.iter().any(|r| r.error != ErrorCode::None);
        let now = Instant::now();
        if total >= min_bytes as usize || failed || now >= deadline {
            return Response::Fetch { partitions: results };
        }
        // Wake as soon as any partition's high watermark moves, or at the deadline.
        let mut set = tokio::task::JoinSet::new();
        for mut w in watches.drain(..) {
            set.spawn(async move {
                let _ = w.changed().await;
            });
        }
        let _ = tokio::time::timeout(deadline - now, set.join_next()).await;
        set.abort_all();
    }
}

async fn read_all(
    parts: &[FetchPartition],
    logs: &[Result<Arc<PartitionLog>, Response>],
    max_bytes: u32,
) -> Vec<FetchResult> {
    let jobs: Vec<_> = parts.iter().zip(logs).map(|(p, l)| (p.offset, p.max_bytes, l.clone())).collect();
    let budget = max_bytes as usize;
    tokio::task::spawn_blocking(move || {
        let mut used = 0usize;
        jobs.into_iter()
            .map(|(offset, part_max, log)| {
                let log = match log {
                    Ok(l) => l,
                    Err(Response::Error { code, .. }) => return empty(code, 0, 0),
                    Err(_) => return empty(ErrorCode::Internal, 0, 0),
                };
                // The first partition with data always gets at least one whole batch.
                let room = (part_max as usize).min(budget.saturating_sub(used)).max(1);
                match log.read(offset, room) {
                    Ok(r) => {
                        used += r.data.len();
                        FetchResult {
                            error: ErrorCode::None,
                            high_watermark: r.high_watermark,
                            log_start_offset: r.log_start_offset,
                            data: r.data,
                        }
                    }
                    Err(e) => {
                        let info = log.info();
                        empty(log_code(&e), info.high_watermark, info.log_start_offset)
                    }
                }
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

fn empty(error: ErrorCode, high_watermark: u64, log_start_offset: u64) -> FetchResult {
    FetchResult { error, high_watermark, log_start_offset, data: bytes::Bytes::new() }
}

/// Topic admin, offsets and producer ids (blocking: metadata is fsynced).
fn admin(state: &BinaryState, req: Request) -> Response {
    let registry = &state.registry;
    let result: Result<Response, Response> = (|| match req {
        Request::ListOffsets { topic, partition: p, spec } => {
            let log = partition(state, &topic, p)?;
            let offset = match spec {
                OffsetSpec::Earliest => Some(log.info().log_start_offset),
                OffsetSpec::Latest => Some(log.high_watermark()),
                OffsetSpec::Timestamp(t) => log.offset_for_timestamp(t).map_err(|e| log_error(&e))?,
            };
            Ok(Response::ListOffsets { offset })
        }
        Request::CreateTopic { name, partitions, configs } => {
            let changes: BTreeMap<String, serde_json::Value> = configs
                .into_iter()
                .map(|(k, v)| {
                    let value = serde_json::from_str(&v).unwrap_or(serde_json::Value::String(v));
                    (k, value)
                })
                .collect();
            registry.create(&name, partitions, &changes).map_err(|e| server_error(&e))?;
            Ok(Response::CreateTopic)
        }
        Request::ListTopics => {
            let topics = registry
                .list()
                .iter()
                .map(|t| ListedTopic { name: t.name(), partitions: t.partition_count() })
                .collect();
            Ok(Response::ListTopics { topics })
        }
        Request::DescribeTopic { name } => Ok(Response::DescribeTopic(describe(state, &name)?)),
        Request::DeleteTopic { name } => {
            registry.delete(&name).map_err(|e| server_error(&e))?;
            Ok(Response::DeleteTopic)
        }
        Request::InitProducerId => {
            let (producer_id, epoch) = state.registry.allocate_producer_id().map_err(|e| server_error(&e))?;
            Ok(Response::InitProducerId { producer_id, epoch })
        }
        Request::Hello { .. } | Request::Produce { .. } | Request::Fetch { .. } | Request::Group(_) => {
            Err(error(ErrorCode::Internal, "handled elsewhere".into()))
        }
    })();
    result.unwrap_or_else(|e| e)
}

fn describe(state: &BinaryState, name: &str) -> Result<TopicDescription, Response> {
    let topic = state.registry.topic(name).map_err(|e| server_error(&e))?;
    let configs = match serde_json::to_value(topic.config()) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect(),
        _ => Vec::new(),
    };
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(i, log)| {
            let info = log.info();
            PartitionDescription {
                partition: i as u32,
                log_start_offset: info.log_start_offset,
                high_watermark: info.high_watermark,
                size_bytes: info.size_bytes,
                segments: info.segment_count as u32,
            }
        })
        .collect();
    Ok(TopicDescription { name: topic.name(), configs, partitions })
}

fn server_error(e: &ServerError) -> Response {
    let code = match e {
        ServerError::TopicNotFound(_) => ErrorCode::UnknownTopic,
        ServerError::PartitionNotFound { .. } => ErrorCode::UnknownPartition,
        ServerError::TopicExists(_) => ErrorCode::TopicExists,
        ServerError::InvalidTopicName { .. } | ServerError::InvalidRequest(_) => ErrorCode::InvalidRequest,
        ServerError::InvalidConfig(_) => ErrorCode::InvalidConfig,
        ServerError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        ServerError::BatchTooLarge { .. } | ServerError::RequestTooLarge { .. } => ErrorCode::BatchTooLarge,
        ServerError::RecordTooLarge { .. } => ErrorCode::RecordTooLarge,
        ServerError::ShuttingDown => ErrorCode::ShuttingDown,
        ServerError::Storage(l) => log_code(l),
        _ => ErrorCode::Internal,
    };
    error(code, e.to_string())
}

fn log_code(e: &LogError) -> ErrorCode {
    match e {
        LogError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        LogError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
        LogError::RecordTooLarge { .. } => ErrorCode::RecordTooLarge,
        LogError::InvalidBatch(_) | LogError::OffsetMismatch { .. } => ErrorCode::InvalidBatch,
        LogError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequence,
        LogError::ProducerFenced { .. } => ErrorCode::ProducerFenced,
        LogError::InvalidConfig(_) => ErrorCode::InvalidConfig,
        LogError::ShutDown => ErrorCode::ShuttingDown,
        LogError::Io { .. } | LogError::Failed(_) | LogError::Corrupt { .. } | LogError::OldFormat { .. } => {
            ErrorCode::StorageError
        }
        LogError::StaleEpoch { .. } | LogError::UnknownEpoch { .. } | LogError::NotBatchBoundary { .. } => {
            ErrorCode::Internal
        }
    }
}

fn log_error(e: &LogError) -> Response {
    error(log_code(e), e.to_string())
}
