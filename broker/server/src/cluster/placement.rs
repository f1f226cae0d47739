//! Where a partition's replicas live (docs/cluster.md, "Placement"). A topic is
//! created with `replication.factor` replicas per partition (default: 3, or every
//! node of a smaller cluster), placed round-robin over the members from the member
//! that is preferred leader of the fewest partitions, so replicas and preferred
//! leaders spread evenly. When every member names its rack (`cluster.rack`), the
//! members are walked in Kafka's rack-alternated order and a partition's replicas
//! take racks none of its other replicas has while any is left, as Kafka's
//! rack-aware assignment does; otherwise placement ignores racks. The first
//! replica listed is the preferred leader: it forms the group and the leader
//! balancer hands leadership back to it. The planning functions are pure: the
//! proposing node plans, the metadata log carries the plan, and every node applies
//! the same lists. A node a partition moved away from keeps its group open until
//! the group's membership no longer names it, so it can still help commit the
//! change (`spawn_retirer`); its log stays on disk until the topic is deleted.

use std::collections::{BTreeMap, BTreeSet};

use crate::service::error::{BrokerError, Result};
use crate::store::TopicMeta;

/// A topic's replication factor when creation names none: Kafka's usual 3, or
/// every node of a smaller cluster.
pub const DEFAULT_REPLICATION_FACTOR: usize = 3;

/// The replication factor asked for (`None`: the default), checked against the
/// members.
pub fn replication_factor(asked: Option<usize>, members: usize) -> Result<usize> {
    match asked {
        None => Ok(DEFAULT_REPLICATION_FACTOR.min(members)),
        Some(0) => Err(BrokerError::InvalidRequest("the replication factor must be at least 1".into())),
        Some(rf) if rf > members => Err(BrokerError::InvalidRequest(format!(
            "replication factor {rf} is larger than the {members} node(s) of this cluster; ask for at most \
             {members}, or add nodes first (es cluster add-node)"
        ))),
        Some(rf) => Ok(rf),
    }
}

/// Replicas for partitions `first..first + count` of a topic, `rf` each, over
/// `members` (sorted), whose racks are `racks` (ignored unless every member has
/// one): partition `first + i` starts at the member after the previous one's in
/// [`walk_order`], beginning with the member preferred by the fewest partitions
/// of `topics`, and takes the next members of that order, those in a rack it has
/// no replica in yet first.
pub fn place<'a>(
    members: &[u64],
    racks: &BTreeMap<u64, String>,
    rf: usize,
    count: u32,
    topics: impl Iterator<Item = &'a TopicMeta>,
) -> Vec<Vec<u64>> {
    let n = members.len();
    if n == 0 {
        return Vec::new();
    }
    let racks = known_racks(members, racks);
    let order = walk_order(members, racks);
    let preferred = preferred_counts(members, topics);
    let start = order
        .iter()
        .enumerate()
        .min_by_key(|(i, m)| (preferred.get(m).copied().unwrap_or(0), *i))
        .map_or(0, |(i, _)| i);
    (0..count as usize).map(|p| replicas_from(&order, racks, (start + p) % n, rf.min(n))).collect()
}

/// `racks` when every member has one, else none (placement ignores racks then,
/// as Kafka refuses rack-aware assignment over brokers some of which have none).
fn known_racks<'r>(members: &[u64], racks: &'r BTreeMap<u64, String>) -> &'r BTreeMap<u64, String> {
    static NONE: BTreeMap<u64, String> = BTreeMap::new();
    if members.iter().all(|m| racks.contains_key(m)) { racks } else { &NONE }
}

/// The order placement walks the members in: as given without racks; with racks,
/// Kafka's rack-alternated list (racks by name, each rack's next member taken in
/// turn), so neighbours sit in different racks.
fn walk_order(members: &[u64], racks: &BTreeMap<u64, String>) -> Vec<u64> {
    if racks.is_empty() {
        return members.to_vec();
    }
    let mut by_rack: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for m in members {
        by_rack.entry(racks[m].as_str()).or_default().push(*m);
    }
    let deepest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest).flat_map(|i| by_rack.values().filter_map(move |ms| ms.get(i).copied())).collect()
}

/// `rf` members of `order` from index `first` on: a member whose rack none chosen
/// so far has before any other (without racks, the next `rf`).
fn replicas_from(order: &[u64], racks: &BTreeMap<u64, String>, first: usize, rf: usize) -> Vec<u64> {
    let walk = || (0..order.len()).map(|k| order[(first + k) % order.len()]);
    let mut chosen: Vec<u64> = Vec::with_capacity(rf);
    let mut used = BTreeSet::new();
    for m in walk() {
        if chosen.len() < rf && racks.get(&m).is_none_or(|r| used.insert(r)) {
            chosen.push(m);
        }
    }
    for m in walk() {
        if chosen.len() < rf && !chosen.contains(&m) {
            chosen.push(m);
        }
    }
    chosen
}

/// How many placed partitions each member is the preferred leader of.
fn preferred_counts<'a>(
    members: &[u64],
    topics: impl Iterator<Item = &'a TopicMeta>,
) -> BTreeMap<u64, usize> {
    let mut counts: BTreeMap<u64, usize> = members.iter().map(|m| (*m, 0)).collect();
    for t in topics {
        for r in t.replicas.iter().flatten() {
            if let Some(c) = r.first().and_then(|m| counts.get_mut(m)) {
                *c += 1;
            }
        }
    }
    counts
}

/// Checks replicas an operator asks for (`es cluster move`): at least one, no
/// node twice, every one a member.
pub fn check_replicas(replicas: &[u64], members: &BTreeSet<u64>) -> Result<()> {
    if replicas.is_empty() {
        return Err(BrokerError::InvalidRequest("name at least one replica".into()));
    }
    let unique: BTreeSet<u64> = replicas.iter().copied().collect();
    if unique.len() != replicas.len() {
        return Err(BrokerError::InvalidRequest(format!("{replicas:?} names a node twice")));
    }
    if let Some(stranger) = replicas.iter().find(|r| !members.contains(r)) {
        return Err(BrokerError::InvalidRequest(format!(
            "node {stranger} is not a member of this cluster; its members are {members:?}"
        )));
    }
    Ok(())
}

/// What removing node `gone` moves: each placed partition it replicates gets the
/// remaining member that holds the fewest replicas in its place (at the same
/// position, so a preferred leader's place goes to its replacement), one in a
/// rack the partition's other replicas are not in first when every member's rack
/// is known (`racks`), or loses it when every other member already replicates
/// that partition. Answers (topic, partition, new replicas) in topic and
/// partition order.
pub fn without_node<'a>(
    gone: u64,
    members: &BTreeSet<u64>,
    racks: &BTreeMap<u64, String>,
    topics: impl Iterator<Item = &'a TopicMeta> + Clone,
) -> Vec<(String, u32, Vec<u64>)> {
    // The removed node's rack is never used: it may be down and unheard of.
    let remaining: Vec<u64> = members.iter().copied().filter(|m| *m != gone).collect();
    let racks = known_racks(&remaining, racks);
    let mut load: BTreeMap<u64, usize> = remaining.iter().map(|m| (*m, 0)).collect();
    for t in topics.clone() {
        for r in t.replicas.iter().flatten() {
            for m in r {
                if let Some(c) = load.get_mut(m) {
                    *c += 1;
                }
            }
        }
    }
    let mut sorted: Vec<&TopicMeta> = topics.collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut moves = Vec::new();
    for t in sorted {
        for (p, r) in t.replicas.iter().flatten().enumerate() {
            let Some(at) = r.iter().position(|m| *m == gone) else { continue };
            let taken: BTreeSet<&String> =
                r.iter().filter(|m| **m != gone).filter_map(|m| racks.get(m)).collect();
            let spare = load
                .iter()
                .filter(|(m, _)| !r.contains(m))
                .min_by_key(|(m, c)| (racks.get(*m).is_some_and(|rack| taken.contains(rack)), **c, **m))
                .map(|(m, _)| *m);
            let mut next = r.clone();
            match spare {
                Some(s) => {
                    next[at] = s;
                    *load.get_mut(&s).expect("a member") += 1;
                }
                None => {
                    next.remove(at);
                }
            }
            moves.push((t.name.clone(), p as u32, next));
        }
    }
    moves
}

/// How often moved-away groups are checked.
const RETIRE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Closes the groups of partitions moved away from this node once their
/// membership, as this node's log has it, no longer names it, and discards the
/// copies they leave here. Ends with the cluster.
pub(super) fn spawn_retirer(cluster: &std::sync::Arc<super::Cluster>) {
    let weak = std::sync::Arc::downgrade(cluster);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RETIRE_EVERY).await;
            let Some(cluster) = weak.upgrade() else { return };
            let keys: Vec<super::PartitionKey> =
                cluster.retiring.lock().expect("retiring lock").iter().copied().collect();
            for key in keys {
                let group = cluster.groups.read().expect("groups lock").get(&key).cloned();
                let done = match &group {
                    None => true,
                    Some(g) => {
                        !g.membership_nodes().contains(&cluster.node_id)
                            || left(&cluster, g.id(), g.leader()).await
                    }
                };
                if done {
                    retire(&cluster, key).await;
                }
            }
        }
    });
}

/// Closes a moved-away partition's group here and discards this node's copy of
/// its log (Kafka's StopReplica with delete), unless it was placed here again
/// since (moved back) or its topic is gone (its deletion closed the group). The
/// copy goes only once the group stopped here and its leader's committed
/// membership, asked again after that, still does not name this node: a move
/// back that re-added it in between keeps it (it may count toward a majority).
async fn retire(cluster: &super::Cluster, key: super::PartitionKey) {
    let _placing = cluster.placing.lock().await;
    cluster.retiring.lock().expect("retiring lock").remove(&key);
    let Some(topic) = cluster.registry.topic_by_id(key.0) else { return };
    if cluster.registry.hosts(&topic, key.1) {
        return;
    }
    let group_id = super::group_id(&topic.id, key.1);
    let removed = cluster.groups.write().expect("groups lock").remove(&key);
    let local_leader = removed.as_ref().and_then(es_raft::Group::leader);
    if removed.is_some() && !cluster.host.close_group(group_id).await {
        tracing::warn!(topic = %topic.name(), partition = key.1, "a moved-away partition's group did not stop in time; its copy is kept until the next start");
        return;
    }
    let Some(log) = topic.partitions.get(key.1 as usize) else { return };
    let has_vote = log.read_raft_file(es_log::RaftFile::Vote).map(|v| v.is_some()).unwrap_or(true);
    if has_vote && !left(cluster, group_id, local_leader).await {
        // Asked again later (no group open: `done` at once, then this check).
        cluster.retiring.lock().expect("retiring lock").insert(key);
        return;
    }
    match discard(log).await {
        Ok(bytes) => tracing::info!(
            topic = %topic.name(),
            partition = key.1,
            bytes,
            "a partition moved away: its group is closed here and this node's copy discarded"
        ),
        Err(e) => tracing::warn!(
            topic = %topic.name(),
            partition = key.1,
            error = %e,
            "a partition moved away but discarding this node's copy failed; the next start retries"
        ),
    }
}

/// At start: a partition not placed here in whose group this node holds no vote
/// may still have a copy (the node stopped while discarding it): it goes. A
/// failure is logged; the start goes on (the copy serves nobody).
pub(super) async fn discard_leftover(
    topic: &str,
    partition: u32,
    log: &std::sync::Arc<es_log::PartitionLog>,
) {
    match discard(log).await {
        Ok(0) => {}
        Ok(bytes) => {
            tracing::info!(
                topic,
                partition,
                bytes,
                "a copy of a partition moved away from this node is discarded"
            )
        }
        Err(e) => {
            tracing::warn!(topic, partition, error = %e, "discarding a moved-away copy failed; the next start retries")
        }
    }
}

/// Discards `log`'s copy if it holds one; the bytes it held.
async fn discard(log: &std::sync::Arc<es_log::PartitionLog>) -> Result<u64> {
    let log = log.clone();
    tokio::task::spawn_blocking(move || {
        if !log.holds_replica_state()? {
            return Ok(0);
        }
        let info = log.info();
        log.discard_replica()?;
        Ok(info.size_bytes + info.cold_size_bytes)
    })
    .await
    .map_err(|e| BrokerError::Internal(format!("the discard task failed: {e}")))?
}

/// Whether group `id`'s leader (as this node's group last named it, or the
/// leaders' announcements) has a committed membership without this node: the
/// leader never sends a node the entry that removes it, so its own log may name
/// it forever. Unknown (no leader answers): false.
async fn left(cluster: &super::Cluster, id: u64, local_leader: Option<u64>) -> bool {
    let me = cluster.node_id;
    let mut asked = BTreeSet::new();
    let candidates = [local_leader, cluster.directory.leader(id).map(|(l, _)| l)];
    for leader in candidates.into_iter().flatten() {
        if leader == me || !asked.insert(leader) {
            continue;
        }
        if let Some(nodes) = super::directory::ask_membership(cluster, leader, id).await {
            return !nodes.contains(&me);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, replicas: Vec<Vec<u64>>) -> TopicMeta {
        TopicMeta {
            name: name.into(),
            partitions: replicas.len() as u32,
            config: Default::default(),
            created_ms: 0,
            validators: Vec::new(),
            topic_id: None,
            replicas: Some(replicas),
            moved: Default::default(),
        }
    }

    #[test]
    fn replicas_and_preferred_leaders_spread_round_robin() {
        let none = BTreeMap::new();
        let placed = place(&[1, 2, 3, 4], &none, 2, 4, std::iter::empty());
        assert_eq!(placed, vec![vec![1, 2], vec![2, 3], vec![3, 4], vec![4, 1]]);
        // The next topic starts at the member preferred by the fewest.
        let first = topic("a", vec![vec![1, 2], vec![2, 3]]);
        let next = place(&[1, 2, 3, 4], &none, 3, 2, [&first].into_iter());
        assert_eq!(next, vec![vec![3, 4, 1], vec![4, 1, 2]]);
        // A factor as large as the cluster: every member, each preferred in turn.
        assert_eq!(
            place(&[1, 2, 3], &none, 3, 3, std::iter::empty()),
            vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]
        );
        // A rack known for some members only: racks are ignored.
        let some = racks(&[(1, "a"), (2, "a")]);
        assert_eq!(place(&[1, 2, 3, 4], &some, 2, 4, std::iter::empty()), placed);
    }

    fn racks(of: &[(u64, &str)]) -> BTreeMap<u64, String> {
        of.iter().map(|(m, r)| (*m, (*r).to_owned())).collect()
    }

    fn racks_of(replicas: &[u64], racks: &BTreeMap<u64, String>) -> BTreeSet<String> {
        replicas.iter().map(|m| racks[m].clone()).collect()
    }

    #[test]
    fn with_every_rack_known_a_partitions_replicas_span_the_racks() {
        // Two racks of three, ids interleaved with the racks as they often are not.
        let six = racks(&[(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "b"), (6, "b")]);
        let members = [1, 2, 3, 4, 5, 6];
        let placed = place(&members, &six, 2, 6, std::iter::empty());
        // Rack-unaware, [1, 2] would sit in rack a alone.
        assert_eq!(placed, vec![vec![1, 4], vec![4, 2], vec![2, 5], vec![5, 3], vec![3, 6], vec![6, 1]]);
        for r in &placed {
            assert_eq!(racks_of(r, &six).len(), 2, "{r:?}");
        }
        // Three racks of unequal sizes, factor 3: every partition in all three,
        // preferred leaders on every member in turn.
        let uneven = racks(&[(1, "a"), (2, "b"), (3, "c"), (4, "a"), (5, "c")]);
        let placed = place(&[1, 2, 3, 4, 5], &uneven, 3, 5, std::iter::empty());
        for r in &placed {
            assert_eq!(racks_of(r, &uneven).len(), 3, "{r:?}");
        }
        let leaders: BTreeSet<u64> = placed.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, BTreeSet::from([1, 2, 3, 4, 5]));
        // More replicas than racks: every rack first, then the rest.
        let placed = place(&members, &six, 3, 1, std::iter::empty());
        assert_eq!(placed, vec![vec![1, 4, 2]]);
    }

    #[test]
    fn the_factor_defaults_to_three_and_never_exceeds_the_members() {
        assert_eq!(replication_factor(None, 5).unwrap(), 3);
        assert_eq!(replication_factor(None, 2).unwrap(), 2);
        assert_eq!(replication_factor(Some(1), 3).unwrap(), 1);
        assert!(replication_factor(Some(4), 3).unwrap_err().to_string().contains("larger than the 3 node"));
        assert!(replication_factor(Some(0), 3).is_err());
    }

    #[test]
    fn asked_replicas_are_distinct_members() {
        let members = BTreeSet::from([1, 2, 3, 4]);
        assert!(check_replicas(&[1, 4], &members).is_ok());
        assert!(check_replicas(&[], &members).is_err());
        assert!(check_replicas(&[1, 1], &members).unwrap_err().to_string().contains("twice"));
        assert!(
            check_replicas(&[1, 9], &members).unwrap_err().to_string().contains("node 9 is not a member")
        );
    }

    #[test]
    fn a_removed_node_is_replaced_by_the_least_loaded_spare_or_dropped() {
        let members = BTreeSet::from([1, 2, 3, 4]);
        let a = topic("a", vec![vec![3, 1], vec![1, 2], vec![2, 3]]);
        let b = topic("b", vec![vec![1, 2, 3]]);
        let moves = without_node(3, &members, &BTreeMap::new(), [&a, &b].into_iter());
        // Loads without 3: 1 -> 3, 2 -> 3, 4 -> 0: node 4 takes 3's places first.
        assert_eq!(
            moves,
            vec![("a".into(), 0, vec![4, 1]), ("a".into(), 2, vec![2, 4]), ("b".into(), 0, vec![1, 2, 4]),]
        );
        // Three members, a partition on all of them: it loses the node.
        let three = BTreeSet::from([1, 2, 3]);
        assert_eq!(
            without_node(3, &three, &BTreeMap::new(), [&b].into_iter()),
            vec![("b".into(), 0, vec![1, 2])]
        );
        // With racks: the spare in the rack the partition lost, though it holds more.
        let four = racks(&[(1, "a"), (2, "b"), (3, "b"), (4, "a")]);
        let c = topic("c", vec![vec![1, 3]]);
        let d = topic("d", vec![vec![2, 1], vec![2, 4]]);
        // Loads without 3: 1 -> 2, 2 -> 2, 4 -> 1; node 4 is least loaded but in rack a.
        assert_eq!(without_node(3, &members, &four, [&c, &d].into_iter()), vec![("c".into(), 0, vec![1, 2])]);
        // The removed node's rack unknown (down since this node started): the same.
        let unheard = racks(&[(1, "a"), (2, "b"), (4, "a")]);
        assert_eq!(
            without_node(3, &members, &unheard, [&c, &d].into_iter()),
            vec![("c".into(), 0, vec![1, 2])]
        );
    }
}
