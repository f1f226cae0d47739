//! The broker's own peer RPCs, beside Raft's: a metadata change forwarded to the
//! metadata leader, a plugin blob's chunk (`blobs.rs`), a partition's ends (`ends.rs`) and records
//! (`reads.rs`), the registry for a node past the metadata log's start
//! (`image.rs`), and each node's client addresses (so Metadata, 421 answers and
//! NotLeader errors can name a leader clients can reach).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use es_peer::{Handler, RpcError};

use super::metadata::{ProposalId, Retry};
use super::{Cluster, NodeAddresses};
use crate::service::error::BrokerError;

/// A metadata command for the leader to append: its proposal id (16 bytes) and
/// the command (JSON); answers its offset (u64 BE). (Kind 128, the command
/// without an id, is retired: a node of an older build is answered "unknown".)
const FORWARD_METADATA: u8 = 135;
/// Answers this node's [`NodeAddresses`] (JSON).
const NODE_ADDRESSES: u8 = 129;
/// A schema-registry write a follower forwards to the leader of `__es_schemas`
/// (`http/forward.rs` has the payload); answers the HTTP response.
const FORWARD_HTTP: u8 = 130;
/// Asks for a chunk of a plugin blob by sha256 (`blobs.rs` has the payload);
/// answers its total size and the bytes.
pub(super) const FETCH_BLOB: u8 = 131;
/// Asks a replica for a partition's ends (`ends.rs` has the payload).
pub(super) const PARTITION_ENDS: u8 = 134;
/// Asks a replica for a partition's records (`reads.rs` has the payload).
pub(super) const PARTITION_READ: u8 = 136;

/// Failure codes of these RPCs (es-peer keeps codes below 256 for itself).
const NOT_LEADER: u16 = 1001;
pub(super) const FAILED: u16 = 1002;
const STARTING: u16 = 1003;
/// The leader took the command and lost its answer: it may be committed.
const MAY_HAVE_LANDED: u16 = 1005;

/// How long one forwarded call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often addresses are asked of nodes not known yet, and of all of them.
const EXCHANGE_EVERY: Duration = Duration::from_millis(500);
const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// The handler es-raft routes the broker's RPC kinds to. `slot` is filled once the
/// cluster exists; before that every call is refused as "starting".
pub(super) fn handler(slot: Arc<OnceLock<Weak<Cluster>>>) -> Handler {
    es_peer::handler(move |from, _group, kind, payload| {
        let cluster = slot.get().and_then(Weak::upgrade);
        async move {
            let Some(cluster) = cluster else {
                return Err(RpcError::new(STARTING, "this node is still starting"));
            };
            match kind {
                FORWARD_METADATA => {
                    let Some((id, value)) = payload.split_first_chunk::<16>() else {
                        return Err(RpcError::new(FAILED, "a forwarded metadata command without its id"));
                    };
                    match cluster.metadata.propose_here(id, value).await {
                        Ok(offset) => Ok(Bytes::copy_from_slice(&offset.to_be_bytes())),
                        Err(Retry::NoLeader) => Err(RpcError::new(NOT_LEADER, "not the metadata leader")),
                        Err(Retry::MayHaveLanded) => {
                            Err(RpcError::new(MAY_HAVE_LANDED, "the metadata leader lost the answer"))
                        }
                        Err(Retry::Failed(e)) => Err(RpcError::new(FAILED, e.to_string())),
                    }
                }
                FETCH_BLOB => super::blobs::serve(&cluster, &payload).await,
                PARTITION_ENDS => super::ends::serve(&cluster, &payload),
                PARTITION_READ => super::reads::serve(&cluster, &payload).await,
                super::image::METADATA_IMAGE => super::image::serve(&cluster, &payload).await,
                super::directory::ANNOUNCE_LEADERS => super::directory::serve(&cluster, from, &payload),
                super::directory::ASK_MEMBERSHIP => super::directory::serve_membership(&cluster, &payload),
                FORWARD_HTTP => crate::http::forward::serve(cluster.http_router(), from, &payload)
                    .await
                    .map_err(|e| RpcError::new(FAILED, e)),
                NODE_ADDRESSES => {
                    let own = cluster.addresses(cluster.node_id).expect("a node knows its own addresses");
                    let json = serde_json::to_vec(&own).map_err(|e| RpcError::new(FAILED, e.to_string()))?;
                    Ok(Bytes::from(json))
                }
                other => Err(RpcError::new(FAILED, format!("unknown broker RPC kind {other}"))),
            }
        }
    })
}

/// Sends a metadata command to `leader`; answers the offset it got.
pub(super) async fn forward_metadata(
    cluster: &Cluster,
    leader: u64,
    id: &ProposalId,
    value: &[u8],
) -> Result<u64, Retry> {
    let mut payload = Vec::with_capacity(id.len() + value.len());
    payload.extend_from_slice(id);
    payload.extend_from_slice(value);
    match cluster.host.call(leader, FORWARD_METADATA, Bytes::from(payload), CALL_TIMEOUT).await {
        Ok(bytes) => match <[u8; 8]>::try_from(bytes.as_ref()) {
            Ok(b) => Ok(u64::from_be_bytes(b)),
            Err(_) => Err(Retry::Failed(BrokerError::Internal("a malformed forwarding answer".into()))),
        },
        Err(es_peer::PeerError::Remote(e)) if e.code == FAILED => {
            Err(Retry::Failed(BrokerError::Internal(format!("node {leader}: {}", e.message))))
        }
        // Too large to send: it never will be.
        Err(e @ es_peer::PeerError::FrameSize { .. }) => {
            Err(Retry::Failed(BrokerError::Internal(format!("forwarding a metadata change: {e}"))))
        }
        // Never appended: not the leader any more, starting, or never sent.
        Err(
            e @ (es_peer::PeerError::Unavailable(_)
            | es_peer::PeerError::UnknownNode(_)
            | es_peer::PeerError::SelfCall),
        ) => {
            tracing::debug!(leader, error = %e, "forwarding a metadata change failed; retrying");
            Err(Retry::NoLeader)
        }
        Err(es_peer::PeerError::Remote(e)) if e.code == NOT_LEADER || e.code == STARTING => {
            tracing::debug!(leader, error = %e, "forwarding a metadata change failed; retrying");
            Err(Retry::NoLeader)
        }
        // Sent, and the answer lost (or the handler failed midway): it may be
        // committed; proposed again, same id.
        Err(e) => {
            tracing::debug!(leader, error = %e, "a forwarded metadata change's answer was lost; retrying");
            Err(Retry::MayHaveLanded)
        }
    }
}

/// Sends a forwarded HTTP request to `leader`; answers its encoded response.
pub(super) async fn forward_http(
    cluster: &Cluster,
    leader: u64,
    payload: Bytes,
) -> Result<Bytes, es_peer::PeerError> {
    cluster.host.call(leader, FORWARD_HTTP, payload, CALL_TIMEOUT).await
}

/// Asks every node for its addresses until all are known, then now and then (a
/// node restarted with new addresses is learned within `REFRESH_EVERY`).
pub(super) fn spawn_address_exchange(cluster: &Arc<Cluster>) {
    let weak = Arc::downgrade(cluster);
    tokio::spawn(async move {
        let mut since_refresh = Duration::ZERO;
        loop {
            let Some(cluster) = weak.upgrade() else { return };
            let refresh = since_refresh >= REFRESH_EVERY;
            let known = cluster.known_nodes();
            for id in cluster.voters() {
                if id == cluster.node_id || (known.contains_key(&id) && !refresh) {
                    continue;
                }
                if let Some(addresses) = ask_addresses(&cluster, id).await {
                    cluster.learn_addresses(id, addresses);
                }
            }
            since_refresh = if refresh { Duration::ZERO } else { since_refresh + EXCHANGE_EVERY };
            drop(cluster);
            tokio::time::sleep(EXCHANGE_EVERY).await;
        }
    });
}

async fn ask_addresses(cluster: &Cluster, id: u64) -> Option<NodeAddresses> {
    let answer = cluster.host.call(id, NODE_ADDRESSES, Bytes::new(), Duration::from_secs(2)).await.ok()?;
    serde_json::from_slice(&answer).ok()
}
