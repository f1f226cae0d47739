//! Who leads the partitions this node does not replicate. A partition placed on
//! some of the nodes (`placement.rs`) has no group on the others, yet every node
//! answers Kafka's Metadata for every partition and names the leader in its
//! NotLeader errors. So each leader tells the members outside a group it leads
//! that it leads it, and in which term: one message per peer every
//! `ANNOUNCE_EVERY` (RPC kind 132: (group, term) pairs, u64 big-endian; the
//! sender is the leader), nothing at all while every partition is on every node.
//! A receiver keeps the highest term it heard per group and forgets a group its
//! announcer stopped naming. What it answers is a hint, up to one period stale
//! after a failover: a client sent to the old leader gets NOT_LEADER and asks again.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::{BufMut, Bytes};

use super::Cluster;

/// The RPC kind of an announcement.
pub(super) const ANNOUNCE_LEADERS: u8 = 132;
/// Asks a group's leader for its committed membership: the group id (u64 BE);
/// answers the node ids (u64 BE each), or fails when this node does not lead the
/// group or its membership is changing (`placement::spawn_retirer`).
pub(super) const ASK_MEMBERSHIP: u8 = 133;

/// How often leaders announce themselves.
const ANNOUNCE_EVERY: Duration = Duration::from_millis(500);
/// How long one announcement may take.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    leader: u64,
    term: u64,
}

/// The leaders this node heard of, by group id.
#[derive(Debug, Default)]
pub(super) struct Directory {
    leaders: RwLock<HashMap<u64, Entry>>,
}

impl Directory {
    /// The leader of `group` and its term, as last announced.
    pub fn leader(&self, group: u64) -> Option<(u64, u64)> {
        self.leaders.read().expect("directory lock").get(&group).map(|e| (e.leader, e.term))
    }

    /// Takes `from`'s announcement: it leads these (group, term) pairs and, of the
    /// groups it named before, no others.
    fn learn(&self, from: u64, led: &[(u64, u64)]) {
        let mut leaders = self.leaders.write().expect("directory lock");
        let named: BTreeSet<u64> = led.iter().map(|(g, _)| *g).collect();
        leaders.retain(|g, e| e.leader != from || named.contains(g));
        for &(group, term) in led {
            let entry = leaders.entry(group).or_insert(Entry { leader: from, term });
            if term >= entry.term {
                *entry = Entry { leader: from, term };
            }
        }
    }
}

/// Serves an announcement from `from`.
pub(super) fn serve(cluster: &Cluster, from: u64, payload: &[u8]) -> Result<Bytes, es_peer::RpcError> {
    if !payload.len().is_multiple_of(16) {
        return Err(es_peer::RpcError::new(super::rpc::FAILED, "a malformed leader announcement"));
    }
    let led: Vec<(u64, u64)> = payload
        .chunks_exact(16)
        .map(|c| {
            let (g, t) = c.split_at(8);
            (
                u64::from_be_bytes(g.try_into().expect("8 bytes")),
                u64::from_be_bytes(t.try_into().expect("8 bytes")),
            )
        })
        .collect();
    cluster.directory.learn(from, &led);
    Ok(Bytes::new())
}

/// Serves [`ASK_MEMBERSHIP`].
pub(super) fn serve_membership(cluster: &Cluster, payload: &[u8]) -> Result<Bytes, es_peer::RpcError> {
    let group = <[u8; 8]>::try_from(payload)
        .map(u64::from_be_bytes)
        .map_err(|_| es_peer::RpcError::new(super::rpc::FAILED, "a malformed membership question"))?;
    let led = cluster.groups.read().expect("groups lock").values().find(|g| g.id() == group).cloned();
    let nodes = led.and_then(|g| g.committed_membership()).ok_or_else(|| {
        es_peer::RpcError::new(
            super::rpc::FAILED,
            "not the leader of that group, or its membership is changing",
        )
    })?;
    let mut out = bytes::BytesMut::with_capacity(nodes.len() * 8);
    for n in nodes {
        out.put_u64(n);
    }
    Ok(out.freeze())
}

/// The committed membership of `group` as node `leader` answers it, if it leads it.
pub(super) async fn ask_membership(cluster: &Cluster, leader: u64, group: u64) -> Option<BTreeSet<u64>> {
    let payload = Bytes::copy_from_slice(&group.to_be_bytes());
    let answer = cluster.host.call(leader, ASK_MEMBERSHIP, payload, ANNOUNCE_TIMEOUT).await.ok()?;
    (answer.len() % 8 == 0)
        .then(|| answer.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// Announces, every period, to each member the groups this node leads that it is
/// not a replica of; an empty list once to a peer it named groups to before.
pub(super) fn spawn(cluster: &Arc<Cluster>) {
    let weak = Arc::downgrade(cluster);
    tokio::spawn(async move {
        let mut named_before: BTreeSet<u64> = BTreeSet::new();
        loop {
            tokio::time::sleep(ANNOUNCE_EVERY).await;
            let Some(cluster) = weak.upgrade() else { return };
            let me = cluster.node_id;
            let led: Vec<(u64, u64, BTreeSet<u64>)> = cluster
                .groups
                .read()
                .expect("groups lock")
                .values()
                .filter(|g| g.is_leader())
                .filter_map(|g| Some((g.id(), g.leader_epoch().0.max(0) as u64, g.target()?)))
                .collect();
            for peer in cluster.voters().into_iter().filter(|p| *p != me) {
                let mut payload = bytes::BytesMut::new();
                for (group, term, replicas) in &led {
                    if !replicas.contains(&peer) {
                        payload.put_u64(*group);
                        payload.put_u64(*term);
                    }
                }
                if payload.is_empty() && !named_before.remove(&peer) {
                    continue;
                }
                if !payload.is_empty() {
                    named_before.insert(peer);
                }
                let host = cluster.host.clone();
                let payload = payload.freeze();
                tokio::spawn(async move {
                    if let Err(e) = host.call(peer, ANNOUNCE_LEADERS, payload, ANNOUNCE_TIMEOUT).await {
                        tracing::debug!(peer, error = %e, "announcing leaders failed; the next round retries");
                    }
                });
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_term_wins_and_a_leader_that_stops_naming_a_group_is_forgotten() {
        let d = Directory::default();
        d.learn(1, &[(10, 3), (11, 3)]);
        assert_eq!(d.leader(10), Some((1, 3)));
        // Node 2 won group 10 in term 4; node 1's stale claim of term 3 is ignored.
        d.learn(2, &[(10, 4)]);
        d.learn(1, &[(10, 3), (11, 3)]);
        assert_eq!(d.leader(10), Some((2, 4)));
        // Node 1 no longer leads 11.
        d.learn(1, &[]);
        assert_eq!(d.leader(11), None);
        assert_eq!(d.leader(10), Some((2, 4)), "node 2's entry stays");
    }
}
