//! Online snapshots for `es-tools dump --online` (the work is the registry's,
//! `registry/snapshot.rs`): authorized as cluster admin, refused on a cluster node.

use super::offsets::blocking;
use super::{Call, Principal, Resource, Service};
use crate::registry::snapshot::{self, SnapshotView};
use crate::service::error::{BrokerError, Result};

impl Service {
    /// Takes a snapshot held for `lease_ms` (default 60 s), off the async workers.
    pub async fn take_snapshot(&self, principal: &Principal, lease_ms: Option<u64>) -> Result<SnapshotView> {
        self.authorize(principal, Call::Snapshot, Resource::Cluster)?;
        self.check_running()?;
        let lease = snapshot::lease(lease_ms)?;
        self.refuse_in_a_cluster()?;
        let registry = self.registry.clone();
        blocking(move || registry.take_snapshot(lease)).await
    }

    /// Extends a snapshot's lease by `lease_ms` from now.
    pub fn renew_snapshot(&self, principal: &Principal, id: &str, lease_ms: Option<u64>) -> Result<u64> {
        self.authorize(principal, Call::Snapshot, Resource::Cluster)?;
        let lease = snapshot::lease(lease_ms)?;
        self.registry.renew_snapshot(id, lease)?;
        Ok(lease.as_millis() as u64)
    }

    /// Releases a snapshot: its directory (and the disk space its links pin) goes.
    pub async fn release_snapshot(&self, principal: &Principal, id: &str) -> Result<()> {
        self.authorize(principal, Call::Snapshot, Resource::Cluster)?;
        let (registry, id) = (self.registry.clone(), id.to_owned());
        blocking(move || registry.release_snapshot(&id)).await
    }

    /// A cluster node's segments may hold Raft entries not yet committed (durable
    /// here, but not acknowledged), and a Raft truncation may rewrite a sealed
    /// segment in place: neither may reach a backup, so the online dump is a
    /// single-node feature.
    fn refuse_in_a_cluster(&self) -> Result<()> {
        if self.registry.cluster().is_none() {
            return Ok(());
        }
        Err(BrokerError::InvalidRequest(
            "online snapshots are not available on a cluster node: its segments may hold Raft entries that are not \
             committed yet. Back up a cluster by stopping one node (the others keep serving), running `es-tools dump` \
             on its data directory, and starting it again"
                .into(),
        ))
    }
}
