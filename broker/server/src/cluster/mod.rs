//! The broker as a cluster member (docs/cluster.md): the Raft host over es-peer,
//! the replicated metadata log (`metadata.rs`), one Raft group per data partition,
//! and what every protocol needs to follow leaders (`Cluster::replica`, node
//! addresses). Without `--node-id`/`--cluster-peers` none of this exists and the
//! broker is the single node it always was.

mod balance;
mod blobs;
mod directory;
pub mod ends;
mod image;
mod internal;
mod members;
mod metadata;
pub mod placement;
mod racks;
mod reads;
mod rpc;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use es_groups::LeaderHint;
use es_raft::{Group, RaftHost, Timers};
use serde::{Deserialize, Serialize};

use crate::registry::{Registry, Topic, TopicKind};
use crate::service::error::{BrokerError, Result};

pub use internal::internal_group_id;
pub use metadata::MetadataLog;

/// Where clients reach a node, as that node advertises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddresses {
    /// The Kafka listener's advertised `host:port`.
    pub kafka_host: String,
    pub kafka_port: u16,
    /// The HTTP API's base URL (`http://host:port`).
    pub http: String,
    /// The binary protocol's `host:port`.
    pub binary: String,
    /// The node's rack (`cluster.rack`, Kafka's `broker.rack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

/// How this node joins its cluster.
pub struct ClusterOptions {
    pub node_id: u64,
    /// Every node's peer-listener address, this node's included.
    pub peers: BTreeMap<u64, String>,
    pub secrets: es_peer::Secrets,
    pub timers: Timers,
    /// This node's client-facing addresses (exchanged with the peers).
    pub addresses: NodeAddresses,
    /// How often this node hands partitions it leads beyond its share to the
    /// voters that lead the fewest (`cluster.leader_balance_ms`); `None`: never.
    pub leader_balance: Option<Duration>,
    /// This node joins a running cluster (`--cluster-join`): it forms no group
    /// itself and waits to be added (`es cluster add-node`).
    pub join: bool,
    pub metadata_log: MetadataLogConfig,
}

/// The metadata log's segments and retention (`cluster.metadata_segment_bytes`,
/// `cluster.metadata_retention_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataLogConfig {
    pub segment_bytes: u64,
    /// Bytes of applied commands kept before older segments go; 0 keeps all.
    pub retention_bytes: u64,
}

impl MetadataLogConfig {
    /// The log's config: kept by size only, never by age.
    pub fn log_config(&self) -> es_log::LogConfig {
        let retention_bytes = if self.retention_bytes == 0 { -1 } else { self.retention_bytes as i64 };
        es_log::LogConfig {
            segment_bytes: self.segment_bytes,
            retention_ms: -1,
            retention_bytes,
            ..es_log::LogConfig::default()
        }
    }
}

impl Default for MetadataLogConfig {
    fn default() -> MetadataLogConfig {
        MetadataLogConfig { segment_bytes: 8 * 1024 * 1024, retention_bytes: 100 * 1024 * 1024 }
    }
}

/// A partition whose group is on other nodes (`Cluster::remote`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    pub leader: Option<u64>,
    pub epoch: es_core::LeaderEpoch,
    pub replicas: Vec<u64>,
}

/// A data partition: its topic's id and its number.
type PartitionKey = ([u8; 16], u32);

/// One cluster member's state.
pub struct Cluster {
    node_id: u64,
    /// The members (`members.rs`), as this node last applied them; every group's
    /// voters are brought to them.
    members: RwLock<members::Members>,
    host: RaftHost,
    registry: Arc<Registry>,
    metadata: MetadataLog,
    /// `__es_offsets` and `__es_schemas`.
    internal: internal::InternalGroups,
    /// The HTTP API, built on first use, for writes forwarded from followers.
    http: std::sync::OnceLock<(axum::Router, tokio::sync::watch::Sender<bool>)>,
    /// The Raft group of each data partition, by (topic id, partition).
    groups: RwLock<HashMap<PartitionKey, Group>>,
    /// Client addresses of the nodes, learned from each (this one's included).
    nodes: RwLock<BTreeMap<u64, NodeAddresses>>,
    /// Every node's rack as last heard, kept across restarts (`racks.rs`).
    racks: Arc<racks::Remembered>,
    runtime: tokio::runtime::Handle,
    /// One idempotent producer's proposals to one partition, in the order they
    /// arrived: its duplicate check and append must not interleave with another
    /// batch of the same producer there (a retry would pass the check while its
    /// original is in flight), nor overtake one (a batch proposed before the one
    /// before it is refused out of order, which Kafka clients take as fatal).
    /// Other producers' batches do not touch its state, so they go in parallel.
    /// The entry is the last turn's id and the signal its end sends
    /// (`IdempotentTurn`); removed when that turn ends with none after it.
    idempotent: Mutex<HashMap<ProducerKey, (u64, tokio::sync::oneshot::Receiver<()>)>>,
    turns: std::sync::atomic::AtomicU64,
    /// Wakes the blob fetcher (`blobs.rs`): an applied upload left a blob missing.
    blobs_wanted: Arc<tokio::sync::Notify>,
    /// Partitions moved away from this node whose groups are still open here
    /// (`placement::retire` closes them).
    retiring: Mutex<std::collections::BTreeSet<PartitionKey>>,
    /// Held while groups are opened for a placement (`open_groups`), while a
    /// moved-away replica is closed and its log discarded (`placement.rs`), and
    /// while a topic is deleted: none of them acts on a log another is changing.
    placing: tokio::sync::Mutex<()>,
    /// Who leads the partitions this node does not replicate, as their leaders
    /// announce it (`directory.rs`).
    directory: directory::Directory,
}

/// (topic id, partition, producer id): what `Cluster::idempotent` orders.
type ProducerKey = ([u8; 16], u32, i64);

/// A producer's turn at a partition (`Cluster::idempotent_turn`), taken when the
/// batch arrives, in the request's order, before any task runs: `wait` until the
/// turn before it ended, then check and propose; dropping it ends the turn.
pub struct IdempotentTurn {
    cluster: Arc<Cluster>,
    key: ProducerKey,
    id: u64,
    before: Option<tokio::sync::oneshot::Receiver<()>>,
    /// Dropped with the turn: the next turn's `before` resolves.
    _done: tokio::sync::oneshot::Sender<()>,
}

impl IdempotentTurn {
    /// Resolves once every earlier turn of this producer at this partition ended.
    pub async fn wait(&mut self) {
        if let Some(before) = self.before.take() {
            // A dropped sender (the turn ended, however) is the signal too.
            let _ = before.await;
        }
    }
}

impl Drop for IdempotentTurn {
    fn drop(&mut self) {
        let mut turns = self.cluster.idempotent.lock().expect("idempotent turns");
        if turns.get(&self.key).is_some_and(|(last, _)| *last == self.id) {
            turns.remove(&self.key);
        }
    }
}

/// A data partition's group id: stable on every node, from the topic id (which the
/// replicated create carries) and the partition. 0 is the metadata group.
pub fn group_id(topic_id: &[u8; 16], partition: u32) -> u64 {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(topic_id);
    h.update(partition.to_be_bytes());
    let digest = h.finalize();
    let id = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    id.max(1)
}

impl Cluster {
    /// Starts the Raft host on `listener`, opens the metadata group and every data
    /// partition's group, and makes `registry` replicate its changes through this
    /// cluster. Runs on the runtime the broker serves on.
    pub async fn start(
        registry: Arc<Registry>,
        options: ClusterOptions,
        listener: tokio::net::TcpListener,
    ) -> Result<Arc<Cluster>> {
        let ClusterOptions { node_id, peers, secrets, timers, addresses, leader_balance, join, metadata_log } =
            options;
        let members = start_members(node_id, &peers, &cluster_dir(&registry))?;
        let remembered = Arc::new(racks::Remembered::load(&cluster_dir(&registry)));
        racks::remember(&remembered, node_id, addresses.rack.as_deref());
        let voters: Vec<u64> = members.nodes.keys().copied().collect();
        let others =
            members.nodes.iter().filter(|(id, _)| **id != node_id).map(|(id, a)| (*id, a.clone())).collect();
        let peer_config = es_peer::PeerConfig {
            node_id,
            peers: others,
            secrets,
            timeouts: es_peer::Timeouts::default(),
            tls: None,
        };
        let slot: Arc<std::sync::OnceLock<Weak<Cluster>>> = Arc::default();
        let app = rpc::handler(slot.clone());
        let host = RaftHost::start(peer_config, listener, timers, Some(app)).map_err(raft_error)?;
        if join {
            host.join();
        }
        host.set_members(members.ids());
        let log = registry.open_cluster_log("metadata", metadata_log.log_config())?;
        let group = host.open_group(0, log, &voters).await.map_err(raft_error)?;
        let metadata = MetadataLog::open(&registry, group)?;
        let internal = internal::open(&host, &registry, &voters).await?;
        let cluster = Arc::new(Cluster {
            node_id,
            members: RwLock::new(members),
            host,
            registry: registry.clone(),
            metadata,
            internal,
            http: std::sync::OnceLock::new(),
            groups: RwLock::default(),
            nodes: RwLock::new(BTreeMap::from([(node_id, addresses)])),
            racks: remembered,
            runtime: tokio::runtime::Handle::current(),
            idempotent: Mutex::default(),
            turns: std::sync::atomic::AtomicU64::new(0),
            blobs_wanted: Arc::default(),
            retiring: Mutex::default(),
            placing: tokio::sync::Mutex::new(()),
            directory: directory::Directory::default(),
        });
        let _ = slot.set(Arc::downgrade(&cluster));
        for topic in registry.list() {
            refuse_single_node_data(&topic, node_id)?;
            cluster.open_groups(&topic, true).await?;
        }
        internal::spawn_coordinator(&cluster);
        internal::spawn_schema_applier(&cluster);
        registry.set_cluster(cluster.clone());
        let adopting = registry.clone();
        tokio::task::spawn_blocking(move || adopting.adopt_stranded_plugins())
            .await
            .map_err(|e| BrokerError::Internal(format!("adopting plugins: {e}")))?;
        blobs::spawn_fetcher(&cluster);
        placement::spawn_retirer(&cluster);
        directory::spawn(&cluster);
        metadata::spawn_applier(&cluster);
        rpc::spawn_address_exchange(&cluster);
        if let Some(interval) = leader_balance {
            balance::spawn(&cluster, interval);
        }
        tracing::info!(node = node_id, voters = ?voters, join, peer = %cluster.host.peer_addr(), "joined the cluster");
        Ok(cluster)
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// Every member of the cluster, by id.
    pub fn voters(&self) -> Vec<u64> {
        self.members.read().expect("members lock").nodes.keys().copied().collect()
    }

    /// Every member with its peer address.
    pub fn members(&self) -> BTreeMap<u64, String> {
        self.members.read().expect("members lock").nodes.clone()
    }

    /// Adds node `id`, its peer listener at `peer`, to the cluster: committed
    /// through the metadata log; every group's leader then adds it as a learner
    /// and makes it a voter once it caught up (`RaftHost::set_members`).
    pub async fn add_node(&self, id: u64, peer: String) -> Result<()> {
        members::check_peer_address(&peer)?;
        self.replicate_async(crate::registry::metadata::Command::AddNode { id, peer }).await
    }

    /// Removes node `id` from the cluster for good: committed through the metadata
    /// log; the leaders drop it from every group's voters, and the node itself
    /// closes its groups.
    ///
    /// First every placed partition it replicates is moved (`placement::without_node`):
    /// to the member holding the fewest replicas, or, when every other member has
    /// one already, to the others alone. Answers how many partitions moved.
    pub async fn remove_node(&self, id: u64) -> Result<usize> {
        use crate::registry::metadata::Command;
        let members = self.members.read().expect("members lock").ids();
        if !members.contains(&id) {
            // Refused on apply with the members named.
            self.replicate_async(Command::RemoveNode { id }).await?;
            return Ok(0);
        }
        // Planned again until nothing names the node: a topic created or grown
        // meanwhile may have been placed on it.
        let mut moved = 0;
        loop {
            let moves =
                placement::without_node(id, &members, &self.racks(), self.registry.topic_metas().iter());
            if moves.is_empty() {
                break;
            }
            moved += moves.len();
            self.drain(id, &moves).await?;
        }
        // Refused on apply, on every node alike, if a placement still names it.
        self.replicate_async(Command::RemoveNode { id }).await?;
        Ok(moved)
    }

    /// Commits `moves` off node `id` and waits until each group's committed
    /// membership shows it.
    async fn drain(&self, id: u64, moves: &[(String, u32, Vec<u64>)]) -> Result<()> {
        use crate::registry::metadata::Command;
        for (name, partition, replicas) in moves {
            let command = Command::SetReplicas {
                name: name.clone(),
                partition: *partition,
                replicas: replicas.clone(),
            };
            self.replicate_async(command).await?;
        }
        // The node leaves only once no group needs it: a joint change from a group
        // it replicates needs a majority of the old replicas, which may include it.
        let deadline = tokio::time::Instant::now() + REMOVE_MOVE_WAIT;
        for (name, partition, replicas) in moves {
            let want: std::collections::BTreeSet<u64> = replicas.iter().copied().collect();
            loop {
                if self.settled_membership(name, *partition).await.is_some_and(|m| m == want) {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(BrokerError::Timeout(format!(
                        "partition {partition} of {name:?} did not finish moving to {replicas:?} within \
                         {REMOVE_MOVE_WAIT:?} (is a majority of its replicas running?); node {id} stays a member: \
                         run remove-node again once `es cluster status` shows the partition moved"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    }

    /// The committed membership of a partition's group as its leader answers it
    /// (this node, or the leader it knows of); `None` when unknown or changing.
    async fn settled_membership(
        &self,
        topic: &str,
        partition: u32,
    ) -> Option<std::collections::BTreeSet<u64>> {
        let t = self.registry.topic(topic).ok()?;
        let group = self.replica(&t, partition);
        if let Some(g) = &group
            && let Some(m) = g.committed_membership()
        {
            return Some(m);
        }
        let gid = group_id(&t.id, partition);
        let leader = group.and_then(|g| g.leader()).or_else(|| self.directory.leader(gid).map(|(l, _)| l))?;
        if leader == self.node_id {
            return None;
        }
        directory::ask_membership(self, leader, gid).await
    }

    /// Moves `topic`'s `partition` to `replicas` (`es cluster move`), committed
    /// through the metadata log: the group's leader adds the new replicas as
    /// learners, makes them voters once caught up (a joint change) and drops the
    /// old ones; a leader that is no longer a replica hands over first.
    pub async fn move_replicas(&self, topic: &Topic, partition: u32, replicas: Vec<u64>) -> Result<()> {
        placement::check_replicas(&replicas, &self.members.read().expect("members lock").ids())?;
        let name = topic.name();
        if topic.meta.lock().expect("meta lock").replicas_of(partition).is_none() {
            return Err(BrokerError::InvalidRequest(format!(
                "partition {partition} of {name:?} has no placement to change: the topic was created before \
                 placement and every member replicates it"
            )));
        }
        let command = crate::registry::metadata::Command::SetReplicas { name, partition, replicas };
        self.replicate_async(command).await
    }

    /// A data partition placed on other nodes only: its replicas and, when
    /// announced (`directory.rs`), its leader and term. `None` when this node has
    /// the partition's group, for internal topics, and for partitions every member
    /// replicates.
    pub fn remote(&self, topic: &Topic, partition: u32) -> Option<Remote> {
        if topic.kind == TopicKind::Internal || self.replica(topic, partition).is_some() {
            return None;
        }
        let replicas = topic.meta.lock().expect("meta lock").replicas_of(partition)?.to_vec();
        let announced = self.directory.leader(group_id(&topic.id, partition));
        // Any announced leader: while a partition moves to other nodes altogether,
        // an old replica still leads it until the new ones take over.
        let (leader, term) = announced.map_or((None, 0), |(l, t)| (Some(l), t));
        Some(Remote {
            leader,
            epoch: es_core::LeaderEpoch(i32::try_from(term).unwrap_or(i32::MAX)),
            replicas,
        })
    }

    /// Applies a committed membership command (`metadata.rs`): the members file
    /// first, then the peer links and the groups' target voters.
    async fn apply_membership(&self, command: &crate::registry::metadata::Command) -> Result<()> {
        if let crate::registry::metadata::Command::RemoveNode { id } = command
            && let Some(t) = self
                .registry
                .topic_metas()
                .into_iter()
                .find(|t| t.replicas.iter().flatten().any(|r| r.contains(id)))
        {
            return Err(BrokerError::InvalidRequest(format!(
                "node {id} still replicates partitions of {:?}: es cluster remove-node moves them off it \
                 first; run it again",
                t.name
            )));
        }
        let mut members = self.members.read().expect("members lock").clone();
        let change = members.apply(command)?;
        if change != members::Change::Unchanged {
            members.save(&cluster_dir(&self.registry))?;
        }
        let ids = members.ids();
        *self.members.write().expect("members lock") = members;
        match change {
            members::Change::Unchanged => {}
            members::Change::Added { id, peer } => {
                if id != self.node_id {
                    self.host.add_peer(id, &peer).map_err(|e| BrokerError::Internal(e.to_string()))?;
                }
                tracing::info!(node = self.node_id, added = id, %peer, "a node joined the cluster");
            }
            members::Change::Removed { id } if id == self.node_id => {
                tracing::warn!(
                    node = id,
                    "this node was removed from the cluster: its groups are closed; stop this process \
                     (its id may not be used again)"
                );
                self.host.shutdown().await;
                return Ok(());
            }
            members::Change::Removed { id } => {
                self.host.remove_peer(id);
                self.nodes.write().expect("nodes lock").remove(&id);
                racks::remember(&self.racks, id, None);
                tracing::info!(node = self.node_id, removed = id, "a node left the cluster");
            }
        }
        self.host.set_members(ids);
        Ok(())
    }

    /// The client addresses of node `id`, once learned.
    pub fn addresses(&self, id: u64) -> Option<NodeAddresses> {
        self.nodes.read().expect("nodes lock").get(&id).cloned()
    }

    /// Every node whose addresses are known.
    pub fn known_nodes(&self) -> BTreeMap<u64, NodeAddresses> {
        self.nodes.read().expect("nodes lock").clone()
    }

    /// The rack of every node that names one, as this node last heard it, now or
    /// before a restart (placement uses them when every member's is known).
    pub fn racks(&self) -> BTreeMap<u64, String> {
        self.racks.racks()
    }

    /// Node `id`'s client addresses, as it advertised them (asked of a member,
    /// which may have left since: then forgotten).
    fn learn_addresses(&self, id: u64, addresses: NodeAddresses) {
        if !self.members.read().expect("members lock").nodes.contains_key(&id) {
            return;
        }
        racks::remember(&self.racks, id, addresses.rack.as_deref());
        self.nodes.write().expect("nodes lock").insert(id, addresses);
    }

    /// The metadata group's leader (the controller, in Kafka's words).
    pub fn controller(&self) -> Option<u64> {
        self.metadata.group().leader()
    }

    /// The group coordinator: the leader of `__es_offsets`' group (Kafka's design).
    pub fn coordinator(&self) -> Option<u64> {
        self.internal.offsets.leader()
    }

    /// The schema registry's writer: the leader of `__es_schemas`' group.
    pub fn schemas_leader(&self) -> Option<u64> {
        self.internal.schemas.leader()
    }

    /// Whether this node leads `__es_schemas` now.
    pub fn leads_schemas(&self) -> bool {
        self.internal.schemas.is_leader()
    }

    /// Sends a schema-registry write to the registry's leader (`http/forward.rs`).
    pub async fn forward_http(
        &self,
        leader: u64,
        payload: bytes::Bytes,
    ) -> std::result::Result<bytes::Bytes, es_peer::PeerError> {
        rpc::forward_http(self, leader, payload).await
    }

    /// This node's HTTP API, for writes forwarded to it (built on first use; its
    /// shutdown signal never fires: a forwarded write does not long-poll).
    fn http_router(&self) -> axum::Router {
        let (router, _never) = self.http.get_or_init(|| {
            let (tx, rx) = tokio::sync::watch::channel(false);
            (crate::http::router(self.registry.clone(), rx), tx)
        });
        router.clone()
    }

    /// The Raft group of a data partition, when this node holds it.
    pub fn replica(&self, topic: &Topic, partition: u32) -> Option<Group> {
        if topic.kind == TopicKind::Internal {
            return None;
        }
        self.groups.read().expect("groups lock").get(&(topic.id, partition)).cloned()
    }

    /// The turn of an idempotent produce of `producer_id` to the partition, after
    /// every produce of that producer there that arrived before it; it holds the
    /// turn from its duplicate check until its batch is committed. Take it where
    /// the batch arrives, not in a task spawned for it (tasks start in any order).
    pub fn idempotent_turn(
        self: &Arc<Self>,
        topic: &Topic,
        partition: u32,
        producer_id: i64,
    ) -> IdempotentTurn {
        let key = (topic.id, partition, producer_id);
        let id = self.turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (done, next) = tokio::sync::oneshot::channel();
        let before =
            self.idempotent.lock().expect("idempotent turns").insert(key, (id, next)).map(|(_, rx)| rx);
        IdempotentTurn { cluster: self.clone(), key, id, before, _done: done }
    }

    /// A leader hint for errors: the leader's HTTP URL when known, else its id.
    pub fn leader_hint(&self, leader: Option<u64>) -> Option<LeaderHint> {
        let leader = leader?;
        Some(match self.addresses(leader) {
            Some(a) => LeaderHint { http: a.http, binary: Some(a.binary) },
            None => LeaderHint { http: format!("node {leader}"), binary: None },
        })
    }

    /// "This node does not lead `partition` of `topic`", with the leader's HTTP
    /// hint and advertised binary address when known (es-client follows the latter).
    pub fn not_leader(&self, topic: String, partition: u32, leader: Option<u64>) -> BrokerError {
        BrokerError::NotLeader { topic, partition, leader: self.leader_hint(leader) }
    }

    /// Brings this node's groups of `topic` to its placement: opens the group of
    /// every partition placed here that is not open yet and points each group at
    /// its replicas (`Group::set_target`); a group open here for a partition no
    /// longer placed here is pointed at its new replicas too and let go once its
    /// membership no longer names this node (`placement::retire`). `starting`:
    /// also rejoin, until then, a group this node has a vote in but whose
    /// partition is no longer placed here (a move a restart interrupted; only a
    /// restart loses the open group, so only start-up reads the vote files).
    /// Idempotent.
    async fn open_groups(&self, topic: &Arc<Topic>, starting: bool) -> Result<()> {
        if topic.kind == TopicKind::Internal {
            return Ok(());
        }
        let _placing = self.placing.lock().await;
        let meta = topic.meta.lock().expect("meta lock").clone();
        for (p, log) in topic.partitions.iter().enumerate() {
            let p = p as u32;
            let placed = meta.replicas_of(p);
            let here = placed.is_none_or(|r| r.contains(&self.node_id));
            let target = placed.map(|r| r.iter().copied().collect::<std::collections::BTreeSet<u64>>());
            let open = self.groups.read().expect("groups lock").get(&(topic.id, p)).cloned();
            match (open, here) {
                (Some(group), _) => {
                    group.set_target(target);
                    if !here {
                        self.retiring.lock().expect("retiring lock").insert((topic.id, p));
                    }
                }
                // Not placed here, but this node took part in the group (a vote on
                // disk): a move away that a restart interrupted. It may still be a
                // voter the move's joint change needs, so it rejoins until the
                // leader's committed membership no longer names it.
                (None, false) => {
                    if !starting {
                        continue;
                    }
                    if log.read_raft_file(es_log::RaftFile::Vote)?.is_none() {
                        // No part in the group (never, or its copy was being
                        // discarded when the node stopped): whatever is left goes.
                        placement::discard_leftover(&topic.name(), p, log).await;
                        continue;
                    }
                    let group = self
                        .host
                        .open_group(group_id(&topic.id, p), log.clone(), &[])
                        .await
                        .map_err(raft_error)?;
                    group.set_target(target);
                    self.groups.write().expect("groups lock").insert((topic.id, p), group);
                    self.retiring.lock().expect("retiring lock").insert((topic.id, p));
                }
                (None, true) => {
                    // A copy without a vote is what an interrupted discard left: the
                    // node joins as a new replica, with an empty log.
                    if starting
                        && meta.moved.contains(&p)
                        && log.read_raft_file(es_log::RaftFile::Vote)?.is_none()
                    {
                        placement::discard_leftover(&topic.name(), p, log).await;
                    }
                    // A partition moved here joins the group its first replicas formed.
                    let voters: Vec<u64> = match placed {
                        _ if meta.moved.contains(&p) => Vec::new(),
                        Some(r) => r.to_vec(),
                        None => self.voters(),
                    };
                    let group = self
                        .host
                        .open_group(group_id(&topic.id, p), log.clone(), &voters)
                        .await
                        .map_err(raft_error)?;
                    group.set_target(target);
                    self.groups.write().expect("groups lock").insert((topic.id, p), group);
                }
            }
        }
        Ok(())
    }

    /// Closes the groups of a topic about to be deleted (the caller holds
    /// `placing` until the deletion is applied).
    async fn close_groups(&self, topic: &Topic) {
        for p in 0..topic.partition_count() {
            let removed = self.groups.write().expect("groups lock").remove(&(topic.id, p));
            if removed.is_some() {
                self.host.close_group(group_id(&topic.id, p)).await;
            }
        }
    }

    /// Whether the metadata group has a leader and this node applied all of its log
    /// it knows to be committed (what a node waits for before it imports its
    /// bootstrap key).
    pub fn metadata_caught_up(&self) -> bool {
        self.metadata.caught_up()
    }

    /// Every data partition's leader as this node knows it, with the in-sync voters
    /// of the ones it leads (what the leader balancer plans from).
    fn seen_partitions(&self) -> Vec<balance::Seen> {
        let groups: Vec<(PartitionKey, Group)> =
            self.groups.read().expect("groups lock").iter().map(|(k, g)| (*k, g.clone())).collect();
        groups
            .into_iter()
            .map(|(key, g)| {
                let leader = g.leader();
                let in_sync = if g.is_leader() { g.status().in_sync } else { Vec::new() };
                let preferred = self.registry.topic_by_id(key.0).and_then(|t| {
                    t.meta.lock().expect("meta lock").replicas_of(key.1).and_then(|r| r.first().copied())
                });
                balance::Seen { key, leader, in_sync, preferred }
            })
            .collect()
    }

    /// Stops every group and the peer links (bounded).
    pub async fn shutdown(&self) {
        self.host.shutdown().await;
    }

    /// Commits `command` through the metadata group and waits for this node's apply.
    async fn replicate_async(&self, command: crate::registry::metadata::Command) -> Result<()> {
        let offset = self.metadata.propose(self, &command).await?;
        self.metadata.outcome(offset, metadata::APPLY_WAIT).await
    }
}

impl Cluster {
    /// Commits a metadata command cluster-wide and answers this node's apply of it.
    /// Blocking: registry changes run on blocking threads (service/admin.rs), so
    /// waiting here holds no async worker.
    pub(crate) fn replicate(&self, command: crate::registry::metadata::Command) -> Result<()> {
        self.runtime.block_on(self.replicate_async(command))
    }
}

/// `<data>/cluster`: the node's own cluster files (members, metadata progress).
fn cluster_dir(registry: &Registry) -> std::path::PathBuf {
    registry.options().data_dir.join("cluster")
}

/// The members a node starts with: those it last applied (`members.json`), with
/// the addresses `--cluster-peers` gives for them (an operator's move of a node),
/// or the nodes of `--cluster-peers` before any membership command. A node that
/// was removed does not start; one joining and not yet added counts itself in.
fn start_members(
    node_id: u64,
    peers: &BTreeMap<u64, String>,
    dir: &std::path::Path,
) -> Result<members::Members> {
    let Some(mut stored) = members::Members::load(dir)? else {
        return Ok(members::Members { nodes: peers.clone(), removed: Default::default() });
    };
    if stored.removed.contains(&node_id) {
        return Err(BrokerError::InvalidConfig(format!(
            "node {node_id} was removed from its cluster (es cluster remove-node) and may not come back under \
             the same id: start it with an empty data directory, another --node-id and --cluster-join, then \
             add it with es cluster add-node"
        )));
    }
    for (id, addr) in peers {
        if let Some(known) = stored.nodes.get_mut(id) {
            known.clone_from(addr);
        }
    }
    if let Some(own) = peers.get(&node_id) {
        stored.nodes.entry(node_id).or_insert_with(|| own.clone());
    }
    Ok(stored)
}

/// A partition a single node wrote (records, but never a Raft vote) cannot become a
/// Raft group: its batches have no Raft indexes and the other nodes do not have
/// them. Refused at start, before openraft sees it.
fn refuse_single_node_data(topic: &Topic, node_id: u64) -> Result<()> {
    let meta = topic.meta.lock().expect("meta lock").clone();
    for (p, log) in topic.partitions.iter().enumerate() {
        // Placed elsewhere, or moved here: what is left is a moved-away copy or
        // one an interrupted discard left, which `open_groups` discards.
        if meta.replicas_of(p as u32).is_some_and(|r| !r.contains(&node_id))
            || meta.moved.contains(&(p as u32))
        {
            continue;
        }
        let voted = log.read_raft_file(es_log::RaftFile::Vote)?.is_some();
        if !voted && log.info().log_end_offset > 0 {
            return Err(BrokerError::InvalidConfig(format!(
                "partition {} holds records written by a single-node broker; a data directory with data \
                 cannot join a cluster yet: start the cluster on empty data directories and copy topics \
                 in with a client (docs/cluster.md)",
                log.name()
            )));
        }
    }
    Ok(())
}

/// A Raft failure as the service's error: the group could not do its part.
pub(crate) fn raft_error(e: es_raft::RaftError) -> BrokerError {
    BrokerError::Internal(format!("replication: {e}"))
}

/// How long `remove_node` waits for the node's partitions to move off it.
const REMOVE_MOVE_WAIT: Duration = Duration::from_secs(120);

/// How long a write waits for a leader to appear before it is refused.
pub(crate) const LEADER_WAIT: Duration = Duration::from_secs(10);
