//! The protocol-neutral service every listener calls (HTTP, binary, and later
//! Kafka): typed requests in, typed results or a [`BrokerError`] out. A listener
//! keeps only its framing, wire types, wire-shape limits and encoding.
//!
//! The seams the next issues plug into live here, one place each:
//! authorization ([`authz`]), quotas ([`quota`]), leader routing and the log
//! append ([`partition`]: a [`PartitionHandle`] carries the leader epoch and is
//! the only thing that appends, so replication replaces it without touching a
//! listener).

pub mod admin;
pub mod authz;
pub mod error;
pub mod fetch;
pub mod offsets;
pub mod partition;
pub mod produce;
pub mod quota;

use std::sync::Arc;

pub use authz::{Access, Call, Principal, Resource};
pub use error::{BrokerError, Result};
pub use partition::{LeaderEpoch, PartitionHandle};

use crate::registry::{Registry, Topic};

/// The broker as the listeners see it. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    registry: Arc<Registry>,
    quotas: Arc<quota::Quotas>,
    polls: Arc<fetch::PollGauge>,
}

impl Service {
    pub fn new(registry: Arc<Registry>) -> Service {
        Service {
            registry,
            quotas: Arc::new(quota::Quotas::default()),
            polls: Arc::new(fetch::PollGauge::default()),
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Authorizes `call` on `resource` for `principal`: always the first step, before
    /// any lookup, so a refusal never says whether the resource exists.
    fn authorize(&self, principal: &Principal, call: Call, resource: Resource) -> Result<()> {
        authz::authorize(principal, &authz::Operation { call, resource })
    }

    fn check_running(&self) -> Result<()> {
        if self.registry.is_shutting_down() {
            return Err(BrokerError::ShuttingDown);
        }
        Ok(())
    }

    fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.registry.topic(name)
    }

    /// The handle a read or write of one partition goes through: the leader
    /// routing seam. A single node leads every partition it has.
    fn partition(&self, topic: &Arc<Topic>, partition: u32) -> Result<PartitionHandle> {
        PartitionHandle::local(topic, partition)
    }
}
