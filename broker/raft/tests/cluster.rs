//! Three Raft hosts in one process on 127.0.0.1, each with its own data directory
//! and es-log manager, talking over real es-peer links: elections, proposals from
//! concurrent tasks, every acknowledged batch at its offset on every replica,
//! byte-identical replicas, failover and a restarted node catching up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use es_core::{LeaderEpoch, ProducerInfo, Record};
use es_log::{LogConfig, LogManager, ManagerOptions, PartitionLog};
use es_peer::{PeerConfig, Secret, Secrets, Timeouts};
use es_raft::{Group, ProposeError, RaftHost, Timers};
use tokio::net::TcpListener;

const SECRET: &[u8] = b"a shared cluster secret for raft tests";
const VOTERS: [u64; 3] = [1, 2, 3];
/// Short timers so elections in tests take a second or two; `ES_RAFT_DEFAULT_TIMERS=1`
/// runs with the defaults (to measure failover as the broker will see it).
fn timers() -> Timers {
    if std::env::var_os("ES_RAFT_DEFAULT_TIMERS").is_some() {
        return Timers::default();
    }
    Timers { heartbeat_ms: 100, election_min_ms: 600, election_max_ms: 1200, ..Timers::default() }
}
const WAIT: Duration = Duration::from_secs(30);

fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Fields drop in order: the host and the log manager before the directory.
struct Node {
    id: u64,
    timers: Timers,
    host: Option<RaftHost>,
    groups: BTreeMap<u64, Group>,
    manager: Option<LogManager>,
    dir: tempfile::TempDir,
}

impl Node {
    fn host(&self) -> &RaftHost {
        self.host.as_ref().expect("node is running")
    }

    fn log(&self, group: u64) -> &Arc<PartitionLog> {
        self.groups[&group].log()
    }
}

fn peer_config(id: u64, addrs: &BTreeMap<u64, String>) -> PeerConfig {
    let ms = Duration::from_millis;
    let timeouts = Timeouts {
        connect: ms(500),
        handshake: ms(1000),
        request: ms(2000),
        backoff_min: ms(10),
        backoff_max: ms(200),
        keepalive: ms(100),
        idle: ms(2000),
    };
    let peers = addrs.iter().filter(|(p, _)| **p != id).map(|(p, a)| (*p, a.clone())).collect();
    PeerConfig { node_id: id, peers, secrets: Secrets::single(Secret::new(1, SECRET)), timeouts, tls: None }
}

/// Starts (or restarts, over the same directory) node `node.id` with `groups`.
async fn start(node: &mut Node, listener: TcpListener, addrs: &BTreeMap<u64, String>, groups: &[u64]) {
    let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let manager = LogManager::new(node.dir.path(), opts).unwrap();
    let host = RaftHost::start(peer_config(node.id, addrs), listener, node.timers, None).unwrap();
    for &g in groups {
        let (log, _) = manager.open_partition(&format!("g-{g}"), LogConfig::default()).unwrap();
        let group = host.open_group(g, log, &VOTERS).await.unwrap();
        node.groups.insert(g, group);
    }
    node.manager = Some(manager);
    node.host = Some(host);
}

async fn cluster(groups: &[u64]) -> (Vec<Node>, BTreeMap<u64, String>) {
    cluster_with(groups, timers()).await
}

async fn cluster_with(groups: &[u64], timers: Timers) -> (Vec<Node>, BTreeMap<u64, String>) {
    logs();
    let mut listeners = Vec::new();
    let mut addrs = BTreeMap::new();
    for id in VOTERS {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.insert(id, l.local_addr().unwrap().to_string());
        listeners.push(l);
    }
    let mut nodes = Vec::new();
    for (id, l) in VOTERS.into_iter().zip(listeners) {
        let mut node = Node {
            id,
            timers,
            host: None,
            groups: BTreeMap::new(),
            manager: None,
            dir: tempfile::tempdir().unwrap(),
        };
        start(&mut node, l, &addrs, groups).await;
        assert_eq!(node.host().node_id(), id);
        assert_eq!(node.host().peer_addr().to_string(), addrs[&id]);
        nodes.push(node);
    }
    (nodes, addrs)
}

async fn stop_all(nodes: &mut [Node]) {
    for n in nodes {
        if let Some(host) = n.host.take() {
            host.shutdown().await;
        }
        n.groups.clear();
        if let Some(m) = n.manager.take() {
            m.shutdown().unwrap();
        }
    }
}

/// Polls `cond` until it holds or `limit` passes.
async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !cond() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// The node every running member agrees leads `group`, once they do.
async fn leader_of(nodes: &[Node], group: u64) -> u64 {
    let running: Vec<&Node> = nodes.iter().filter(|n| n.host.is_some()).collect();
    let mut leader = None;
    let agreed = wait_until(WAIT, || {
        let seen: Vec<Option<u64>> = running.iter().map(|n| n.groups[&group].leader()).collect();
        leader = seen[0];
        let Some(l) = leader else { return false };
        seen.iter().all(|s| *s == Some(l))
            && running.iter().any(|n| n.id == l && n.groups[&group].is_leader())
    })
    .await;
    assert!(agreed, "no agreed leader for group {group} within {WAIT:?}");
    leader.unwrap()
}

fn node(nodes: &[Node], id: u64) -> &Node {
    nodes.iter().find(|n| n.id == id).unwrap()
}

fn batch(value: &str) -> Vec<u8> {
    es_core::batch::encode(&[Record::from_value(value.to_owned())], 1_000, ProducerInfo::NONE).unwrap()
}

/// Proposes `count` one-record batches from `tasks` concurrent tasks; answers
/// (offset, value) of every acknowledged one.
async fn propose_many(group: &Group, prefix: &str, tasks: usize, count: usize) -> Vec<(u64, String)> {
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let (group, prefix) = (group.clone(), prefix.to_owned());
        set.spawn(async move {
            let mut acked = Vec::new();
            for i in (t..count).step_by(tasks) {
                let value = format!("{prefix}-{i}");
                let a = group.propose(batch(&value)).await.unwrap();
                assert_eq!(a.base_offset, a.last_offset, "one record per batch");
                acked.push((a.base_offset, value));
            }
            acked
        });
    }
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r.unwrap());
    }
    all.sort();
    all
}

/// The value of the record at `offset` as `log` serves it.
fn value_at(log: &PartitionLog, offset: u64) -> Option<String> {
    let read = log.read(offset, 1).ok()?;
    let batch = read.batches().next()?;
    let rec = batch.records().find_map(|r| r.ok().filter(|r| r.offset == offset))?;
    Some(String::from_utf8(rec.value?.to_vec()).unwrap())
}

/// Every acknowledged batch is at its offset on every running replica of
/// `group`, and the replicas hold the same entries, byte for byte.
async fn check_replicas(nodes: &[Node], group: u64, acked: &[(u64, String)]) {
    let running: Vec<&Node> = nodes.iter().filter(|n| n.host.is_some()).collect();
    let end = acked.iter().map(|(o, _)| o + 1).max().unwrap_or(0);
    let caught_up = wait_until(WAIT, || {
        let ranges: Vec<_> = running.iter().map(|n| n.log(group).entry_range()).collect();
        running.iter().all(|n| n.log(group).high_watermark() >= end) && ranges.iter().all(|r| *r == ranges[0])
    })
    .await;
    assert!(caught_up, "group {group}: replicas did not all reach offset {end}");
    for n in &running {
        for (offset, value) in acked {
            assert_eq!(value_at(n.log(group), *offset).as_deref(), Some(value.as_str()), "node {}", n.id);
        }
    }
    let entries = |n: &Node| {
        let r = n.log(group).entry_range();
        n.log(group).read_entries(r.first, r.next, usize::MAX).unwrap()
    };
    let first = entries(running[0]);
    for n in &running[1..] {
        assert!(entries(n) == first, "node {} differs from node {}", n.id, running[0].id);
    }
    let served = |n: &Node| n.log(group).read(0, 64 << 20).unwrap().data;
    for n in &running[1..] {
        assert_eq!(served(n), served(running[0]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_group_elects_replicates_and_refuses_proposals_on_followers() {
    let (mut nodes, _addrs) = cluster(&[7]).await;
    let leader = leader_of(&nodes, 7).await;
    let lead = &node(&nodes, leader).groups[&7];
    for n in nodes.iter().filter(|n| n.id != leader) {
        let err = n.groups[&7].propose(batch("nope")).await.unwrap_err();
        assert!(matches!(err, ProposeError::NotLeader { leader: Some(l) } if l == leader), "{err:?}");
    }
    assert!(lead.leader_epoch() > LeaderEpoch(0), "term 1 or later");
    assert!(matches!(lead.propose(vec![1, 2, 3]).await, Err(ProposeError::Rejected(_))));

    // A follower's watermark never passes its committed offset, nor what it holds
    // durably, nor what the leader holds, and never moves back. (Not "the leader's
    // watermark": each replica applies on its own task, and a follower told of a
    // commit may apply it before the leader's state machine gets to it.)
    let watch_logs: Vec<(Arc<PartitionLog>, Arc<PartitionLog>)> =
        nodes.iter().filter(|n| n.id != leader).map(|n| (n.log(7).clone(), lead.log().clone())).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut last = vec![0u64; watch_logs.len()];
            let mut samples = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                for (i, (follower, leader)) in watch_logs.iter().enumerate() {
                    let f = follower.high_watermark();
                    let l = leader.info().log_end_offset;
                    assert!(f <= l, "a follower's watermark {f} passed the leader's log end {l}");
                    assert!(f <= follower.committed_offset().unwrap());
                    assert!(f <= follower.info().log_end_offset);
                    assert!(f >= last[i], "the watermark moved back");
                    last[i] = f;
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples
        })
    };
    let acked = propose_many(lead, "a", 8, 200).await;
    assert_eq!(acked.iter().map(|(o, _)| *o).collect::<Vec<_>>(), (0..200).collect::<Vec<_>>());
    check_replicas(&nodes, 7, &acked).await;
    stop.store(true, std::sync::atomic::Ordering::Release);
    assert!(watcher.await.unwrap() > 0);

    // Once idle, the leader's replication state has every voter at the commit.
    assert!(wait_until(WAIT, || lead.status().in_sync == VOTERS.to_vec()).await, "{:?}", lead.status());
    let status = lead.status();
    assert_eq!((status.leader, status.voters.clone()), (Some(leader), VOTERS.to_vec()));
    assert_eq!(status.committed_offset, 200);
    assert!(status.in_sync.contains(&leader));
    stop_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_failure_elects_a_new_leader_and_a_restarted_node_catches_up() {
    let groups = [1u64, 2, 3];
    let (mut nodes, addrs) = cluster(&groups).await;
    let mut acked: BTreeMap<u64, Vec<(u64, String)>> = BTreeMap::new();
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        acked.insert(g, propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-a"), 4, 40).await);
    }
    let old = leader_of(&nodes, 1).await;
    let old_group = node(&nodes, old).groups[&1].clone();
    let mut epochs = node(&nodes, old).groups[&1].watch_leader();
    let old_epoch = epochs.borrow_and_update().1;
    // The leader's host goes away.
    let seen: BTreeMap<u64, u64> =
        groups.iter().map(|&g| (g, node(&nodes, old).log(g).high_watermark())).collect();
    {
        let n = nodes.iter_mut().find(|n| n.id == old).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
    }
    let err = old_group.propose(batch("late")).await.unwrap_err();
    assert!(matches!(err, ProposeError::NotLeader { .. } | ProposeError::Shutdown), "{err:?}");

    let started = std::time::Instant::now();
    let new = leader_of(&nodes, 1).await;
    assert_ne!(new, old);
    let elapsed = started.elapsed();
    let lead = node(&nodes, new).groups[&1].clone();
    assert!(lead.leader_epoch() > old_epoch, "a new term");
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        let more = propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-b"), 4, 40).await;
        acked.get_mut(&g).unwrap().extend(more);
        check_replicas(&nodes, g, &acked[&g]).await;
    }
    eprintln!("group 1: new leader {new} {elapsed:?} after the old one ({old}) stopped");

    // The old leader restarts over the same directory and catches up.
    let listener = TcpListener::bind(&addrs[&old]).await.unwrap();
    let n = nodes.iter_mut().find(|n| n.id == old).unwrap();
    n.groups.clear();
    start(n, listener, &addrs, &groups).await;
    for &g in &groups {
        // What readers saw before the restart is served again at once.
        assert!(n.log(g).high_watermark() >= seen[&g], "group {g}: the watermark moved back");
    }
    for &g in &groups {
        check_replicas(&nodes, g, &acked[&g]).await;
    }
    // And it serves as a follower: a proposal there names the leader.
    let leader = leader_of(&nodes, 1).await;
    if leader != old {
        let err = node(&nodes, old).groups[&1].propose(batch("x")).await.unwrap_err();
        assert!(matches!(err, ProposeError::NotLeader { leader: Some(l) } if l == leader), "{err:?}");
    }
    stop_all(&mut nodes).await;
}

/// With the broker's default timers (elections after 1.5-3 s of silence, a 3 s
/// lease), a leader whose process goes away is replaced well within one election
/// timeout: its links go down, and the followers hand its groups to one successor
/// at once (`RaftHost`'s "elect on link loss") instead of waiting out the lease
/// and their election timers (about 5 s here before). Nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_leaders_groups_get_a_new_leader_within_an_election_timeout() {
    let groups = [21u64, 22];
    let (mut nodes, _addrs) = cluster_with(&groups, Timers::default()).await;
    let mut acked: BTreeMap<u64, Vec<(u64, String)>> = BTreeMap::new();
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        acked.insert(g, propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-a"), 2, 20).await);
    }
    // Both groups led by one node, so its loss needs both hand-overs.
    let old = leader_of(&nodes, 21).await;
    if leader_of(&nodes, 22).await != old {
        node(&nodes, leader_of(&nodes, 22).await).groups[&22].transfer_leader(old).await.unwrap();
        assert!(wait_until(WAIT, || node(&nodes, old).groups[&22].is_leader()).await);
    }
    let old_epochs: BTreeMap<u64, LeaderEpoch> =
        groups.iter().map(|&g| (g, node(&nodes, old).groups[&g].leader_epoch())).collect();
    {
        let n = nodes.iter_mut().find(|n| n.id == old).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
        n.groups.clear();
    }
    let started = std::time::Instant::now();
    for &g in &groups {
        let new = leader_of(&nodes, g).await;
        assert_ne!(new, old);
    }
    let elapsed = started.elapsed();
    eprintln!("both groups led again {elapsed:?} after their leader ({old}) went away");
    let election_min = Duration::from_millis(Timers::default().election_min_ms);
    assert!(elapsed < election_min, "failover took {elapsed:?}: the election timers', not the link loss's");
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        let lead = node(&nodes, leader).groups[&g].clone();
        assert!(lead.leader_epoch() > old_epochs[&g], "group {g}: a new term");
        acked.get_mut(&g).unwrap().extend(propose_many(&lead, &format!("g{g}-b"), 2, 20).await);
        check_replicas(&nodes, g, &acked[&g]).await;
    }
    stop_all(&mut nodes).await;
}

/// A leader whose followers all stop is fenced once its links to them are down (or,
/// links open, once a lease passes without a quorum's answer): the proposal it was waiting on answers
/// `NotLeader` well before the proposal timeout, it names no leader (metadata then
/// answers LEADER_NOT_AVAILABLE rather than a stale claim), and new proposals are
/// refused at once. With the followers back, the group has one writable leader again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_without_a_quorum_is_fenced_within_a_lease_and_recovers() {
    let (mut nodes, addrs) = cluster(&[9]).await;
    let leader = leader_of(&nodes, 9).await;
    let lead = node(&nodes, leader).groups[&9].clone();
    let mut acked = propose_many(&lead, "before", 2, 10).await;
    assert!(!lead.fenced() && !lead.status().fenced);
    let followers: Vec<u64> = VOTERS.into_iter().filter(|v| *v != leader).collect();
    for id in &followers {
        let n = nodes.iter_mut().find(|n| n.id == *id).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
        n.groups.clear();
    }
    let started = std::time::Instant::now();
    let err = lead.propose(batch("cut off")).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, ProposeError::LeadershipLost { leader: None }), "{err:?}");
    let timeout = Duration::from_millis(es_raft::limits::PROPOSE_TIMEOUT_MS);
    assert!(waited < timeout / 2, "the fenced leader held the proposal {waited:?}");
    // Its links to both followers went down: fenced then, not a lease later.
    let lease = Duration::from_millis(timers().election_max_ms);
    assert!(waited < lease, "fenced after {waited:?}, a lease ({lease:?}) or more after its links went down");
    assert!(lead.fenced() && lead.status().fenced, "{:?}", lead.status());
    assert_eq!((lead.leader(), lead.is_leader(), lead.status().leader), (None, false, None));
    let refused = std::time::Instant::now();
    let err = lead.propose(batch("still cut off")).await.unwrap_err();
    assert!(matches!(err, ProposeError::NotLeader { leader: None }), "{err:?}");
    assert!(refused.elapsed() < timeout / 2, "a fenced leader refuses at once: {:?}", refused.elapsed());
    eprintln!("fenced: the in-flight proposal answered LeadershipLost after {waited:?}");

    for id in &followers {
        let listener = TcpListener::bind(&addrs[id]).await.unwrap();
        let n = nodes.iter_mut().find(|n| n.id == *id).unwrap();
        start(n, listener, &addrs, &[9]).await;
    }
    let now = leader_of(&nodes, 9).await;
    assert!(!node(&nodes, now).groups[&9].fenced());
    acked.extend(propose_many(&node(&nodes, now).groups[&9], "after", 2, 10).await);
    check_replicas(&nodes, 9, &acked).await;
    stop_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idempotent_retry_answers_its_offsets_leadership_transfers_and_close_group_stops_it() {
    let (mut nodes, _addrs) = cluster(&[5]).await;
    let leader = leader_of(&nodes, 5).await;
    let host = node(&nodes, leader).host().clone();
    let lead = node(&nodes, leader).groups[&5].clone();
    let producer = ProducerInfo { producer_id: 11, producer_epoch: 0, base_sequence: 0 };
    let first = es_core::batch::encode(&[Record::from_value("once".to_owned())], 1_000, producer).unwrap();
    let a = lead.propose(first.clone()).await.unwrap();
    let again = lead.propose(first).await.unwrap();
    assert_eq!((again.base_offset, again.last_offset, again.duplicate), (a.base_offset, a.last_offset, true));
    let gap = ProducerInfo { base_sequence: 9, ..producer };
    let out_of_order = es_core::batch::encode(&[Record::from_value("gap".to_owned())], 1_000, gap).unwrap();
    assert!(matches!(lead.propose(out_of_order).await, Err(ProposeError::Rejected(_))));
    // Leadership moves on request, and the watch sees the new leader and term.
    let to = VOTERS.into_iter().find(|v| *v != leader).unwrap();
    let mut watch = lead.watch_leader();
    let term = watch.borrow_and_update().1;
    lead.transfer_leader(to).await.unwrap();
    let moved = tokio::time::timeout(WAIT, watch.wait_for(|(l, t)| *l == Some(to) && *t > term)).await;
    assert!(matches!(moved, Ok(Ok(_))), "leadership did not move to {to}: {:?}", lead.status());
    assert!(wait_until(WAIT, || node(&nodes, to).groups[&5].is_leader()).await);
    let err = lead.transfer_leader(leader).await.unwrap_err();
    assert!(matches!(err, ProposeError::NotLeader { .. }), "only the leader transfers: {err:?}");
    host.close_group(5).await;
    assert!(matches!(lead.propose(batch("closed")).await, Err(ProposeError::Shutdown)));
    assert!(!lead.is_leader());
    stop_all(&mut nodes).await;
}

/// A follower that was down while the leader took thousands of entries is asked
/// to lead as soon as it is back: the transfer waits for it to hold the leader's
/// log first (openraft's leader refuses proposals while a transfer is pending),
/// then it leads, with every acknowledged entry, and takes proposals at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transfer_to_a_follower_that_missed_entries_waits_until_it_caught_up() {
    let (mut nodes, addrs) = cluster(&[6]).await;
    let leader = leader_of(&nodes, 6).await;
    let lead = node(&nodes, leader).groups[&6].clone();
    let mut acked = propose_many(&lead, "before", 2, 10).await;
    let to = VOTERS.into_iter().find(|v| *v != leader).unwrap();
    {
        let n = nodes.iter_mut().find(|n| n.id == to).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
        n.groups.clear();
    }
    acked.extend(propose_many(&lead, "missed", 8, 400).await);
    let listener = TcpListener::bind(&addrs[&to]).await.unwrap();
    let n = nodes.iter_mut().find(|n| n.id == to).unwrap();
    start(n, listener, &addrs, &[6]).await;
    let started = std::time::Instant::now();
    lead.transfer_leader(to).await.unwrap();
    assert!(wait_until(WAIT, || node(&nodes, to).groups[&6].is_leader()).await, "{:?}", lead.status());
    let new = node(&nodes, to).groups[&6].clone();
    let answered = tokio::time::timeout(Duration::from_secs(5), new.propose(batch("after"))).await;
    assert!(matches!(answered, Ok(Ok(_))), "the new leader takes proposals: {answered:?}");
    eprintln!("transferred to the restarted follower in {:?}", started.elapsed());
    acked.extend(propose_many(&new, "after", 2, 10).await);
    check_replicas(&nodes, 6, &acked).await;
    stop_all(&mut nodes).await;
}

/// Node 3 is a bare peer node (no Raft): what it sends a host's Raft kinds is
/// refused with typed failures, and kinds >= 128 go to the broker's handlers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_raft_rpcs_are_typed_failures_and_broker_kinds_reach_the_app_handler() {
    use es_peer::{PeerError, PeerNode, handler};
    logs();
    let mut listeners = Vec::new();
    let mut addrs = BTreeMap::new();
    for id in VOTERS {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.insert(id, l.local_addr().unwrap().to_string());
        listeners.push(l);
    }
    let mut listeners = listeners.into_iter();
    let app = handler(|from, _group, kind, payload: bytes::Bytes| async move {
        Ok(bytes::Bytes::from(format!("app {from} {kind} {}", String::from_utf8_lossy(&payload))))
    });
    let one =
        RaftHost::start(peer_config(1, &addrs), listeners.next().unwrap(), timers(), Some(app)).unwrap();
    let two = RaftHost::start(peer_config(2, &addrs), listeners.next().unwrap(), timers(), None).unwrap();
    let bare = handler(|_, _, _, _| async { Ok(bytes::Bytes::from_static(b"three")) });
    let three = PeerNode::start(peer_config(3, &addrs), listeners.next().unwrap(), bare).unwrap();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let opts = || ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let managers =
        [LogManager::new(dirs[0].path(), opts()).unwrap(), LogManager::new(dirs[1].path(), opts()).unwrap()];
    let mut groups = Vec::new();
    for (host, m) in [&one, &two].into_iter().zip(&managers) {
        let (log, _) = m.open_partition("g-7", LogConfig::default()).unwrap();
        groups.push(host.open_group(7, log.clone(), &[1, 2]).await.unwrap());
        let again = host.open_group(7, log, &[1, 2]).await;
        assert!(matches!(again, Err(es_raft::RaftError::GroupOpen { group: 7 })));
    }

    let code = |r: Result<bytes::Bytes, PeerError>| match r {
        Err(PeerError::Remote(e)) => e.code,
        other => panic!("expected a remote failure, got {other:?}"),
    };
    let call = |to, group, kind, payload: &'static [u8]| {
        three.call_timeout(to, group, kind, bytes::Bytes::from_static(payload), WAIT)
    };
    assert_eq!(code(call(1, 7, 1, b"\x00\x00\x00\x09garbage").await), es_raft::CODE_BAD_REQUEST);
    assert_eq!(code(call(1, 7, 2, b"{\"not\":\"a vote\"}").await), es_raft::CODE_BAD_REQUEST);
    assert_eq!(code(call(1, 7, 3, b"").await), es_raft::CODE_BAD_REQUEST);
    assert_eq!(code(call(1, 7, 99, b"").await), es_raft::CODE_UNKNOWN_KIND);
    assert_eq!(code(call(1, 42, 1, b"").await), es_raft::CODE_NO_GROUP);
    assert_eq!(code(call(2, 0, 200, b"hi").await), es_raft::CODE_UNKNOWN_KIND, "node 2 has no app handler");
    assert_eq!(call(1, 0, 200, b"hi").await.unwrap(), "app 3 200 hi".as_bytes());
    assert_eq!(one.call(3, 130, bytes::Bytes::from_static(b"x"), WAIT).await.unwrap(), &b"three"[..]);
    assert!(matches!(one.call(3, 1, bytes::Bytes::new(), WAIT).await, Err(PeerError::Malformed(_))));

    // The group of nodes 1 and 2 works through all of it.
    assert!(wait_until(WAIT, || groups.iter().any(|g| g.is_leader())).await);
    let lead = groups.iter().find(|g| g.is_leader()).unwrap();
    assert_eq!(lead.status().leader, lead.leader());
    let a = lead.propose(batch("after the noise")).await;
    let a = a.unwrap();
    assert_eq!(a.base_offset, 0);
    one.shutdown().await;
    two.shutdown().await;
    three.shutdown().await;
    drop(groups);
    for m in &managers {
        m.shutdown().unwrap();
    }
}

/// The voters of `group` as every running node sees it equal `want`.
async fn voters_become(nodes: &[Node], group: u64, want: &[u64]) {
    let running: Vec<&Node> = nodes.iter().filter(|n| n.host.is_some()).collect();
    let settled = wait_until(WAIT, || running.iter().all(|n| n.groups[&group].status().voters == want)).await;
    let seen: Vec<(u64, Vec<u64>)> =
        running.iter().map(|n| (n.id, n.groups[&group].status().voters)).collect();
    assert!(settled, "group {group}: voters {seen:?}, want {want:?} on every node");
}

/// Replacing a node: node 4 joins (it initializes nothing), every group's leader
/// adds it as a learner and makes it a voter once it caught up, while proposals go
/// on; then node 3 stops and is removed. Every acknowledged batch is on nodes 1, 2
/// and 4, byte-identical, and the groups take writes with node 3 gone for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_joins_under_load_and_a_stopped_one_is_removed() {
    let groups = [1u64, 2];
    let (mut nodes, mut addrs) = cluster(&groups).await;
    let mut acked: BTreeMap<u64, Vec<(u64, String)>> = BTreeMap::new();
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        acked.insert(g, propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-a"), 4, 100).await);
    }
    let l4 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    addrs.insert(4, l4.local_addr().unwrap().to_string());
    let mut four = Node {
        id: 4,
        timers: timers(),
        host: None,
        groups: BTreeMap::new(),
        manager: None,
        dir: tempfile::tempdir().unwrap(),
    };
    {
        let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
        let manager = LogManager::new(four.dir.path(), opts).unwrap();
        let host = RaftHost::start(peer_config(4, &addrs), l4, four.timers, None).unwrap();
        host.join();
        for &g in &groups {
            let (log, _) = manager.open_partition(&format!("g-{g}"), LogConfig::default()).unwrap();
            // The voters given are not used: a joining node initializes nothing.
            four.groups.insert(g, host.open_group(g, log, &[1, 2, 3, 4]).await.unwrap());
        }
        four.manager = Some(manager);
        four.host = Some(host);
    }
    // Left alone for a while, the joining node forms no group of its own.
    tokio::time::sleep(Duration::from_millis(timers().election_max_ms * 3)).await;
    assert_eq!(four.groups[&1].leader(), None);
    assert!(four.groups[&1].status().voters.is_empty(), "{:?}", four.groups[&1].status());
    nodes.push(four);

    let members: std::collections::BTreeSet<u64> = [1, 2, 3, 4].into();
    for n in &nodes {
        if n.id != 4 {
            assert!(n.host().add_peer(4, &addrs[&4]).unwrap());
        }
        n.host().set_members(members.clone());
    }
    // Proposals go on while the change happens (the leaders do not change).
    let mut load = tokio::task::JoinSet::new();
    for &g in &groups {
        let lead = node(&nodes, leader_of(&nodes, g).await).groups[&g].clone();
        load.spawn(async move { (g, propose_many(&lead, &format!("g{g}-b"), 4, 200).await) });
    }
    for &g in &groups {
        voters_become(&nodes, g, &[1, 2, 3, 4]).await;
    }
    while let Some(done) = load.join_next().await {
        let (g, more) = done.unwrap();
        acked.get_mut(&g).unwrap().extend(more);
    }
    for &g in &groups {
        check_replicas(&nodes, g, &acked[&g]).await;
    }

    // Node 3 stops for good and is removed.
    {
        let n = nodes.iter_mut().find(|n| n.id == 3).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
    }
    let members: std::collections::BTreeSet<u64> = [1, 2, 4].into();
    for n in nodes.iter().filter(|n| n.host.is_some()) {
        n.host().remove_peer(3);
        n.host().set_members(members.clone());
    }
    for &g in &groups {
        voters_become(&nodes, g, &[1, 2, 4]).await;
        let leader = leader_of(&nodes, g).await;
        let more = propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-c"), 4, 100).await;
        acked.get_mut(&g).unwrap().extend(more);
        check_replicas(&nodes, g, &acked[&g]).await;
    }
    stop_all(&mut nodes).await;
}

/// Frames all running nodes sent over `window`.
async fn frames_sent_over(nodes: &[Node], window: Duration) -> u64 {
    let sent = |nodes: &[Node]| -> u64 {
        nodes.iter().filter_map(|n| n.host.as_ref()).map(|h| h.peer_stats().frames_sent).sum()
    };
    let before = sent(nodes);
    tokio::time::sleep(window).await;
    sent(nodes) - before
}

/// Idle groups quiesce on every node: their heartbeats stop (only the per-pair
/// pings remain on the links); a proposal wakes a group and commits at once; a
/// quiet group's leadership transfers; a dead leader's quiet groups are led again by the link-loss hand-over, and a
/// restarted node's groups wake and quiesce again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_groups_quiesce_wake_on_a_proposal_and_fail_over_when_their_leader_dies() {
    let groups: Vec<u64> = (31..51).collect();
    let timers =
        Timers { quiesce_after_ms: std::env::var("QA").map_or(500, |v| v.parse().unwrap()), ..timers() };
    let (mut nodes, addrs) = cluster_with(&groups, timers).await;
    let mut acked: BTreeMap<u64, Vec<(u64, String)>> = BTreeMap::new();
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        acked.insert(g, propose_many(&node(&nodes, leader).groups[&g], &format!("g{g}-a"), 1, 3).await);
    }
    let all_quiet = |nodes: &[Node]| {
        nodes.iter().filter(|n| n.host.is_some()).all(|n| n.groups.values().all(|g| g.status().quiesced))
    };
    assert!(wait_until(WAIT, || all_quiet(&nodes)).await, "every group quiesces on every node");
    // 20 groups heartbeating every 100 ms to two followers would send 800 frames a
    // second with the answers; quiet, only the pings (3 nodes x 2 peers x 10 a
    // second, and their answers: 120) remain.
    let quiet = frames_sent_over(&nodes, Duration::from_secs(1)).await;
    eprintln!("quiet: {quiet} frames in 1 s for {} groups", groups.len());
    assert!(quiet < 300, "{quiet} frames a second: the quiet groups still heartbeat");
    for &g in &groups {
        let leader = leader_of(&nodes, g).await;
        let lead = node(&nodes, leader).groups[&g].clone();
        assert!(!lead.fenced(), "a quiet leader with its peers answering is not fenced");
    }

    // A proposal wakes its group and commits without waiting out a lease.
    let g = groups[0];
    let lead = node(&nodes, leader_of(&nodes, g).await).groups[&g].clone();
    let started = std::time::Instant::now();
    acked.get_mut(&g).unwrap().extend(propose_many(&lead, "woken", 1, 1).await);
    let took = started.elapsed();
    eprintln!("a proposal to a quiet group committed in {took:?}");
    assert!(took < Duration::from_millis(timers.election_min_ms), "{took:?}");
    check_replicas(&nodes, g, &acked[&g]).await;

    // A quiet group's leadership moves: the transfer wakes it, the target leads.
    assert!(wait_until(WAIT, || all_quiet(&nodes)).await, "quiet again after the proposal");
    let g = groups[1];
    let from = leader_of(&nodes, g).await;
    let to = VOTERS.into_iter().find(|v| *v != from).unwrap();
    node(&nodes, from).groups[&g].transfer_leader(to).await.unwrap();
    assert!(wait_until(WAIT, || node(&nodes, to).groups[&g].is_leader()).await, "node {to} leads group {g}");
    assert_eq!(leader_of(&nodes, g).await, to);
    let lead = node(&nodes, to).groups[&g].clone();
    acked.get_mut(&g).unwrap().extend(propose_many(&lead, "moved", 1, 2).await);

    // The leader of the most groups dies: every group it led gets a leader again.
    assert!(wait_until(WAIT, || all_quiet(&nodes)).await, "quiet again after the transfer");
    let mut led: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &g in &groups {
        led.entry(leader_of(&nodes, g).await).or_default().push(g);
    }
    let (&old, _) = led.iter().max_by_key(|(_, gs)| gs.len()).unwrap();
    let listener_addr = addrs[&old].clone();
    {
        let n = nodes.iter_mut().find(|n| n.id == old).unwrap();
        n.host.take().unwrap().shutdown().await;
        n.manager.take().unwrap().shutdown().unwrap();
        n.groups.clear();
    }
    let started = std::time::Instant::now();
    tracing::info!("node {old} stopped");
    for &g in &groups {
        assert_ne!(leader_of(&nodes, g).await, old);
        tracing::info!("group {g} led again");
    }
    eprintln!("every group led again {:?} after node {old} went away", started.elapsed());
    for &g in &groups {
        let lead = node(&nodes, leader_of(&nodes, g).await).groups[&g].clone();
        acked.get_mut(&g).unwrap().extend(propose_many(&lead, &format!("g{g}-b"), 1, 2).await);
    }

    // The node comes back: it catches up, and the groups quiesce again everywhere,
    // with no election: the leaders wake as it answers pings, so it hears them
    // before its election timer runs out.
    assert!(wait_until(WAIT, || all_quiet(&nodes)).await, "quiet with node {old} down");
    let mut epochs = BTreeMap::new();
    for &g in &groups {
        epochs.insert(g, node(&nodes, leader_of(&nodes, g).await).groups[&g].leader_epoch());
    }
    let listener = TcpListener::bind(&listener_addr).await.unwrap();
    let n = nodes.iter_mut().find(|n| n.id == old).unwrap();
    start(n, listener, &addrs, &groups).await;
    for &g in &groups {
        leader_of(&nodes, g).await;
    }
    assert!(wait_until(WAIT, || all_quiet(&nodes)).await, "quiet again with the node back");
    for &g in &groups {
        let now = node(&nodes, leader_of(&nodes, g).await).groups[&g].leader_epoch();
        assert_eq!(now, epochs[&g], "group {g}: the restarted follower caused an election");
    }
    for &g in &groups {
        check_replicas(&nodes, g, &acked[&g]).await;
    }
    stop_all(&mut nodes).await;
}
