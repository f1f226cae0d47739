//! Validators bound to a topic: the stored binding (`ValidatorBinding`, part of the
//! topic's metadata), the loaded chain a produce runs (`Chain`), and what a chain
//! decides about a batch (`Checked`).
//!
//! A topic holds its chain behind an `Arc`; a produce clones the `Arc` once and
//! validates with it, so rebinding (or replacing a plugin's version) swaps the
//! `Arc` atomically while batches already in flight finish on the old chain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use es_core::batch::BatchView;
use es_core::{Header, Record};
use es_plugin_host::{Action, BatchTarget, PackError, PackedBatch, PluginError, Validator};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What happens to a record a validator refuses, or to the whole batch when the
/// plugin itself fails (traps, runs past its deadline, exceeds its memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// The whole produce request fails and nothing is written.
    #[default]
    Reject,
    /// Refused records go to the binding's dead-letter topic; the others are written.
    DeadLetter,
    /// Everything is written; the refusal is counted and logged.
    Warn,
}

/// Whether a binding's verdicts count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BindingMode {
    /// The binding's policy applies to what it refuses.
    #[default]
    Enforce,
    /// The validator runs on every batch and its counters say what it would have
    /// done, but nothing is refused, dead-lettered or warned about: a way to trial
    /// a new plugin (or a new version of one) on live traffic.
    Shadow,
}

impl BindingMode {
    fn is_enforce(&self) -> bool {
        *self == BindingMode::Enforce
    }
}

/// One validator bound to a topic, as stored in the topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidatorBinding {
    /// The plugin's name (`GET /plugins`).
    pub plugin: String,
    /// Configuration for this binding, over the plugin's default config.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub on_failure: FailurePolicy,
    /// Where `dead-letter` sends refused records; required with that policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_topic: Option<String>,
    /// `shadow` runs the validator without enforcing it; absent means `enforce`.
    #[serde(default, skip_serializing_if = "BindingMode::is_enforce")]
    pub mode: BindingMode,
}

/// Headers a dead-lettered record carries besides its own.
pub const DLQ_HEADER_TOPIC: &str = "es.dlq.topic";
pub const DLQ_HEADER_PARTITION: &str = "es.dlq.partition";
pub const DLQ_HEADER_PLUGIN: &str = "es.dlq.plugin";
pub const DLQ_HEADER_CODE: &str = "es.dlq.code";
pub const DLQ_HEADER_REASON: &str = "es.dlq.reason";

/// A binding with its loaded validator and counters.
pub struct Link {
    pub spec: ValidatorBinding,
    /// The version (sha256) of the plugin this link runs.
    pub sha256: String,
    /// Why the validator could not be loaded at startup; the link then fails
    /// every batch under its policy until it is rebound.
    validator: Result<Arc<Validator>, String>,
    /// In a cluster: the plugin's blob has not reached this node yet. A produce
    /// through an enforcing link like this is refused as retriable, whatever the
    /// binding's policy, and the chain is rebuilt once the blob arrives.
    pub awaiting_blob: bool,
    pub counters: LinkCounters,
}

/// Per-binding counters, for describe and metrics. For a shadow binding,
/// `rejected`, `dead_lettered` and `warned` count what it would have done.
#[derive(Debug)]
pub struct LinkCounters {
    pub batches: AtomicU64,
    pub rejected: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub warned: AtomicU64,
    pub plugin_failures: AtomicU64,
    /// Calls into the guest (a retry after a missed deadline is a second call).
    pub calls: AtomicU64,
    pub deadline_kills: AtomicU64,
    pub memory_kills: AtomicU64,
    pub latency: es_core::histogram::Histogram,
}

impl LinkCounters {
    /// The counter of calls the host stopped for this error, if it is a kill.
    fn kill_counter(&self, e: &PluginError) -> Option<&AtomicU64> {
        match e {
            PluginError::Deadline { .. } => Some(&self.deadline_kills),
            PluginError::Memory { .. } => Some(&self.memory_kills),
            PluginError::NotAComponent { .. }
            | PluginError::Compile { .. }
            | PluginError::WrongWorld { .. }
            | PluginError::ForbiddenImport { .. }
            | PluginError::Configure { .. }
            | PluginError::Limits { .. }
            | PluginError::Trap { .. }
            | PluginError::Garbage { .. }
            | PluginError::RecordTooLarge { .. }
            | PluginError::Pack { .. }
            | PluginError::Instantiate { .. }
            | PluginError::Cache { .. }
            | PluginError::Engine(_) => None,
        }
    }
}

impl Default for LinkCounters {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            batches: zero(),
            rejected: zero(),
            dead_lettered: zero(),
            warned: zero(),
            plugin_failures: zero(),
            calls: zero(),
            deadline_kills: zero(),
            memory_kills: zero(),
            latency: es_core::histogram::Histogram::latency(),
        }
    }
}

impl Link {
    pub fn new(spec: ValidatorBinding, sha256: String, validator: Result<Validator, String>) -> Self {
        Self {
            spec,
            sha256,
            validator: validator.map(Arc::new),
            awaiting_blob: false,
            counters: LinkCounters::default(),
        }
    }

    /// A link whose plugin's blob is still being fetched from a peer.
    pub fn awaiting_blob(spec: ValidatorBinding, sha256: String) -> Self {
        let why =
            format!("the component {sha256} has not reached this node yet; it is being fetched from a peer");
        Self { awaiting_blob: true, ..Link::new(spec, sha256, Err(why)) }
    }

    pub fn validator(&self) -> Option<&Arc<Validator>> {
        self.validator.as_ref().ok()
    }

    pub fn load_error(&self) -> Option<&str> {
        self.validator.as_ref().err().map(String::as_str)
    }

    /// Runs the validator, retrying once when it only ran out of time: on a busy
    /// machine a wall-clock deadline can be missed by a healthy plugin.
    fn run(
        &self,
        target: BatchTarget<'_>,
        batch: &PackedBatch<'_>,
    ) -> Result<Vec<es_plugin_host::Violation>, String> {
        let validator = self.validator.as_ref().map_err(Clone::clone)?;
        match self.call(validator, target, batch) {
            Err(PluginError::Deadline { .. }) => self.call(validator, target, batch),
            other => other,
        }
        .map_err(|e| e.to_string())
    }

    /// One call into the guest, counted and timed; deadline and memory kills noted.
    fn call(
        &self,
        validator: &Validator,
        target: BatchTarget<'_>,
        batch: &PackedBatch<'_>,
    ) -> Result<Vec<es_plugin_host::Violation>, PluginError> {
        let started = std::time::Instant::now();
        let result = validator.validate_packed(target, batch);
        let c = &self.counters;
        c.latency.observe_duration(started.elapsed());
        c.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(kills) = result.as_ref().err().and_then(|e| c.kill_counter(e)) {
            kills.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Runs a shadow binding: its verdicts only move its counters (what its
    /// policy would have done to each record), and its failures never refuse.
    fn shadow(&self, target: BatchTarget<'_>, batch: &PackedBatch<'_>) {
        let counters = &self.counters;
        match self.run(target, batch) {
            Ok(violations) => {
                for v in violations {
                    let counter = match (v.action, self.spec.on_failure) {
                        (Action::Warn, _) | (_, FailurePolicy::Warn) => &counters.warned,
                        (_, FailurePolicy::Reject) => &counters.rejected,
                        (_, FailurePolicy::DeadLetter) => &counters.dead_lettered,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(reason) => {
                counters.plugin_failures.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(topic = target.topic, plugin = %self.spec.plugin, %reason,
                    "shadow validator failed on a batch (not enforced)");
            }
        }
    }
}

/// The validators of one topic, in order.
#[derive(Default)]
pub struct Chain {
    pub links: Vec<Link>,
    /// For a chain with the `schema-registry` validator: the schema registry's
    /// generation its config was derived from.
    pub schema_generation: Option<u64>,
}

impl Chain {
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn specs(&self) -> Vec<ValidatorBinding> {
        self.links.iter().map(|l| l.spec.clone()).collect()
    }

    /// The first enforcing link whose plugin's blob has not arrived yet: while
    /// there is one, the chain cannot validate and a produce must be refused.
    pub fn awaiting_blob(&self) -> Option<&Link> {
        self.links.iter().find(|l| l.awaiting_blob && l.spec.mode == BindingMode::Enforce)
    }

    /// Runs every validator over one partition's records, packed once for the
    /// whole chain (the HTTP path), and decides each record's fate;
    /// `request_indexes[i]` is the index of record `i` in the produce request,
    /// which is what findings name.
    pub async fn check(
        self: Arc<Self>,
        topic: Arc<str>,
        partition: u32,
        batch: PackedBatch<'static>,
        request_indexes: Vec<usize>,
    ) -> Checked {
        let index = move |i: usize| request_indexes.get(i).copied().unwrap_or(i);
        let run = move |chain: &Chain| chain.check_here(&topic, partition, &batch, &index);
        self.on_blocking_pool(run).await.unwrap_or_else(Checked::task_failed)
    }

    /// Runs every validator over an encoded produce batch (the binary path) with
    /// views straight into its records section, so no record is decoded or copied
    /// (a compressed batch is decompressed once). Gives the batch back for the
    /// append; findings name records by their index in the batch.
    pub async fn check_encoded(
        self: Arc<Self>,
        topic: Arc<str>,
        partition: u32,
        batch: Vec<u8>,
        batch_bytes_max: usize,
    ) -> Result<(Checked, Vec<u8>), EncodedCheckError> {
        let run = move |chain: &Chain| {
            let checked = (|| {
                let view = BatchView::parse(&batch, batch_bytes_max)?;
                let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)?;
                let packed = PackedBatch::from_plain(&plain)?;
                Ok::<_, PackError>(chain.check_here(&topic, partition, &packed, &|i| i))
            })();
            checked.map(|c| (c, batch)).map_err(EncodedCheckError::Invalid)
        };
        self.on_blocking_pool(run).await.unwrap_or_else(|e| Err(EncodedCheckError::Task(e)))
    }

    /// Guest code runs on tokio's blocking pool: a call may block for up to its
    /// deadline, and WASI's stdio (a guest's panic message) blocks on the runtime,
    /// which a runtime worker thread may not do.
    async fn on_blocking_pool<R: Send + 'static>(
        self: Arc<Self>,
        f: impl FnOnce(&Chain) -> R + Send + 'static,
    ) -> Result<R, String> {
        tokio::task::spawn_blocking(move || f(&self))
            .await
            .map_err(|e| format!("the validation task failed: {e}"))
    }

    fn check_here(
        &self,
        topic: &str,
        partition: u32,
        batch: &PackedBatch<'_>,
        request_index: &dyn Fn(usize) -> usize,
    ) -> Checked {
        let mut checked = Checked::default();
        let target = BatchTarget { topic, partition, schema_id: None };
        for link in &self.links {
            link.counters.batches.fetch_add(1, Ordering::Relaxed);
            if link.spec.mode == BindingMode::Shadow {
                link.shadow(target, batch);
                continue;
            }
            let plugin = &link.spec.plugin;
            match link.run(target, batch) {
                Ok(violations) => {
                    for v in violations {
                        // A plugin may soften a refusal to a warning; it cannot
                        // harden the binding's policy.
                        let outcome = match (v.action, link.spec.on_failure) {
                            (Action::Warn, _) | (_, FailurePolicy::Warn) => Outcome::Warned,
                            (_, FailurePolicy::Reject) => Outcome::Rejected,
                            (_, FailurePolicy::DeadLetter) => Outcome::DeadLettered,
                        };
                        checked.add(link, request_index(v.index as usize), outcome, v.code, v.reason);
                    }
                }
                Err(reason) => {
                    link.counters.plugin_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic, partition, plugin = %plugin, %reason, "validator failed on a batch");
                    match link.spec.on_failure {
                        FailurePolicy::Reject => {
                            checked.plugin_failure.get_or_insert_with(|| (plugin.clone(), reason.clone()));
                            link.counters.rejected.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        }
                        policy => {
                            let outcome = if policy == FailurePolicy::Warn {
                                Outcome::Warned
                            } else {
                                Outcome::DeadLettered
                            };
                            for i in 0..batch.len() {
                                let why = format!("the validator failed: {reason}");
                                checked.add(link, request_index(i), outcome, "plugin-failed".into(), why);
                            }
                        }
                    }
                }
            }
        }
        for f in checked.findings.iter().filter(|f| f.outcome == Outcome::Warned) {
            tracing::warn!(topic, partition, index = f.index, plugin = %f.plugin, code = %f.code, reason = %f.reason,
                "record accepted with a validation warning");
        }
        checked
    }
}

/// Why an encoded batch could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum EncodedCheckError {
    /// The batch is malformed: the produce fails as an invalid batch.
    #[error("{0}")]
    Invalid(PackError),
    /// The validation task died; the batch is lost with it and the produce fails.
    #[error("{0}")]
    Task(String),
}

/// What was decided for one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Rejected,
    DeadLettered,
    Warned,
}

/// One validator's verdict on one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    /// Index of the record in the produce request.
    pub index: usize,
    pub plugin: String,
    /// The plugin's stable code, e.g. `key-required`.
    pub code: String,
    pub reason: String,
    pub outcome: Outcome,
    /// Where a dead-lettered record went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_topic: Option<String>,
}

/// The chain's decision on a batch.
#[derive(Debug, Default)]
pub struct Checked {
    /// Every finding, in validator order.
    pub findings: Vec<Finding>,
    /// A plugin failed under `reject`: (plugin, reason). The batch is refused.
    pub plugin_failure: Option<(String, String)>,
}

impl Checked {
    /// The decision when the validation task itself failed: the batch is refused.
    fn task_failed(reason: String) -> Self {
        Checked { findings: Vec::new(), plugin_failure: Some(("-".into(), reason)) }
    }

    fn add(&mut self, link: &Link, index: usize, outcome: Outcome, code: String, reason: String) {
        let counter = match outcome {
            Outcome::Rejected => &link.counters.rejected,
            Outcome::DeadLettered => &link.counters.dead_lettered,
            Outcome::Warned => &link.counters.warned,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let dead_letter_topic =
            (outcome == Outcome::DeadLettered).then(|| link.spec.dead_letter_topic.clone()).flatten();
        self.findings.push(Finding {
            index,
            plugin: link.spec.plugin.clone(),
            code,
            reason,
            outcome,
            dead_letter_topic,
        });
    }

    /// Adds another partition's decision to this one.
    pub fn merge(&mut self, other: Checked) {
        self.findings.extend(other.findings);
        if self.plugin_failure.is_none() {
            self.plugin_failure = other.plugin_failure;
        }
    }

    /// True when the request must fail: a rejected record or a failed plugin.
    pub fn refuses(&self) -> bool {
        self.plugin_failure.is_some() || self.findings.iter().any(|f| f.outcome == Outcome::Rejected)
    }

    /// Request indexes of the records that go to a dead-letter topic, each with
    /// its first dead-letter finding.
    pub fn dead_lettered(&self) -> BTreeMap<usize, &Finding> {
        let mut out = BTreeMap::new();
        for f in self.findings.iter().filter(|f| f.outcome == Outcome::DeadLettered) {
            out.entry(f.index).or_insert(f);
        }
        out
    }
}

/// The record as it goes to the dead-letter topic: unchanged, plus headers that
/// say where it was headed and why it was refused.
pub fn dead_letter_record(record: &Record, topic: &str, partition: u32, finding: &Finding) -> Record {
    let mut out = record.clone();
    let header = |key: &str, value: &str| Header {
        key: key.to_owned(),
        value: Some(value.as_bytes().to_vec().into()),
    };
    out.headers.push(header(DLQ_HEADER_TOPIC, topic));
    out.headers.push(header(DLQ_HEADER_PARTITION, &partition.to_string()));
    out.headers.push(header(DLQ_HEADER_PLUGIN, &finding.plugin));
    out.headers.push(header(DLQ_HEADER_CODE, &finding.code));
    out.headers.push(header(DLQ_HEADER_REASON, &finding.reason));
    out
}
