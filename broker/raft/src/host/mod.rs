//! The API the broker uses: a [`RaftHost`] per process (the peer node and every
//! open group) and a [`Group`] per partition (propose, leadership, status). No
//! openraft type crosses it (docs/cluster.md, "Raft groups").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use es_core::LeaderEpoch;
use es_log::{Appended, PartitionLog};
use es_peer::{Handler, HandlerFuture, PeerConfig, PeerError, PeerNode, RpcError};
use openraft::Instant as _;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::{ClientWriteError, Fatal, InitializeError};
use tokio::sync::watch;

use crate::error::{ProposeError, RaftError};
use crate::limits;
use crate::network::{self, Factory, Raft};
use crate::state_machine::DataStateMachine;
use crate::store::LogStore;
use crate::types::BatchData;
use leader::{leader_view, stop_on_commit_failure, watch_leader};

mod leader;
mod membership;
mod quiesce;

/// A group's Raft timers, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// How long a group must sit idle and settled before it quiesces (stops
    /// ticking and heartbeating, `quiesce.rs`); 0: never.
    pub quiesce_after_ms: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            heartbeat_ms: limits::HEARTBEAT_MS_DEFAULT,
            election_min_ms: limits::ELECTION_MIN_MS_DEFAULT,
            election_max_ms: limits::ELECTION_MAX_MS_DEFAULT,
            quiesce_after_ms: limits::QUIESCE_AFTER_MS_DEFAULT,
        }
    }
}

/// The Raft side of one process: its peer node and open groups. Clones share it.
#[derive(Clone)]
pub struct RaftHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    peer: Arc<PeerNode>,
    groups: Arc<RwLock<HashMap<u64, Group>>>,
    config: Arc<openraft::Config>,
    stopped: AtomicBool,
    /// Whether this node initializes fresh groups (`open_group`); not on a node that
    /// joins a running cluster (`RaftHost::join`).
    initializes: AtomicBool,
    /// The cluster's members: the voters every group this node leads is brought to
    /// (`reconcile_membership`). Empty until `set_members`: no change is made.
    members: watch::Sender<BTreeSet<u64>>,
    /// Which peers answer pings (`quiesce.rs`).
    liveness: Arc<quiesce::Liveness>,
    /// Pokes the membership reconciler: a group's target voters changed.
    reconcile: Arc<tokio::sync::Notify>,
}

/// The leader as a group's watchers see it: (leader id, term).
type LeaderView = (Option<u64>, LeaderEpoch);

impl RaftHost {
    /// Starts the peer node with a handler that routes Raft RPCs to the open group
    /// by group id (an unknown group is a typed failure the caller treats as
    /// unreachable) and RPC kinds >= 128 to `app`. Must be called inside a tokio
    /// runtime.
    pub fn start(
        peer: PeerConfig,
        listener: tokio::net::TcpListener,
        timers: Timers,
        app: Option<Handler>,
    ) -> Result<RaftHost, RaftError> {
        let config = Arc::new(raft_config(timers)?);
        let groups: Arc<RwLock<HashMap<u64, Group>>> = Arc::default();
        let handler = route(groups.clone(), app);
        let me = peer.node_id;
        let peer = Arc::new(PeerNode::start(peer, listener, handler)?);
        let losses = peer.link_losses();
        let inner = Arc::new(HostInner {
            peer,
            groups,
            config,
            stopped: AtomicBool::new(false),
            initializes: AtomicBool::new(true),
            members: watch::Sender::new(BTreeSet::new()),
            liveness: Arc::new(quiesce::Liveness::new(me, Duration::from_millis(timers.election_min_ms))),
            reconcile: Arc::default(),
        });
        let heartbeat = Duration::from_millis(timers.heartbeat_ms);
        tokio::spawn(quiesce::watch_liveness(Arc::downgrade(&inner), heartbeat));
        if timers.quiesce_after_ms > 0 {
            let after = Duration::from_millis(timers.quiesce_after_ms);
            tokio::spawn(quiesce::quiesce_idle_groups(Arc::downgrade(&inner), after, heartbeat * 2));
        }
        tokio::spawn(purge_for_retention(Arc::downgrade(&inner)));
        tokio::spawn(elect_on_link_loss(Arc::downgrade(&inner), losses));
        tokio::spawn(membership::reconcile_membership(Arc::downgrade(&inner)));
        Ok(RaftHost { inner })
    }

    pub fn node_id(&self) -> u64 {
        self.inner.peer.node_id()
    }

    /// This node joins a running cluster: it initializes no group (each is formed
    /// by the nodes that created it, which add this one as a learner, then as a
    /// voter: `set_members`). Call before opening groups.
    pub fn join(&self) {
        self.inner.initializes.store(false, Ordering::Release);
    }

    /// The cluster's members. Every group this node leads is brought to them as
    /// its voters, one step per round: a new member is added as a learner, made a
    /// voter once it has caught up to the commit (a joint change when members also
    /// go), a removed one is dropped; a leader that is no member any more hands its
    /// groups to one that is. Safe to call again with the same set.
    pub fn set_members(&self, members: BTreeSet<u64>) {
        self.inner.members.send_if_modified(|now| {
            let changed = *now != members;
            *now = members;
            changed
        });
    }

    /// Makes a peer known (a node added to the cluster) at `addr`.
    pub fn add_peer(&self, peer: u64, addr: &str) -> Result<bool, PeerError> {
        self.inner.peer.add_peer(peer, addr)
    }

    /// Forgets a peer (a node removed from the cluster); whether it was known.
    pub fn remove_peer(&self, peer: u64) -> bool {
        self.inner.peer.remove_peer(peer)
    }

    /// What this node's peer links carried so far (frames, bytes, writes).
    pub fn peer_stats(&self) -> es_peer::PeerStatsSnapshot {
        self.inner.peer.stats().snapshot()
    }

    /// The address the peer listener is bound to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer.local_addr()
    }

    /// Opens (or reopens after a restart) the group over `log`. When the log is
    /// fresh (no vote, no entries) the group is initialized with `voters`: by the
    /// first voter listed at once (the preferred leader), by the others after two
    /// election timeouts if nothing reached them (openraft documents initializing
    /// several voters with the same membership as safe: the vote elects one
    /// leader). Empty `voters`: this node joins a group that exists elsewhere and
    /// initializes nothing (a replica moved here is added as a learner by the
    /// group's leader).
    pub async fn open_group(
        &self,
        group: u64,
        log: Arc<PartitionLog>,
        voters: &[u64],
    ) -> Result<Group, RaftError> {
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(RaftError::Shutdown);
        }
        if self.inner.groups.read().expect("groups lock").contains_key(&group) {
            return Err(RaftError::GroupOpen { group });
        }
        let store = LogStore::open(log.clone())?;
        let writer = store.committed_writer();
        let gate = store.commit_gate();
        let fresh = store.state().next_index == 0 && log.read_raft_file(es_log::RaftFile::Vote)?.is_none();
        let sm = DataStateMachine::open(log.clone(), store.commit_gate())?;
        let factory = Factory { peer: self.inner.peer.clone(), group };
        let node = self.node_id();
        let raft = Raft::new(node, self.inner.config.clone(), factory, store, sm)
            .await
            .map_err(|e| RaftError::Group { group, reason: e.to_string() })?;
        if fresh {
            self.initialize_fresh(&raft, group, voters).await?;
        }
        let (liveness, reconcile) = (self.inner.liveness.clone(), self.inner.reconcile.clone());
        let handle = Group::new(group, node, raft, log, writer, liveness, reconcile);
        tokio::spawn(stop_on_commit_failure(Arc::downgrade(&handle.inner), gate));
        let inserted = {
            let mut groups = self.inner.groups.write().expect("groups lock");
            let fresh_slot = !groups.contains_key(&group);
            if fresh_slot {
                groups.insert(group, handle.clone());
            }
            fresh_slot
        };
        if !inserted {
            // Opened twice at once: the first one stays.
            handle.close().await;
            return Err(RaftError::GroupOpen { group });
        }
        Ok(handle)
    }

    /// A fresh group is initialized by its first voter at once, so one candidate
    /// runs the first election (three at once split the vote and churn). The others
    /// initialize too, with the same membership, if nothing reached them within two
    /// election timeouts: the group forms even when the lowest voter is down.
    async fn initialize_fresh(&self, raft: &Raft, group: u64, voters: &[u64]) -> Result<(), RaftError> {
        let node = self.node_id();
        if !voters.contains(&node) || !self.inner.initializes.load(Ordering::Acquire) {
            return Ok(());
        }
        if voters.first() == Some(&node) {
            return initialize(raft, group, voters).await;
        }
        let (raft, voters) = (raft.clone(), voters.to_vec());
        let delay = Duration::from_millis(self.inner.config.election_timeout_max.saturating_mul(2));
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            // Stopped, or already initialized by the lowest voter's entries: done.
            if !matches!(raft.is_initialized().await, Ok(false)) {
                return;
            }
            if let Err(e) = initialize(&raft, group, &voters).await {
                tracing::warn!(group, error = %e, "initializing the group failed");
            }
        });
        Ok(())
    }

    /// Shuts one group down (tests, topic deletion, a partition moved away); its
    /// `Group` handles answer `Shutdown` from then on. Whether it stopped in time,
    /// its last write to the log done (an unknown group: true).
    pub async fn close_group(&self, group: u64) -> bool {
        let handle = self.inner.groups.write().expect("groups lock").remove(&group);
        match handle {
            Some(g) => g.close().await,
            None => true,
        }
    }

    /// An app-level call to a peer (kind >= 128), bounded by `timeout`.
    pub async fn call(
        &self,
        to: u64,
        kind: u8,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, PeerError> {
        if kind < limits::APP_KIND_MIN {
            return Err(PeerError::Malformed("broker RPC kinds start at 128; lower ones are Raft's"));
        }
        self.inner.peer.call_timeout(to, 0, kind, payload, timeout).await
    }

    /// Closes every group, then the peer node; bounded.
    pub async fn shutdown(&self) {
        self.inner.stopped.store(true, Ordering::Release);
        let groups: Vec<Group> =
            self.inner.groups.write().expect("groups lock").drain().map(|(_, g)| g).collect();
        futures_util::future::join_all(groups.iter().map(Group::close)).await;
        self.inner.peer.shutdown().await;
    }
}

/// openraft's configuration from the timers: heartbeats on, snapshots never built by
/// log size (the snapshot trap, state_machine.rs) but at the retention boundary
/// (`purge_for_retention`), a follower never sent a snapshot merely for lagging (a
/// data snapshot is metadata only: it cannot replace records the leader still
/// holds); only one that needs entries retention removed gets it.
fn raft_config(t: Timers) -> Result<openraft::Config, RaftError> {
    let config = openraft::Config {
        cluster_name: "es".into(),
        heartbeat_interval: t.heartbeat_ms,
        // Replication traffic proves liveness: skip heartbeats to a follower that
        // acknowledged something within half an interval.
        heartbeat_min_interval: Some(t.heartbeat_ms / 2),
        election_timeout_min: t.election_min_ms,
        election_timeout_max: t.election_max_ms,
        enable_heartbeat: true,
        enable_elect: true,
        enable_tick: true,
        snapshot_policy: openraft::SnapshotPolicy::Never,
        replication_lag_threshold: u64::MAX / 2,
        max_in_snapshot_log_to_keep: limits::PURGE_LAG_ENTRIES,
        max_payload_entries: limits::APPEND_ENTRIES_MAX,
        ..openraft::Config::default()
    };
    config.validate().map_err(|e| RaftError::Config(e.to_string()))
}

async fn initialize(raft: &Raft, group: u64, voters: &[u64]) -> Result<(), RaftError> {
    let members: BTreeMap<u64, openraft::impls::BasicNode> =
        voters.iter().map(|&v| (v, openraft::impls::BasicNode::default())).collect();
    match raft.initialize(members).await {
        // NotAllowed: another voter's entries got here first; the group exists.
        Ok(()) | Err(openraft::errors::RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(openraft::errors::RaftError::APIError(InitializeError::NotInMembers(e))) => {
            Err(RaftError::Group { group, reason: e.to_string() })
        }
        Err(openraft::errors::RaftError::Fatal(e)) => Err(RaftError::Group { group, reason: e.to_string() }),
    }
}

/// Every `RETENTION_PURGE_CHECK_MS`, each group whose retention waits for a purge
/// (`PartitionLog::retention_wants`) snapshots at the retention boundary and purges
/// its Raft log up to the snapshot; the next housekeeping round deletes the
/// segments. A leader whose log asks for a compaction decision appends one
/// ([`Group::decide_compaction`]). A follower that still needs the purged entries is sent the snapshot
/// and starts its log over at the leader's log start. Ends with the host.
async fn purge_for_retention(host: std::sync::Weak<HostInner>) {
    let every = Duration::from_millis(limits::RETENTION_PURGE_CHECK_MS);
    loop {
        tokio::time::sleep(every).await;
        let Some(host) = host.upgrade() else { return };
        if host.stopped.load(Ordering::Acquire) {
            return;
        }
        let due: Vec<Group> = host
            .groups
            .read()
            .expect("groups lock")
            .values()
            .filter(|g| g.inner.log.retention_wants().is_some() || g.wants_compaction())
            .filter(|g| !g.inner.purging.swap(true, Ordering::AcqRel))
            .cloned()
            .collect();
        for g in due {
            tokio::spawn(async move {
                match g.purge_to_retention().await {
                    Ok(()) | Err(ProposeError::Shutdown) => {}
                    Err(e) => {
                        tracing::warn!(group = g.inner.id, error = %e, "purging the Raft log for retention failed")
                    }
                }
                match g.decide_compaction().await {
                    Ok(()) | Err(ProposeError::Shutdown) => {}
                    Err(e) => {
                        tracing::info!(group = g.inner.id, error = %e, "no compaction decision this round")
                    }
                }
                g.inner.purging.store(false, Ordering::Release);
            });
        }
    }
}

/// A leader whose process died is replaced at once, not after the followers'
/// election timeouts and its lease (about three timeouts, 5 s with the default
/// timers). The kernel closes a dead process's sockets, so its peer links go down
/// at once; when a peer's link stays down for `LINK_LOSS_GRACE_MS`, every group
/// this node follows that peer in hands leadership to one successor, as the dead
/// leader would have with a leader transfer ([`Group::succeed`]). A leader that is
/// alive but unreachable is fenced as soon as its links to a majority are down
/// ([`Group::fenced`]), so this only shortens a failover the election timers would
/// make anyway; a stopped process (SIGSTOP) or a cut that leaves sockets open
/// takes the timers' path, but for the groups quiet here, which the pings hand
/// over (`quiesce.rs`: silent for an election timeout).
async fn elect_on_link_loss(
    host: std::sync::Weak<HostInner>,
    mut losses: tokio::sync::broadcast::Receiver<u64>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let lost = match losses.recv().await {
            Ok(lost) => lost,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let Some(h) = host.upgrade() else { return };
        // Even a peer back within the grace (a restart that quick) counts as come
        // back: the groups it is in wake, so it hears their leaders at once.
        h.liveness.link_dropped(lost);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(limits::LINK_LOSS_GRACE_MS)).await;
            if h.stopped.load(Ordering::Acquire) || h.peer.is_connected(lost) {
                return;
            }
            h.liveness.lost(lost);
            replace_leader(&h, lost, Replace::All, "peer link lost").await;
        });
    }
}

/// Which groups [`replace_leader`] hands over.
#[derive(Debug, Clone, Copy)]
enum Replace {
    /// Every group led by the lost node (its link went down).
    All,
    /// Only the groups quiet here under it (it stopped answering pings).
    QuietOnly,
}

/// Hands every group this node follows `lost` in to one successor
/// ([`Group::succeed`]), its quiet groups woken first: `lost`'s link went down,
/// or it stopped answering pings (`quiesce.rs`).
async fn replace_leader(h: &HostInner, lost: u64, which: Replace, why: &str) {
    let groups: Vec<Group> = h.groups.read().expect("groups lock").values().cloned().collect();
    let groups: Vec<Group> = match which {
        Replace::All => groups,
        Replace::QuietOnly => {
            groups.into_iter().filter(|g| g.quiesced().is_some_and(|q| q.leader == lost)).collect()
        }
    };
    quiesce::wake_involving(h, lost);
    let connected = |n: u64| h.peer.is_connected(n) && h.liveness.alive(n);
    let handed = futures_util::future::join_all(groups.iter().map(|g| g.succeed(lost, &connected))).await;
    let handed = handed.into_iter().filter(|h| *h).count();
    if handed > 0 {
        tracing::info!(node = h.peer.node_id(), lost, groups = handed, "{why}: replacing it as leader");
    }
}

/// The peer handler: Raft kinds to the group's Raft, broker kinds to `app`.
fn route(groups: Arc<RwLock<HashMap<u64, Group>>>, app: Option<Handler>) -> Handler {
    Arc::new(move |from: u64, group: u64, kind: u8, payload: Bytes| -> HandlerFuture {
        if kind >= limits::APP_KIND_MIN {
            return match &app {
                Some(app) => app(from, group, kind, payload),
                None => Box::pin(async move {
                    Err(RpcError::new(
                        network::CODE_UNKNOWN_KIND,
                        format!("no broker handler for kind {kind}"),
                    ))
                }),
            };
        }
        match kind {
            quiesce::KIND_PING => return Box::pin(async { Ok(Bytes::new()) }),
            quiesce::KIND_QUIESCE => {
                let answer = quiesce::serve_quiesce(&groups, from, payload);
                return Box::pin(async move { answer });
            }
            _ => {}
        }
        let raft = groups.read().expect("groups lock").get(&group).map(|g| g.inner.raft.clone());
        Box::pin(async move {
            match raft {
                Some(raft) => network::serve(raft, kind, payload).await,
                None => Err(RpcError::new(network::CODE_NO_GROUP, format!("group {group} is not open here"))),
            }
        })
    })
}

/// One partition's Raft group on this node. Clones share it.
#[derive(Clone)]
pub struct Group {
    inner: Arc<GroupInner>,
}

struct GroupInner {
    id: u64,
    node: u64,
    raft: Raft,
    log: Arc<PartitionLog>,
    leader: watch::Receiver<LeaderView>,
    watcher: tokio::task::JoinHandle<()>,
    /// How many of the store's writing tasks still run (`LogStore::committed_writer`).
    writer: watch::Receiver<usize>,
    stopped: AtomicBool,
    /// A retention purge or a compaction decision is under way (`purge_for_retention`).
    purging: AtomicBool,
    figures: Arc<GroupFigures>,
    /// Where the group quiesced, while it is quiet (`quiesce.rs`).
    quiet: std::sync::Mutex<Option<quiesce::Quiesced>>,
    /// When this node, leading, last woke the group with a majority answering pings.
    woke_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// A woken follower's own elections are held back until then (`Group::wake`).
    elect_from: std::sync::Mutex<Option<std::time::Instant>>,
    liveness: Arc<quiesce::Liveness>,
    /// The voters this group is brought to when this node leads it
    /// (`Group::set_target`); `None`: the host's members (`RaftHost::set_members`).
    target: std::sync::Mutex<Option<BTreeSet<u64>>>,
    /// Pokes the membership reconciler when the target changes.
    reconcile: Arc<tokio::sync::Notify>,
}

/// What the group counts for the metrics, on this node.
#[derive(Debug)]
pub struct GroupFigures {
    /// Leaders this node learned of, one per (leader, term): elections it saw won.
    pub leader_changes: AtomicU64,
    /// A proposal from its hand-over to openraft to its commit (majority durable).
    pub commit_latency: es_core::histogram::Histogram,
}

/// What a group looks like from this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    pub group: u64,
    pub leader: Option<u64>,
    pub term: LeaderEpoch,
    pub voters: Vec<u64>,
    /// Voters whose log reaches the commit index, per the leader's replication
    /// state; on a follower this is unknown and lists every voter.
    pub in_sync: Vec<u64>,
    /// The committed offset: the high watermark readers see here.
    pub committed_offset: u64,
    /// The Raft index of the last entry in this node's log.
    pub last_log_index: Option<u64>,
    /// On the leader, each follower's distance in entries from the leader's last
    /// log index (a follower with nothing matched yet counts from index 0); empty
    /// on a follower.
    pub follower_lag: Vec<(u64, u64)>,
    /// This node was elected leader but lost its quorum ([`Group::fenced`]).
    pub fenced: bool,
    /// The group is quiet here: idle, it neither ticks nor heartbeats (docs/cluster.md,
    /// "Idle groups").
    pub quiesced: bool,
}

impl Group {
    fn new(
        id: u64,
        node: u64,
        raft: Raft,
        log: Arc<PartitionLog>,
        writer: watch::Receiver<usize>,
        liveness: Arc<quiesce::Liveness>,
        reconcile: Arc<tokio::sync::Notify>,
    ) -> Group {
        let (tx, rx) = watch::channel(leader_view(&raft));
        let figures = Arc::new(GroupFigures {
            leader_changes: AtomicU64::new(0),
            commit_latency: es_core::histogram::Histogram::latency(),
        });
        let watcher = tokio::spawn(watch_leader(raft.clone(), tx, figures.clone()));
        let stopped = AtomicBool::new(false);
        let purging = AtomicBool::new(false);
        let (quiet, woke_at) = (std::sync::Mutex::new(None), std::sync::Mutex::new(None));
        let inner = GroupInner {
            id,
            node,
            raft,
            log,
            leader: rx,
            watcher,
            writer,
            stopped,
            purging,
            figures,
            quiet,
            woke_at,
            elect_from: std::sync::Mutex::new(None),
            liveness,
            target: std::sync::Mutex::new(None),
            reconcile,
        };
        Group { inner: Arc::new(inner) }
    }

    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Proposes one encoded v2 data batch (unstamped, as the service appends
    /// locally) and resolves once a majority has it durably and it is committed,
    /// with the offsets it got; [`Group::visible`] waits for this node's readers
    /// to see it. An idempotent producer's retry of a batch in the log answers
    /// the original offsets once they are visible. Not the leader:
    /// `NotLeader` (nothing appended); leadership lost before the commit:
    /// `LeadershipLost` (the batch may or may not be in the log). Bounded by the
    /// proposal timeout.
    pub async fn propose(&self, mut batch: Vec<u8>) -> Result<Appended, ProposeError> {
        if self.inner.stopped.load(Ordering::Acquire) {
            return Err(ProposeError::Shutdown);
        }
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        self.wake();
        let header = es_core::BatchHeader::parse(&batch, usize::MAX).map_err(es_log::LogError::from)?;
        if header.is_raft_control() {
            return Err(ProposeError::ControlBatch);
        }
        if let Some((base, last)) = self.inner.log.check_duplicate(&batch)? {
            // The original may be appended but not committed: once the watermark
            // passes it, it is committed, unless this node lost the leadership
            // meanwhile and its tail was replaced by the new leader's entries
            // (which rebuilds the producer table). Asked again, the table says
            // which: an original no longer there is not answered as written.
            self.visible(last).await?;
            return match self.inner.log.check_duplicate(&batch) {
                Ok(Some(at)) if at == (base, last) => {
                    Ok(Appended { base_offset: base, last_offset: last, duplicate: true })
                }
                _ => Err(ProposeError::LeadershipLost { leader: None }),
            };
        }
        // The leader's store stamps a batch without a leader epoch; one a client
        // stamped would take the follower path there and fail the group.
        es_core::batch::stamp(&mut batch, 0, LeaderEpoch::UNKNOWN);
        let started = std::time::Instant::now();
        let write = self.write(Bytes::from(batch));
        match tokio::time::timeout(Duration::from_millis(limits::PROPOSE_TIMEOUT_MS), write).await {
            Err(_) => Err(ProposeError::Timeout),
            Ok(result) => {
                if result.is_ok() {
                    self.inner.figures.commit_latency.observe_duration(started.elapsed());
                }
                result
            }
        }
    }

    /// Resolves once this node's high watermark passes `last`. A committed entry
    /// becomes visible once the committed id covering it is on disk (`CommitGate`),
    /// a file's fsync after the commit; the service waits for this before
    /// answering a Kafka or HTTP produce, as Kafka answers acks=all once the high
    /// watermark moved, so a fetch or ListOffsets sent to this leader right after
    /// the answer sees the record. An idempotent retry waits here for its original
    /// to commit. A group that stops meanwhile (a storage error) answers
    /// `LeadershipLost`: the batch may be committed on the others. Bounded by the
    /// proposal timeout.
    pub async fn visible(&self, last: u64) -> Result<(), ProposeError> {
        let mut rx = self.inner.log.subscribe();
        let heartbeat = Duration::from_millis(self.inner.raft.config().heartbeat_interval);
        let seen = async {
            while self.inner.log.high_watermark() <= last {
                if self.inner.stopped.load(Ordering::Acquire) {
                    return Err(ProposeError::LeadershipLost { leader: None });
                }
                // Bounded by a heartbeat: a stopped group publishes nothing.
                if let Ok(Err(_)) = tokio::time::timeout(heartbeat, rx.changed()).await {
                    return Err(ProposeError::Shutdown);
                }
            }
            Ok(())
        };
        tokio::time::timeout(Duration::from_millis(limits::PROPOSE_TIMEOUT_MS), seen)
            .await
            .unwrap_or(Err(ProposeError::Timeout))
    }

    /// Hands the batch to openraft. A leader whose quorum lease is not (yet or any
    /// more) valid refuses it before appending: a new leader has its lease only once
    /// a follower answered it. Then the write is retried when the metrics change
    /// (a follower's answer), within the caller's deadline, while this node leads.
    ///
    /// A leader that loses its quorum gives up the batches it waits on once it is
    /// fenced ([`Group::fenced`]): `LeadershipLost`, so clients look for the new
    /// leader instead of waiting out the proposal timeout on a node that cannot
    /// commit. A new leader that no follower answers within a lease refuses before
    /// appending: `NotLeader`.
    async fn write(&self, batch: Bytes) -> Result<Appended, ProposeError> {
        let mut metrics = self.inner.raft.metrics();
        let heartbeat = Duration::from_millis(self.inner.raft.config().heartbeat_interval);
        let started = tokio::time::Instant::now();
        loop {
            metrics.borrow_and_update();
            let write = self.inner.raft.client_write(BatchData(batch.clone()));
            let result = tokio::select! {
                r = write => r,
                () = self.until_fenced(heartbeat) => return Err(ProposeError::LeadershipLost { leader: None }),
            };
            match result {
                Ok(resp) => {
                    return Ok(Appended {
                        base_offset: resp.data.base_offset,
                        last_offset: resp.data.next_offset.saturating_sub(1),
                        duplicate: false,
                    });
                }
                Err(e) if lease_expired(&e) && self.is_leader() => {
                    if started.elapsed() >= self.lease() {
                        return Err(ProposeError::NotLeader { leader: None });
                    }
                    // Bounded by a heartbeat too: a lease can also come back without a change.
                    let _ = tokio::time::timeout(heartbeat, metrics.changed()).await;
                }
                Err(e) => return Err(write_error(e)),
            }
        }
    }

    /// Resolves once this node is fenced, checked every `every`; never otherwise.
    async fn until_fenced(&self, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            if self.fenced() {
                return;
            }
        }
    }

    /// openraft's leader lease: a quorum's acknowledgement keeps a leader writable
    /// this long (its `election_timeout_max`).
    fn lease(&self) -> Duration {
        Duration::from_millis(self.inner.raft.config().election_timeout_max)
    }

    /// Whether this node was elected leader but has heard from no quorum for a whole
    /// lease: by then the followers' election timers have run out and a majority
    /// may have elected another leader, so it must not pass for the leader (Raft's
    /// CheckQuorum; openraft only stops its writes). It neither takes writes nor
    /// names itself leader (`is_leader`, `leader`) until a quorum answers again or
    /// a vote of a higher term demotes it. A single-voter group is never fenced,
    /// and neither is a new leader no follower has answered yet (`write` bounds
    /// that wait by a lease). A quiet leader is fenced when no majority of its
    /// voters answers pings; one just woken is not, for a lease, while its first
    /// heartbeat is answered (`quiesce.rs`).
    pub fn fenced(&self) -> bool {
        self.fenced_by(&self.inner.raft.metrics().borrow_watched())
    }

    /// [`Group::fenced`], from metrics the caller already holds.
    fn fenced_by(&self, m: &openraft::RaftMetrics<crate::types::TypeConfig>) -> bool {
        if m.current_leader != Some(self.inner.node)
            || m.membership_config.membership().voter_ids().nth(1).is_none()
        {
            return false;
        }
        if self.quiesced().is_some_and(|q| q.leader == self.inner.node) {
            return !self.inner.liveness.majority_alive(m.membership_config.membership().voter_ids());
        }
        let lease = self.lease();
        let unacked = m.last_quorum_acked.as_ref().is_some_and(|acked| acked.elapsed() >= lease)
            && !self.woke_within(lease);
        // Links tell sooner than the lease: a leader whose links to a majority went
        // down (for the link-loss grace) is fenced at once; the followers hand its
        // groups over just as soon ("elect on link loss"). Ping silence alone does
        // not fence a busy leader: pings share the link with replication and may
        // lag while its acknowledgements still arrive.
        unacked || self.inner.liveness.majority_unreachable(m.membership_config.membership().voter_ids())
    }

    /// Whether this node leads the group now (an elected leader, term 1 or later).
    /// Not while fenced ([`Group::fenced`]).
    pub fn is_leader(&self) -> bool {
        !self.inner.stopped.load(Ordering::Acquire)
            && self.inner.raft.is_leader()
            && self.leader() == Some(self.inner.node)
    }

    /// Whether `node` answered this host's pings within an election timeout
    /// (this node always has).
    pub fn peer_alive(&self, node: u64) -> bool {
        self.inner.liveness.alive(node)
    }

    /// The leader this node knows of, if any: not itself while fenced.
    pub fn leader(&self) -> Option<u64> {
        let known = self.inner.leader.borrow().0;
        if known == Some(self.inner.node) && self.fenced() { None } else { known }
    }

    /// The current term, which is the Kafka leader epoch.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.inner.leader.borrow().1
    }

    /// The leader id and term as [`Group::watch_leader`] has them now.
    pub fn leader_view(&self) -> (Option<u64>, LeaderEpoch) {
        *self.inner.leader.borrow()
    }

    pub fn status(&self) -> GroupStatus {
        let m = self.inner.raft.metrics().borrow_watched().clone();
        let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        let committed = m.local_committed.map(|c| c.index);
        let in_sync = match (&m.replication, committed) {
            (Some(repl), Some(c)) => voters
                .iter()
                .copied()
                .filter(|v| {
                    *v == self.inner.node || repl.get(v).is_some_and(|r| r.is_some_and(|r| r.index >= c))
                })
                .collect(),
            (Some(_), None) | (None, _) => voters.clone(),
        };
        let last = m.last_log_index.unwrap_or(0);
        let follower_lag = match &m.replication {
            Some(repl) => repl
                .iter()
                .filter(|(id, _)| **id != self.inner.node)
                .map(|(id, matched)| (*id, last.saturating_sub(matched.map_or(0, |l| l.index))))
                .collect(),
            None => Vec::new(),
        };
        GroupStatus {
            group: self.inner.id,
            leader: self.leader(),
            term: m.current_term.epoch(),
            voters,
            in_sync,
            committed_offset: self.inner.log.high_watermark(),
            last_log_index: m.last_log_index,
            follower_lag,
            fenced: self.fenced_by(&m),
            quiesced: self.quiesced().is_some(),
        }
    }

    /// The group's counters on this node (leader changes, commit latency).
    pub fn figures(&self) -> &GroupFigures {
        &self.inner.figures
    }

    /// Changes whenever the leader id or the term changes (for routing caches).
    pub fn watch_leader(&self) -> watch::Receiver<(Option<u64>, LeaderEpoch)> {
        self.inner.leader.clone()
    }

    /// If this node follows `lost` in this group, hands the group's leadership to
    /// one successor as a leader transfer from `lost` would: every follower that
    /// saw the link to `lost` go down names the same one, the lowest voter other
    /// than `lost` it is connected to (or itself). The successor starts an election
    /// at once; the others drop their lease on `lost` (openraft's followers refuse
    /// votes while their leader's lease lasts), so they vote for it at once. The
    /// votes still require the successor's log to be up to date: a successor that
    /// is behind loses, and the election timers elect another. Whether it acted.
    async fn succeed(&self, lost: u64, connected: &(dyn Fn(u64) -> bool + Sync)) -> bool {
        let m = self.inner.raft.metrics().borrow_watched().clone();
        let me = self.inner.node;
        if self.inner.stopped.load(Ordering::Acquire)
            || m.current_leader != Some(lost)
            || m.state != openraft::ServerState::Follower
        {
            return false;
        }
        let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        let successor = voters.iter().copied().filter(|&v| v != lost && (v == me || connected(v))).min();
        let Some(to) = successor.filter(|_| voters.contains(&me)) else { return false };
        let req = openraft::raft::TransferLeaderRequest::new(m.vote, to, None);
        let wait = Duration::from_millis(limits::LINK_LOSS_ELECT_MS);
        match tokio::time::timeout(wait, self.inner.raft.handle_transfer_leader(req)).await {
            Ok(Ok(Ok(()))) => true,
            Ok(Ok(Err(e))) => {
                tracing::debug!(group = self.inner.id, lost, to, error = %e, "no hand-over after a lost leader");
                false
            }
            Ok(Err(_)) | Err(_) => false,
        }
    }

    pub fn log(&self) -> &Arc<PartitionLog> {
        &self.inner.log
    }

    /// Snapshots at the retention boundary and purges the Raft log up to the
    /// snapshot (openraft clamps the purge to it, and on a leader waits until no
    /// replication reads those entries). Bounded.
    async fn purge_to_retention(&self) -> Result<(), ProposeError> {
        let Some(wants) = self.inner.log.retention_wants() else { return Ok(()) };
        let upto = wants - 1;
        // A follower's purge needs no ticks; woken while its leader stays quiet it
        // would only elect.
        if self.is_leader() {
            self.wake();
        }
        let mut metrics = self.inner.raft.metrics();
        let before = metrics.borrow_watched().snapshot;
        if before.is_some_and(|s| s.index >= upto) {
            // The snapshot is there; the purge may be waiting for a replication.
            return self.inner.raft.trigger().purge_log(upto).await.map_err(fatal);
        }
        self.inner.raft.trigger().snapshot().await.map_err(fatal)?;
        let built = async {
            while metrics.borrow_watched().snapshot == before {
                if metrics.changed().await.is_err() {
                    return;
                }
            }
        };
        let wait = Duration::from_millis(limits::PROPOSE_TIMEOUT_MS);
        if tokio::time::timeout(wait, built).await.is_err() {
            // Nothing new to snapshot (nothing applied past the last one): next round.
            return Ok(());
        }
        self.inner.raft.trigger().purge_log(upto).await.map_err(fatal)
    }

    fn wants_compaction(&self) -> bool {
        self.is_leader() && self.inner.log.compaction_wants().is_some()
    }

    /// As the leader, appends the compaction entry its log asks for
    /// (`PartitionLog::compaction_wants`; es-log's compaction.rs says what every
    /// replica does once it is applied) and waits for its commit. Bounded. Only a
    /// leader that applied an entry of its own term does, so it applied every
    /// earlier decision and its horizon is never below one: every replica then
    /// compacts with the entry's horizon, whatever history it holds (one that
    /// installed a snapshot knows no earlier decision).
    async fn decide_compaction(&self) -> Result<(), ProposeError> {
        let caught_up = {
            let m = self.inner.raft.metrics().borrow_watched().clone();
            m.last_applied.as_ref().map(|l| l.leader_id.term) == Some(m.current_term)
        };
        let Some(horizon) = self.inner.log.compaction_wants().filter(|_| caught_up && self.is_leader())
        else {
            return Ok(());
        };
        self.wake();
        let write = self.write(crate::entry::compaction_batch(horizon));
        match tokio::time::timeout(Duration::from_millis(limits::PROPOSE_TIMEOUT_MS), write).await {
            Err(_) => Err(ProposeError::Timeout),
            Ok(result) => result.map(drop),
        }
    }

    /// Stops the group, then waits for its committed-id writer's last write and
    /// its state machine (bounded); whether all ended in time.
    async fn close(&self) -> bool {
        self.inner.stopped.store(true, Ordering::Release);
        let mut writer = self.inner.writer.clone();
        let stop = async {
            let _ = self.inner.raft.shutdown().await;
            writer.wait_for(|writing| *writing == 0).await.is_ok()
        };
        let stopped = tokio::time::timeout(Duration::from_millis(limits::GROUP_SHUTDOWN_MS), stop).await;
        self.inner.watcher.abort();
        if stopped.is_err() {
            tracing::warn!(group = self.inner.id, "the Raft group did not stop in time");
        }
        stopped.unwrap_or(false)
    }
}

pub(super) fn fatal(e: Fatal<crate::types::TypeConfig>) -> ProposeError {
    match e {
        Fatal::Stopped => ProposeError::Shutdown,
        Fatal::StorageError(_) | Fatal::Panicked => ProposeError::Failed(e.to_string()),
    }
}

fn lease_expired(
    e: &openraft::errors::RaftError<crate::types::TypeConfig, ClientWriteError<crate::types::TypeConfig>>,
) -> bool {
    matches!(
        e,
        openraft::errors::RaftError::APIError(ClientWriteError::ForwardToLeader(f))
            if f.reason == openraft::errors::ForwardReason::LeaseExpired
    )
}

fn write_error(
    e: openraft::errors::RaftError<crate::types::TypeConfig, ClientWriteError<crate::types::TypeConfig>>,
) -> ProposeError {
    match e {
        openraft::errors::RaftError::APIError(api) => match api {
            ClientWriteError::ForwardToLeader(f) => ProposeError::NotLeader { leader: f.leader_id },
            ClientWriteError::LogEntryDiscarded(f) => ProposeError::LeadershipLost { leader: f.leader_id },
            ClientWriteError::ChangeMembershipError(e) => ProposeError::Failed(e.to_string()),
            ClientWriteError::PreconditionFailed(e) => ProposeError::Failed(e.to_string()),
        },
        openraft::errors::RaftError::Fatal(f) => fatal(f),
    }
}
