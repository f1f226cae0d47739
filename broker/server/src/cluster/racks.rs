//! Follower fetching (Kafka's KIP-392): a consumer that names its rack
//! (`client.rack`) is sent by the partition's leader to an in-sync replica in that
//! rack, and reads there up to that replica's high watermark, so its bytes stay in
//! its rack or zone. Each node's rack is `cluster.rack` (Kafka's `broker.rack`),
//! advertised with its addresses and listed in Metadata. The choice is Kafka's
//! `RackAwareReplicaSelector`: no rack named, or the leader in the consumer's rack,
//! or no in-sync replica there, and the leader serves.

use std::collections::BTreeMap;

use super::{Cluster, NodeAddresses};

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
