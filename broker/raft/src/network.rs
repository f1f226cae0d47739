//! openraft's `RaftNetworkV2` over es-peer: one [`PeerNetwork`] per (group, target
//! node), every call a `PeerNode::call_timeout(target, group, kind, payload)` on
//! the one authenticated link per node pair, so all groups' heartbeats share it and
//! are coalesced per write. The receiving side is [`serve`], which the host's peer
//! handler calls for RPC kinds below [`crate::host::APP_KIND_MIN`].
//!
//! Failures map to what openraft should do next: no link, a closed link, a stopped
//! node or a remote that has no such group is `Unreachable` (openraft backs off); a
//! call that got no answer in time is `Timeout`; anything else is `Network`.

use std::future::Future;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_peer::{PeerError, PeerNode, RpcError};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Timeout, Unreachable};
use openraft::network::{RPCOption, RPCTypes, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::storage::Snapshot;

use crate::codec::{self, CodecError};
use crate::types::{TypeConfig, Vote};

/// The Raft RPC kinds on a peer link (the broker's own start at 128).
pub(crate) const KIND_APPEND: u8 = 1;
pub(crate) const KIND_VOTE: u8 = 2;
pub(crate) const KIND_SNAPSHOT: u8 = 3;
pub(crate) const KIND_TRANSFER: u8 = 4;

/// Failure codes of the Raft handler (es-peer keeps those below 256 for itself;
/// these are es-raft's, above them).
pub const CODE_NO_GROUP: u16 = 1001;
pub const CODE_BAD_REQUEST: u16 = 1002;
pub const CODE_GROUP_STOPPED: u16 = 1003;
pub const CODE_UNKNOWN_KIND: u16 = 1004;

pub(crate) type Raft = openraft::Raft<TypeConfig, crate::state_machine::DataStateMachine>;
type Snap = Snapshot<crate::types::CommittedLeaderId, u64, openraft::impls::BasicNode, Cursor<Vec<u8>>>;
type TransferRequest = openraft::raft::TransferLeaderRequest<TypeConfig>;
type TransferResponse = openraft::raft::TransferLeaderResponse<TypeConfig>;

/// Builds a group's clients: one per target node, all over the same peer node.
pub(crate) struct Factory {
    pub peer: Arc<PeerNode>,
    pub group: u64,
}

impl RaftNetworkFactory<TypeConfig> for Factory {
    type Network = PeerNetwork;

    async fn new_client(&mut self, target: u64, _node: &openraft::impls::BasicNode) -> PeerNetwork {
        PeerNetwork { peer: self.peer.clone(), group: self.group, target }
    }
}

/// The client side of one group's RPCs to one node.
pub(crate) struct PeerNetwork {
    peer: Arc<PeerNode>,
    group: u64,
    target: u64,
}

impl PeerNetwork {
    async fn call(&self, kind: u8, payload: Bytes, limit: Duration) -> Result<Bytes, PeerError> {
        self.peer.call_timeout(self.target, self.group, kind, payload, limit).await
    }

    fn rpc_error(&self, e: PeerError, action: RPCTypes, limit: Duration) -> RPCError<TypeConfig> {
        match classify(&e) {
            Failure::Unreachable => RPCError::Unreachable(Unreachable::new(&e)),
            Failure::Timeout => RPCError::Timeout(self.timeout(action, limit)),
            Failure::Network => RPCError::Network(NetworkError::new(&e)),
        }
    }

    fn timeout(&self, action: RPCTypes, limit: Duration) -> Timeout<TypeConfig> {
        Timeout { action, id: self.peer.node_id(), target: self.target, timeout: limit }
    }
}

/// What openraft should make of a failed call.
enum Failure {
    Unreachable,
    Timeout,
    Network,
}

fn classify(e: &PeerError) -> Failure {
    match e {
        PeerError::Unavailable(_)
        | PeerError::LinkClosed
        | PeerError::Shutdown
        | PeerError::UnknownNode(_)
        | PeerError::SelfCall
        // The remote has no such group, is stopping it, or could not read the request.
        | PeerError::Remote(_) => Failure::Unreachable,
        PeerError::Timeout | PeerError::HandshakeTimeout | PeerError::IdleTimeout(_) => Failure::Timeout,
        PeerError::Io(_)
        | PeerError::BadMagic
        | PeerError::WrongNode { .. }
        | PeerError::UnknownKeyId(_)
        | PeerError::KeyIdMismatch { .. }
        | PeerError::BadProof
        | PeerError::Reflected
        | PeerError::Replayed
        | PeerError::FrameSize { .. }
        | PeerError::FrameAuth { .. }
        | PeerError::Malformed(_)
        | PeerError::SecretTooShort { .. }
        | PeerError::DuplicateKeyId(_)
        | PeerError::SelfInPeers(_) => Failure::Network,
    }
}

fn decode_failed(e: CodecError) -> NetworkError<TypeConfig> {
    NetworkError::new(&e)
}

impl RaftNetworkV2<TypeConfig> for PeerNetwork {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: openraft::raft::AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let limit = option.hard_ttl();
        let reply = self
            .call(KIND_APPEND, codec::encode_append(&rpc), limit)
            .await
            .map_err(|e| self.rpc_error(e, RPCTypes::AppendEntries, limit))?;
        codec::from_json("append-entries response", &reply).map_err(|e| RPCError::Network(decode_failed(e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let limit = option.hard_ttl();
        let reply = self
            .call(KIND_VOTE, codec::to_json(&rpc), limit)
            .await
            .map_err(|e| self.rpc_error(e, RPCTypes::Vote, limit))?;
        codec::from_json("vote response", &reply).map_err(|e| RPCError::Network(decode_failed(e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snap,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let limit = option.hard_ttl();
        let payload = codec::encode_snapshot(vote, &snapshot.meta, snapshot.snapshot.get_ref());
        let reply = tokio::select! {
            closed = cancel => return Err(StreamingError::Closed(closed)),
            reply = self.call(KIND_SNAPSHOT, payload, limit) => reply,
        };
        let reply = reply.map_err(|e| match classify(&e) {
            Failure::Unreachable => StreamingError::Unreachable(Unreachable::new(&e)),
            Failure::Timeout => StreamingError::Timeout(self.timeout(RPCTypes::InstallSnapshot, limit)),
            Failure::Network => StreamingError::Network(NetworkError::new(&e)),
        })?;
        codec::from_json("snapshot response", &reply).map_err(|e| StreamingError::Network(decode_failed(e)))
    }

    async fn transfer_leader(
        &mut self,
        req: TransferRequest,
        option: RPCOption,
    ) -> Result<TransferResponse, RPCError<TypeConfig>> {
        let limit = option.hard_ttl();
        let reply = self
            .call(KIND_TRANSFER, codec::to_json(&req), limit)
            .await
            .map_err(|e| self.rpc_error(e, RPCTypes::TransferLeader, limit))?;
        codec::from_json("transfer-leader response", &reply).map_err(|e| RPCError::Network(decode_failed(e)))
    }
}

fn bad_request(e: CodecError) -> RpcError {
    RpcError::new(CODE_BAD_REQUEST, e.to_string())
}

fn stopped(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(CODE_GROUP_STOPPED, e.to_string())
}

/// Serves one Raft RPC for `raft`: decodes, hands it to openraft, encodes the
/// answer. A payload that does not decode is a typed failure, never a panic.
pub(crate) async fn serve(raft: Raft, kind: u8, payload: Bytes) -> Result<Bytes, RpcError> {
    match kind {
        KIND_APPEND => {
            let req = codec::decode_append(payload).map_err(bad_request)?;
            let resp = raft.append_entries(req).await.map_err(stopped)?;
            Ok(codec::to_json(&resp))
        }
        KIND_VOTE => {
            let req: VoteRequest<TypeConfig> = codec::from_json("vote", &payload).map_err(bad_request)?;
            let resp = raft.vote(req).await.map_err(stopped)?;
            Ok(codec::to_json(&resp))
        }
        KIND_SNAPSHOT => {
            let (vote, meta, data) = codec::decode_snapshot(payload).map_err(bad_request)?;
            let snapshot = Snapshot { meta, snapshot: Cursor::new(data) };
            let resp = raft.install_full_snapshot(vote, snapshot).await.map_err(stopped)?;
            Ok(codec::to_json(&resp))
        }
        KIND_TRANSFER => {
            let req: TransferRequest = codec::from_json("transfer-leader", &payload).map_err(bad_request)?;
            let resp = raft.handle_transfer_leader(req).await.map_err(stopped)?;
            Ok(codec::to_json(&resp))
        }
        other => Err(RpcError::new(CODE_UNKNOWN_KIND, format!("no Raft RPC of kind {other}"))),
    }
}
