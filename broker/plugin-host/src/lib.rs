//! Runs es plugins: sandboxed WebAssembly components implementing the worlds of
//! the `es:plugin@0.1.0` WIT contract (`wit/`). This is the only crate that
//! depends on wasmtime.
//!
//! - `PluginEngine` owns the wasmtime engine (component model, pooling allocator,
//!   epoch interruption with a 1 ms ticker), the linker with the allowed imports,
//!   and the on-disk cache of precompiled components.
//! - `Validator` is one loaded record-validator plugin with a warm instance pool;
//!   `validate_packed` calls the guest with a `PackedBatch` (flat views over the
//!   batch's bytes, built once per produce batch, borrowing a binary batch's
//!   records section) under a deadline and a memory cap; every failure comes back
//!   as a typed `PluginError`.
//! - `CompatChecker` is one loaded schema-compat plugin (the schema registry's
//!   checker for a schema type): `normalize` and `check` under the compatibility
//!   deadline, with the same pool and typed errors.
//! - `Authenticator` is one loaded authenticator plugin (a SASL mechanism): each
//!   handshake is an `AuthSession` holding one warm instance and the guest's
//!   session resource, every step under the auth-step deadline, the memory cap
//!   and a step cap, with the broker's lookups (`AuthLookup`) linked in.
//! - `builtin` holds the built-in plugins, embedded at build time.
//! - `limits` holds every limit and its default.

mod authenticator;
mod bindings;
pub mod builtin;
mod compat;
mod engine;
mod error;
pub mod limits;
mod pack;
mod pool;
mod runtime;
mod sandbox;
mod stderr;
mod validator;

pub use authenticator::{AuthLookup, AuthSession, AuthStep, Authenticator, ScramSecret};
pub use compat::{
    CompatChecker, CompatLevel, CompatStats, Incompatibility, Schema, SchemaReference, UnknownCompatLevel,
};
pub use engine::PluginEngine;
pub use error::PluginError;
pub use limits::{EngineLimits, PluginLimits};
pub use pack::{BatchTarget, HEADER_WORDS, PackError, PackedBatch, RECORD_WORDS};
pub use runtime::{PluginInfo, PluginStats};
pub use validator::{Action, Validator, ValidatorStats, Violation};

/// Where the build put every guest component, the test fixtures included (tests
/// upload fixtures from here).
pub const GUEST_WASM_DIR: &str = env!("ES_GUEST_WASM_DIR");

/// Interfaces plugins may import, `namespace:package/interface` (any compatible
/// version); anything else is refused at load.
pub fn allowed_imports() -> impl Iterator<Item = &'static str> {
    sandbox::ALLOWED_IMPORTS.iter().map(|(name, _)| *name)
}
