//! Consumer groups, modelled on Kafka's group protocol: members join, sync, heartbeat
//! and leave; every membership change starts a new generation; each partition of the
//! group's topics is owned by exactly one member at any time.
//!
//! - [`assignor`]: the sticky assignor (balanced within one, minimal movement).
//! - [`coordinator`]: the pure group state machine, driven by a [`es_core::Clock`], with
//!   session-timeout eviction, rebalance timeout, generation fencing and cooperative
//!   (two-phase: revoke, then assign) hand-over of moved partitions.
//! - [`classic`]: Kafka's classic group protocol, where the leader member computes the
//!   assignment and the coordinator only carries opaque protocol metadata: a join
//!   barrier, generations, static membership (KIP-345), parked joins and syncs.
//! - [`offsets`]: committed offsets stored durably in an internal compacted log and
//!   rebuilt from it on start.
//!
//! No network code here: the server's listeners call into this crate.

pub mod assignor;
pub mod classic;
pub mod coordinator;
mod error;
pub mod limits;
pub mod offsets;

pub use classic::ClassicCoordinator;
pub use coordinator::{
    Coordinator, GroupDescription, GroupState, JoinRequest, Joined, MemberDescription, SyncResult,
};
pub use error::{GroupError, LeaderHint, Result};
pub use offsets::{Committed, OffsetStore};

use serde::{Deserialize, Serialize};

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: u32) -> Self {
        TopicPartition { topic: topic.into(), partition }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Which protocol a group speaks: a group id is one kind or the other, never both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// es-native groups (HTTP and binary protocol): the broker computes the assignment.
    #[default]
    Es,
    /// Kafka's classic protocol: the leader member computes the assignment.
    Kafka,
}

impl GroupKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKind::Es => "es",
            GroupKind::Kafka => "kafka",
        }
    }

    /// The rest of an error message after "a" ("an es-native", "a Kafka").
    fn article(self) -> &'static str {
        match self {
            GroupKind::Es => "n es-native",
            GroupKind::Kafka => " Kafka",
        }
    }
}
