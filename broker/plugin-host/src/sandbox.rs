//! What a plugin instance can reach: its store data, the linker with the allowed
//! imports, the memory limiter and the rate-limited log.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::p2::bindings::{cli, clocks, random, sync::io as sync_io};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::authenticator::AuthLookup;
use crate::bindings::auth::es::plugin::auth_host;
use crate::bindings::validator::RecordValidator;
use crate::bindings::validator::es::plugin::host::{self, LogLevel};
use crate::error::PluginError;
use crate::limits::{AUTH_RANDOM_BYTES_MAX, LOG_LINE_BYTES_MAX, PluginLimits, TABLE_ELEMENTS_MAX};
use crate::stderr::StderrTail;

/// Interfaces a plugin may import, as `namespace:package/interface` plus the
/// version prefix it must have. These are what a Rust guest's standard library
/// needs (stdio, clocks, randomness for hash maps) and the es host interface.
/// Filesystem, sockets, HTTP and anything else are refused at load.
pub(crate) const ALLOWED_IMPORTS: &[(&str, &str)] = &[
    ("es:plugin/host", "0.1."),
    // Answers only during an authentication session (see `HostState::auth`).
    ("es:plugin/auth-host", "0.1."),
    ("wasi:io/error", "0.2."),
    ("wasi:io/poll", "0.2."),
    ("wasi:io/streams", "0.2."),
    ("wasi:clocks/wall-clock", "0.2."),
    ("wasi:clocks/monotonic-clock", "0.2."),
    ("wasi:random/random", "0.2."),
    ("wasi:random/insecure", "0.2."),
    ("wasi:random/insecure-seed", "0.2."),
    ("wasi:cli/environment", "0.2."),
    ("wasi:cli/exit", "0.2."),
    ("wasi:cli/stdin", "0.2."),
    ("wasi:cli/stdout", "0.2."),
    ("wasi:cli/stderr", "0.2."),
    ("wasi:cli/terminal-input", "0.2."),
    ("wasi:cli/terminal-output", "0.2."),
    ("wasi:cli/terminal-stdin", "0.2."),
    ("wasi:cli/terminal-stdout", "0.2."),
    ("wasi:cli/terminal-stderr", "0.2."),
];

/// Refuses a component that imports anything outside `ALLOWED_IMPORTS`, naming
/// the first such import.
pub(crate) fn check_imports(plugin: &str, engine: &Engine, component: &Component) -> Result<(), PluginError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if !import_allowed(name) {
            let allowed: Vec<&str> = ALLOWED_IMPORTS.iter().map(|(n, _)| *n).collect();
            return Err(PluginError::ForbiddenImport {
                plugin: plugin.to_owned(),
                import: name.to_owned(),
                allowed: allowed.join(", "),
            });
        }
    }
    Ok(())
}

fn import_allowed(name: &str) -> bool {
    let (interface, version) = name.split_once('@').unwrap_or((name, ""));
    ALLOWED_IMPORTS.iter().any(|(allowed, prefix)| *allowed == interface && version.starts_with(prefix))
}

/// Links the es host interface and the allowed WASI interfaces, nothing else, so
/// even a component that slipped past `check_imports` could not instantiate.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut l = Linker::new(engine);
    RecordValidator::add_to_linker::<HostState, HasSelf<HostState>>(&mut l, |s| s)?;
    auth_host::add_to_linker::<HostState, HasSelf<HostState>>(&mut l, |s| s)?;
    wasmtime_wasi_io_error(&mut l)?;
    sync_io::poll::add_to_linker::<HostState, HasTable>(&mut l, |s| &mut s.table)?;
    sync_io::streams::add_to_linker::<HostState, HasTable>(&mut l, |s| &mut s.table)?;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(
        &mut l,
        <HostState as WasiClocksView>::clocks,
    )?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(
        &mut l,
        <HostState as WasiClocksView>::clocks,
    )?;
    random::random::add_to_linker::<HostState, WasiRandom>(&mut l, <HostState as WasiRandomView>::random)?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(&mut l, <HostState as WasiRandomView>::random)?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(
        &mut l,
        <HostState as WasiRandomView>::random,
    )?;
    link_cli(&mut l)?;
    Ok(l)
}

fn wasmtime_wasi_io_error(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    sync_io::error::add_to_linker::<HostState, HasTable>(l, |s| &mut s.table)
}

fn link_cli(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let view = <HostState as WasiCliView>::cli;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, view)?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, view)?;
    Ok(())
}

/// Gives the WASI io bindings the store's resource table.
struct HasTable;

impl wasmtime::component::HasData for HasTable {
    type Data<'a> = &'a mut ResourceTable;
}

/// The data of one plugin instance's store.
pub(crate) struct HostState {
    plugin: Arc<str>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// The end of the guest's stderr, for trap messages.
    pub(crate) stderr: StderrTail,
    log: LogBudget,
    /// The broker's lookups, set for the length of one authentication session
    /// and `None` otherwise: a validator, or an authenticator between sessions,
    /// sees no key at all.
    pub(crate) auth: Option<Arc<dyn AuthLookup>>,
}

impl HostState {
    /// A sandbox with no environment, arguments, preopened directories or
    /// network; stdin is empty, stdout is discarded and only the tail of stderr
    /// is kept.
    pub(crate) fn new(plugin: Arc<str>, limits: &PluginLimits) -> Self {
        let stderr = StderrTail::default();
        Self {
            plugin,
            wasi: WasiCtxBuilder::new().stderr(stderr.clone()).build(),
            stderr,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes_max),
            log: LogBudget::new(limits.log_lines_per_second, limits.log_burst),
            auth: None,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: LogLevel, mut message: String) {
        if !self.log.take() {
            return;
        }
        if message.len() > LOG_LINE_BYTES_MAX {
            let cut = message.floor_char_boundary(LOG_LINE_BYTES_MAX);
            message.truncate(cut);
        }
        let plugin = &*self.plugin;
        let dropped = std::mem::take(&mut self.log.dropped);
        match level {
            LogLevel::Trace => tracing::trace!(plugin, dropped, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, dropped, "{message}"),
            LogLevel::Info => tracing::info!(plugin, dropped, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, dropped, "{message}"),
            LogLevel::Error => tracing::error!(plugin, dropped, "{message}"),
        }
    }
}

impl auth_host::Host for HostState {
    fn key_exists(&mut self, id: String) -> bool {
        self.auth.as_ref().is_some_and(|a| a.key_exists(&id))
    }

    fn scram_lookup(&mut self, mechanism: String, id: String) -> Option<auth_host::ScramCredential> {
        let c = self.auth.as_ref()?.scram_credential(&mechanism, &id)?;
        Some(auth_host::ScramCredential {
            salt: c.salt,
            iterations: c.iterations,
            stored_key: c.stored_key,
            server_key: c.server_key,
        })
    }

    fn now_ms(&mut self) -> i64 {
        // Outside a session the guest has its own WASI clock; this one is the
        // broker's, so tests with a fixed clock reach the plugin too.
        self.auth.as_ref().map_or(0, |a| a.now_ms())
    }

    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        let len = len.min(AUTH_RANDOM_BYTES_MAX) as usize;
        match &self.auth {
            Some(a) => a.random_bytes(len),
            None => vec![0; len],
        }
    }
}

/// Caps linear memory and tables, and remembers whether the cap was what stopped
/// the guest so the error can say so.
pub(crate) struct MemoryLimiter {
    memory_bytes_max: usize,
    /// Largest memory size granted so far, for the recycle threshold.
    pub(crate) memory_bytes: usize,
    pub(crate) exceeded: bool,
}

impl MemoryLimiter {
    fn new(memory_bytes_max: usize) -> Self {
        Self { memory_bytes_max, memory_bytes: 0, exceeded: false }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes_max {
            // Trapping (rather than failing the grow) stops the guest at once, instead
            // of letting its allocator abort with a less telling trap; the flag is
            // what the caller reads to name the error.
            self.exceeded = true;
            return Err(wasmtime::Error::msg("memory cap exceeded"));
        }
        self.memory_bytes = self.memory_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS_MAX)
    }
}

/// A token bucket for the guest's log lines: lines beyond the budget are dropped
/// and counted, and the count rides on the next line that gets through.
struct LogBudget {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    dropped: u64,
}

impl LogBudget {
    fn new(per_second: u32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self { per_second: f64::from(per_second), burst, tokens: burst, last: Instant::now(), dropped: 0 }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_matched_by_interface_and_version() {
        assert!(import_allowed("wasi:io/streams@0.2.6"));
        assert!(import_allowed("es:plugin/host@0.1.0"));
        assert!(!import_allowed("wasi:io/streams@0.3.0"));
        assert!(!import_allowed("wasi:filesystem/types@0.2.6"));
        assert!(!import_allowed("wasi:sockets/tcp@0.2.0"));
        assert!(!import_allowed("es:plugin/host"));
    }

    #[test]
    fn log_budget_drops_past_the_burst() {
        let mut budget = LogBudget::new(0, 3);
        assert_eq!((0..10).filter(|_| budget.take()).count(), 3);
        assert_eq!(budget.dropped, 7);
    }
}
