//! Plugin blobs between nodes. A replicated upload carries only the manifest and
//! the blob's sha256 (`registry/cluster_plugins.rs`); a node that applied it
//! without the blob fetches it here, in chunks, from any peer that holds it, and
//! the plugin store refuses it unless its sha256 is the one the manifest names.
//!
//! The metadata applier never waits for a blob: it records the manifest with the
//! blob missing and applies the next commands in order, and this fetcher works in
//! the background. Each round asks every peer in turn; a round that leaves a blob
//! missing is followed by a longer pause (doubling, capped), and a new missing
//! blob wakes the fetcher at once. A node keeps trying for as long as a manifest
//! names a blob it lacks: meanwhile produce to a topic bound to it is refused
//! as retriable, never written unvalidated.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_peer::RpcError;
use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::plugins::BlobChunk;
use crate::service::error::{BrokerError, Result};

/// Pauses after a round that left a blob missing: the first, and the cap.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long one chunk call may take.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the fetcher looks for missing blobs when nothing woke it.
const IDLE_RECHECK: Duration = Duration::from_secs(30);
/// Failure code: the asked node does not hold the blob.
const NOT_HERE: u16 = 1004;

/// What a node asks a peer for: the bytes of blob `sha256` from `offset`.
#[derive(Debug, Serialize, Deserialize)]
struct ChunkRequest {
    sha256: String,
    offset: u64,
}

/// Answers a peer's chunk request from this node's plugin store.
pub(super) async fn serve(cluster: &Cluster, payload: &[u8]) -> std::result::Result<Bytes, RpcError> {
    let failed = |e: String| RpcError::new(super::rpc::FAILED, e);
    let request: ChunkRequest = serde_json::from_slice(payload).map_err(|e| failed(e.to_string()))?;
    let registry = cluster.registry.clone();
    let sha256 = request.sha256.clone();
    let chunk = tokio::task::spawn_blocking(move || registry.plugins().blob_chunk(&sha256, request.offset))
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    match chunk {
        Some(chunk) => Ok(Bytes::from(chunk.encode())),
        None => Err(RpcError::new(NOT_HERE, format!("this node does not hold blob {}", request.sha256))),
    }
}

/// Starts the task that fetches missing blobs for the node's life.
pub(super) fn spawn_fetcher(cluster: &Arc<Cluster>) {
    let weak = Arc::downgrade(cluster);
    let wanted = cluster.blobs_wanted.clone();
    tokio::spawn(async move {
        let mut backoff = BACKOFF_MIN;
        loop {
            let Some(cluster) = weak.upgrade() else { return };
            let mut left = 0;
            for sha256 in cluster.registry.plugins().missing_blobs() {
                if let Err(e) = fetch(&cluster, &sha256).await {
                    tracing::warn!(%sha256, error = %e, retry_in = ?backoff, "fetching a plugin component failed");
                    left += 1;
                }
            }
            drop(cluster);
            let pause = if left > 0 {
                let pause = backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                pause
            } else {
                backoff = BACKOFF_MIN;
                IDLE_RECHECK
            };
            let _ = tokio::time::timeout(pause, wanted.notified()).await;
        }
    });
}

/// Fetches blob `sha256` from the first peer that holds it and sends a blob that
/// matches its hash; stores it through the registry, which rebuilds the chains.
async fn fetch(cluster: &Arc<Cluster>, sha256: &str) -> Result<()> {
    let mut tried = Vec::new();
    for peer in cluster.voters().into_iter().filter(|id| *id != cluster.node_id) {
        let bytes = match fetch_from(cluster, peer, sha256).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tried.push(format!("node {peer}: {e}"));
                continue;
            }
        };
        let (registry, sha) = (cluster.registry.clone(), sha256.to_owned());
        let stored = tokio::task::spawn_blocking(move || registry.blob_arrived(&sha, &bytes))
            .await
            .map_err(|e| BrokerError::Internal(format!("the blob store task failed: {e}")))?;
        match stored {
            Ok(()) => return Ok(()),
            // A wrong hash (a damaged copy there): another peer may have it right.
            Err(e) => tried.push(format!("node {peer}: {e}")),
        }
    }
    Err(BrokerError::Internal(format!("no peer gave blob {sha256}: {}", tried.join("; "))))
}

/// The whole blob `sha256` from `peer`, chunk by chunk (not yet verified).
async fn fetch_from(cluster: &Cluster, peer: u64, sha256: &str) -> Result<Vec<u8>> {
    let mut blob = Vec::new();
    let mut total = None;
    loop {
        let request = ChunkRequest { sha256: sha256.to_owned(), offset: blob.len() as u64 };
        let payload = Bytes::from(serde_json::to_vec(&request).expect("a chunk request serializes"));
        let answer = cluster
            .host
            .call(peer, super::rpc::FETCH_BLOB, payload, CHUNK_TIMEOUT)
            .await
            .map_err(|e| BrokerError::Internal(e.to_string()))?;
        let chunk = BlobChunk::decode(&answer)?;
        crate::plugins::check_blob_size(chunk.total_bytes)?;
        if *total.get_or_insert(chunk.total_bytes) != chunk.total_bytes {
            return Err(BrokerError::Internal("the blob changed size between chunks".into()));
        }
        if chunk.bytes.is_empty() && (blob.len() as u64) < chunk.total_bytes {
            return Err(BrokerError::Internal("an empty chunk before the blob's end".into()));
        }
        blob.extend_from_slice(&chunk.bytes);
        if blob.len() as u64 >= chunk.total_bytes {
            blob.truncate(chunk.total_bytes as usize);
            return Ok(blob);
        }
    }
}
