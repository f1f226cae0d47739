//! Every limit of the plugin sandbox in one place, with its default. Engine-wide
//! limits size the pooling allocator; per-plugin limits bound each call.

/// The epoch ticker's period. Deadlines are counted in ticks of this length, so a
/// deadline is honoured to within about one tick.
pub const EPOCH_TICK_MS: u64 = 1;

/// Default deadline for one `validate` call (one batch).
pub const VALIDATE_DEADLINE_MS_DEFAULT: u64 = 20;
/// Default deadline for one call of a schema-compat plugin (`normalize` or
/// `check`); `PluginLimits::compat()` uses it.
pub const COMPAT_DEADLINE_MS_DEFAULT: u64 = 200;
/// Default deadline for one authentication step (for the authenticator world).
pub const AUTH_STEP_DEADLINE_MS_DEFAULT: u64 = 100;
/// Most `step` calls one authentication session may make: SCRAM needs two,
/// OAUTHBEARER one; a plugin that challenges forever fails its handshake here.
pub const AUTH_STEPS_MAX: u32 = 8;
/// Longest challenge an authenticator may send to a client in one step.
pub const AUTH_CHALLENGE_BYTES_MAX: usize = 16 * 1024;
/// Longest principal an authenticator may return (key ids are far shorter).
pub const AUTH_PRINCIPAL_BYTES_MAX: usize = 256;
/// Most bytes one `random-bytes` call returns.
pub const AUTH_RANDOM_BYTES_MAX: u32 = 1024;
/// Default deadline for instantiation plus `configure`: a plugin may compile a
/// schema there, which is far slower than checking one batch.
pub const CONFIGURE_DEADLINE_MS_DEFAULT: u64 = 2_000;
/// Default cap on one instance's linear memory.
pub const MEMORY_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;
/// Default cap on the packed bytes (keys, values, headers) sent in one call; larger
/// batches are split into several calls.
pub const BATCH_BYTES_MAX_DEFAULT: usize = 4 * 1024 * 1024;
/// Default number of idle warm instances kept per plugin binding: enough for
/// the concurrent produce requests of a busy topic, so a call never pays for an
/// instantiation (30 us for a small Rust guest, 1-2 ms for json-schema) in the
/// steady state. Two were too few: eight concurrent producers churned instances.
pub const WARM_INSTANCES_MAX_DEFAULT: usize = 8;
/// An instance is replaced after this many calls, so slow leaks in a guest stay
/// bounded.
pub const RECYCLE_AFTER_CALLS_DEFAULT: u64 = 100_000;
/// An instance whose memory grew past this is replaced after its call returns.
pub const RECYCLE_MEMORY_BYTES_DEFAULT: usize = 48 * 1024 * 1024;
/// Log lines a plugin instance may write per second on average...
pub const LOG_LINES_PER_SECOND_DEFAULT: u32 = 10;
/// ...and in one burst.
pub const LOG_BURST_DEFAULT: u32 = 20;
/// Longer log lines are cut to this many bytes.
pub const LOG_LINE_BYTES_MAX: usize = 1024;
/// Longer violation codes and reasons from a guest are cut to this many bytes.
pub const VIOLATION_TEXT_BYTES_MAX: usize = 1024;
/// Most incompatibilities one `check` returns; a guest's extra ones are dropped.
pub const INCOMPATIBILITIES_MAX: usize = 1_000;
/// Longest schema type name a schema-compat plugin may list in `supports()`.
pub const SCHEMA_TYPE_BYTES_MAX: usize = 64;
/// Most table elements one instance may have (function tables of big guests).
pub const TABLE_ELEMENTS_MAX: usize = 100_000;

/// Default number of live instances across all plugins of one engine (pool slots).
pub const ENGINE_INSTANCES_MAX_DEFAULT: u32 = 256;
/// Core instances one component may hold (and tables, which the pool sizes the
/// same way): a Rust guest has its module plus a few shims that wit-component
/// adds, but a Python guest built by componentize-py 0.25 links CPython's
/// libraries as separate modules and has 38. The pool only counts instances and
/// reserves (does not commit) table address space, so the headroom is cheap.
pub const CORE_INSTANCES_PER_COMPONENT_MAX: u32 = 64;

/// Limits of one plugin binding. Every field has a default (see `Default`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    /// Deadline for one call of the plugin's main function.
    pub call_deadline_ms: u64,
    /// Deadline for instantiation plus `configure`.
    pub configure_deadline_ms: u64,
    /// Cap on one instance's linear memory; exceeding it fails the call.
    pub memory_bytes_max: usize,
    /// Cap on the packed record bytes sent in one call.
    pub batch_bytes_max: usize,
    /// Idle warm instances kept for reuse.
    pub warm_instances_max: usize,
    /// Calls after which an instance is replaced.
    pub recycle_after_calls: u64,
    /// Memory size past which an instance is replaced after its call.
    pub recycle_memory_bytes: usize,
    /// Log lines per second per instance (token bucket rate).
    pub log_lines_per_second: u32,
    /// Log lines per instance in one burst (token bucket size).
    pub log_burst: u32,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            call_deadline_ms: VALIDATE_DEADLINE_MS_DEFAULT,
            configure_deadline_ms: CONFIGURE_DEADLINE_MS_DEFAULT,
            memory_bytes_max: MEMORY_BYTES_MAX_DEFAULT,
            batch_bytes_max: BATCH_BYTES_MAX_DEFAULT,
            warm_instances_max: WARM_INSTANCES_MAX_DEFAULT,
            recycle_after_calls: RECYCLE_AFTER_CALLS_DEFAULT,
            recycle_memory_bytes: RECYCLE_MEMORY_BYTES_DEFAULT,
            log_lines_per_second: LOG_LINES_PER_SECOND_DEFAULT,
            log_burst: LOG_BURST_DEFAULT,
        }
    }
}

impl PluginLimits {
    /// The defaults for a schema-compat plugin: the compatibility deadline
    /// (`COMPAT_DEADLINE_MS_DEFAULT`) instead of the per-batch one.
    pub fn compat() -> Self {
        Self { call_deadline_ms: COMPAT_DEADLINE_MS_DEFAULT, ..Self::default() }
    }

    /// The defaults for an authenticator: the per-step deadline
    /// (`AUTH_STEP_DEADLINE_MS_DEFAULT`) instead of the per-batch one.
    pub fn auth() -> Self {
        Self { call_deadline_ms: AUTH_STEP_DEADLINE_MS_DEFAULT, ..Self::default() }
    }
}

/// Limits of one engine: they size the pooling allocator, which reserves address
/// space for every slot up front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineLimits {
    /// Live instances across all plugins.
    pub instances_max: u32,
    /// Largest memory any plugin may be given (`PluginLimits::memory_bytes_max`
    /// above this is refused at load).
    pub memory_bytes_max: usize,
}

impl Default for EngineLimits {
    fn default() -> Self {
        Self { instances_max: ENGINE_INSTANCES_MAX_DEFAULT, memory_bytes_max: MEMORY_BYTES_MAX_DEFAULT }
    }
}
