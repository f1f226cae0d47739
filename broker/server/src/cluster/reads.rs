//! A partition's records read from a replica over the peer link (RPC kind 136),
//! for the one reader that does not follow leaders: the simple HTTP consumer
//! session, which reads every partition assigned to its member through the node
//! the client is connected to, placed there or not. Kafka and binary clients go
//! to a replica themselves (NOT_LEADER_OR_FOLLOWER, NotLeader), so they never
//! come here.
//!
//! ```text
//! ask:    JSON {topic, partition, offset, max_bytes}
//! answer: high watermark u64 BE, log start u64 BE, then the batches read
//! ```
//!
//! A replica answers from its own copy, up to its high watermark, from
//! max(offset, its log start) (retention may have removed records below the
//! position, as a local read skips to the log start).

use bytes::{BufMut, Bytes, BytesMut};
use es_peer::RpcError;
use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::registry::Topic;
use crate::service::error::{BrokerError, Result};

/// The most one answer carries, whatever was asked.
const READ_BYTES_MAX: usize = crate::limits::CONSUME_BYTES_MAX;

#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    topic: String,
    partition: u32,
    offset: u64,
    max_bytes: usize,
}

/// Answers a peer's [`Ask`] from this node's replica, read on the blocking pool
/// (a read may touch the disk or fetch a cold segment).
pub(super) async fn serve(cluster: &Cluster, payload: &[u8]) -> std::result::Result<Bytes, RpcError> {
    let failed = |e: String| RpcError::new(super::rpc::FAILED, e);
    let ask: Ask =
        serde_json::from_slice(payload).map_err(|e| failed(format!("a malformed request: {e}")))?;
    let topic = super::ends::served_here(cluster, &ask.topic, ask.partition)?;
    let log = topic.partition(u64::from(ask.partition)).map_err(|e| failed(e.to_string()))?.clone();
    let read = tokio::task::spawn_blocking(move || {
        let info = log.info();
        let offset = ask.offset.max(info.log_start_offset).min(info.high_watermark);
        log.read(offset, ask.max_bytes.clamp(1, READ_BYTES_MAX))
    })
    .await
    .map_err(|e| failed(e.to_string()))?
    .map_err(|e| failed(e.to_string()))?;
    let mut out = BytesMut::with_capacity(16 + read.data.len());
    out.put_u64(read.high_watermark);
    out.put_u64(read.log_start_offset);
    out.put_slice(&read.data);
    Ok(out.freeze())
}

impl Cluster {
    /// Reads `topic`'s `partition` from `offset` (or its log start, if higher) on
    /// one of its replicas: the announced leader first, then the others. No long
    /// poll: nothing there yet answers no batches.
    pub async fn partition_read(
        &self,
        topic: &Topic,
        partition: u32,
        offset: u64,
        max_bytes: usize,
    ) -> Result<es_log::ReadResult> {
        let ask = Ask { topic: topic.name(), partition, offset, max_bytes };
        let payload =
            Bytes::from(serde_json::to_vec(&ask).map_err(|e| BrokerError::Internal(e.to_string()))?);
        let (node, answer) =
            self.ask_replicas(topic, partition, super::rpc::PARTITION_READ, payload, "a read").await?;
        if answer.len() < 16 {
            return Err(BrokerError::Internal(format!(
                "node {node} answered a read with {} bytes",
                answer.len()
            )));
        }
        let word = |at: usize| u64::from_be_bytes(answer[at..at + 8].try_into().expect("8 bytes"));
        Ok(es_log::ReadResult {
            high_watermark: word(0),
            log_start_offset: word(8),
            data: answer.slice(16..),
        })
    }
}
