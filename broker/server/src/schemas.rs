//! The broker's schema registry service: the es-schema-registry state machine
//! behind a lock, its durable log in the internal compacted topic `__es_schemas`,
//! and the per-type compatibility checkers (Wasm plugins).
//!
//! Every write is serialized: plan against the state, append the records, wait for
//! the fsync, then apply them and answer. So an answer is never given for a change
//! that is not on disk, two registrations never get one id, and the state is always
//! what the log says (it is rebuilt from the log on start).

use std::sync::{Arc, RwLock};

use es_core::Record;
use es_log::PartitionLog;
use es_plugin_host::{CompatChecker, PluginEngine, PluginError, PluginLimits, builtin};
use es_schema_registry::{
    Change, CheckerError, CompatLevel, Incompatibility, Plan, RegistryError, ResolvedSchema, SchemaChecker,
    SchemaCheckers, SchemaType, State,
};

/// The internal compacted topic that holds the registry.
pub const SCHEMAS_TOPIC: &str = "__es_schemas";
/// Leader term of the single-node broker.
const TERM: u64 = 1;
/// Bytes read per step while rebuilding.
const REBUILD_READ_BYTES: usize = 1 << 20;

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
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").field("log", &self.log.name()).field("checkers", &self.checkers).finish()
    }
}

impl Schemas {
    /// Opens the registry over its log and rebuilds the state from it.
    pub fn open(log: Arc<PartitionLog>, checkers: Arc<SchemaCheckers>) -> crate::Result<Schemas> {
        let mut state = State::new();
        let corrupt = |offset: u64, reason: String| {
            crate::ServerError::Internal(format!(
                "{SCHEMAS_TOPIC}: unreadable record at offset {offset}: {reason}"
            ))
        };
        let mut offset = log.info().log_start_offset;
        while offset < log.high_watermark() {
            let read = log.read(offset, REBUILD_READ_BYTES)?;
            let mut next = offset;
            for batch in read.batches() {
                let plain = batch
                    .plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)
                    .map_err(|e| corrupt(next, e.to_string()))?;
                for r in plain.iter() {
                    let r = r.map_err(|e| corrupt(next, e.to_string()))?;
                    if r.offset < offset {
                        continue;
                    }
                    let key = r.key.ok_or_else(|| corrupt(r.offset, "a record without a key".into()))?;
                    let change =
                        Change::decode(key, r.value).map_err(|e| corrupt(r.offset, e.to_string()))?;
                    state.apply(change);
                }
                next = next.max(batch.header.next_offset());
            }
            if next == offset {
                break;
            }
            offset = next;
        }
        Ok(Schemas {
            log,
            state: RwLock::new(state),
            writer: tokio::sync::Mutex::new(()),
            checkers,
            generation: std::sync::atomic::AtomicU64::new(0),
        })
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
        let this = self.clone();
        let plan =
            run_blocking(move || plan(&this.state.read().expect("schemas state"), &this.checkers)).await?;
        if plan.changes.is_empty() {
            return Ok(plan.answer);
        }
        let records: Vec<Record> = plan
            .changes
            .iter()
            .map(|c| {
                let (key, value) = c.encode();
                Record { key: Some(key.into()), value: value.map(Into::into), ..Record::default() }
            })
            .collect();
        let store = |e: es_log::LogError| RegistryError::Store(e.to_string());
        // One batch: the records of one write become durable together or not at all.
        let pending = self.log.append_records(&records, TERM).map_err(store)?;
        pending.durable().await.map_err(store)?;
        let mut state = self.state.write().expect("schemas state");
        for change in plan.changes {
            state.apply(change);
        }
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(plan.answer)
    }
}

async fn run_blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RegistryError::Store(format!("a registry task failed: {e}")))?
}

/// The checkers the broker starts with: every built-in schema-compat plugin
/// (`es_plugin_host::builtin::COMPAT_NAMES`), each for the types it supports. A
/// type without one is refused at registration (42201) rather than accepted
/// unchecked; `SchemaCheckers::set` replaces a type's checker at run time.
pub fn builtin_checkers(engine: &PluginEngine) -> crate::Result<SchemaCheckers> {
    let checkers = SchemaCheckers::new();
    for name in builtin::COMPAT_NAMES {
        let wasm = builtin::compat(name).expect("listed in COMPAT_NAMES");
        let checker = CompatChecker::load(engine, name, wasm, Vec::new(), PluginLimits::compat())
            .map_err(|e| crate::ServerError::Internal(format!("loading the built-in checker {name}: {e}")))?;
        install(&checkers, Arc::new(checker));
    }
    Ok(checkers)
}

/// Makes `checker` the checker of every schema type it supports that the registry
/// knows (AVRO, JSON, PROTOBUF); returns those types.
pub fn install(checkers: &SchemaCheckers, checker: Arc<CompatChecker>) -> Vec<SchemaType> {
    let types: Vec<SchemaType> =
        checker.supports().iter().filter_map(|t| SchemaType::parse(Some(t)).ok()).collect();
    for t in &types {
        checkers.set(*t, Arc::new(PluginChecker(checker.clone())));
    }
    types
}

/// A schema-compat Wasm plugin as the registry's checker.
struct PluginChecker(Arc<CompatChecker>);

impl SchemaChecker for PluginChecker {
    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError> {
        self.0.normalize(&plugin_schema(schema)).map_err(checker_error)
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &ResolvedSchema,
        existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError> {
        let level: es_plugin_host::CompatLevel = level.as_str().parse().expect("the same seven levels");
        let existing: Vec<es_plugin_host::Schema> = existing.iter().map(plugin_schema).collect();
        let found = self.0.check(level, &plugin_schema(proposed), &existing).map_err(checker_error)?;
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
/// ids values (and, with `key=true`, keys) may carry, and those schemas. With
/// Confluent's TopicNameStrategy (the default) a value's subject is
/// `<topic>-value` and a key's `<topic>-key`; with RecordNameStrategy
/// (`subject.name.strategy=record`) it is the schema's record name, so any
/// schema registered under its own record name is allowed.
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
            .map(|v| SubjectVersionLite { id: v.id, schema_type: v.schema_type, schema: v.schema })
            .collect()
    };
    let (values, keys) = if record_strategy {
        let mut own = Vec::new();
        for subject in state.subjects(false, false, "") {
            own.extend(
                live(&subject).into_iter().filter(|v| record_name(v).as_deref() == Some(subject.as_str())),
            );
        }
        (own.clone(), own)
    } else {
        (live(&format!("{topic}-value")), live(&format!("{topic}-key")))
    };
    let mut schemas = serde_json::Map::new();
    for v in values.iter().chain(if key { keys.iter() } else { [].iter() }) {
        schemas.insert(
            v.id.to_string(),
            serde_json::json!({"type": v.schema_type.as_str(), "schema": v.schema}),
        );
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
}

/// The record name RecordNameStrategy uses: an Avro record's full name, a JSON
/// schema's `title`, a Protobuf schema's first message (with its package).
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
        SchemaType::Protobuf => {
            let mut package = None;
            for line in v.schema.lines().map(str::trim) {
                if let Some(p) = line.strip_prefix("package ") {
                    package = Some(p.trim_end_matches(';').trim().to_owned());
                } else if let Some(m) = line.strip_prefix("message ") {
                    let name = m.split(|c: char| c.is_whitespace() || c == '{').next()?;
                    return Some(match package {
                        Some(p) => format!("{p}.{name}"),
                        None => name.to_owned(),
                    });
                }
            }
            None
        }
    }
}
