//! Leader balancing. A placed partition (`placement.rs`) goes back to its
//! preferred leader, its first replica, whenever that replica is in sync (Kafka's
//! preferred replica election); placement spreads preferred leaders evenly. The
//! partitions of topics that predate placement have every node as a voter, so
//! each node should lead about 1/n of them; elections alone leave leadership wherever timers happened
//! to fire first (often all on the node that started first). Every `interval`, each
//! node counts the leaders it knows of and, while it leads more than its share
//! (total / voters, rounded up), hands one of its partitions to the in-sync voter
//! that leads the fewest, with openraft's leader transfer. One transfer per node per
//! round, and only to a voter that has every committed entry, so a round never
//! costs more than one short election per node and no write is lost (Kafka's
//! `auto.leader.rebalance.enable` does the same towards its preferred replicas).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Cluster, PartitionKey};

/// What the balancer knows of one partition it looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub key: PartitionKey,
    pub leader: Option<u64>,
    /// On a partition this node leads: the voters that have every committed entry.
    pub in_sync: Vec<u64>,
    /// A placed partition's preferred leader (its first replica).
    pub preferred: Option<u64>,
}

/// The one transfer `me` should make now, if any: a partition it leads to the
/// in-sync voter leading the fewest, while `me` leads more than its share and
/// that voter fewer.
pub(crate) fn plan(me: u64, voters: &[u64], seen: &[Seen]) -> Option<(PartitionKey, u64)> {
    let back = seen.iter().filter(|s| s.leader == Some(me)).find_map(|s| {
        let p = s.preferred.filter(|p| *p != me && s.in_sync.contains(p))?;
        Some((s.key, p))
    });
    if back.is_some() {
        return back;
    }
    let unplaced: Vec<Seen> = seen.iter().filter(|s| s.preferred.is_none()).cloned().collect();
    let seen = unplaced.as_slice();
    if voters.len() < 2 || seen.is_empty() {
        return None;
    }
    let share = seen.len().div_ceil(voters.len());
    let mut leads: BTreeMap<u64, usize> = voters.iter().map(|v| (*v, 0)).collect();
    for s in seen {
        if let Some(n) = s.leader.and_then(|l| leads.get_mut(&l)) {
            *n += 1;
        }
    }
    if leads.get(&me).copied().unwrap_or(0) <= share {
        return None;
    }
    let mut mine: Vec<&Seen> = seen.iter().filter(|s| s.leader == Some(me)).collect();
    mine.sort_by_key(|s| s.key);
    mine.iter()
        .filter_map(|s| {
            let to = s
                .in_sync
                .iter()
                .copied()
                .filter(|v| *v != me && leads.get(v).is_some_and(|n| *n < share))
                .min_by_key(|v| (leads[v], *v))?;
            Some((s.key, to, leads[&to]))
        })
        .min_by_key(|(_, to, n)| (*n, *to))
        .map(|(key, to, _)| (key, to))
}

/// Runs the balancer until the cluster is dropped.
pub(crate) fn spawn(cluster: &Arc<Cluster>, interval: Duration) {
    let weak: Weak<Cluster> = Arc::downgrade(cluster);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(cluster) = weak.upgrade() else { return };
            let seen = cluster.seen_partitions();
            let Some((key, to)) = plan(cluster.node_id, &cluster.voters(), &seen) else { continue };
            let Some(group) = cluster.groups.read().expect("groups lock").get(&key).cloned() else {
                continue;
            };
            match group.transfer_leader(to).await {
                Ok(()) => tracing::info!(
                    group = group.id(),
                    to,
                    "moved a partition's leadership to balance leaders"
                ),
                Err(e) => tracing::debug!(group = group.id(), to, error = %e, "leader transfer refused"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(p: u32, leader: Option<u64>, in_sync: &[u64]) -> Seen {
        Seen { key: ([0; 16], p), leader, in_sync: in_sync.to_vec(), preferred: None }
    }

    #[test]
    fn a_placed_partition_goes_back_to_its_in_sync_preferred_leader() {
        let mut s = seen(0, Some(1), &[1, 3]);
        s.preferred = Some(2);
        assert_eq!(plan(1, &[1, 2, 3], std::slice::from_ref(&s)), None, "node 2 is not in sync");
        s.in_sync = vec![1, 2];
        assert_eq!(plan(1, &[1, 2, 3], std::slice::from_ref(&s)), Some((([0; 16], 0), 2)));
        assert_eq!(plan(2, &[1, 2, 3], std::slice::from_ref(&s)), None, "node 2 does not lead it");
        // Placed partitions do not count toward the shares of unplaced ones.
        let mut mine = seen(1, Some(1), &[1, 2, 3]);
        mine.preferred = Some(1);
        let all = vec![mine, seen(2, Some(1), &[1, 2, 3]), seen(3, Some(2), &[1, 2, 3])];
        assert_eq!(plan(1, &[1, 2, 3], &all), None, "1 leads one unplaced partition of two: its share");
    }

    #[test]
    fn a_node_leading_everything_hands_one_to_the_least_loaded_in_sync_voter() {
        let all: Vec<Seen> = (0..6).map(|p| seen(p, Some(1), &[1, 2, 3])).collect();
        assert_eq!(plan(1, &[1, 2, 3], &all), Some((([0; 16], 0), 2)));
        // Node 2 has one now: the next goes to node 3.
        let mut next = all.clone();
        next[0].leader = Some(2);
        assert_eq!(plan(1, &[1, 2, 3], &next), Some((([0; 16], 1), 3)));
        // The others have nothing to give.
        assert_eq!(plan(2, &[1, 2, 3], &next), None);
    }

    #[test]
    fn balanced_leadership_and_single_nodes_stay_as_they_are() {
        let even: Vec<Seen> = (0..6).map(|p| seen(p, Some(u64::from(p % 3) + 1), &[1, 2, 3])).collect();
        for me in 1..=3 {
            assert_eq!(plan(me, &[1, 2, 3], &even), None);
        }
        // 7 partitions on 3 nodes: a share of 3, so 3-2-2 is balanced.
        let mut seven = even.clone();
        seven.push(seen(6, Some(1), &[1, 2, 3]));
        assert_eq!(plan(1, &[1, 2, 3], &seven), None);
        assert_eq!(plan(1, &[1], &[seen(0, Some(1), &[1])]), None);
        assert_eq!(plan(1, &[1, 2, 3], &[]), None);
    }

    #[test]
    fn only_an_in_sync_voter_below_its_share_gets_a_partition() {
        // Node 3 is behind on every partition, node 2 already has its share.
        let mut s: Vec<Seen> = (0..5).map(|p| seen(p, Some(1), &[1, 2])).collect();
        s.push(seen(5, Some(2), &[1, 2]));
        s[4].leader = Some(2);
        assert_eq!(plan(1, &[1, 2, 3], &s), None, "node 2 leads 2 = its share; node 3 lags");
        s[0].in_sync = vec![1, 2, 3];
        assert_eq!(plan(1, &[1, 2, 3], &s), Some((([0; 16], 0), 3)));
        // Partitions mid-election count for nobody.
        let electing: Vec<Seen> = (0..6).map(|p| seen(p, None, &[1, 2, 3])).collect();
        assert_eq!(plan(1, &[1, 2, 3], &electing), None);
    }
}
