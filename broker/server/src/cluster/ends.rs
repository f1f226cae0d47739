//! A partition's ends (log start, high watermark, the first offset at a timestamp)
//! wherever it is placed: a group's lag and an offset reset are computed on the
//! coordinator, which replicates `__es_offsets` but not necessarily the
//! partitions the group reads. For one it does not replicate it asks a replica,
//! the announced leader first, over the peer link (RPC kind 134).

use bytes::Bytes;
use es_peer::RpcError;
use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::registry::Topic;
use crate::service::error::{BrokerError, Result};

/// Failure code: the asked node does not replicate the partition (any more).
const NOT_A_REPLICA: u16 = 1006;
/// How long one call may take.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A partition's ends as one of its replicas has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionEnds {
    pub log_start: u64,
    pub high_watermark: u64,
    /// The first offset with a timestamp at or after the one asked, if any.
    pub at_timestamp: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    topic: String,
    partition: u32,
    timestamp: Option<i64>,
}

/// The ends of a partition this node holds.
pub fn local(topic: &Topic, partition: u32, timestamp: Option<i64>) -> Result<PartitionEnds> {
    let log = topic.partition(u64::from(partition))?;
    let info = log.info();
    let at_timestamp = timestamp.map(|ts| log.offset_for_timestamp(ts)).transpose()?.flatten();
    Ok(PartitionEnds { log_start: info.log_start_offset, high_watermark: info.high_watermark, at_timestamp })
}

/// The topic of a partition a peer asks this node about, if this node serves it
/// as [`crate::service::Service`] would: a replica that leads it or is placed
/// here. The Raft group, not the placement alone: while a partition moves to
/// other nodes altogether, its old leader still leads (and is asked first) until
/// the new replicas take over; a follower it moved away from has left the group
/// and its copy no longer moves.
pub(super) fn served_here(
    cluster: &Cluster,
    topic: &str,
    partition: u32,
) -> std::result::Result<std::sync::Arc<Topic>, RpcError> {
    let t = cluster.registry.topic(topic).map_err(|e| RpcError::new(super::rpc::FAILED, e.to_string()))?;
    match cluster.replica(&t, partition) {
        Some(group) if group.is_leader() || cluster.registry.hosts(&t, partition) => Ok(t),
        _ => Err(RpcError::new(NOT_A_REPLICA, format!("not a replica of {topic}-{partition}"))),
    }
}

/// Answers a peer's [`Ask`] from this node's replica.
pub(super) fn serve(cluster: &Cluster, payload: &[u8]) -> std::result::Result<Bytes, RpcError> {
    let failed = |e: String| RpcError::new(super::rpc::FAILED, e);
    let ask: Ask =
        serde_json::from_slice(payload).map_err(|e| failed(format!("a malformed request: {e}")))?;
    let topic = served_here(cluster, &ask.topic, ask.partition)?;
    let ends = local(&topic, ask.partition, ask.timestamp).map_err(|e| failed(e.to_string()))?;
    serde_json::to_vec(&ends).map(Bytes::from).map_err(|e| failed(e.to_string()))
}

impl Cluster {
    /// The ends of `topic`'s `partition`: this node's replica when it holds one,
    /// else the first replica that answers, the announced leader first.
    pub async fn partition_ends(
        &self,
        topic: &Topic,
        partition: u32,
        timestamp: Option<i64>,
    ) -> Result<PartitionEnds> {
        if self.remote(topic, partition).is_none() {
            return local(topic, partition, timestamp);
        }
        self.ask_ends(topic, partition, timestamp).await
    }

    /// The ends of a partition this node does not serve (the HTTP consumer
    /// session's start positions), asked of the other nodes only: this node's own
    /// copy, if any, is one it no longer follows, or not yet.
    pub async fn partition_ends_elsewhere(&self, topic: &Topic, partition: u32) -> Result<PartitionEnds> {
        self.ask_ends(topic, partition, None).await
    }

    async fn ask_ends(&self, topic: &Topic, partition: u32, timestamp: Option<i64>) -> Result<PartitionEnds> {
        let ask = Ask { topic: topic.name(), partition, timestamp };
        let payload =
            Bytes::from(serde_json::to_vec(&ask).map_err(|e| BrokerError::Internal(e.to_string()))?);
        let (node, answer) =
            self.ask_replicas(topic, partition, super::rpc::PARTITION_ENDS, payload, "its ends").await?;
        serde_json::from_slice(&answer).map_err(|e| {
            BrokerError::Internal(format!(
                "node {node} answered the ends of {}-{partition}: {e}",
                topic.name()
            ))
        })
    }

    /// Asks the replicas of `topic`'s `partition` other than this node, the
    /// announced leader first, then every one the placement names, until one
    /// answers RPC `kind`: that node and its answer. Each call is bounded.
    pub(super) async fn ask_replicas(
        &self,
        topic: &Topic,
        partition: u32,
        kind: u8,
        payload: Bytes,
        what: &str,
    ) -> Result<(u64, Bytes)> {
        let me = self.host.node_id();
        let leader = self.directory.leader(super::group_id(&topic.id, partition)).map(|(l, _)| l);
        let placed = topic.meta.lock().expect("meta lock").replicas_of(partition).map(|r| r.to_vec());
        let order =
            leader.into_iter().chain(placed.unwrap_or_default().into_iter().filter(|r| Some(*r) != leader));
        let mut last = None;
        for node in order.filter(|n| *n != me) {
            match self.host.call(node, kind, payload.clone(), CALL_TIMEOUT).await {
                Ok(answer) => return Ok((node, answer)),
                Err(e) => last = Some(format!("node {node}: {e}")),
            }
        }
        Err(BrokerError::Timeout(format!(
            "no replica of {}-{partition} answered for {what} ({}); retry shortly",
            topic.name(),
            last.unwrap_or_else(|| "none is known".into())
        )))
    }
}
