//! The broker's one domain error. Every listener maps it onto its wire with an
//! exhaustive match (HTTP: `http/error.rs`, binary: `binary/error.rs`), so a new
//! variant does not compile until every protocol says how it looks there.

use es_groups::LeaderHint;
use es_log::LogError;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// This broker does not lead the partition; `leader` says where the one that
    /// does is, when known: its HTTP URL (else its node id) and its binary-protocol
    /// address, for es-client to follow. (A single node always leads.)
    #[error("this broker does not lead partition {partition} of topic {topic:?}{}", leader_hint(.leader))]
    NotLeader { topic: String, partition: u32, leader: Option<LeaderHint> },
    /// This broker led the partition and lost the leadership (or was fenced) after
    /// the batch was proposed and before it committed: it may or may not be
    /// written, and may still commit under the next leader. Unlike NotLeader, a
    /// blind resend may write it twice; an idempotent producer's resend cannot.
    #[error(
        "this broker stopped leading partition {partition} of topic {topic:?} before the write committed, \
         so it may or may not be written{}: read the partition before resending, or send with an \
         idempotent producer, whose resend is never written twice",
        leader_hint(.leader)
    )]
    LeadershipLost { topic: String, partition: u32, leader: Option<LeaderHint> },
    /// A Kafka client named a leader epoch for the partition (KIP-320) that is not
    /// this replica's: older, so its metadata is stale (FENCED_LEADER_EPOCH), or
    /// newer, so this replica has not caught up with the leader it knows of
    /// (UNKNOWN_LEADER_EPOCH). Either way it refreshes its metadata and retries.
    #[error(
        "the request names leader epoch {asked} of partition {partition} of topic {topic:?}, \
         and this broker's is {current}: refresh the metadata and retry"
    )]
    LeaderEpoch { topic: String, partition: u32, asked: i32, current: i32 },
    /// The caller may not do this to `resource`. Raised before any lookup, so the
    /// answer never says whether the resource exists.
    #[error("not authorized for {resource}")]
    Unauthorized { resource: String },
    /// A topic or group the caller may not use, carrying the "does not exist" error
    /// it is shown as. HTTP and binary answer exactly the inner error (same status,
    /// code and message); Kafka answers TOPIC_/GROUP_AUTHORIZATION_FAILED, as Kafka
    /// does for any topic or group the caller may not describe, existing or not.
    #[error("{0}")]
    Denied(Box<BrokerError>),
    /// No credential, or one that is malformed, unknown, revoked or wrong (all
    /// alike, so the answer never says which).
    #[error(
        "authentication required: send a valid API key (HTTP: Authorization: Bearer <key>; binary: Authenticate)"
    )]
    Unauthenticated,
    /// An API key id that names no key (key admin routes, cluster admins only).
    #[error("API key {0:?} does not exist; `es key list` shows the keys")]
    KeyNotFound(String),
    /// The caller is over its quota; retry after `ms`.
    #[error("over quota: retry after {ms} ms")]
    Throttled { ms: u64 },
    /// Internal topics (`__es_*`) are written by the broker alone.
    #[error("topic {0:?} is internal to the broker; clients cannot write to it")]
    InternalTopic(String),
    /// An encoded batch that does not decode (bad CRC, malformed records, bad compression).
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    #[error("topic {0:?} does not exist")]
    TopicNotFound(String),
    #[error("topic {topic:?} has no partition {partition} (it has {count})")]
    PartitionNotFound { topic: String, partition: u64, count: u32 },
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("request body is not valid JSON for this route: {0}")]
    BadJson(String),
    #[error("{0}")]
    BadEncoding(String),
    #[error(
        "offset {requested} is out of range: partition {partition} holds [{log_start}, {high_watermark}]"
    )]
    OffsetOutOfRange { partition: u32, requested: u64, log_start: u64, high_watermark: u64 },
    #[error(
        "the batch for partition {partition} is {size} bytes encoded; the topic's max.message.bytes is {max}"
    )]
    BatchTooLarge { partition: u32, size: usize, max: usize },
    #[error("record {index} is {size} bytes (key + value + headers); the limit is {max}")]
    RecordTooLarge { index: usize, size: usize, max: usize },
    #[error("request body exceeds the broker's limit of {max} bytes; send smaller batches")]
    RequestTooLarge { max: usize },
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("the broker is shutting down; retry against a running broker")]
    ShuttingDown,
    /// An operation the broker started did not finish in time (a leader transfer
    /// the target did not complete); the message says what state it left.
    #[error("{0}")]
    Timeout(String),
    #[error("the broker is already serving its limit of {max} requests; retry with backoff")]
    Overloaded { max: usize },
    #[error("another es-broker is already using the data directory {0}; stop it or pick another --data-dir")]
    DataDirInUse(std::path::PathBuf),
    #[error("{0}")]
    OutOfOrderSequence(String),
    #[error("{0}")]
    ProducerFenced(String),
    /// An idempotent produce with a producer id this broker never issued.
    #[error(
        "producer id {0} was never issued by this broker; get one from POST /producers (binary: InitProducerId)"
    )]
    UnknownProducerId(i64),
    #[error("storage error: {0}")]
    Storage(LogError),
    #[error("internal error: {0}")]
    Internal(String),
    /// A consumer-group refusal (unknown member, stale generation, rebalance, ...).
    #[error("{0}")]
    Group(es_groups::GroupError),
    #[error("plugin {0:?} does not exist; `es plugin list` shows the plugins")]
    PluginNotFound(String),
    /// An online snapshot id that names none held: released, or its lease ran out.
    #[error("snapshot {0:?} is not held: it was released, its lease ran out, or the broker restarted")]
    SnapshotNotFound(String),
    #[error("a different plugin named {0:?} exists; remove it first or upload with replace=true")]
    PluginExists(String),
    #[error(
        "plugin {name:?} is bound to topic(s) {topics:?}; unbind it first (`es topic alter TOPIC --no-validators`)"
    )]
    PluginInUse { name: String, topics: Vec<String> },
    #[error("topic {topic:?} is the dead-letter topic of {users:?}; rebind those first")]
    TopicInUse { topic: String, users: Vec<String> },
    /// An upload the plugin host refused (not a component, wrong world, forbidden
    /// import, trapped while loading, ...): the plugin itself is at fault.
    #[error("{0}")]
    Plugin(es_plugin_host::PluginError),
    /// The plugin's `configure` refused the configuration it was given: the
    /// caller's config is at fault, not the plugin. `message` is the plugin's
    /// own, which names the key.
    #[error(
        "plugin {plugin:?} refused its configuration: {message}; `es plugin describe {plugin}` lists its keys"
    )]
    PluginConfig { plugin: String, message: String },
    /// Records refused by the topic's validators under `reject`: nothing was written.
    #[error("{}", validation_message(.topic, .findings))]
    ValidationFailed { topic: String, findings: Vec<crate::plugins::binding::Finding> },
    /// A validator failed (trapped, ran past its deadline, ran out of memory) on a
    /// topic whose binding rejects on failure: nothing was written.
    #[error("validator {plugin:?} of topic {topic:?} failed, so the batch was refused: {reason}")]
    PluginFailed { topic: String, plugin: String, reason: String },
    /// In a cluster: a plugin's component (blob) has not reached this node yet; it
    /// is being fetched from a peer. A produce to a topic bound to it is refused
    /// rather than written unvalidated; a retry succeeds once the blob is here.
    #[error(
        "the component of plugin {plugin:?} (sha256 {sha256}) has not reached this node yet and is being \
         fetched from a peer; nothing was written: retry shortly (docs/cluster.md)"
    )]
    PluginUnavailable { plugin: String, sha256: String },
}

fn leader_hint(leader: &Option<LeaderHint>) -> String {
    leader.as_ref().map_or_else(String::new, |h| format!("; the leader is {}", h.http))
}

fn validation_message(topic: &str, findings: &[crate::plugins::binding::Finding]) -> String {
    use crate::plugins::binding::Outcome;
    let rejected: Vec<_> = findings.iter().filter(|f| f.outcome == Outcome::Rejected).collect();
    let first = rejected.first().map_or(String::new(), |f| {
        format!(": record {} refused by {} ({}: {})", f.index, f.plugin, f.code, f.reason)
    });
    let n = rejected.len();
    let (records, each) = if n == 1 { ("record", "it") } else { ("records", "each") };
    format!(
        "{n} {records} failed validation on topic {topic:?}, so nothing was written{first}; `violations` lists {each}"
    )
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

impl From<es_plugin_host::PluginError> for BrokerError {
    /// A refused configuration is the caller's error; every other refusal is the plugin's.
    fn from(e: es_plugin_host::PluginError) -> Self {
        use es_plugin_host::PluginError as P;
        match e {
            P::Configure { plugin, message } => BrokerError::PluginConfig { plugin, message },
            e @ (P::NotAComponent { .. }
            | P::Compile { .. }
            | P::WrongWorld { .. }
            | P::ForbiddenImport { .. }
            | P::Limits { .. }
            | P::Trap { .. }
            | P::Deadline { .. }
            | P::Memory { .. }
            | P::Garbage { .. }
            | P::RecordTooLarge { .. }
            | P::Pack { .. }
            | P::Instantiate { .. }
            | P::Cache { .. }
            | P::Engine(_)) => BrokerError::Plugin(e),
        }
    }
}

impl From<LogError> for BrokerError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::InvalidConfig(m) => BrokerError::InvalidConfig(m),
            LogError::InvalidBatch(c) => BrokerError::InvalidBatch(c.to_string()),
            LogError::ShutDown => BrokerError::ShuttingDown,
            e @ LogError::OutOfOrderSequence { .. } => BrokerError::OutOfOrderSequence(e.to_string()),
            e @ LogError::ProducerFenced { .. } => BrokerError::ProducerFenced(e.to_string()),
            e @ (LogError::Io { .. }
            | LogError::Corrupt { .. }
            | LogError::ColdStore { .. }
            | LogError::ColdConflict { .. }
            | LogError::ColdCorrupt { .. }
            | LogError::ColdManifest(_)
            | LogError::BatchTooLarge { .. }
            | LogError::RecordTooLarge { .. }
            | LogError::OffsetOutOfRange { .. }
            | LogError::OffsetMismatch { .. }
            | LogError::StaleEpoch { .. }
            | LogError::UnknownEpoch { .. }
            | LogError::OldFormat { .. }
            | LogError::NotBatchBoundary { .. }
            | LogError::NotContiguous { .. }
            | LogError::EntryOutOfRange { .. }
            | LogError::EpochMismatch { .. }
            | LogError::Failed(_)
            | LogError::JournalFull { .. }) => BrokerError::Storage(e),
        }
    }
}
