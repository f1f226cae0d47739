//! The binary-protocol listener (`--bind-binary`, default 127.0.0.1:9001).
//!
//! Split as in mini-redis: `connection` buffers bytes and frames them (check, then
//! parse), `command` applies one request to the shared state and encodes its
//! answer. Per connection, requests are read in order and answered as they finish
//! (pipelining): produces are appended in frame order, so one connection's batches
//! to one partition keep their order, and their fsyncs are awaited concurrently, so
//! 64 produces in flight share group-commit rounds instead of queueing one fsync
//! each. Every bound (frame size, in-flight window, connections) is in `limits.rs`.

mod command;
mod connection;
mod error;
mod groups;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::registry::Registry;
use crate::service::Service;

/// Shared state of the binary listener.
#[derive(Clone)]
pub struct BinaryState {
    pub service: Service,
}

impl BinaryState {
    pub fn new(registry: Arc<Registry>) -> BinaryState {
        BinaryState { service: Service::new(registry) }
    }
}

/// Accepts connections until `shutdown` turns true, then lets open connections
/// finish their in-flight requests (bounded) and returns.
pub async fn serve_binary(
    listener: TcpListener,
    state: BinaryState,
    tls: Option<crate::tls::ServerTls>,
    shutdown: watch::Receiver<bool>,
) {
    let limits = state.service.registry().options().listeners.binary;
    let metrics = state.service.metrics().clone();
    crate::listener::accept_until_shutdown(
        listener,
        "binary",
        limits,
        (metrics, crate::metrics::Protocol::Binary),
        tls,
        shutdown,
        move |stream, peer, shutdown| connection::run(stream, peer, state.clone(), limits, shutdown),
    )
    .await;
}

/// Which service call every binary op is: the binary side of the one
/// authorization table (`service::authz::Call::access`). Exhaustive, so a new op
/// does not compile without its row.
pub fn call_of(op: es_protocol::Op) -> crate::service::Call {
    use crate::service::Call;
    use es_protocol::Op;
    match op {
        Op::Hello => Call::Health,
        Op::Produce => Call::Produce,
        Op::Fetch => Call::Fetch,
        Op::ListOffsets => Call::ListOffsets,
        Op::CreateTopic => Call::CreateTopic,
        Op::ListTopics => Call::ListTopics,
        Op::DescribeTopic => Call::DescribeTopic,
        Op::DeleteTopic => Call::DeleteTopic,
        Op::InitProducerId => Call::InitProducerId,
        Op::JoinGroup => Call::GroupJoin,
        Op::SyncGroup => Call::GroupSync,
        Op::Heartbeat => Call::GroupHeartbeat,
        Op::LeaveGroup => Call::GroupLeave,
        Op::OffsetCommit => Call::GroupCommit,
        Op::OffsetFetch => Call::GroupFetchOffsets,
        Op::Authenticate => Call::Authenticate,
    }
}

#[cfg(test)]
mod tests {
    use super::call_of;
    use crate::service::Access;

    /// Every op the protocol knows has a row, and only the handshake and the
    /// login are public.
    #[test]
    fn every_op_has_an_authorization_row() {
        let mut ops = 0;
        for code in 0..=u8::MAX {
            let Ok(op) = es_protocol::Op::from_u8(code) else { continue };
            ops += 1;
            let public = call_of(op).access() == Access::Public;
            let handshake = matches!(op, es_protocol::Op::Hello | es_protocol::Op::Authenticate);
            assert_eq!(public, handshake, "{op:?}");
        }
        assert_eq!(ops, 16);
    }
}
