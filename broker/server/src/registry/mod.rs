//! The topic registry: which topics exist, their partitions' logs and their config.
//! Changes are commands of the metadata state machine (`metadata.rs`, no I/O) made
//! durable through the metadata store seam (`store.rs`) before they are applied;
//! this module does the local part: partition directories, logs, validator chains.
//! Metadata is written only after every partition directory exists, and removed
//! before any data is deleted, so a crash never leaves a half-created topic visible;
//! startup deletes partition directories that no topic owns.

mod bindings;
mod cluster_plugins;
pub(crate) mod metadata;
mod replicas;
mod replicated;
pub mod snapshot;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use es_core::{Clock, SystemClock};
use es_log::{LogManager, ManagerOptions, PartitionLog, RecoveryReport};
use serde_json::Value;

use crate::config::TopicConfig;
use crate::limits;
use crate::plugins::binding::{Chain, Link, ValidatorBinding};
use crate::plugins::{Manifest, Plugins, Upload};
use crate::service::error::{BrokerError, Result};
use crate::store::{self, FileMetadataStore, MetadataStore, TopicMeta};
use metadata::{Command, Metadata, Origin, is_internal};
pub use replicas::REPLICATION_FACTOR;
use replicas::split_replication_factor;
pub use replicated::Applied;

/// How the broker was started.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    pub data_dir: PathBuf,
    /// Where topics with `cold.tier.enable` move expired segments.
    pub cold_dir: Option<PathBuf>,
    /// The cold tier's store (an S3 bucket, or a directory), cache and retention;
    /// set, it replaces `cold_dir`.
    pub cold: Option<es_log::ColdOptions>,
    pub request_bytes_max: usize,
    /// Requests served at once; more get 503 `overloaded`.
    pub in_flight_requests_max: usize,
    /// How often retention, tiering and compaction run.
    pub housekeeping_interval: std::time::Duration,
    /// Where compiled plugins are cached [default: `<data>/plugins/cache`]. Entries
    /// are named by the component's sha256 and the engine's compatibility hash
    /// and written atomically, so brokers of one build may share a directory;
    /// it must be writable only by whoever runs the brokers, since a cached
    /// artifact is loaded as native code.
    pub plugin_cache_dir: Option<PathBuf>,
    /// Kafka's classic groups: `group.initial.rebalance.delay.ms` and the session
    /// timeout range.
    pub kafka_groups: es_groups::classic::ClassicConfig,
    /// Authentication, grants and quotas (off by default: the loopback quickstart).
    pub auth: crate::auth::AuthOptions,
    /// `journal.enabled`: one journal fdatasync per flush round for all partitions
    /// (off: one per dirty segment).
    pub journal: bool,
    /// Where the journal lives, e.g. on another disk [default: `<data>/journal`].
    pub journal_dir: Option<PathBuf>,
    /// Whether metrics are kept, and the Kafka-compatible names.
    pub metrics: crate::metrics::MetricsOptions,
    /// Each listener's connection caps and timeouts.
    pub listeners: crate::listener::Listeners,
}

impl BrokerOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            cold_dir: None,
            cold: None,
            request_bytes_max: limits::REQUEST_BYTES_MAX_DEFAULT,
            in_flight_requests_max: limits::IN_FLIGHT_REQUESTS_MAX_DEFAULT,
            housekeeping_interval: std::time::Duration::from_millis(limits::HOUSEKEEPING_INTERVAL_MS_DEFAULT),
            plugin_cache_dir: None,
            kafka_groups: es_groups::classic::ClassicConfig::default(),
            auth: crate::auth::AuthOptions::default(),
            journal: true,
            journal_dir: None,
            metrics: crate::metrics::MetricsOptions::default(),
            listeners: crate::listener::Listeners::default(),
        }
    }
}

/// What startup found: counts, and one human sentence per repair.
#[derive(Debug, Default)]
pub struct StartupReport {
    pub topics: usize,
    pub partitions: usize,
    pub repairs: Vec<String>,
}

/// Whose records a topic holds. An internal topic (`__es_*`) is written by the
/// broker alone (the group service, the schema registry): every client write is
/// refused, whatever the protocol, because this is a property of the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicKind {
    Data,
    Internal,
}

impl TopicKind {
    pub fn of(name: &str) -> TopicKind {
        if is_internal(name) { TopicKind::Internal } else { TopicKind::Data }
    }
}

/// One topic: its metadata and one log per partition.
pub struct Topic {
    pub kind: TopicKind,
    /// The topic's UUID (Kafka's topic id), fixed for its life.
    pub id: [u8; 16],
    pub meta: Mutex<TopicMeta>,
    pub partitions: Vec<Arc<PartitionLog>>,
    /// Round-robin start for unkeyed batches (sticky per batch).
    sticky: AtomicU32,
    /// The validators a produce runs; swapped whole on rebinding.
    validators: RwLock<Arc<Chain>>,
    /// Records and bytes in and out, for metrics; kept across add-partitions.
    pub stats: Arc<crate::metrics::TopicStats>,
}

impl Topic {
    pub fn name(&self) -> String {
        self.meta.lock().expect("meta lock").name.clone()
    }

    pub fn config(&self) -> TopicConfig {
        self.meta.lock().expect("meta lock").config.clone()
    }

    pub fn partition_count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// The partition log, or a typed error naming the topic's partition count.
    pub fn partition(&self, partition: u64) -> Result<&Arc<PartitionLog>> {
        usize::try_from(partition).ok().and_then(|p| self.partitions.get(p)).ok_or_else(|| {
            BrokerError::PartitionNotFound { topic: self.name(), partition, count: self.partition_count() }
        })
    }

    /// The validator chain to run on one produce: batches keep the chain they
    /// started with while a rebinding swaps in a new one.
    pub fn validators(&self) -> Arc<Chain> {
        self.validators.read().expect("validators lock").clone()
    }

    /// Refuses a client write to an internal topic.
    pub fn check_client_write(&self) -> Result<()> {
        match self.kind {
            TopicKind::Data => Ok(()),
            TopicKind::Internal => Err(BrokerError::InternalTopic(self.name())),
        }
    }

    /// The partition all unkeyed records of one batch go to.
    pub fn sticky_partition(&self) -> u32 {
        self.sticky.fetch_add(1, Ordering::Relaxed) % self.partition_count()
    }
}

pub struct Registry {
    options: BrokerOptions,
    manager: LogManager,
    /// Where metadata commands are made durable (files now, a replicated log later).
    store: Box<dyn MetadataStore>,
    /// The metadata every command is checked against; changed only under `admin`,
    /// after the store made the command durable.
    metadata: RwLock<Metadata>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises every metadata command. Their disk work happens under this lock
    /// only, so lookups by produce and consume never wait for an fsync.
    admin: Mutex<()>,
    /// Long polls parked now, over every listener's service.
    polls: Arc<crate::service::fetch::PollGauge>,
    /// True once shutdown begins; long polls watch it to return at once.
    shutting_down: tokio::sync::watch::Sender<bool>,
    /// The next producer id to hand out; ids up to the metadata's reserved end are
    /// handed out without a disk write. A restart starts at the reserved end.
    producer_next: Mutex<i64>,
    /// Uploaded and built-in plugins, and the engine that runs them.
    plugins: Arc<Plugins>,
    /// Consumer groups; set once the internal offsets topic is open.
    groups: std::sync::OnceLock<Arc<crate::groups::Groups>>,
    /// The schema registry; set once the internal schemas topic is open.
    schemas: std::sync::OnceLock<Arc<crate::schemas::Schemas>>,
    /// Keys, grants, owners and quotas (`auth.enabled` off: allows everything).
    auth: Arc<crate::auth::Auth>,
    /// Broker-wide metrics the listeners and the service move.
    metrics: Arc<crate::metrics::Metrics>,
    /// Set in a cluster: topic changes go through the metadata Raft group.
    cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    /// Online snapshots and their leases (`snapshot.rs`).
    snapshots: snapshot::Leases,
    /// Held for the broker's life: two brokers on one data directory would corrupt it.
    _lock: std::fs::File,
}

fn partition_dir_name(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

fn io(context: String, e: std::io::Error) -> BrokerError {
    BrokerError::Internal(format!("{context}: {e}"))
}

impl Registry {
    /// Opens the data directory: loads every topic, runs log recovery on each
    /// partition and removes partition directories no topic owns.
    pub fn open(options: BrokerOptions) -> Result<(Arc<Registry>, StartupReport)> {
        let lock = lock_data_dir(&options.data_dir)?;
        let store = FileMetadataStore::open(&options.data_dir)?;
        let metadata = store.load()?;
        let clock: Arc<dyn es_core::Clock> = Arc::new(es_core::SystemClock);
        let auth = Arc::new(crate::auth::Auth::open(&options.data_dir, &options.auth, clock)?);
        auth.stats().set_enabled(options.metrics.enabled);
        let mut report = StartupReport::default();
        let snapshots = snapshot::Leases::open(&options.data_dir, &mut report.repairs)?;
        let plugins = Arc::new(Plugins::open(
            &options.data_dir.join("plugins"),
            options.plugin_cache_dir.as_deref(),
            &mut report.repairs,
        )?);
        // Authenticator plugins (`--auth-mechanisms NAME:plugin`) come from the store.
        auth.set_plugins(plugins.clone());
        let manager = LogManager::new(
            options.data_dir.join("partitions"),
            ManagerOptions {
                cold_dir: options.cold_dir.clone(),
                cold: options.cold.clone(),
                housekeeping_interval: Some(options.housekeeping_interval),
                journal: options.journal,
                journal_dir: options.journal_dir.clone(),
                ..ManagerOptions::default()
            },
        )?;
        let metrics = Arc::new(crate::metrics::Metrics::new(options.metrics));
        let registry = Registry {
            options,
            manager,
            store: Box::new(store),
            producer_next: Mutex::new(metadata.producer_ids_reserved()),
            metadata: RwLock::new(metadata),
            topics: RwLock::new(BTreeMap::new()),
            admin: Mutex::new(()),
            polls: Arc::default(),
            shutting_down: tokio::sync::watch::Sender::new(false),
            plugins,
            groups: std::sync::OnceLock::new(),
            schemas: std::sync::OnceLock::new(),
            auth,
            metrics,
            cluster: std::sync::OnceLock::new(),
            snapshots,
            _lock: lock,
        };
        registry.assign_missing_topic_ids()?;
        let stored: Vec<TopicMeta> =
            registry.metadata.read().expect("metadata lock").topics().cloned().collect();
        for meta in stored {
            let log_config = meta.config.to_log_config()?;
            let mut partitions = Vec::new();
            for p in 0..meta.partitions {
                let dir_name = partition_dir_name(&meta.name, p);
                let (log, recovery) = registry.manager.open_partition(&dir_name, log_config.clone())?;
                describe_recovery(&dir_name, &recovery, &mut report.repairs);
                partitions.push(log);
            }
            report.topics += 1;
            report.partitions += partitions.len();
            // The chain comes later: a `schema-registry` binding needs the schema
            // registry, which reads an internal topic this loop is still opening.
            let unbound = Chain { links: Vec::new(), schema_generation: None };
            registry.insert(meta, partitions, unbound);
        }
        registry.remove_orphans(&mut report.repairs)?;
        registry.open_groups()?;
        registry.open_schemas()?;
        registry.install_uploaded_checkers(&mut report.repairs);
        registry.load_chains(&mut report.repairs);
        Ok((Arc::new(registry), report))
    }

    /// Topics from before topic ids get one now, kept durably so it never changes.
    fn assign_missing_topic_ids(&self) -> Result<()> {
        let _admin = self.admin.lock().expect("admin lock");
        let missing: Vec<String> = self
            .metadata
            .read()
            .expect("metadata lock")
            .topics()
            .filter(|t| t.topic_id.is_none())
            .map(|t| t.name.clone())
            .collect();
        for name in missing {
            self.commit(&Command::SetTopicId { name, id: store::new_topic_id() })?;
        }
        Ok(())
    }

    /// Makes `command` durable, then applies it. The caller holds the admin lock.
    fn commit(&self, command: &Command) -> Result<Metadata> {
        let mut after = self.metadata.read().expect("metadata lock").clone();
        after.apply(command);
        self.store.persist(command, &after)?;
        *self.metadata.write().expect("metadata lock") = after.clone();
        Ok(after)
    }

    /// The metadata as it stands (a copy: commands change it under the admin lock).
    fn metadata(&self) -> std::sync::RwLockReadGuard<'_, Metadata> {
        self.metadata.read().expect("metadata lock")
    }

    /// Loads every topic's validators once everything they may need is open. No
    /// produce runs before `open` returns, so no batch meets a topic unbound.
    fn load_chains(&self, repairs: &mut Vec<String>) {
        let topics: Vec<Arc<Topic>> = self.topics.read().expect("topics lock").values().cloned().collect();
        for topic in topics {
            let (name, specs) = {
                let meta = topic.meta.lock().expect("meta lock");
                (meta.name.clone(), meta.validators.clone())
            };
            if specs.is_empty() {
                continue;
            }
            let chain = self.load_chain(&name, &specs, repairs);
            *topic.validators.write().expect("validators lock") = Arc::new(chain);
        }
    }

    fn insert(&self, meta: TopicMeta, partitions: Vec<Arc<PartitionLog>>, chain: Chain) -> Arc<Topic> {
        self.insert_topic(meta, partitions, Arc::new(chain))
    }

    fn insert_topic(
        &self,
        meta: TopicMeta,
        partitions: Vec<Arc<PartitionLog>>,
        chain: Arc<Chain>,
    ) -> Arc<Topic> {
        let id = meta.topic_id.as_deref().and_then(|s| uuid::Uuid::parse_str(s).ok()).unwrap_or_default();
        let stats = match self.topics.read().expect("topics lock").get(&meta.name) {
            Some(old) => old.stats.clone(),
            None => Arc::new(crate::metrics::TopicStats::new(self.options.metrics.enabled)),
        };
        let topic = Arc::new(Topic {
            stats,
            kind: TopicKind::of(&meta.name),
            id: id.into_bytes(),
            meta: Mutex::new(meta.clone()),
            partitions,
            sticky: AtomicU32::new(0),
            validators: RwLock::new(chain),
        });
        self.topics.write().expect("topics lock").insert(meta.name, topic.clone());
        topic
    }

    /// Deletes partition directories left by a crash during create or delete.
    fn remove_orphans(&self, repairs: &mut Vec<String>) -> Result<()> {
        let owned: BTreeSet<String> = self
            .topics
            .read()
            .expect("topics lock")
            .values()
            .flat_map(|t| (0..t.partition_count()).map(move |p| partition_dir_name(&t.name(), p)))
            .collect();
        let root = self.manager.root();
        let entries = std::fs::read_dir(root).map_err(|e| io(format!("listing {}", root.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(format!("listing {}", root.display()), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let cluster = name.starts_with(replicated::CLUSTER_DIR_PREFIX);
            if owned.contains(&name) || cluster || name == es_log::FORMAT_FILE || name == es_log::JOURNAL_DIR
            {
                continue;
            }
            std::fs::remove_dir_all(entry.path())
                .map_err(|e| io(format!("removing {}", entry.path().display()), e))?;
            repairs.push(format!("removed partition directory {name} that no topic owns (left by an interrupted create or delete)"));
        }
        store::fsync_dir(root).map_err(|e| io(format!("syncing {}", root.display()), e))
    }

    /// The internal compacted topic `name` (one partition), created on first start.
    fn internal_compacted(&self, name: &str) -> Result<Arc<Topic>> {
        match self.topic(name) {
            Ok(t) => Ok(t),
            Err(_) => {
                // Smaller segments than data topics, so compaction (sealed segments
                // only) keeps the log short, as Kafka does for __consumer_offsets.
                let compact = BTreeMap::from([
                    ("cleanup.policy".to_owned(), Value::from("compact")),
                    ("segment.bytes".to_owned(), Value::from(64 * 1024 * 1024)),
                ]);
                self.create_any(Origin::Broker, name, 1, &compact)
            }
        }
    }

    /// Creates the internal offsets topic on first start, then opens the group service.
    fn open_groups(&self) -> Result<()> {
        use crate::groups::{Groups, OFFSETS_TOPIC};
        let topic = self.internal_compacted(OFFSETS_TOPIC)?;
        let groups = Groups::open(topic.partitions[0].clone(), self.options.kafka_groups)?;
        let _ = self.groups.set(Arc::new(groups));
        Ok(())
    }

    /// Creates the internal schemas topic on first start, then opens the schema
    /// registry with the built-in compatibility checkers.
    fn open_schemas(&self) -> Result<()> {
        use crate::schemas::{SCHEMAS_TOPIC, Schemas};
        let topic = self.internal_compacted(SCHEMAS_TOPIC)?;
        let checkers = Arc::new(crate::schemas::builtin_checkers(self.plugins.engine()));
        let schemas = Schemas::open(topic.partitions[0].clone(), checkers)?;
        let _ = self.schemas.set(Arc::new(schemas));
        Ok(())
    }

    /// The schema registry.
    pub fn schemas(&self) -> &Arc<crate::schemas::Schemas> {
        self.schemas.get().expect("opened in Registry::open")
    }

    /// The consumer-group service.
    pub fn groups(&self) -> &Arc<crate::groups::Groups> {
        self.groups.get().expect("opened in Registry::open")
    }

    /// Authentication and the grants every call is authorized against.
    pub fn auth(&self) -> &Arc<crate::auth::Auth> {
        &self.auth
    }

    pub fn options(&self) -> &BrokerOptions {
        &self.options
    }

    /// Broker-wide metrics (`GET /metrics`).
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The log's group-commit counters (rounds, fsyncs and their latency).
    pub fn log_stats(&self) -> &es_log::FlushStats {
        self.manager.stats()
    }

    /// The cold tier's counters (uploads, failures, refused objects, the last
    /// store error), or `None` without a cold tier.
    pub fn cold_status(&self) -> Option<es_log::ColdStatus> {
        self.manager.cold_status()
    }

    pub fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.topics
            .read()
            .expect("topics lock")
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::TopicNotFound(name.to_owned()))
    }

    /// The topic whose id is `id` (Kafka's topic ids); internal topics included.
    pub fn topic_by_id(&self, id: [u8; 16]) -> Option<Arc<Topic>> {
        self.topics.read().expect("topics lock").values().find(|t| t.id == id).cloned()
    }

    /// A new producer id (epoch 0) for an idempotent producer; durable before it
    /// returns: ids come from blocks the metadata reserves before any is used, so a
    /// restart, even after kill -9, never hands one out twice.
    pub fn allocate_producer_id(&self) -> Result<(i64, i16)> {
        let mut next = self.producer_next.lock().expect("producer ids lock");
        if *next >= self.metadata().producer_ids_reserved() {
            // Lock order: producer ids, then admin (no admin holder takes the first).
            let _admin = self.admin.lock().expect("admin lock");
            let reserve = self.metadata().reserve_producer_ids();
            self.commit(&reserve)?;
        }
        let id = *next;
        *next += 1;
        Ok((replicated::cluster_producer_id(self.node_id(), id), 0))
    }

    /// True when this broker (in any run) handed out producer id `id`. Ids of a
    /// block reserved but not reached before a restart count as issued: the store
    /// keeps only the block's end, and no one else can hold them.
    /// In a cluster an id another node handed out is taken on trust when its node
    /// is a member (a producer whose leader moved keeps its id; ids are not
    /// replicated, so this node cannot check the other's count).
    pub fn producer_id_issued(&self, id: i64) -> bool {
        if let Some(cluster) = self.cluster()
            && let Some(node) = replicated::issuing_node(id)
            && node != cluster.node_id()
        {
            return cluster.voters().contains(&node);
        }
        let Some(local) = replicated::local_producer_id(self.node_id(), id) else {
            return false;
        };
        (0..*self.producer_next.lock().expect("producer ids lock")).contains(&local)
    }

    /// Every topic's metadata as committed (placement plans from it).
    pub fn topic_metas(&self) -> Vec<TopicMeta> {
        self.metadata().topics().cloned().collect()
    }

    pub fn list(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .expect("topics lock")
            .iter()
            .filter(|(name, _)| !is_internal(name))
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Creates a topic: partition directories first, then the metadata file.
    pub fn create(
        &self,
        name: &str,
        partitions: u32,
        changes: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>> {
        self.create_any(Origin::Client, name, partitions, changes)
    }

    fn create_any(
        &self,
        origin: Origin,
        name: &str,
        partitions: u32,
        changes: &BTreeMap<String, Value>,
    ) -> Result<Arc<Topic>> {
        self.check_running()?;
        let admin = self.admin.lock().expect("admin lock");
        let id = store::new_topic_id();
        let (changes, asked_rf) = split_replication_factor(changes)?;
        let replicas = self.place_replicas(origin, asked_rf, partitions, None)?;
        let mut command =
            self.metadata().create_topic(origin, name, partitions, &changes, SystemClock.now_ms(), id)?;
        if let Command::CreateTopic(meta) = &mut command {
            meta.replicas = replicas;
        }
        let Command::CreateTopic(meta) = &command else { unreachable!("create_topic plans a CreateTopic") };
        // The log config is checked here too, so a refused config never reaches the log.
        self.log_config(&meta.config)?;
        if let Some(replicator) = self.replicator_for(origin) {
            drop(admin);
            replicator.replicate(command.clone())?;
            return self.topic(name);
        }
        self.apply_create(meta, &command)
    }

    /// The local part of a create, under the admin lock: partition directories,
    /// then the metadata, then the topic is visible.
    fn apply_create(&self, meta: &TopicMeta, command: &Command) -> Result<Arc<Topic>> {
        let (name, partitions) = (meta.name.as_str(), meta.partitions);
        let log_config = self.log_config(&meta.config)?;
        let logs = self.open_new_partitions(name, 0..partitions, &log_config)?;
        if let Err(e) = self.commit(command) {
            self.discard(&logs);
            return Err(e);
        }
        tracing::info!(topic = name, partitions, "created topic");
        Ok(self.insert(meta.clone(), logs, Chain::default()))
    }

    /// Opens fresh, empty partitions `range` of `name` (a leftover directory is
    /// removed first); on any failure the ones opened are discarded.
    fn open_new_partitions(
        &self,
        name: &str,
        range: std::ops::Range<u32>,
        log_config: &es_log::LogConfig,
    ) -> Result<Vec<Arc<PartitionLog>>> {
        let mut logs = Vec::new();
        for p in range {
            let dir_name = partition_dir_name(name, p);
            let opened = self
                .remove_partition_dir(&dir_name)
                .and_then(|()| Ok(self.manager.open_partition(&dir_name, log_config.clone())?));
            match opened {
                Ok((log, _)) => logs.push(log),
                Err(e) => {
                    self.discard(&logs);
                    return Err(e);
                }
            }
        }
        Ok(logs)
    }

    /// Removes a topic: metadata first (durably), then its partitions' data.
    pub fn delete(&self, name: &str) -> Result<()> {
        self.check_running()?;
        let admin = self.admin.lock().expect("admin lock");
        let command = self.metadata().delete_topic(name)?;
        if let Some(replicator) = self.replicator_for(Origin::Client) {
            drop(admin);
            return replicator.replicate(command);
        }
        self.apply_delete(name, &command)
    }

    fn apply_delete(&self, name: &str, command: &Command) -> Result<()> {
        self.commit(command)?;
        let topic = self
            .topics
            .write()
            .expect("topics lock")
            .remove(name)
            .expect("checked above under the admin lock");
        self.discard(&topic.partitions);
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Closes and deletes partitions; failures only leave orphans startup removes.
    fn discard(&self, logs: &[Arc<PartitionLog>]) {
        for log in logs {
            if let Err(e) = log.close() {
                tracing::warn!(partition = log.name(), error = %e, "closing a deleted partition failed");
            }
            // The cold objects first: the local manifest is what names them.
            if let Err(e) = log.delete_cold() {
                tracing::warn!(partition = log.name(), error = %e, "deleting a partition's cold objects failed; they are left in the store");
            }
            if let Err(e) = self.remove_partition_dir(log.name()) {
                tracing::warn!(partition = log.name(), error = %e, "deleting a partition's data failed; the next start removes it");
            }
        }
    }

    fn remove_partition_dir(&self, dir_name: &str) -> Result<()> {
        let dir = self.manager.root().join(dir_name);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => store::fsync_dir(self.manager.root())
                .map_err(|e| io(format!("syncing {}", self.manager.root().display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("removing {}", dir.display()), e)),
        }
    }

    /// Grows a topic to `count` partitions (partitions never shrink: keyed records
    /// would move). New partition directories first, then the metadata; the topic
    /// is swapped whole, so a produce in flight finishes on the partitions it saw.
    pub fn add_partitions(&self, name: &str, count: u32) -> Result<Arc<Topic>> {
        self.check_running()?;
        let admin = self.admin.lock().expect("admin lock");
        let (current, rf) = match self.metadata().topic(name) {
            Some(t) => (t.partitions, t.replicas_of(0).map(<[u64]>::len)),
            None => (0, None),
        };
        let replicas = match rf {
            Some(rf) if count > current => {
                self.place_replicas(Origin::Client, Some(rf), count - current, Some(rf))?
            }
            _ => None,
        };
        let command = self.metadata().add_partitions(name, count, replicas)?;
        if let Some(replicator) = self.replicator_for(Origin::Client) {
            drop(admin);
            replicator.replicate(command)?;
            return self.topic(name);
        }
        self.apply_add_partitions(name, count, &command)
    }

    fn apply_add_partitions(&self, name: &str, count: u32, command: &Command) -> Result<Arc<Topic>> {
        let topic = self.topic(name)?;
        let current = topic.partition_count();
        let log_config = self.log_config(&topic.config())?;
        let added = self.open_new_partitions(name, current..count, &log_config)?;
        let next = match self.commit(command) {
            Ok(after) => after.topic(name).expect("the topic the command grew").clone(),
            Err(e) => {
                self.discard(&added);
                return Err(e);
            }
        };
        let mut logs = topic.partitions.clone();
        logs.extend(added);
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(self.insert_topic(next, logs, topic.validators()))
    }

    /// Changes a topic's config: validated, persisted, then applied to every partition.
    pub fn alter(&self, name: &str, changes: &BTreeMap<String, Value>) -> Result<TopicConfig> {
        self.check_running()?;
        let admin = self.admin.lock().expect("admin lock");
        let command = self.metadata().alter_config(name, changes)?;
        let Command::SetConfig { config, .. } = &command else {
            unreachable!("alter_config plans a SetConfig")
        };
        self.log_config(config)?;
        if let Some(replicator) = self.replicator_for(Origin::Client) {
            let config = config.clone();
            drop(admin);
            replicator.replicate(command)?;
            return Ok(config);
        }
        let config = self.apply_alter(name, &command)?;
        tracing::info!(topic = name, ?changes, "altered topic config");
        Ok(config)
    }

    fn apply_alter(&self, name: &str, command: &Command) -> Result<TopicConfig> {
        let Command::SetConfig { config, .. } = command else {
            unreachable!("apply_alter applies a SetConfig")
        };
        let log_config = self.log_config(config)?;
        let topic = self.topic(name)?;
        let next = self.commit(command)?.topic(name).expect("the topic the command altered").clone();
        let config = next.config.clone();
        for log in &topic.partitions {
            log.set_config(log_config.clone())?;
        }
        *topic.meta.lock().expect("meta lock") = next;
        Ok(config)
    }

    /// The log config for `config`, refusing a cold tier this broker does not have.
    fn log_config(&self, config: &TopicConfig) -> Result<es_log::LogConfig> {
        let log_config = config.to_log_config()?;
        if log_config.cold_tier && self.options.cold_dir.is_none() && self.options.cold.is_none() {
            return Err(BrokerError::InvalidConfig(
                "cold.tier.enable needs a cold tier: start the broker with --cold-dir or cold.backend = \"s3\"".into(),
            ));
        }
        Ok(log_config)
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// The gauge of parked long polls every listener's service shares.
    pub fn poll_gauge(&self) -> Arc<crate::service::fetch::PollGauge> {
        self.polls.clone()
    }

    /// Turns true when shutdown begins.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutting_down.subscribe()
    }

    fn check_running(&self) -> Result<()> {
        if self.is_shutting_down() {
            return Err(BrokerError::ShuttingDown);
        }
        Ok(())
    }

    /// Marks the broker as stopping (readiness turns false, admin changes refused).
    pub fn begin_shutdown(&self) {
        self.shutting_down.send_replace(true);
    }

    /// Flushes and closes every partition.
    pub fn shutdown(&self) -> Result<()> {
        self.begin_shutdown();
        self.snapshots.close();
        Ok(self.manager.shutdown()?)
    }
}

/// Takes an exclusive lock on `<data>/LOCK`; the OS drops it when the process dies,
/// so a crash never leaves a stale lock behind.
fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io(format!("opening {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(BrokerError::DataDirInUse(dir.to_owned())),
        Err(std::fs::TryLockError::Error(e)) => Err(io(format!("locking {}", path.display()), e)),
    }
}

fn describe_recovery(dir_name: &str, recovery: &RecoveryReport, repairs: &mut Vec<String>) {
    if let Some(t) = &recovery.trimmed {
        repairs.push(format!(
            "partition {dir_name}: trimmed {} bytes of torn tail at byte {} of {} ({})",
            t.bytes,
            t.position,
            t.file.display(),
            t.reason
        ));
    }
    for (file, position, reason) in &recovery.corrupt_segments {
        repairs.push(format!(
            "partition {dir_name}: sealed segment {} is corrupt at byte {position} ({reason}); reads stop there",
            file.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn open(dir: &std::path::Path) -> Arc<Registry> {
        Registry::open(BrokerOptions::new(dir)).unwrap().0
    }

    fn changes(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn topics_and_config_survive_reopen_and_delete_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        r.create("a", 2, &changes(json!({"retention.ms": 5000}))).unwrap();
        r.create("b", 1, &BTreeMap::new()).unwrap();
        let err = r.create("a", 1, &BTreeMap::new()).err().unwrap();
        assert_eq!(err.code(), "topic_already_exists");
        r.alter("b", &changes(json!({"segment.bytes": 65536}))).unwrap();
        r.delete("a").unwrap();
        assert!(!dir.path().join("partitions/a-0").exists());
        r.shutdown().unwrap();
        drop(r);

        let r = open(dir.path());
        let names: Vec<String> = r.list().iter().map(|t| t.name()).collect();
        assert_eq!(names, vec!["b".to_owned()]);
        assert_eq!(r.topic("b").unwrap().config().segment_bytes, 65536);
        assert_eq!(r.topic("a").err().unwrap().code(), "topic_not_found");
    }

    #[test]
    fn topic_ids_are_unique_durable_and_given_to_old_topics_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        let (a, b) =
            (r.create("a", 1, &BTreeMap::new()).unwrap().id, r.create("b", 1, &BTreeMap::new()).unwrap().id);
        assert!(a != b && a != [0; 16]);
        assert_eq!(r.topic_by_id(b).map(|t| t.name()).as_deref(), Some("b"));
        r.shutdown().unwrap();
        drop(r);
        // A topic file from before topic ids: no "topic_id" key.
        let path = dir.path().join("topics/b.json");
        let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta.as_object_mut().unwrap().remove("topic_id");
        std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
        let r = open(dir.path());
        assert_eq!(r.topic("a").unwrap().id, a, "an id survives a restart");
        let given = r.topic("b").unwrap().id;
        assert!(given != [0; 16] && given != b);
        r.shutdown().unwrap();
        drop(r);
        assert_eq!(open(dir.path()).topic("b").unwrap().id, given, "the id given at load was persisted");
    }

    #[test]
    fn a_single_node_takes_a_replication_factor_of_one_only() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        let e = r.create("two", 1, &changes(json!({"replication.factor": 2}))).err().unwrap();
        assert!(e.to_string().contains("larger than the 1 node"), "{e}");
        let e = r.create("bad", 1, &changes(json!({"replication.factor": "many"}))).err().unwrap();
        assert_eq!(e.code(), "invalid_request", "{e}");
        let t =
            r.create("one", 1, &changes(json!({"replication.factor": "1", "retention.ms": 1000}))).unwrap();
        // Not a topic config: it leaves nothing in the topic's settings.
        let stored = t.meta.lock().unwrap().clone();
        assert_eq!((stored.replicas, stored.config.retention_ms), (None, 1000));
        assert!(r.topic("two").is_err() && r.topic("bad").is_err());
    }

    #[test]
    fn refused_changes_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        r.create("t", 1, &BTreeMap::new()).unwrap();
        let bad = changes(json!({"cold.tier.enable": true}));
        assert_eq!(r.create("c", 1, &bad).err().unwrap().code(), "invalid_config");
        assert_eq!(r.alter("t", &bad).err().unwrap().code(), "invalid_config");
        assert!(!r.topic("t").unwrap().config().cold_tier);
        assert!(!dir.path().join("partitions/c-0").exists());
        assert_eq!(r.list().len(), 1);
    }

    #[test]
    fn producer_ids_are_unique_across_restarts_and_only_issued_ones_are_known() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        assert!(!r.producer_id_issued(0), "nothing is issued before the first allocation");
        let first: Vec<i64> = (0..3).map(|_| r.allocate_producer_id().unwrap().0).collect();
        assert_eq!(first, vec![0, 1, 2]);
        assert!(r.producer_id_issued(2) && !r.producer_id_issued(3) && !r.producer_id_issued(-1));
        r.shutdown().unwrap();
        drop(r);
        let r = open(dir.path());
        assert!(r.producer_id_issued(2), "an id issued before a restart stays known");
        let block = metadata::PRODUCER_ID_BLOCK;
        assert!(!r.producer_id_issued(block), "the next block's ids are not issued yet");
        assert_eq!(r.allocate_producer_id().unwrap().0, block, "a restart skips the whole reserved block");
    }

    /// A produce refreshing its schema-enforcing chain never waits for the admin
    /// lock, which create and delete hold across fsyncs.
    #[test]
    fn refreshing_a_chain_does_not_take_the_admin_lock() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        let topic = r.create("t", 1, &BTreeMap::new()).unwrap();
        let _admin = r.admin.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (r2, t2) = (r.clone(), topic.clone());
        std::thread::spawn(move || {
            let _ = tx.send(r2.refresh_chain(&t2).links.len());
        });
        let refreshed = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(refreshed, Ok(0), "refresh_chain waited for the admin lock");
    }

    #[test]
    fn partitions_only_grow_and_internal_topics_are_a_kind() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        r.create("g", 2, &BTreeMap::new()).unwrap();
        assert_eq!(r.add_partitions("g", 2).err().unwrap().code(), "invalid_request");
        assert_eq!(r.add_partitions("g", 1).err().unwrap().code(), "invalid_request");
        assert_eq!(r.add_partitions("g", 5).unwrap().partition_count(), 5);
        assert_eq!(r.topic("g").unwrap().kind, TopicKind::Data);
        assert_eq!(r.topic("__es_offsets").unwrap().kind, TopicKind::Internal);
        assert_eq!(
            r.topic("__es_offsets").unwrap().check_client_write().err().unwrap().code(),
            "internal_topic"
        );
        r.shutdown().unwrap();
        drop(r);
        let r = open(dir.path());
        assert_eq!(r.topic("g").unwrap().partition_count(), 5);
    }

    #[test]
    fn a_second_registry_on_one_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _first = open(dir.path());
        let err = Registry::open(BrokerOptions::new(dir.path())).err().unwrap();
        assert_eq!(err.code(), "data_dir_in_use");
    }
}
