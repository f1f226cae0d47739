//! What every loaded plugin shares, whatever its world: the load-time checks
//! (limits, imports, exports, the world's type check), the warm pool, instances
//! created and configured under the configure deadline, guest calls under the
//! call deadline, and naming what stopped a guest. `Validator` and
//! `CompatChecker` are thin typed layers over `Plugin<W>`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::component::{Component, InstancePre};
use wasmtime::{Store, Trap};

use crate::engine::PluginEngine;
use crate::error::PluginError;
use crate::limits::{EPOCH_TICK_MS, PluginLimits, VIOLATION_TEXT_BYTES_MAX};
use crate::pool::{Pool, Warm};
use crate::sandbox::{self, HostState};

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub config_keys: Vec<String>,
}

/// Counters of one loaded plugin, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PluginStats {
    /// Calls into the guest (a large batch may take several).
    pub calls: u64,
    /// Instances created, including the first one and every replacement.
    pub instances_created: u64,
    /// Calls that failed (trap, deadline, memory, garbage).
    pub failures: u64,
}

/// One world's generated bindings, seen the same way by the shared machinery.
pub(crate) trait World: Sized {
    /// The world's full name, for `PluginError::WrongWorld`.
    const NAME: &'static str;
    /// Exports the world requires, by interface name (any 0.1.x version).
    const REQUIRED_EXPORTS: &'static [&'static str];
    /// The bindgen `...Pre` type: the type-checked, linked component.
    type Pre;

    fn pre(instance_pre: InstancePre<HostState>) -> wasmtime::Result<Self::Pre>;
    fn instantiate(pre: &Self::Pre, store: &mut Store<HostState>) -> wasmtime::Result<Self>;
    fn configure(
        &self,
        store: &mut Store<HostState>,
        config: &[(String, String)],
    ) -> wasmtime::Result<Result<(), String>>;
    fn info(&self, store: &mut Store<HostState>) -> wasmtime::Result<PluginInfo>;
}

/// Implements `World` for a bindgen world whose bindings type is `$world` and
/// whose pre-instance type is `$pre`; every world exports `lifecycle`, so
/// `configure` and `info` are the same calls on each world's own types.
macro_rules! impl_world {
    ($world:ident, $pre:ident, $name:literal, [$($export:literal),+ $(,)?]) => {
        impl $crate::runtime::World for $world {
            const NAME: &'static str = $name;
            const REQUIRED_EXPORTS: &'static [&'static str] = &[$($export),+];
            type Pre = $pre<$crate::sandbox::HostState>;

            fn pre(
                instance_pre: wasmtime::component::InstancePre<$crate::sandbox::HostState>,
            ) -> wasmtime::Result<Self::Pre> {
                $pre::new(instance_pre)
            }

            fn instantiate(
                pre: &Self::Pre,
                store: &mut wasmtime::Store<$crate::sandbox::HostState>,
            ) -> wasmtime::Result<Self> {
                pre.instantiate(store)
            }

            fn configure(
                &self,
                store: &mut wasmtime::Store<$crate::sandbox::HostState>,
                config: &[(String, String)],
            ) -> wasmtime::Result<Result<(), String>> {
                self.es_plugin_lifecycle().call_configure(store, config)
            }

            fn info(
                &self,
                store: &mut wasmtime::Store<$crate::sandbox::HostState>,
            ) -> wasmtime::Result<$crate::runtime::PluginInfo> {
                let info = self.es_plugin_lifecycle().call_info(store)?;
                Ok($crate::runtime::PluginInfo {
                    name: info.name,
                    version: info.version,
                    description: info.description,
                    config_keys: info.config_keys,
                })
            }
        }
    };
}
pub(crate) use impl_world;

/// A loaded plugin of world `W`, callable from any thread.
pub(crate) struct Plugin<W: World> {
    name: Arc<str>,
    engine: PluginEngine,
    pre: W::Pre,
    config: Vec<(String, String)>,
    limits: PluginLimits,
    pool: Pool<W>,
    calls: AtomicU64,
    instances_created: AtomicU64,
    failures: AtomicU64,
}

impl<W: World> Plugin<W> {
    /// Checks that `wasm` is a component of world `W` importing only what the
    /// sandbox allows and compiles it (or takes it from the cache); no instance
    /// yet. `load` then instantiates and configures one instance, so a bad
    /// configuration fails at load.
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
        check_exports::<W>(engine, name, &component)?;
        let wrong_world = |e: wasmtime::Error| PluginError::WrongWorld {
            plugin: name.to_owned(),
            world: W::NAME,
            reason: format!("{e:#}"),
        };
        let instance_pre = engine.linker().instantiate_pre(&component).map_err(wrong_world)?;
        let pre = W::pre(instance_pre).map_err(wrong_world)?;
        let plugin = Self {
            name: Arc::from(name),
            engine: engine.clone(),
            pre,
            config,
            pool: Pool::new(limits.warm_instances_max.max(1)),
            limits,
            calls: AtomicU64::new(0),
            instances_created: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        };
        Ok(plugin)
    }

    /// Loads as [`Plugin::load`] does, then reads `info()` from one configured
    /// instance, which stays warm.
    pub(crate) fn load(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<(Self, PluginInfo), PluginError> {
        let plugin = Self::prepare(engine, name, wasm, config, limits)?;
        let info = plugin.at_load(|b, s| b.info(s))?;
        Ok((plugin, info))
    }

    /// The checks of `load`, then `info()` from an instance that is never
    /// configured and never kept: what an upload checks before any binding has
    /// given the plugin a configuration.
    pub(crate) fn inspect(engine: &PluginEngine, name: &str, wasm: &[u8]) -> Result<PluginInfo, PluginError> {
        let plugin = Self::prepare(engine, name, wasm, Vec::new(), PluginLimits::default())?;
        let deadline_ms = plugin.limits.configure_deadline_ms;
        let mut store =
            Store::new(plugin.engine.engine(), HostState::new(plugin.name.clone(), &plugin.limits));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(ticks(deadline_ms));
        let bindings = W::instantiate(&plugin.pre, &mut store)
            .map_err(|e| plugin.classify(e, &store, deadline_ms, instantiate_error))?;
        bindings.info(&mut store).map_err(|e| plugin.classify(e, &store, deadline_ms, trap_error))
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn limits(&self) -> &PluginLimits {
        &self.limits
    }

    pub(crate) fn stats(&self) -> PluginStats {
        PluginStats {
            calls: self.calls.load(Ordering::Relaxed),
            instances_created: self.instances_created.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn warm_instances(&self) -> usize {
        self.pool.idle_count()
    }

    /// One counted guest call under the call deadline.
    pub(crate) fn call<R>(
        &self,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.invoke(self.limits.call_deadline_ms, true, f)
    }

    /// A load-time query (`info`, `supports`) under the configure deadline. It is
    /// part of loading, not a call: it does not count towards the instance's
    /// calls, and the instance it ran on stays warm for the first real call.
    pub(crate) fn at_load<R>(
        &self,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        self.invoke(self.limits.configure_deadline_ms, false, f)
    }

    /// A `Garbage` error for a result the guest should never have returned,
    /// counted as a failed call.
    pub(crate) fn garbage(&self, reason: String) -> PluginError {
        self.failures.fetch_add(1, Ordering::Relaxed);
        PluginError::Garbage { plugin: self.name.to_string(), reason }
    }

    /// Runs `f` on a warm instance under `deadline_ms`. A failed instance is
    /// dropped, never reused: after a trap its state is unknown and wasmtime
    /// refuses it anyway. `counted` calls age the instance towards recycling.
    fn invoke<R>(
        &self,
        deadline_ms: u64,
        counted: bool,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let mut warm = self.checkout()?;
        let out = self.run_on(&mut warm, deadline_ms, counted, f)?;
        if !counted || self.healthy(&warm) {
            self.pool.give(warm);
        }
        Ok(out)
    }

    /// A warm instance for the caller's exclusive use (an authentication session
    /// holds one for its whole handshake); give it back with [`Plugin::checkin`].
    pub(crate) fn checkout(&self) -> Result<Warm<W>, PluginError> {
        match self.pool.take() {
            Some(warm) => Ok(warm),
            None => self.instantiate(),
        }
    }

    /// Returns a checked-out instance to the pool unless it is due for replacement.
    /// Only instances whose every call succeeded may come back.
    pub(crate) fn checkin(&self, warm: Warm<W>) {
        if self.healthy(&warm) {
            self.pool.give(warm);
        }
    }

    /// One counted call on a checked-out instance under the call deadline.
    pub(crate) fn call_on<R>(
        &self,
        warm: &mut Warm<W>,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.run_on(warm, self.limits.call_deadline_ms, true, f)
    }

    fn run_on<R>(
        &self,
        warm: &mut Warm<W>,
        deadline_ms: u64,
        counted: bool,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        warm.calls += u64::from(counted);
        warm.store.set_epoch_deadline(ticks(deadline_ms));
        f(&warm.bindings, &mut warm.store).map_err(|e| {
            self.failures.fetch_add(1, Ordering::Relaxed);
            self.classify(e, &warm.store, deadline_ms, trap_error)
        })
    }

    /// An instance may go back to the pool unless it is due for replacement.
    fn healthy(&self, warm: &Warm<W>) -> bool {
        warm.calls < self.limits.recycle_after_calls
            && warm.store.data().limiter.memory_bytes <= self.limits.recycle_memory_bytes
    }

    /// A new instance, configured, under the configure deadline.
    fn instantiate(&self) -> Result<Warm<W>, PluginError> {
        let deadline_ms = self.limits.configure_deadline_ms;
        let mut store = Store::new(self.engine.engine(), HostState::new(self.name.clone(), &self.limits));
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(ticks(deadline_ms));
        let bindings = match W::instantiate(&self.pre, &mut store) {
            Ok(bindings) => bindings,
            Err(e) => return Err(self.classify(e, &store, deadline_ms, instantiate_error)),
        };
        self.instances_created.fetch_add(1, Ordering::Relaxed);
        match bindings.configure(&mut store, &self.config) {
            Ok(Ok(())) => Ok(Warm { store, bindings, calls: 0 }),
            Ok(Err(message)) => Err(PluginError::Configure { plugin: self.name.to_string(), message }),
            Err(e) => Err(self.classify(e, &store, deadline_ms, trap_error)),
        }
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

/// Epoch ticks for a deadline, at least one.
fn ticks(deadline_ms: u64) -> u64 {
    deadline_ms.div_ceil(EPOCH_TICK_MS).max(1)
}

/// Bounds guest-provided text, so a plugin cannot blow up a response or a log.
pub(crate) fn cut(mut s: String) -> String {
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
fn check_exports<W: World>(
    engine: &PluginEngine,
    name: &str,
    component: &Component,
) -> Result<(), PluginError> {
    let ty = component.component_type();
    let exports: Vec<&str> = ty.exports(engine.engine()).map(|(n, _)| n).collect();
    for required in W::REQUIRED_EXPORTS {
        if !exports.iter().any(|e| e.starts_with(required)) {
            return Err(PluginError::WrongWorld {
                plugin: name.to_owned(),
                world: W::NAME,
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
