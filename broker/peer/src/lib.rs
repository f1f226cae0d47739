//! es-peer: authenticated node-to-node links for the cluster. Peers prove a shared
//! secret without sending it (a mutual HMAC-SHA256 challenge-response), every frame
//! carries an HMAC tag under per-direction session keys over an implicit sequence
//! number, and one connection per node pair multiplexes the RPCs of every Raft
//! group, coalescing what is queued into one write. The payloads are opaque: the
//! Raft layer adapts its network trait onto [`PeerNode::call`] and the handler.
//! The protocol is in docs/cluster.md, "Peer links".

pub mod config;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod limits;
mod link;
mod node;
pub mod stats;

pub use config::{PeerConfig, PeerTls, Secret, Secrets, Timeouts};
pub use error::{PeerError, RpcError};
pub use link::{HANDLER_PANICKED, Handler, HandlerFuture, RESPONSE_TOO_LARGE, handler};
pub use node::{PeerNode, probe};
pub use stats::{PeerStats, PeerStatsSnapshot};
