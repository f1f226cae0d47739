//! es-raft: a Raft group per partition on openraft, where the partition log is the
//! Raft log (DESIGN §4, docs/cluster.md "Raft log store").
//!
//! Each Raft entry is one stored v2 record batch: a data batch as the producer sent
//! it, or a control batch (blank, membership) that takes no Kafka offset. The
//! entry's bytes are the segment's bytes; there is no second copy. The log id is
//! (term = the batch's partitionLeaderEpoch, index = its Raft index in es-log).
//! openraft stays inside this crate: the rest of the broker will talk to a group
//! through es types (the wiring, network and cluster flags are not built yet).

mod entry;
mod error;
mod state_machine;
mod store;
mod types;

#[cfg(test)]
mod suite_tests;

pub use error::RaftError;
pub use state_machine::{AppliedState, DataStateMachine};
pub use store::{LogStore, StoreState};
pub use types::Term;
