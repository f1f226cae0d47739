//! A loaded record-validator plugin: compiled once, instantiated into a warm pool,
//! called with packed batches under a deadline and a memory cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use es_core::Record;
use wasmtime::component::Component;
use wasmtime::{Store, Trap};

use crate::bindings::RecordValidatorPre;
use crate::bindings::exports::es::plugin::validator::{self as wit, Batch};
use crate::engine::PluginEngine;
use crate::error::PluginError;
use crate::limits::{EPOCH_TICK_MS, PluginLimits, VIOLATION_TEXT_BYTES_MAX};
use crate::pack::{self, BatchTarget};
use crate::pool::{Pool, Warm};
use crate::sandbox::{self, HostState};

/// The world a validator implements, for error messages.
const WORLD: &str = "es:plugin/record-validator@0.1.0";
/// Exports the world requires, by interface name (any 0.1.x version).
const REQUIRED_EXPORTS: &[&str] = &["es:plugin/lifecycle@0.1.", "es:plugin/validator@0.1."];

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub config_keys: Vec<String>,
}

/// What the broker does with a failing record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Reject,
    DeadLetter,
    Warn,
}

/// One failing record, with its index in the records passed to `validate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub index: u32,
    pub action: Action,
    pub code: String,
    pub reason: String,
}

/// Counters of one validator, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValidatorStats {
    /// Calls into the guest (a large batch may take several).
    pub calls: u64,
    /// Instances created, including the first one and every replacement.
    pub instances_created: u64,
    /// Calls that failed (trap, deadline, memory, garbage).
    pub failures: u64,
}

/// A record-validator plugin ready to be called from any thread.
pub struct Validator {
    name: Arc<str>,
    info: PluginInfo,
    engine: PluginEngine,
    pre: RecordValidatorPre<HostState>,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    pool: Pool,
    calls: AtomicU64,
    instances_created: AtomicU64,
    failures: AtomicU64,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("name", &self.name)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// Loads `wasm` as the plugin `name`: checks it is a component of the
    /// record-validator world importing only what the sandbox allows, compiles it
    /// (or takes it from the cache), instantiates and configures one instance so a
    /// bad configuration fails here, and keeps that instance warm.
    pub fn load(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<Self, PluginError> {
        let mut validator = Self::prepare(engine, name, wasm, config, limits)?;
        validator.info = validator.fetch_info(true)?;
        Ok(validator)
    }

    /// Checks `wasm` as `load` does (a component of the record-validator world
    /// importing only what the sandbox allows) and returns what the plugin says
    /// about itself, without configuring it: what an upload checks before the
    /// plugin is stored, when no binding has given it a configuration yet.
    pub fn inspect(engine: &PluginEngine, name: &str, wasm: &[u8]) -> Result<PluginInfo, PluginError> {
        let validator = Self::prepare(engine, name, wasm, Vec::new(), PluginLimits::default())?;
        validator.fetch_info(false)
    }

    /// Checks, compiles (or finds in the cache) and links `wasm`; no instance yet.
    fn prepare(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<Self, PluginError> {
        check_limits(engine, name, &limits)?;
        let component = engine.load(name, wasm)?;
        sandbox::check_imports(name, engine.engine(), &component)?;
        check_exports(engine, name, &component)?;
        let wrong_world = |e: wasmtime::Error| PluginError::WrongWorld {
            plugin: name.to_owned(),
            world: WORLD,
            reason: format!("{e:#}"),
        };
        let instance_pre = engine.linker().instantiate_pre(&component).map_err(wrong_world)?;
        let pre = RecordValidatorPre::new(instance_pre).map_err(wrong_world)?;
        Ok(Self {
            name: Arc::from(name),
            info: PluginInfo { name: name.to_owned(), ..empty_info() },
            engine: engine.clone(),
            pre,
            config,
            pool: Pool::new(limits.warm_instances_max.max(1)),
            limits,
            calls: AtomicU64::new(0),
            instances_created: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// The name the plugin was loaded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    pub fn limits(&self) -> &PluginLimits {
        &self.limits
    }

    pub fn stats(&self) -> ValidatorStats {
        ValidatorStats {
            calls: self.calls.load(Ordering::Relaxed),
            instances_created: self.instances_created.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    /// Idle warm instances right now.
    pub fn warm_instances(&self) -> usize {
        self.pool.idle_count()
    }

    /// Validates `records` and returns one violation per failing record, with
    /// indexes into `records`. Batches above the per-call cap are split into
    /// several calls. Blocks for at most about the deadline per call, so it may be
    /// called directly from an async task for ordinary batches.
    pub fn validate(
        &self,
        target: BatchTarget<'_>,
        records: &[Record],
    ) -> Result<Vec<Violation>, PluginError> {
        let ranges = pack::chunks(records, self.limits.batch_bytes_max).map_err(|(index, bytes)| {
            PluginError::RecordTooLarge {
                plugin: self.name.to_string(),
                index,
                bytes,
                limit_bytes: self.limits.batch_bytes_max,
            }
        })?;
        let mut out = Vec::new();
        for range in ranges {
            let batch = pack::pack(target, &records[range.clone()]);
            let found = self.call(&batch)?;
            for v in found {
                out.push(self.convert(v, range.start, range.len())?);
            }
        }
        Ok(out)
    }

    /// `validate` on tokio's blocking pool, for callers that must not block their
    /// task even for a deadline's length (it costs a thread hop, ~10-20 us).
    pub async fn validate_blocking(
        self: Arc<Self>,
        topic: Arc<str>,
        partition: u32,
        schema_id: Option<u32>,
        records: Arc<[Record]>,
    ) -> Result<Vec<Violation>, PluginError> {
        let name = self.name.to_string();
        tokio::task::spawn_blocking(move || {
            self.validate(BatchTarget { topic: &topic, partition, schema_id }, &records)
        })
        .await
        .map_err(|e| PluginError::Trap { plugin: name, reason: format!("host task failed: {e}") })?
    }

    /// One guest call on a warm instance. A failed instance is dropped, never
    /// reused: after a trap its state is unknown and wasmtime refuses it anyway.
    fn call(&self, batch: &Batch) -> Result<Vec<wit::Violation>, PluginError> {
        let mut warm = match self.pool.take() {
            Some(warm) => warm,
            None => self.instantiate(true)?,
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        warm.calls += 1;
        warm.store.set_epoch_deadline(ticks(self.limits.call_deadline_ms));
        match warm.bindings.es_plugin_validator().call_validate(&mut warm.store, batch) {
            Ok(found) => {
                if self.healthy(&warm) {
                    self.pool.give(warm);
                }
                Ok(found)
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(self.classify(e, &warm.store, self.limits.call_deadline_ms, trap_error))
            }
        }
    }

    /// An instance may go back to the pool unless it is due for replacement.
    fn healthy(&self, warm: &Warm) -> bool {
        warm.calls < self.limits.recycle_after_calls
            && warm.store.data().limiter.memory_bytes <= self.limits.recycle_memory_bytes
    }

    /// A new instance, configured unless `configure` is false (only `inspect`
    /// asks for that), under the configure deadline.
    fn instantiate(&self, configure: bool) -> Result<Warm, PluginError> {
        let deadline_ms = self.limits.configure_deadline_ms;
        let mut store = Store::new(self.engine.engine(), HostState::new(self.name.clone(), &self.limits));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(ticks(deadline_ms));
        let bindings = match self.pre.instantiate(&mut store) {
            Ok(bindings) => bindings,
            Err(e) => return Err(self.classify(e, &store, deadline_ms, instantiate_error)),
        };
        self.instances_created.fetch_add(1, Ordering::Relaxed);
        if !configure {
            return Ok(Warm { store, bindings, calls: 0 });
        }
        match bindings.es_plugin_lifecycle().call_configure(&mut store, &self.config) {
            Ok(Ok(())) => Ok(Warm { store, bindings, calls: 0 }),
            Ok(Err(message)) => Err(PluginError::Configure { plugin: self.name.to_string(), message }),
            Err(e) => Err(self.classify(e, &store, deadline_ms, trap_error)),
        }
    }

    fn fetch_info(&self, configured: bool) -> Result<PluginInfo, PluginError> {
        let mut warm = self.instantiate(configured)?;
        warm.store.set_epoch_deadline(ticks(self.limits.configure_deadline_ms));
        let info = warm
            .bindings
            .es_plugin_lifecycle()
            .call_info(&mut warm.store)
            .map_err(|e| self.classify(e, &warm.store, self.limits.configure_deadline_ms, trap_error))?;
        // An unconfigured instance must never serve `validate`.
        if configured {
            self.pool.give(warm);
        }
        Ok(PluginInfo {
            name: info.name,
            version: info.version,
            description: info.description,
            config_keys: info.config_keys,
        })
    }

    /// Names what stopped the guest: the memory cap, the deadline, or a trap.
    fn classify(
        &self,
        e: wasmtime::Error,
        store: &Store<HostState>,
        deadline_ms: u64,
        other: fn(String, String) -> PluginError,
    ) -> PluginError {
        let plugin = self.name.to_string();
        if store.data().limiter.exceeded {
            return PluginError::Memory { plugin, limit_bytes: self.limits.memory_bytes_max };
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => PluginError::Deadline { plugin, deadline_ms },
            Some(trap) => other(plugin, with_stderr(trap.to_string(), store)),
            None => other(plugin, with_stderr(format!("{e:#}"), store)),
        }
    }

    /// Checks a guest's violation against the chunk it came from and shifts its
    /// index to the caller's numbering.
    fn convert(&self, v: wit::Violation, offset: usize, len: usize) -> Result<Violation, PluginError> {
        let index = v.index as usize;
        if index >= len {
            self.failures.fetch_add(1, Ordering::Relaxed);
            return Err(PluginError::Garbage {
                plugin: self.name.to_string(),
                reason: format!("violation index {index} is outside a batch of {len} records"),
            });
        }
        let action = match v.action {
            wit::Action::Reject => Action::Reject,
            wit::Action::DeadLetter => Action::DeadLetter,
            wit::Action::Warn => Action::Warn,
        };
        Ok(Violation {
            index: u32::try_from(offset + index).expect("record count fits u32"),
            action,
            code: cut(v.code),
            reason: cut(v.reason),
        })
    }
}

/// Adds the guest's last stderr lines (a Rust panic's message) to a trap reason.
fn with_stderr(reason: String, store: &Store<HostState>) -> String {
    match store.data().stderr.last_message() {
        Some(message) => format!("{reason}; guest stderr: {message}"),
        None => reason,
    }
}

fn trap_error(plugin: String, reason: String) -> PluginError {
    PluginError::Trap { plugin, reason }
}

fn instantiate_error(plugin: String, reason: String) -> PluginError {
    PluginError::Instantiate { plugin, reason }
}

fn empty_info() -> PluginInfo {
    PluginInfo {
        name: String::new(),
        version: String::new(),
        description: String::new(),
        config_keys: Vec::new(),
    }
}

/// Epoch ticks for a deadline, at least one.
fn ticks(deadline_ms: u64) -> u64 {
    deadline_ms.div_ceil(EPOCH_TICK_MS).max(1)
}

/// Bounds guest-provided text, so a plugin cannot blow up a response or a log.
fn cut(mut s: String) -> String {
    if s.len() > VIOLATION_TEXT_BYTES_MAX {
        let at = s.floor_char_boundary(VIOLATION_TEXT_BYTES_MAX);
        s.truncate(at);
    }
    s
}

fn check_limits(engine: &PluginEngine, name: &str, limits: &PluginLimits) -> Result<(), PluginError> {
    let engine_max = engine.limits().memory_bytes_max;
    let reason = if limits.memory_bytes_max > engine_max {
        format!("memory_bytes_max {} exceeds the engine's {engine_max}", limits.memory_bytes_max)
    } else if limits.call_deadline_ms == 0 || limits.configure_deadline_ms == 0 {
        "deadlines must be at least 1 ms".to_owned()
    } else if limits.batch_bytes_max == 0 || limits.batch_bytes_max > i32::MAX as usize {
        format!("batch_bytes_max must be within 1..={}", i32::MAX)
    } else {
        return Ok(());
    };
    Err(PluginError::Limits { plugin: name.to_owned(), reason })
}

/// Refuses a component that lacks the world's exports, naming the missing one
/// (wasmtime's own type check that follows reports mismatched signatures).
fn check_exports(engine: &PluginEngine, name: &str, component: &Component) -> Result<(), PluginError> {
    let ty = component.component_type();
    let exports: Vec<&str> = ty.exports(engine.engine()).map(|(n, _)| n).collect();
    for required in REQUIRED_EXPORTS {
        if !exports.iter().any(|e| e.starts_with(required)) {
            return Err(PluginError::WrongWorld {
                plugin: name.to_owned(),
                world: WORLD,
                reason: format!("missing export `{required}x` (exports: [{}])", exports.join(", ")),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_up_and_never_reach_zero() {
        assert_eq!(ticks(0), 1);
        assert_eq!(ticks(20), 20 / EPOCH_TICK_MS);
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let s = "é".repeat(VIOLATION_TEXT_BYTES_MAX);
        let c = cut(s);
        assert!(c.len() <= VIOLATION_TEXT_BYTES_MAX && c.chars().all(|ch| ch == 'é'));
    }
}
