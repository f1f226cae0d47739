//! es-raft: a Raft group per partition on openraft, where the partition log is the
//! Raft log (DESIGN §4, docs/cluster.md "Raft log store").
//!
//! Each Raft entry is one stored v2 record batch: a data batch as the producer sent
//! it, or a control batch (blank, membership) that takes no Kafka offset. The
//! entry's bytes are the segment's bytes; there is no second copy. The log id is
//! (term = the batch's partitionLeaderEpoch, index = its Raft index in es-log).
//! openraft stays inside this crate: the broker talks to a group through es types
//! ([`RaftHost`], [`Group`]); the network is openraft's `RaftNetworkV2` over
//! es-peer's authenticated links (`network.rs`, `codec.rs`).

mod codec;
mod entry;
mod error;
mod host;
pub mod limits;
mod network;
mod state_machine;
mod store;
mod types;

#[cfg(test)]
mod suite_tests;

pub use codec::CodecError;
pub use error::{ProposeError, RaftError};
pub use host::{Group, GroupFigures, GroupStatus, RaftHost, Timers};
pub use network::{CODE_BAD_REQUEST, CODE_GROUP_STOPPED, CODE_NO_GROUP, CODE_UNKNOWN_KIND};
pub use state_machine::{AppliedState, DataStateMachine};
pub use store::{CommitGate, LogStore, StoreState};
pub use types::Term;
