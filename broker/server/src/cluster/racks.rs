//! Follower fetching (Kafka's KIP-392): a consumer that names its rack
//! (`client.rack`) is sent by the partition's leader to an in-sync replica in that
//! rack, and reads there up to that replica's high watermark, so its bytes stay in
//! its rack or zone. Each node's rack is `cluster.rack` (Kafka's `broker.rack`),
//! advertised with its addresses and listed in Metadata. The choice is Kafka's
//! `RackAwareReplicaSelector`: no rack named, or the leader in the consumer's rack,
//! or no in-sync replica there, and the leader serves.
//!
//! Racks also place replicas (`placement.rs`). Each node remembers every node's
//! rack as it last heard it in `<data>/cluster/racks.json`, so a node that
//! restarted plans rack-aware placements even for members it has not heard from
//! since (one that is down), as Kafka's controller knows every registered
//! broker's rack.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Cluster, NodeAddresses};

const FILE: &str = "racks.json";

/// Every node's rack as this node last heard it, by id (`<data>/cluster/racks.json`).
/// A cache of what the nodes advertise: a file that cannot be read is logged and
/// started afresh, and what a node advertises replaces what was remembered.
pub(super) struct Remembered {
    path: PathBuf,
    racks: Mutex<BTreeMap<u64, String>>,
    /// Held while a save writes, so the save that ends last writes the newest racks.
    saving: Mutex<()>,
}

impl Remembered {
    pub(super) fn load(dir: &Path) -> Remembered {
        let path = dir.join(FILE);
        let racks = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "not a racks file; racks are learned afresh");
                BTreeMap::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "the racks file cannot be read; racks are learned afresh");
                BTreeMap::new()
            }
        };
        Remembered { path, racks: Mutex::new(racks), saving: Mutex::new(()) }
    }

    /// Node `id` advertises `rack` (`None`: none, or it left the cluster); whether
    /// that changed what is remembered.
    pub(super) fn heard(&self, id: u64, rack: Option<&str>) -> bool {
        let mut racks = self.racks.lock().expect("racks lock");
        match rack {
            Some(r) if racks.get(&id).map(String::as_str) != Some(r) => {
                racks.insert(id, r.to_owned());
                true
            }
            Some(_) => false,
            None => racks.remove(&id).is_some(),
        }
    }

    pub(super) fn racks(&self) -> BTreeMap<u64, String> {
        self.racks.lock().expect("racks lock").clone()
    }

    /// Writes what is remembered durably; blocking.
    fn save(&self) {
        let _one = self.saving.lock().expect("racks save lock");
        let bytes = serde_json::to_vec_pretty(&self.racks()).expect("a map of strings serializes");
        // A new node saves its own rack before anything else made `<data>/cluster`.
        let dir = self.path.parent().expect("a file in a directory");
        if let Err(e) =
            std::fs::create_dir_all(dir).and_then(|()| crate::store::write_durably(&self.path, &bytes))
        {
            tracing::warn!(path = %self.path.display(), error = %e, "the racks could not be saved");
        }
    }
}

/// Notes that node `id` advertises `rack`, saving off the async workers when that
/// changed what `remembered` holds.
pub(super) fn remember(remembered: &Arc<Remembered>, id: u64, rack: Option<&str>) {
    if remembered.heard(id, rack) {
        let remembered = remembered.clone();
        tokio::task::spawn_blocking(move || remembered.save());
    }
}

impl Cluster {
    /// The replica a consumer in `rack` should read `partition` from while this
    /// node leads it with `in_sync` (the voters caught up to the commit): `None`
    /// to read here.
    pub fn preferred_read_replica(&self, rack: &str, in_sync: &[u64], partition: u32) -> Option<u64> {
        let nodes = self.nodes.read().expect("nodes lock");
        select(self.node_id, rack, in_sync, &nodes, partition)
    }
}

/// An in-sync replica in `rack` other than the leader `me`, unless `me` is in
/// it; several such replicas take partitions in turn, so their reads spread.
fn select(
    me: u64,
    rack: &str,
    in_sync: &[u64],
    nodes: &BTreeMap<u64, NodeAddresses>,
    partition: u32,
) -> Option<u64> {
    if rack.is_empty() {
        return None;
    }
    let rack_of = |id: u64| nodes.get(&id).and_then(|a| a.rack.as_deref());
    if rack_of(me) == Some(rack) {
        return None;
    }
    let same: Vec<u64> =
        in_sync.iter().copied().filter(|&id| id != me && rack_of(id) == Some(rack)).collect();
    (!same.is_empty()).then(|| same[partition as usize % same.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(racks: &[(u64, Option<&str>)]) -> BTreeMap<u64, NodeAddresses> {
        racks
            .iter()
            .map(|&(id, rack)| {
                let a = NodeAddresses {
                    kafka_host: "127.0.0.1".into(),
                    kafka_port: 9092,
                    http: String::new(),
                    binary: String::new(),
                    rack: rack.map(str::to_owned),
                };
                (id, a)
            })
            .collect()
    }

    #[test]
    fn racks_heard_are_remembered_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let r = Remembered::load(dir.path());
        assert!(r.heard(1, Some("a")) && r.heard(2, Some("b")));
        assert!(!r.heard(1, Some("a")), "unchanged");
        assert!(r.heard(2, Some("c")) && r.heard(3, Some("a")) && r.heard(3, None));
        r.save();
        let again = Remembered::load(dir.path());
        assert_eq!(again.racks(), BTreeMap::from([(1, "a".to_owned()), (2, "c".to_owned())]));
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(Remembered::load(dir.path()).racks().is_empty(), "a damaged cache starts afresh");
    }

    #[test]
    fn a_consumer_in_another_rack_is_sent_to_an_in_sync_replica_in_its_own() {
        let n = nodes(&[(1, Some("a")), (2, Some("b")), (3, Some("c"))]);
        assert_eq!(select(1, "b", &[1, 2, 3], &n, 0), Some(2));
        assert_eq!(select(1, "c", &[1, 2, 3], &n, 7), Some(3));
    }

    #[test]
    fn the_leader_serves_when_it_shares_the_rack_or_no_in_sync_replica_does() {
        let n = nodes(&[(1, Some("a")), (2, Some("b")), (3, None)]);
        assert_eq!(select(1, "a", &[1, 2, 3], &n, 0), None, "the leader is in the consumer's rack");
        assert_eq!(select(1, "b", &[1, 3], &n, 0), None, "node 2 is behind the commit");
        assert_eq!(select(1, "z", &[1, 2, 3], &n, 0), None, "no replica in that rack");
        assert_eq!(select(1, "", &[1, 2, 3], &n, 0), None, "the consumer named no rack");
        assert_eq!(select(1, "b", &[1, 2, 3], &nodes(&[]), 0), None, "racks not known yet");
    }

    #[test]
    fn replicas_sharing_a_rack_take_partitions_in_turn() {
        let n = nodes(&[(1, Some("a")), (2, Some("b")), (3, Some("b"))]);
        let chosen: Vec<_> = (0..4).map(|p| select(1, "b", &[1, 2, 3], &n, p)).collect();
        assert_eq!(chosen, [Some(2), Some(3), Some(2), Some(3)]);
    }
}
