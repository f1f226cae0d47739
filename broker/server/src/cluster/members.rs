//! The cluster's members: which nodes replicate every group, where their peer
//! listeners are, and which ids were removed for good. The metadata log changes
//! them (`Command::AddNode`, `Command::RemoveNode`); each node keeps what it
//! applied in `<data>/cluster/members.json` (written atomically), so a restart
//! starts from the members it last knew, not from its `--cluster-peers`.
//!
//! Until the first membership command, the members are the nodes of
//! `--cluster-peers` (the cluster as it was started).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::registry::metadata::Command;
use crate::service::error::{BrokerError, Result};

const FILE: &str = "members.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    /// Each member's peer-listener address, by node id.
    pub nodes: BTreeMap<u64, String>,
    /// Ids removed from the cluster. openraft forbids reusing one: a node that
    /// starts over from an empty log under an old id could, replaying old
    /// memberships, form a second majority.
    pub removed: BTreeSet<u64>,
}

/// What applying a membership command changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Unchanged,
    Added { id: u64, peer: String },
    Removed { id: u64 },
}

impl Members {
    /// The members `<data>/cluster` holds, if this node ever applied a membership
    /// command.
    pub fn load(dir: &Path) -> Result<Option<Members>> {
        let path = dir.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                BrokerError::Internal(format!(
                    "{} is not a members file ({e}); copy it from another node of the cluster",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BrokerError::Internal(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Writes the members durably (temporary file, fsync, rename, directory fsync).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(FILE);
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| BrokerError::Internal(e.to_string()))?;
        crate::store::write_durably(&path, &bytes)
            .map_err(|e| BrokerError::Internal(format!("saving {}: {e}", path.display())))
    }

    pub fn ids(&self) -> BTreeSet<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Applies a membership command; the same answer on every node for the same
    /// members. Refused: re-adding a removed id, removing a non-member or the last
    /// member. Adding a member again at the same address changes nothing; at a new
    /// address, records the new address.
    pub fn apply(&mut self, command: &Command) -> Result<Change> {
        match command {
            Command::AddNode { id, peer } => {
                if self.removed.contains(id) {
                    return Err(BrokerError::InvalidRequest(format!(
                        "node {id} was removed from this cluster and its id may not come back (a node that \
                         starts over under an old id could form a second majority): start the new node \
                         with another --node-id"
                    )));
                }
                if self.nodes.get(id) == Some(peer) {
                    return Ok(Change::Unchanged);
                }
                self.nodes.insert(*id, peer.clone());
                Ok(Change::Added { id: *id, peer: peer.clone() })
            }
            Command::RemoveNode { id } => {
                if !self.nodes.contains_key(id) {
                    let members: Vec<u64> = self.nodes.keys().copied().collect();
                    return Err(BrokerError::InvalidRequest(format!(
                        "node {id} is not a member of this cluster; its members are {members:?}"
                    )));
                }
                if self.nodes.len() == 1 {
                    return Err(BrokerError::InvalidRequest(format!(
                        "node {id} is the cluster's last member and cannot be removed"
                    )));
                }
                self.nodes.remove(id);
                self.removed.insert(*id);
                Ok(Change::Removed { id: *id })
            }
            other => Err(BrokerError::Internal(format!("{other:?} is not a membership command"))),
        }
    }
}

/// Checks a peer address as `es cluster add-node` gives it: `host:port`.
pub fn check_peer_address(peer: &str) -> Result<()> {
    let ok = peer
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if ok {
        Ok(())
    } else {
        Err(BrokerError::InvalidRequest(format!(
            "{peer:?} is not a peer address: give the new node's peer listener as HOST:PORT, as in its \
             --cluster-peers entry"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ids: &[u64]) -> Members {
        Members {
            nodes: ids.iter().map(|&i| (i, format!("127.0.0.1:{}", 9000 + i))).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn adding_removing_and_what_is_refused() {
        let mut m = members(&[1, 2, 3]);
        let add4 = Command::AddNode { id: 4, peer: "127.0.0.1:9004".into() };
        assert_eq!(m.apply(&add4).unwrap(), Change::Added { id: 4, peer: "127.0.0.1:9004".into() });
        assert_eq!(m.apply(&add4).unwrap(), Change::Unchanged, "applied twice (a replay)");
        assert_eq!(m.apply(&Command::RemoveNode { id: 3 }).unwrap(), Change::Removed { id: 3 });
        assert_eq!(m.ids(), BTreeSet::from([1, 2, 4]));
        let again = m.apply(&Command::AddNode { id: 3, peer: "127.0.0.1:9003".into() }).unwrap_err();
        assert!(again.to_string().contains("may not come back"), "{again}");
        assert!(m.apply(&Command::RemoveNode { id: 3 }).is_err(), "no longer a member");
        let mut one = members(&[1]);
        assert!(one.apply(&Command::RemoveNode { id: 1 }).unwrap_err().to_string().contains("last member"));
        // A new address for a member is recorded.
        let moved = Command::AddNode { id: 4, peer: "10.0.0.4:9004".into() };
        assert!(matches!(m.apply(&moved).unwrap(), Change::Added { id: 4, .. }));
    }

    #[test]
    fn saved_members_load_back_and_garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Members::load(dir.path()).unwrap(), None);
        let mut m = members(&[1, 2]);
        m.removed.insert(3);
        m.save(dir.path()).unwrap();
        assert_eq!(Members::load(dir.path()).unwrap(), Some(m));
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(Members::load(dir.path()).unwrap_err().to_string().contains("copy it from another node"));
    }

    #[test]
    fn peer_addresses_are_host_and_port() {
        assert!(check_peer_address("127.0.0.1:9490").is_ok());
        assert!(check_peer_address("node4.internal:9490").is_ok());
        assert!(check_peer_address("[::1]:9490").is_ok());
        for bad in ["", "127.0.0.1", ":9490", "host:0", "host:port", "host:99999"] {
            assert!(check_peer_address(bad).is_err(), "{bad:?}");
        }
    }
}
