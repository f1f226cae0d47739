//! The broker's schema registry service: the es-schema-registry state machine
//! behind a lock, its durable log in the internal compacted topic `__es_schemas`,
//! and the per-type compatibility checkers (Wasm plugins).
//!
//! Every write is serialized: plan against the state, append the records, wait for
//! the fsync, then apply them and answer. So an answer is never given for a change
//! that is not on disk, two registrations never get one id, and the state is always
//! what the log says (it is rebuilt from the log on start).
//!
//! In a cluster `__es_schemas` is a Raft group ([`Schemas::replicate`]): every
//! node applies the committed records in offset order ([`Schemas::apply_committed`],
//! tailed by `cluster/internal.rs`) and serves reads from that state; the single
//! writer is the group's leader, which plans against a state that has applied its
//! whole log, proposes the batch and answers once its own node applied it. Writes
//! that reach a follower are forwarded to the leader over the peer links
//! (`http/forward.rs`).

use std::ops::ControlFlow;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use es_core::{LeaderEpoch, Record};
use es_log::{PartitionLog, ReplayError};
use es_plugin_host::{CompatChecker, PluginEngine, PluginError, PluginLimits, builtin};
use es_schema_registry::{
    Change, CheckerError, CompatLevel, Form, Incompatibility, Plan, RegistryError, ResolvedSchema,
    SchemaChecker, SchemaCheckers, SchemaType, State,
};

/// The internal compacted topic that holds the registry.
pub const SCHEMAS_TOPIC: &str = "__es_schemas";
/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// The schema registry of one broker.
pub struct Schemas {
    log: Arc<PartitionLog>,
    state: RwLock<State>,
    /// Held from planning a write until it is applied: writes happen one at a time.
    writer: tokio::sync::Mutex<()>,
    checkers: Arc<SchemaCheckers>,
    /// Bumped after every applied write, so readers that derive something from
    /// the state (the `schema-registry` validator's config) know it is stale.
    generation: std::sync::atomic::AtomicU64,
    /// Set in a cluster: the registry's Raft group and the next offset applied.
    replica: OnceLock<Replica>,
}

struct Replica {
    group: es_raft::Group,
    /// The next offset of the log to apply to `state`.
    applied: tokio::sync::watch::Sender<u64>,
}

/// How long a write waits for this node to apply the log (its own record, or a
/// new leader's earlier records) before it gives up.
const APPLY_WAIT: Duration = Duration::from_secs(10);
/// Bytes read per step while applying committed records.
const APPLY_READ_BYTES: usize = 1 << 20;

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").field("log", &self.log.name()).field("checkers", &self.checkers).finish()
    }
}

impl Schemas {
    /// Opens the registry over its log and rebuilds the state from it.
    pub fn open(log: Arc<PartitionLog>, checkers: Arc<SchemaCheckers>) -> crate::Result<Schemas> {
        let mut state = State::new();
        log.replay(|r| {
            let key = r.key.ok_or_else(|| (r.offset, "a record without a key".to_owned()))?;
            state.apply(Change::decode(key, r.value).map_err(|e| (r.offset, e.to_string()))?);
            Ok(())
        })
        .map_err(|e| {
            let (offset, reason) = match e {
                ReplayError::Log(e) => return e.into(),
                ReplayError::Corrupt { offset, reason } | ReplayError::Apply((offset, reason)) => {
                    (offset, reason)
                }
            };
            crate::BrokerError::Internal(format!(
                "{SCHEMAS_TOPIC}: unreadable record at offset {offset}: {reason}"
            ))
        })?;
        Ok(Schemas {
            log,
            state: RwLock::new(state),
            writer: tokio::sync::Mutex::new(()),
            checkers,
            generation: std::sync::atomic::AtomicU64::new(0),
            replica: OnceLock::new(),
        })
    }

    /// Makes the registry a replica of `group` (its log is this registry's log):
    /// the state is rebuilt from the log start by [`Schemas::apply_committed`],
    /// since what `open` read may hold records the group never committed.
    pub fn replicate(&self, group: es_raft::Group) {
        let start = self.log.info().log_start_offset;
        let (applied, _) = tokio::sync::watch::channel(start);
        *self.state.write().expect("schemas state") = State::new();
        if self.replica.set(Replica { group, applied }).is_err() {
            tracing::warn!("the schema registry was made a replica twice; the first group stays");
        }
    }

    /// The registry's Raft group, in a cluster.
    pub fn group(&self) -> Option<&es_raft::Group> {
        self.replica.get().map(|r| &r.group)
    }

    /// Applies every committed record not applied yet, in offset order (blocking
    /// reads). Every node runs it as the group's high watermark moves.
    pub fn apply_committed(&self) -> crate::Result<()> {
        let Some(replica) = self.replica.get() else { return Ok(()) };
        loop {
            let next = *replica.applied.borrow();
            if next >= self.log.high_watermark() {
                return Ok(());
            }
            let read = self.log.read(next, APPLY_READ_BYTES)?;
            let mut changes = Vec::new();
            let mut end = next;
            for batch in read.batches() {
                let corrupt = |e: es_core::CodecError| {
                    crate::BrokerError::Internal(format!("{SCHEMAS_TOPIC}: an unreadable batch: {e}"))
                };
                let plain = batch.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD).map_err(corrupt)?;
                for r in plain.iter() {
                    let r = r.map_err(corrupt)?;
                    if r.offset < next {
                        continue;
                    }
                    let key = r.key.ok_or_else(|| bad_record(r.offset, "a record without a key"))?;
                    changes.push(
                        Change::decode(key, r.value).map_err(|e| bad_record(r.offset, &e.to_string()))?,
                    );
                }
                end = end.max(batch.header.next_offset());
            }
            if end == next {
                return Ok(());
            }
            let mut state = self.state.write().expect("schemas state");
            for change in changes {
                state.apply(change);
            }
            drop(state);
            self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            replica.applied.send_replace(end);
        }
    }

    /// Waits until this node applied the log up to `offset` (exclusive).
    async fn applied_to(&self, replica: &Replica, offset: u64) -> Result<()> {
        let mut applied = replica.applied.subscribe();
        let reached = applied.wait_for(|a| *a >= offset);
        match tokio::time::timeout(APPLY_WAIT, reached).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) | Err(_) => Err(RegistryError::Store(format!(
                "this node has not applied the registry log up to offset {offset} yet; retry"
            ))),
        }
    }

    /// Changes applied so far (since start).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The checker of each schema type; replace one with `checkers().set(..)`.
    pub fn checkers(&self) -> &Arc<SchemaCheckers> {
        &self.checkers
    }

    /// A read that needs no checker.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> Result<T>) -> Result<T> {
        f(&self.state.read().expect("schemas state"))
    }

    /// A read that calls a checker (lookup, compatibility test), off the async workers.
    pub async fn read_checked<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&State, &SchemaCheckers) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        run_blocking(move || f(&this.state.read().expect("schemas state"), &this.checkers)).await
    }

    /// Plans a write, makes its records durable, applies them, and answers. The
    /// write runs in its own task: a client that hangs up cannot stop it between
    /// the append and the apply, which would leave the state behind the log.
    pub async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        plan: impl FnOnce(&State, &SchemaCheckers) -> Result<Plan<T>> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        tokio::spawn(async move { this.write_now(plan).await })
            .await
            .map_err(|e| RegistryError::Store(format!("a registry write failed: {e}")))?
    }

    async fn write_now<T: Send + 'static>(
        self: Arc<Self>,
        plan: impl FnOnce(&State, &SchemaCheckers) -> Result<Plan<T>> + Send + 'static,
    ) -> Result<T> {
        let _one_writer = self.writer.lock().await;
        if let Some(replica) = self.replica.get() {
            return self.write_replicated(replica, plan).await;
        }
        let plan = match self.plan_now(plan).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(plan) => plan,
        };
        let records = encode_changes(&plan.changes);
        let store = |e: es_log::LogError| RegistryError::Store(e.to_string());
        // One batch: the records of one write become durable together or not at all.
        let pending = self.log.append_records(&records, EPOCH).map_err(store)?;
        pending.durable().await.map_err(store)?;
        let mut state = self.state.write().expect("schemas state");
        for change in plan.changes {
            state.apply(change);
        }
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(plan.answer)
    }
}

impl Schemas {
    /// The leader's write: plan against a state that applied the whole log (a new
    /// leader's earlier-term records commit with its first entry), propose the one
    /// batch, and answer once this node applied it. Called under the writer lock.
    async fn write_replicated<T: Send + 'static>(
        self: &Arc<Self>,
        replica: &Replica,
        plan: impl FnOnce(&State, &SchemaCheckers) -> Result<Plan<T>> + Send + 'static,
    ) -> Result<T> {
        if !replica.group.is_leader() {
            return Err(RegistryError::Store(format!(
                "this node does not lead {SCHEMAS_TOPIC} (the leader is {:?}); retry",
                replica.group.leader()
            )));
        }
        self.applied_to(replica, self.log.info().log_end_offset).await?;
        let plan = match self.plan_now(plan).await? {
            ControlFlow::Break(answer) => return Ok(answer),
            ControlFlow::Continue(plan) => plan,
        };
        let records = encode_changes(&plan.changes);
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let batch = es_core::batch::encode(&records, now as i64, es_core::ProducerInfo::NONE)
            .map_err(|e| RegistryError::Store(e.to_string()))?;
        let appended = replica.group.propose(batch).await.map_err(|e| RegistryError::Store(e.to_string()))?;
        self.applied_to(replica, appended.last_offset + 1).await?;
        Ok(plan.answer)
    }
}

impl Schemas {
    /// Runs the planner against the state under its read lock, off the async
    /// threads: `Break` with the answer when the plan changes nothing (nothing to
    /// write), else `Continue` with the plan to make durable.
    async fn plan_now<T: Send + 'static>(
        self: &Arc<Self>,
        plan: impl FnOnce(&State, &SchemaCheckers) -> Result<Plan<T>> + Send + 'static,
    ) -> Result<ControlFlow<T, Plan<T>>> {
        let this = self.clone();
        let plan =
            run_blocking(move || plan(&this.state.read().expect("schemas state"), &this.checkers)).await?;
        Ok(if plan.changes.is_empty() {
            ControlFlow::Break(plan.answer)
        } else {
            ControlFlow::Continue(plan)
        })
    }
}

fn encode_changes(changes: &[Change]) -> Vec<Record> {
    changes
        .iter()
        .map(|c| {
            let (key, value) = c.encode();
            Record { key: Some(key.into()), value: value.map(Into::into), ..Record::default() }
        })
        .collect()
}

fn bad_record(offset: u64, reason: &str) -> crate::BrokerError {
    crate::BrokerError::Internal(format!("{SCHEMAS_TOPIC}: unreadable record at offset {offset}: {reason}"))
}

async fn run_blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RegistryError::Store(format!("a registry task failed: {e}")))?
}

/// The checkers the broker starts with: every built-in schema-compat plugin
/// (`es_plugin_host::builtin::COMPAT_TYPES`), each for the types it supports,
/// compiled on first use. A type without one is refused at registration (42201)
/// rather than accepted unchecked; `SchemaCheckers::set` replaces a type's
/// checker at run time.
pub fn builtin_checkers(engine: &PluginEngine) -> SchemaCheckers {
    let checkers = SchemaCheckers::new();
    for (name, types) in builtin::COMPAT_TYPES {
        let checker: Arc<PluginChecker> = Arc::new(PluginChecker::builtin(name, engine.clone()));
        for t in types.iter().filter_map(|t| SchemaType::parse(Some(t)).ok()) {
            checkers.set(t, checker.clone());
        }
    }
    checkers
}

/// Makes `checker` the checker of every schema type it supports that the registry
/// knows (AVRO, JSON, PROTOBUF); returns those types.
pub fn install(checkers: &SchemaCheckers, checker: Arc<CompatChecker>) -> Vec<SchemaType> {
    let types: Vec<SchemaType> =
        checker.supports().iter().filter_map(|t| SchemaType::parse(Some(t)).ok()).collect();
    let checker = Arc::new(PluginChecker::loaded(checker));
    for t in &types {
        checkers.set(*t, checker.clone());
    }
    types
}

/// A schema-compat Wasm plugin as the registry's checker. A built-in one is
/// compiled on first use (2-4 s, then cached in the data directory), so a broker
/// whose registry is never used never pays for it.
struct PluginChecker {
    loaded: OnceLock<Result<Arc<CompatChecker>, String>>,
    /// The built-in to load on first use, when not loaded already.
    builtin: Option<(&'static str, PluginEngine)>,
    /// A built-in that takes the config key `form` prints a schema in another
    /// form from an instance configured with it (`Form::ALL`, by
    /// `Form::index`), each loaded on first use.
    forms: [OnceLock<Result<Arc<CompatChecker>, String>>; Form::ALL.len()],
}

/// The config key a checker plugin takes to print a schema in another form.
const FORM_KEY: &str = "form";

impl PluginChecker {
    fn loaded(checker: Arc<CompatChecker>) -> Self {
        Self { loaded: OnceLock::from(Ok(checker)), builtin: None, forms: Default::default() }
    }

    fn builtin(name: &'static str, engine: PluginEngine) -> Self {
        Self { loaded: OnceLock::new(), builtin: Some((name, engine)), forms: Default::default() }
    }

    /// The instance printing `form`, `None` when the checker has no such form
    /// (a user's checker, or a built-in without the `form` key).
    fn form(&self, form: Form) -> Result<Option<&CompatChecker>, CheckerError> {
        let takes_form = self.get()?.info().config_keys.iter().any(|k| k == FORM_KEY);
        let Some((name, engine)) = self.builtin.as_ref().filter(|_| takes_form) else { return Ok(None) };
        let slot = &self.forms[form.index()];
        let loaded = slot.get_or_init(|| {
            let wasm = builtin::compat(name).expect("listed in COMPAT_TYPES");
            let config = vec![(FORM_KEY.to_owned(), form.as_str().to_owned())];
            let loaded = CompatChecker::load(engine, name, wasm, config, PluginLimits::compat());
            loaded.map(Arc::new).map_err(|e| {
                format!("loading the built-in checker {name} ({FORM_KEY}={}): {e}", form.as_str())
            })
        });
        loaded.as_deref().map(Some).map_err(|e| CheckerError::Failed(e.clone()))
    }

    /// The checker, loading a built-in the first time; concurrent first calls
    /// wait for the one load. A built-in that cannot load fails every call.
    fn get(&self) -> Result<&CompatChecker, CheckerError> {
        let loaded = self.loaded.get_or_init(|| {
            let (name, engine) = self.builtin.as_ref().expect("a checker is either loaded or built in");
            let wasm = builtin::compat(name).expect("listed in COMPAT_TYPES");
            let loaded = CompatChecker::load(engine, name, wasm, Vec::new(), PluginLimits::compat());
            loaded.map(Arc::new).map_err(|e| format!("loading the built-in checker {name}: {e}"))
        });
        loaded.as_deref().map_err(|e| CheckerError::Failed(e.clone()))
    }
}

impl SchemaChecker for PluginChecker {
    fn print(
        &self,
        schema: &ResolvedSchema,
        form: Form,
    ) -> Result<Option<Result<String, String>>, CheckerError> {
        match self.form(form)? {
            Some(checker) => checker.normalize(&plugin_schema(schema)).map(Some).map_err(checker_error),
            None => Ok(None),
        }
    }

    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError> {
        self.get()?.normalize(&plugin_schema(schema)).map_err(checker_error)
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &ResolvedSchema,
        existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError> {
        let level: es_plugin_host::CompatLevel = level.as_str().parse().expect("the same seven levels");
        let existing: Vec<es_plugin_host::Schema> = existing.iter().map(plugin_schema).collect();
        let found = self.get()?.check(level, &plugin_schema(proposed), &existing).map_err(checker_error)?;
        Ok(found.into_iter().map(|i| Incompatibility { path: i.path, message: i.message }).collect())
    }
}

/// The registry's schema with its references, as the plugin host passes it.
fn plugin_schema(schema: &ResolvedSchema) -> es_plugin_host::Schema {
    let references = schema
        .references
        .iter()
        .map(|r| es_plugin_host::SchemaReference { name: r.name.clone(), text: r.text.clone() })
        .collect();
    es_plugin_host::Schema { text: schema.text.clone(), references }
}

fn checker_error(e: PluginError) -> CheckerError {
    match e {
        PluginError::Deadline { .. } => CheckerError::Timeout(e.to_string()),
        other => CheckerError::Failed(other.to_string()),
    }
}

/// The built-in validator that enforces registered schemas on a topic.
pub const ENFORCE_PLUGIN: &str = "schema-registry";
/// Its binding keys a user sets; the rest of its config comes from the registry.
pub const ENFORCE_KEYS: &[&str] = &["subject.name.strategy", "key"];

/// The configuration of the `schema-registry` validator for `topic`: the schema
/// ids values (and, with `key=true`, keys) may carry, and those schemas, each
/// with the schemas it references resolved as the compatibility checkers get them
/// (`State::referenced_schemas`: transitively, dependencies first), under
/// `references` as `[{"name", "schema"}]` (left out when there are none).
///
/// With Confluent's TopicNameStrategy (the default) a value's subject is
/// `<topic>-value` and a key's `<topic>-key`. With RecordNameStrategy
/// (`subject.name.strategy=record`) the subject is the record's name, for keys and
/// values alike: an Avro schema is allowed when registered under its record's
/// full name and a JSON schema under its `title` (what Confluent's serializers
/// use as the name); a Protobuf schema names the record's message only through
/// the record's message indexes, so every Protobuf schema registered under a
/// subject that is a valid full message name goes to the plugin with those
/// subjects, and the plugin accepts a record when the message its indexes select
/// has one of them as its full name.
pub fn enforcement_config(
    state: &State,
    topic: &str,
    user: &std::collections::BTreeMap<String, String>,
) -> std::result::Result<std::collections::BTreeMap<String, String>, String> {
    if let Some(unknown) = user.keys().find(|k| !ENFORCE_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{ENFORCE_PLUGIN}: unknown config key {unknown:?} (known: {})",
            ENFORCE_KEYS.join(", ")
        ));
    }
    let record_strategy = match user.get("subject.name.strategy").map(String::as_str) {
        None | Some("topic") | Some("TopicNameStrategy") => false,
        Some("record") | Some("RecordNameStrategy") => true,
        Some(other) => return Err(format!("subject.name.strategy: expected topic or record, got {other:?}")),
    };
    let key = match user.get("key").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(format!("key: expected true or false, got {other:?}")),
    };
    let live = |subject: &str| -> Vec<SubjectVersionLite> {
        state
            .versions(subject, false)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|n| state.version(subject, es_schema_registry::VersionSpec::Number(n), false).ok())
            .map(|v| SubjectVersionLite {
                id: v.id,
                schema_type: v.schema_type,
                schema: v.schema,
                references: v.references,
                subjects: None,
            })
            .collect()
    };
    let (values, keys) = if record_strategy {
        // By id: one schema may be registered under several record names.
        let mut own = std::collections::BTreeMap::<i32, SubjectVersionLite>::new();
        for subject in state.subjects(false, false, "") {
            for v in live(&subject) {
                match v.schema_type {
                    SchemaType::Protobuf if is_full_message_name(&subject) => {
                        let entry =
                            own.entry(v.id).or_insert(SubjectVersionLite { subjects: Some(Vec::new()), ..v });
                        let names = entry.subjects.get_or_insert_with(Vec::new);
                        if !names.contains(&subject) {
                            names.push(subject.clone());
                        }
                    }
                    SchemaType::Avro | SchemaType::Json
                        if record_name(&v).as_deref() == Some(subject.as_str()) =>
                    {
                        own.entry(v.id).or_insert(v);
                    }
                    _ => {}
                }
            }
        }
        let own: Vec<SubjectVersionLite> = own.into_values().collect();
        (own.clone(), own)
    } else {
        (live(&format!("{topic}-value")), live(&format!("{topic}-key")))
    };
    let mut schemas = serde_json::Map::new();
    for v in values.iter().chain(if key { keys.iter() } else { [].iter() }) {
        if schemas.contains_key(&v.id.to_string()) {
            continue; // one schema under both the key's and the value's subject
        }
        let mut entry = serde_json::json!({"type": v.schema_type.as_str(), "schema": v.schema});
        if let Some(subjects) = &v.subjects {
            entry["subjects"] = serde_json::json!(subjects);
        }
        // Stored references point at versions that exist: the registry refuses to
        // delete a referenced version. Should one not resolve, the binding fails
        // with the registry's reason rather than the plugin with a missing name.
        let references = state
            .referenced_schemas(&v.references)
            .map_err(|e| format!("schema {}: its references do not resolve: {e}", v.id))?;
        if !references.is_empty() {
            entry["references"] =
                references.iter().map(|r| serde_json::json!({"name": r.name, "schema": r.text})).collect();
        }
        schemas.insert(v.id.to_string(), entry);
    }
    let ids =
        |list: &[SubjectVersionLite]| list.iter().map(|v| v.id.to_string()).collect::<Vec<_>>().join(",");
    let mut config = std::collections::BTreeMap::from([
        ("schemas".to_owned(), serde_json::Value::Object(schemas).to_string()),
        ("value.ids".to_owned(), ids(&values)),
    ]);
    if key {
        config.insert("key.ids".to_owned(), ids(&keys));
    }
    Ok(config)
}

#[derive(Clone)]
struct SubjectVersionLite {
    id: i32,
    schema_type: SchemaType,
    schema: String,
    /// Its references, resolved to version numbers, as stored.
    references: Vec<es_schema_registry::Reference>,
    /// Protobuf under RecordNameStrategy: the subjects it is registered under.
    subjects: Option<Vec<String>>,
}

/// The record name RecordNameStrategy uses for an Avro schema (its record's full
/// name) or a JSON schema (its `title`). Protobuf has none of its own: the
/// record's message indexes select it.
fn record_name(v: &SubjectVersionLite) -> Option<String> {
    match v.schema_type {
        SchemaType::Avro => {
            let json: serde_json::Value = serde_json::from_str(&v.schema).ok()?;
            let name = json.get("name")?.as_str()?;
            match json.get("namespace").and_then(|n| n.as_str()) {
                Some(ns) if !ns.is_empty() && !name.contains('.') => Some(format!("{ns}.{name}")),
                _ => Some(name.to_owned()),
            }
        }
        SchemaType::Json => {
            let json: serde_json::Value = serde_json::from_str(&v.schema).ok()?;
            json.get("title")?.as_str().map(str::to_owned)
        }
        SchemaType::Protobuf => None,
    }
}

/// Whether `subject` can be a Protobuf message's full name: dot-separated
/// identifiers (letters, digits, `_`; not starting with a digit).
fn is_full_message_name(subject: &str) -> bool {
    subject.split('.').all(|part| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_schema_registry::record::SchemaValue;

    fn state(versions: &[(&str, i32, SchemaType, &str)]) -> State {
        let with_references: Vec<_> =
            versions.iter().map(|&(s, id, t, text)| (s, id, t, text, &[][..])).collect();
        state_with_references(&with_references)
    }

    /// Versions whose references are `(name, subject, version)`.
    #[allow(clippy::type_complexity)]
    fn state_with_references(versions: &[(&str, i32, SchemaType, &str, &[(&str, &str, i32)])]) -> State {
        let mut state = State::new();
        let mut next = std::collections::BTreeMap::<&str, i32>::new();
        for &(subject, id, schema_type, schema, references) in versions {
            let version = next.entry(subject).and_modify(|v| *v += 1).or_insert(1);
            let references = references
                .iter()
                .map(|&(name, subject, version)| es_schema_registry::Reference {
                    name: name.into(),
                    subject: subject.into(),
                    version,
                })
                .collect();
            state.apply(Change::Schema {
                subject: subject.into(),
                version: *version,
                value: Some(SchemaValue {
                    subject: subject.into(),
                    version: *version,
                    id,
                    schema: schema.into(),
                    schema_type,
                    references,
                    canonical: schema.into(),
                    metadata: None,
                    rule_set: None,
                    deleted: false,
                }),
            });
        }
        state
    }

    fn config(state: &State, user: &[(&str, &str)]) -> (serde_json::Value, String, Option<String>) {
        let user = user.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let c = enforcement_config(state, "t", &user).unwrap();
        (serde_json::from_str(&c["schemas"]).unwrap(), c["value.ids"].clone(), c.get("key.ids").cloned())
    }

    const PROTO: &str = "syntax = \"proto3\"; package p; message A {} message B {}";

    #[test]
    fn topic_strategy_takes_the_topics_subjects() {
        let s = state(&[
            ("t-value", 1, SchemaType::Avro, "\"string\""),
            ("t-value", 2, SchemaType::Protobuf, PROTO),
            ("t-key", 3, SchemaType::Avro, "\"long\""),
            ("u-value", 4, SchemaType::Avro, "\"int\""),
        ]);
        let (schemas, values, keys) = config(&s, &[]);
        assert_eq!(values, "1,2");
        assert_eq!(keys, None);
        assert_eq!(schemas.as_object().unwrap().keys().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(schemas["2"], serde_json::json!({"type": "PROTOBUF", "schema": PROTO}));
        let (schemas, _, keys) = config(&s, &[("key", "true")]);
        assert_eq!(keys.as_deref(), Some("3"));
        assert!(schemas.get("3").is_some());
    }

    #[test]
    fn record_strategy_matches_avro_and_json_names_and_hands_protobuf_subjects_to_the_plugin() {
        let avro = r#"{"type": "record", "name": "User", "namespace": "n", "fields": []}"#;
        let json = r#"{"title": "Order", "type": "object"}"#;
        let s = state(&[
            ("n.User", 1, SchemaType::Avro, avro),
            ("User", 1, SchemaType::Avro, avro), // not its full name
            ("t-value", 2, SchemaType::Avro, avro.replace("User", "Other").leak()),
            ("Order", 3, SchemaType::Json, json),
            ("NotTheTitle", 4, SchemaType::Json, r#"{"title": "Else"}"#),
            ("p.A", 5, SchemaType::Protobuf, PROTO),
            ("p.B", 5, SchemaType::Protobuf, PROTO),
            ("t-value", 6, SchemaType::Protobuf, PROTO.replace('A', "C").leak()),
        ]);
        let (schemas, values, keys) = config(&s, &[("subject.name.strategy", "record"), ("key", "true")]);
        assert_eq!(values, "1,3,5");
        assert_eq!(keys.as_deref(), Some("1,3,5"));
        assert_eq!(schemas["1"], serde_json::json!({"type": "AVRO", "schema": avro}));
        assert_eq!(schemas["3"]["type"], "JSON");
        assert_eq!(
            schemas["5"],
            serde_json::json!({"type": "PROTOBUF", "schema": PROTO, "subjects": ["p.A", "p.B"]})
        );
    }

    #[test]
    fn each_schema_carries_its_references_resolved_dependencies_first() {
        let money = "syntax = \"proto3\"; package m; message Money { int64 cents = 1; }";
        let price =
            "syntax = \"proto3\"; package m; import \"m/money.proto\"; message Price { m.Money amount = 1; }";
        let order = "syntax = \"proto3\"; import \"m/price.proto\"; message Order { m.Price price = 1; }";
        let s = state_with_references(&[
            ("money", 1, SchemaType::Protobuf, money, &[]),
            ("price", 2, SchemaType::Protobuf, price, &[("m/money.proto", "money", 1)]),
            ("t-value", 3, SchemaType::Protobuf, order, &[("m/price.proto", "price", 1)]),
            ("t-key", 4, SchemaType::Avro, "\"string\"", &[]),
        ]);
        let (schemas, values, keys) = config(&s, &[("key", "true")]);
        assert_eq!((values.as_str(), keys.as_deref()), ("3", Some("4")));
        assert_eq!(
            schemas["3"]["references"],
            serde_json::json!([
                {"name": "m/money.proto", "schema": money},
                {"name": "m/price.proto", "schema": price},
            ])
        );
        // None: no `references` at all.
        assert_eq!(schemas["4"], serde_json::json!({"type": "AVRO", "schema": "\"string\""}));
    }

    #[test]
    fn full_message_names() {
        for ok in ["Order", "com.acme.Order", "com.acme.Order.Line", "_x.y9"] {
            assert!(is_full_message_name(ok), "{ok}");
        }
        for bad in ["", "orders-value", "com..Order", ".com.Order", "com.Order.", "9a", "a b"] {
            assert!(!is_full_message_name(bad), "{bad}");
        }
    }
}
