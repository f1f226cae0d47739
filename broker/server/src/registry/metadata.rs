//! The broker's metadata as a state machine: which topics exist, their partition
//! counts, config, validator bindings and ids, and how far producer ids are
//! reserved. Every change is a `Command` that a planner checks against the state
//! (no I/O here) and `apply` performs; the metadata store makes a command durable
//! before it is applied, and a replicated log will carry the same commands later.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::TopicConfig;
use crate::limits;
use crate::plugins::Manifest;
use crate::plugins::binding::{FailurePolicy, ValidatorBinding};
use crate::service::error::{BrokerError, Result};
use crate::store::TopicMeta;

/// Producer ids are reserved durably in blocks of this many.
pub const PRODUCER_ID_BLOCK: i64 = 1000;

/// Who asks for a change: clients never create, alter or delete internal topics;
/// the broker creates its own (`__es_offsets`, `__es_schemas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Client,
    Broker,
}

/// One change to the metadata, complete in itself: applying it needs no lookup
/// that could fail, so every replica applying the same commands gets the same state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    CreateTopic(TopicMeta),
    DeleteTopic {
        name: String,
    },
    SetPartitions {
        name: String,
        count: u32,
        /// The new partitions' replicas, in a cluster whose topic is placed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replicas: Option<Vec<Vec<u64>>>,
    },
    /// Moves one partition's replicas (`es cluster move`, or a node removed): its
    /// group's leader adds the new ones as learners, makes them voters once caught
    /// up and drops the old ones (`cluster/placement.rs`).
    SetReplicas {
        name: String,
        partition: u32,
        replicas: Vec<u64>,
    },
    SetConfig {
        name: String,
        config: TopicConfig,
    },
    SetValidators {
        name: String,
        validators: Vec<ValidatorBinding>,
    },
    /// Gives a topic stored before topic ids existed its id.
    SetTopicId {
        name: String,
        id: String,
    },
    /// Marks partitions of a topic as moved (`TopicMeta::moved`): made up by a
    /// node installing a peer's registry (`cluster/image.rs`), never in the log.
    MarkMoved {
        name: String,
        partitions: std::collections::BTreeSet<u32>,
    },
    /// Producer ids below `through` may be handed out.
    ReserveProducerIds {
        through: i64,
    },
    /// A change to the keys, grants, owners and quotas (es-auth's commands, applied
    /// in order, all or none), replicated by the metadata group in a cluster and
    /// applied by `Auth`, not by the topic metadata. `pepper` is the proposer's
    /// pepper fingerprint: a node with another pepper cannot check the key hashes.
    Auth {
        pepper: String,
        commands: Vec<es_auth::Command>,
    },
    /// Node `id`, whose peer listener is at `peer`, becomes a member of the
    /// cluster: every group is brought to include it (`cluster/members.rs`).
    /// Applied by the cluster, not by the topic metadata.
    AddNode {
        id: u64,
        peer: String,
    },
    /// Node `id` leaves the cluster for good; its id is never used again.
    RemoveNode {
        id: u64,
    },
    /// An uploaded plugin, in a cluster: its manifest (with the blob's sha256, not
    /// the blob). Applied by the registry's plugin store; a node without the blob
    /// fetches it from a peer (`cluster/blobs.rs`). `replace`: the upload may
    /// replace a different plugin of the same name.
    PutPlugin {
        manifest: Manifest,
        replace: bool,
    },
    /// Removes an uploaded plugin, in a cluster; refused while a topic binds it.
    RemovePlugin {
        name: String,
    },
}

impl Command {
    /// The topic the command changes, if any.
    pub fn topic(&self) -> Option<&str> {
        match self {
            Command::CreateTopic(meta) => Some(&meta.name),
            Command::DeleteTopic { name }
            | Command::SetPartitions { name, .. }
            | Command::SetReplicas { name, .. }
            | Command::SetConfig { name, .. }
            | Command::SetValidators { name, .. }
            | Command::SetTopicId { name, .. }
            | Command::MarkMoved { name, .. } => Some(name),
            Command::ReserveProducerIds { .. }
            | Command::Auth { .. }
            | Command::AddNode { .. }
            | Command::RemoveNode { .. }
            | Command::PutPlugin { .. }
            | Command::RemovePlugin { .. } => None,
        }
    }
}

/// The state every command is checked against and applied to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    topics: BTreeMap<String, TopicMeta>,
    producer_ids_reserved: i64,
}

impl Metadata {
    pub fn new(topics: impl IntoIterator<Item = TopicMeta>, producer_ids_reserved: i64) -> Metadata {
        Metadata { topics: topics.into_iter().map(|t| (t.name.clone(), t)).collect(), producer_ids_reserved }
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn topics(&self) -> impl Iterator<Item = &TopicMeta> {
        self.topics.values()
    }

    /// Producer ids below this are reserved (handed out, or free to hand out).
    pub fn producer_ids_reserved(&self) -> i64 {
        self.producer_ids_reserved
    }

    fn existing(&self, name: &str) -> Result<&TopicMeta> {
        self.topics.get(name).ok_or_else(|| BrokerError::TopicNotFound(name.to_owned()))
    }

    /// A new topic `name`: Kafka's naming rule, the reserved prefix, the partition
    /// bound and every config change checked.
    pub fn create_topic(
        &self,
        origin: Origin,
        name: &str,
        partitions: u32,
        changes: &BTreeMap<String, Value>,
        created_ms: i64,
        topic_id: String,
    ) -> Result<Command> {
        if origin == Origin::Client {
            refuse_internal(name)?;
        }
        validate_topic_name(name)?;
        if !(1..=limits::PARTITIONS_MAX).contains(&partitions) {
            return Err(BrokerError::InvalidRequest(format!(
                "partitions must be between 1 and {}; got {partitions}",
                limits::PARTITIONS_MAX
            )));
        }
        let config = TopicConfig::default().with_changes(changes)?;
        if self.topics.contains_key(name) {
            return Err(BrokerError::TopicExists(name.to_owned()));
        }
        Ok(Command::CreateTopic(TopicMeta {
            name: name.to_owned(),
            partitions,
            config,
            created_ms,
            validators: Vec::new(),
            topic_id: Some(topic_id),
            replicas: None,
            moved: Default::default(),
        }))
    }

    /// Deletes a topic no other topic's validators dead-letter into.
    pub fn delete_topic(&self, name: &str) -> Result<Command> {
        refuse_internal(name)?;
        self.existing(name)?;
        let users: Vec<String> = self
            .topics
            .values()
            .filter(|t| t.validators.iter().any(|v| v.dead_letter_topic.as_deref() == Some(name)))
            .map(|t| t.name.clone())
            .collect();
        if !users.is_empty() {
            return Err(BrokerError::TopicInUse { topic: name.to_owned(), users });
        }
        Ok(Command::DeleteTopic { name: name.to_owned() })
    }

    /// Grows a topic (partitions never shrink: keyed records would move).
    pub fn add_partitions(&self, name: &str, count: u32, replicas: Option<Vec<Vec<u64>>>) -> Result<Command> {
        refuse_internal(name)?;
        let current = self.existing(name)?.partitions;
        if count <= current || count > limits::PARTITIONS_MAX {
            return Err(BrokerError::InvalidRequest(format!(
                "topic {name:?} has {current} partitions; the new count must be above that and at most {}; got {count}",
                limits::PARTITIONS_MAX
            )));
        }
        Ok(Command::SetPartitions { name: name.to_owned(), count, replicas })
    }

    /// The topic's config with `changes` applied, each checked.
    pub fn alter_config(&self, name: &str, changes: &BTreeMap<String, Value>) -> Result<Command> {
        refuse_internal(name)?;
        let config = self.existing(name)?.config.with_changes(changes)?;
        Ok(Command::SetConfig { name: name.to_owned(), config })
    }

    /// Replaces a topic's validator bindings, checking what the state can check:
    /// their number and the dead-letter rules (loading the plugins is the caller's).
    pub fn bind_validators(&self, name: &str, validators: Vec<ValidatorBinding>) -> Result<Command> {
        refuse_internal(name)?;
        self.existing(name)?;
        if validators.len() > limits::VALIDATORS_PER_TOPIC_MAX {
            return Err(BrokerError::InvalidRequest(format!(
                "a topic has at most {} validators",
                limits::VALIDATORS_PER_TOPIC_MAX
            )));
        }
        for spec in &validators {
            self.check_dead_letter(name, spec)?;
        }
        Ok(Command::SetValidators { name: name.to_owned(), validators })
    }

    fn check_dead_letter(&self, topic: &str, spec: &ValidatorBinding) -> Result<()> {
        match (spec.on_failure, spec.dead_letter_topic.as_deref()) {
            (FailurePolicy::DeadLetter, None) => Err(BrokerError::InvalidRequest(format!(
                "validator {:?}: on_failure dead-letter needs a dead_letter_topic",
                spec.plugin
            ))),
            (FailurePolicy::DeadLetter, Some(dlq)) => {
                if dlq == topic || is_internal(dlq) {
                    return Err(BrokerError::InvalidRequest(format!(
                        "validator {:?}: the dead-letter topic must be another, non-internal topic",
                        spec.plugin
                    )));
                }
                self.existing(dlq).map(|_| ())
            }
            (_, Some(_)) => Err(BrokerError::InvalidRequest(format!(
                "validator {:?}: dead_letter_topic is only used with on_failure dead-letter",
                spec.plugin
            ))),
            (_, None) => Ok(()),
        }
    }

    /// The next block of producer ids after the reserved ones.
    pub fn reserve_producer_ids(&self) -> Command {
        Command::ReserveProducerIds { through: self.producer_ids_reserved + PRODUCER_ID_BLOCK }
    }

    /// Performs a command the planners produced (or a replica received). A command
    /// about a topic that is gone changes nothing: it can only come from a log
    /// that also holds the deletion, and applying it must not fail a replica.
    pub fn apply(&mut self, command: &Command) {
        match command {
            Command::CreateTopic(meta) => {
                self.topics.insert(meta.name.clone(), meta.clone());
            }
            Command::DeleteTopic { name } => {
                self.topics.remove(name);
            }
            Command::SetPartitions { name, count, replicas } => {
                if let Some(t) = self.topics.get_mut(name)
                    && *count > t.partitions
                {
                    // A plan made for fewer partitions than the topic has now (two
                    // grows at once) gives its last lists to the partitions new here.
                    if let (Some(have), Some(new)) = (t.replicas.as_mut(), replicas) {
                        let wanted = (*count - t.partitions) as usize;
                        have.extend(new.iter().skip(new.len().saturating_sub(wanted)).cloned());
                    }
                    t.partitions = *count;
                }
            }
            Command::SetReplicas { name, partition, replicas } => {
                if let Some(t) = self.topics.get_mut(name)
                    && let Some(slot) = t.replicas.as_mut().and_then(|r| r.get_mut(*partition as usize))
                {
                    slot.clone_from(replicas);
                    t.moved.insert(*partition);
                }
            }
            Command::SetConfig { name, config } => {
                if let Some(t) = self.topics.get_mut(name) {
                    t.config = config.clone();
                }
            }
            Command::SetValidators { name, validators } => {
                if let Some(t) = self.topics.get_mut(name) {
                    t.validators = validators.clone();
                }
            }
            Command::MarkMoved { name, partitions } => {
                if let Some(t) = self.topics.get_mut(name) {
                    t.moved.extend(partitions);
                }
            }
            Command::SetTopicId { name, id } => {
                if let Some(t) = self.topics.get_mut(name) {
                    t.topic_id = Some(id.clone());
                }
            }
            Command::ReserveProducerIds { through } => {
                self.producer_ids_reserved = self.producer_ids_reserved.max(*through);
            }
            // The auth state is `Auth`'s own (`Registry::apply_replicated`), the
            // members the cluster's (`cluster/members.rs`), the plugins the plugin
            // store's (`registry/cluster_plugins.rs`).
            Command::Auth { .. }
            | Command::AddNode { .. }
            | Command::RemoveNode { .. }
            | Command::PutPlugin { .. }
            | Command::RemovePlugin { .. } => {}
        }
    }
}

pub fn is_internal(name: &str) -> bool {
    name.starts_with(crate::groups::INTERNAL_PREFIX)
}

/// Internal topics are the broker's own: no client creates, alters or deletes one.
fn refuse_internal(name: &str) -> Result<()> {
    if is_internal(name) {
        return Err(BrokerError::InvalidTopicName {
            name: name.to_owned(),
            reason: "names starting with \"__es_\" are reserved for the broker's internal topics",
        });
    }
    Ok(())
}

/// Kafka's topic name rule: 1 to 249 of `[A-Za-z0-9._-]`, and not `.` or `..`.
fn validate_topic_name(name: &str) -> Result<()> {
    let bad = |reason| Err(BrokerError::InvalidTopicName { name: name.to_owned(), reason });
    if name.is_empty() || name.len() > limits::TOPIC_NAME_CHARS_MAX {
        return bad("a topic name has 1 to 249 characters");
    }
    if name == "." || name == ".." {
        return bad("\".\" and \"..\" are reserved");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return bad("use only ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn changes(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    fn with(names: &[&str]) -> Metadata {
        let mut m = Metadata::default();
        for (i, n) in names.iter().enumerate() {
            let cmd =
                m.create_topic(Origin::Broker, n, 2, &BTreeMap::new(), i as i64, format!("id-{n}")).unwrap();
            m.apply(&cmd);
        }
        m
    }

    fn code(r: Result<Command>) -> &'static str {
        r.expect_err("refused").code()
    }

    #[test]
    fn create_checks_name_kind_bounds_config_and_existence() {
        let m = with(&["a"]);
        assert_eq!(
            code(m.create_topic(Origin::Client, "a", 1, &BTreeMap::new(), 0, "x".into())),
            "topic_already_exists"
        );
        assert_eq!(
            code(m.create_topic(Origin::Client, "__es_x", 1, &BTreeMap::new(), 0, "x".into())),
            "invalid_topic_name"
        );
        assert!(m.create_topic(Origin::Broker, "__es_x", 1, &BTreeMap::new(), 0, "x".into()).is_ok());
        assert_eq!(
            code(m.create_topic(Origin::Client, "b", 0, &BTreeMap::new(), 0, "x".into())),
            "invalid_request"
        );
        let bad = changes(json!({"retention.ms": "soon"}));
        assert_eq!(code(m.create_topic(Origin::Client, "b", 1, &bad, 0, "x".into())), "invalid_config");
        for ok in ["a", "A.b_c-9", &"x".repeat(249)] {
            validate_topic_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_dead_letter_target_cannot_be_deleted_and_bindings_are_checked() {
        let mut m = with(&["orders", "dlq"]);
        let spec = |dlq: Option<&str>, on_failure| ValidatorBinding {
            plugin: "rules".into(),
            config: BTreeMap::new(),
            on_failure,
            dead_letter_topic: dlq.map(str::to_owned),
            mode: Default::default(),
        };
        assert_eq!(
            code(m.bind_validators("orders", vec![spec(None, FailurePolicy::DeadLetter)])),
            "invalid_request"
        );
        assert_eq!(
            code(m.bind_validators("orders", vec![spec(Some("orders"), FailurePolicy::DeadLetter)])),
            "invalid_request"
        );
        assert_eq!(
            code(m.bind_validators("orders", vec![spec(Some("gone"), FailurePolicy::DeadLetter)])),
            "topic_not_found"
        );
        assert_eq!(
            code(m.bind_validators("orders", vec![spec(Some("dlq"), FailurePolicy::Reject)])),
            "invalid_request"
        );
        let bind = m.bind_validators("orders", vec![spec(Some("dlq"), FailurePolicy::DeadLetter)]).unwrap();
        m.apply(&bind);
        assert_eq!(code(m.delete_topic("dlq")), "topic_in_use");
        let unbind = m.bind_validators("orders", Vec::new()).unwrap();
        m.apply(&unbind);
        let delete = m.delete_topic("dlq").unwrap();
        m.apply(&delete);
        assert!(m.topic("dlq").is_none());
    }

    #[test]
    fn placed_partitions_grow_and_move_with_their_replica_lists() {
        let mut m = with(&["p"]);
        let mut create = m.create_topic(Origin::Client, "q", 2, &BTreeMap::new(), 0, "id-q".into()).unwrap();
        if let Command::CreateTopic(meta) = &mut create {
            meta.replicas = Some(vec![vec![1, 2], vec![2, 3]]);
        }
        m.apply(&create);
        // Two grows planned from 2 partitions at once: the second's plan is for
        // partitions 2..5, of which only 4 is new when it applies.
        let first = m.add_partitions("q", 4, Some(vec![vec![3, 1], vec![1, 2]])).unwrap();
        let second = m.add_partitions("q", 5, Some(vec![vec![9], vec![9], vec![2, 3]])).unwrap();
        m.apply(&first);
        m.apply(&second);
        let q = m.topic("q").unwrap();
        assert_eq!(q.replicas, Some(vec![vec![1, 2], vec![2, 3], vec![3, 1], vec![1, 2], vec![2, 3]]));
        m.apply(&Command::SetReplicas { name: "q".into(), partition: 1, replicas: vec![3, 4] });
        let q = m.topic("q").unwrap();
        assert_eq!(
            (q.replicas_of(1), q.moved.iter().copied().collect::<Vec<_>>()),
            (Some(&[3, 4][..]), vec![1])
        );
        // A topic without placement is left alone.
        m.apply(&Command::SetReplicas { name: "p".into(), partition: 0, replicas: vec![3] });
        assert_eq!((m.topic("p").unwrap().replicas.clone(), m.topic("p").unwrap().moved.len()), (None, 0));
    }

    #[test]
    fn partitions_only_grow_and_internal_topics_are_the_brokers() {
        let mut m = with(&["g", "__es_offsets"]);
        assert_eq!(code(m.add_partitions("g", 2, None)), "invalid_request");
        assert_eq!(code(m.add_partitions("g", 1, None)), "invalid_request");
        assert_eq!(code(m.add_partitions("nope", 3, None)), "topic_not_found");
        let grow = m.add_partitions("g", 5, None).unwrap();
        m.apply(&grow);
        assert_eq!(m.topic("g").unwrap().partitions, 5);
        // A stale, smaller count from a log never shrinks the topic.
        m.apply(&Command::SetPartitions { name: "g".into(), count: 3, replicas: None });
        assert_eq!(m.topic("g").unwrap().partitions, 5);
        for refused in [
            m.delete_topic("__es_offsets"),
            m.add_partitions("__es_offsets", 3, None),
            m.alter_config("__es_offsets", &BTreeMap::new()),
            m.bind_validators("__es_offsets", Vec::new()),
        ] {
            assert_eq!(code(refused), "invalid_topic_name");
        }
    }

    #[test]
    fn applying_the_same_commands_gives_the_same_state() {
        let mut a = with(&["t"]);
        let cmds = vec![
            a.alter_config("t", &changes(json!({"segment.bytes": 65536}))).unwrap(),
            a.reserve_producer_ids(),
            Command::SetTopicId { name: "t".into(), id: "new".into() },
            Command::DeleteTopic { name: "t".into() },
            Command::SetConfig { name: "t".into(), config: TopicConfig::default() },
        ];
        let mut b = a.clone();
        for c in &cmds {
            a.apply(c);
        }
        for c in &cmds {
            b.apply(c);
        }
        assert_eq!(a, b);
        assert!(a.topic("t").is_none(), "a command after the deletion changes nothing");
        assert_eq!(a.producer_ids_reserved(), PRODUCER_ID_BLOCK);
        let round: Vec<Command> = serde_json::from_value(serde_json::to_value(&cmds).unwrap()).unwrap();
        assert_eq!(round, cmds, "commands serialize for a replicated log");
    }

    #[test]
    fn plugin_commands_name_no_topic_change_no_topic_and_survive_json() {
        let mut m = with(&["orders"]);
        let before = m.clone();
        let manifest = Manifest {
            name: "gate".into(),
            sha256: "ab".repeat(32),
            world: crate::plugins::VALIDATOR_WORLD.into(),
            version: "1".into(),
            description: String::new(),
            config_keys: Vec::new(),
            default_config: BTreeMap::from([("mode".into(), "strict".into())]),
            limits: Default::default(),
            size_bytes: 10,
            added_ms: 7,
            builtin: false,
            supports: Vec::new(),
        };
        for command in
            [Command::PutPlugin { manifest, replace: true }, Command::RemovePlugin { name: "gate".into() }]
        {
            assert_eq!(command.topic(), None);
            m.apply(&command);
            assert_eq!(m, before, "the topic metadata does not hold plugins");
            let json = serde_json::to_vec(&command).unwrap();
            assert_eq!(serde_json::from_slice::<Command>(&json).unwrap(), command);
        }
    }
}
