//! Applies one binary request to the service and queues its encoded response.
//! Produces are appended here, in frame order, before the next frame is read; the
//! wait for durability and every other request run in tasks of their own. Only
//! the wire mapping lives here: every decision is the service's.

use std::collections::BTreeMap;

use es_protocol::{
    DeadLetterPlace, FetchPartition, FetchResult, ListedTopic, OffsetSpec, Op, PROTOCOL_VERSION,
    PartitionDescription, ProduceFinding, Request, Response, TopicDescription,
};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::BinaryState;
use super::error::{code, response};
use crate::limits;
use crate::plugins::binding::Outcome;
use crate::service::error::{BrokerError, Result};
use crate::service::fetch::{self, FetchRequest, Replicas};
use crate::service::produce::{PartitionBatch, ProduceAck};
use crate::service::{Principal, Service, admin, offsets};

type Tx = mpsc::Sender<Vec<u8>>;

/// Applies `req` for `who`, the connection's principal (`Authenticate` is
/// answered by the connection itself, which owns the principal).
pub async fn dispatch(
    req: Request,
    id: u32,
    state: &BinaryState,
    who: Principal,
    tx: Tx,
    slot: OwnedSemaphorePermit,
) {
    let op = req.op();
    let service = state.service.clone();
    match req {
        Request::Hello { version_min, version_max, .. } => {
            send(&tx, id, op, hello(version_min, version_max), slot).await;
        }
        Request::Produce { topic, partition, batch } => {
            // Appended now, in frame order; only the fsync wait runs concurrently.
            let one = PartitionBatch { partition, batch: batch.to_vec(), ids: None };
            match service.produce(&who, &topic, vec![one]).await {
                Ok(pending) => {
                    tokio::spawn(async move {
                        let resp = answer(pending.durable().await.map(produced));
                        send(&tx, id, op, resp, slot).await;
                    });
                }
                Err(e) => send(&tx, id, op, response(&e), slot).await,
            }
        }
        Request::Fetch { max_wait_ms, min_bytes, max_bytes, partitions } => {
            tokio::spawn(async move {
                let resp = answer(fetch(&service, &who, max_wait_ms, min_bytes, max_bytes, partitions).await);
                send(&tx, id, op, resp, slot).await;
            });
        }
        Request::Group(group) => {
            tokio::spawn(async move {
                let resp = match super::groups::apply(&service, &who, group).await {
                    Ok(g) => Response::Group(g),
                    Err(e) => response(&e),
                };
                send(&tx, id, op, resp, slot).await;
            });
        }
        other => {
            tokio::spawn(async move {
                let resp = answer(admin(&service, &who, other).await);
                send(&tx, id, op, resp, slot).await;
            });
        }
    }
}

fn hello(version_min: u16, version_max: u16) -> Response {
    if (version_min..=version_max).contains(&PROTOCOL_VERSION) {
        Response::Hello {
            version: PROTOCOL_VERSION,
            frame_bytes_max: es_protocol::FRAME_BYTES_MAX as u32,
            in_flight_max: limits::BINARY_IN_FLIGHT_MAX as u32,
            server: format!("es {}", env!("CARGO_PKG_VERSION")),
        }
    } else {
        Response::Error {
            code: es_protocol::ErrorCode::UnsupportedVersion,
            message: format!("this broker speaks version {PROTOCOL_VERSION}"),
        }
    }
}

async fn send(tx: &Tx, id: u32, op: Op, resp: Response, slot: OwnedSemaphorePermit) {
    let mut out = Vec::new();
    resp.encode(id, op, &mut out);
    let _ = tx.send(out).await;
    drop(slot);
}

fn answer(result: Result<Response>) -> Response {
    result.unwrap_or_else(|e| response(&e))
}

/// The batch's offsets, and what validators said of records written anyway or
/// dead-lettered. When every record went to a dead-letter topic the range is
/// empty: `last_offset = base_offset - 1`, `base_offset` the partition's high
/// watermark when the batch was planned.
fn produced(ack: ProduceAck) -> Response {
    let duplicate = ack.duplicate();
    let findings = findings(&ack);
    let Some(p) = ack.partitions.first() else {
        return Response::Error {
            code: es_protocol::ErrorCode::Internal,
            message: "no partition answered".into(),
        };
    };
    let (base_offset, last_offset) = match p.written {
        Some(a) => (a.base_offset, a.last_offset),
        None => (p.high_watermark, p.high_watermark.wrapping_sub(1)),
    };
    Response::Produce { base_offset, last_offset, duplicate, findings }
}

/// One finding per record (the one that dead-lettered it, else the first warning),
/// with the place of a dead-lettered record. A binary produce carries one batch, so
/// a record's request index is its position in the batch.
fn findings(ack: &ProduceAck) -> Vec<ProduceFinding> {
    let mut ordered: Vec<_> = ack.findings.iter().collect();
    ordered.sort_by_key(|f| (f.index, f.outcome != Outcome::DeadLettered));
    let mut out: Vec<ProduceFinding> = Vec::new();
    for f in ordered {
        if out.last().is_some_and(|o| o.index as usize == f.index) {
            continue;
        }
        let dead_letter = ack.dead_letters.iter().find(|d| d.id == f.index).map(|d| DeadLetterPlace {
            topic: d.topic.clone(),
            partition: d.partition,
            offset: d.offset,
        });
        out.push(ProduceFinding {
            index: f.index as u32,
            plugin: f.plugin.clone(),
            code: f.code.clone(),
            reason: f.reason.clone(),
            dead_letter,
        });
    }
    out
}

async fn fetch(
    service: &Service,
    who: &Principal,
    max_wait_ms: u32,
    min_bytes: u32,
    max_bytes: u32,
    parts: Vec<FetchPartition>,
) -> Result<Response> {
    let partitions = parts
        .into_iter()
        .map(|p| fetch::FetchPartition {
            topic: p.topic,
            partition: p.partition,
            offset: p.offset,
            max_bytes: p.max_bytes as usize,
            leader_epoch: None,
        })
        .collect();
    let req = FetchRequest {
        partitions,
        max_wait_ms: u64::from(max_wait_ms),
        min_bytes: min_bytes as usize,
        max_bytes: max_bytes as usize,
        from: Replicas::Any,
    };
    let results = service.fetch(who, req).await?;
    let partitions = results
        .into_iter()
        .map(|r| match r {
            Ok(read) => FetchResult {
                error: es_protocol::ErrorCode::None,
                high_watermark: read.high_watermark,
                log_start_offset: read.log_start_offset,
                data: read.data,
            },
            Err(e) => {
                let (high_watermark, log_start_offset) =
                    if let BrokerError::OffsetOutOfRange { high_watermark, log_start, .. } = &e {
                        (*high_watermark, *log_start)
                    } else {
                        (0, 0)
                    };
                FetchResult { error: code(&e), high_watermark, log_start_offset, data: bytes::Bytes::new() }
            }
        })
        .collect();
    Ok(Response::Fetch { partitions })
}

/// Topic admin, offsets and producer ids.
async fn admin(service: &Service, who: &Principal, req: Request) -> Result<Response> {
    Ok(match req {
        Request::ListOffsets { topic, partition, spec } => {
            let spec = match spec {
                OffsetSpec::Earliest => offsets::OffsetSpec::Earliest,
                OffsetSpec::Latest => offsets::OffsetSpec::Latest,
                OffsetSpec::Timestamp(t) => offsets::OffsetSpec::Timestamp(t),
            };
            // Any replica answers, up to its high watermark, as for a fetch.
            let offset = service.list_offset(who, &topic, partition, spec, Replicas::Any, None).await?;
            Response::ListOffsets { offset }
        }
        Request::CreateTopic { name, partitions, configs } => {
            service.create_topic(who, name, partitions, config_changes(configs)).await?;
            Response::CreateTopic
        }
        Request::ListTopics => {
            let topics = service
                .list_topics(who)?
                .into_iter()
                .map(|t| ListedTopic { name: t.name, partitions: t.partition_count })
                .collect();
            Response::ListTopics { topics }
        }
        Request::DescribeTopic { name } => {
            Response::DescribeTopic(describe(service.describe_topic(who, &name)?))
        }
        Request::DeleteTopic { name } => {
            service.delete_topic(who, name).await?;
            Response::DeleteTopic
        }
        Request::InitProducerId => {
            let (producer_id, epoch) = service.init_producer_id(who).await?;
            Response::InitProducerId { producer_id, epoch }
        }
        Request::Hello { .. }
        | Request::Produce { .. }
        | Request::Fetch { .. }
        | Request::Group(_)
        | Request::Authenticate { .. } => {
            return Err(BrokerError::Internal("handled elsewhere".into()));
        }
    })
}

/// Config values arrive as strings; JSON-looking ones (numbers, booleans) are
/// parsed, as Kafka tools send them.
fn config_changes(configs: Vec<(String, String)>) -> BTreeMap<String, serde_json::Value> {
    configs
        .into_iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(&v).unwrap_or(serde_json::Value::String(v));
            (k, value)
        })
        .collect()
}

fn describe(topic: admin::TopicDescription) -> TopicDescription {
    let configs = match serde_json::to_value(&topic.config) {
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
        .map(|(i, info)| PartitionDescription {
            partition: i as u32,
            log_start_offset: info.log_start_offset,
            high_watermark: info.high_watermark,
            size_bytes: info.size_bytes,
            segments: info.segment_count as u32,
        })
        .collect();
    TopicDescription { name: topic.name, configs, partitions }
}
