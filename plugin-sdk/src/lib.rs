//! Write es plugins in Rust: implement a trait, call one export macro, build for
//! `wasm32-wasip2`.
//!
//! The WIT contract (`es:plugin@0.1.0`, in the repository's `wit/`) is compiled
//! into this crate with `wit-bindgen`; the generated bindings stay private so a
//! plugin only sees the types below, and the contract can evolve behind them.
//!
//! A complete record validator, rejecting records without a key:
//!
//! ```ignore
//! use es_plugin_sdk::{export_validator, Batch, Config, RecordValidator, Violation};
//!
//! struct KeyRequired {
//!     code: String,
//! }
//!
//! impl RecordValidator for KeyRequired {
//!     const NAME: &'static str = "key-required";
//!     const VERSION: &'static str = "0.1.0";
//!     const DESCRIPTION: &'static str = "Rejects records without a key.";
//!     const CONFIG_KEYS: &'static [&'static str] = &["code"];
//!
//!     fn configure(config: &Config) -> Result<Self, String> {
//!         config.reject_unknown(Self::CONFIG_KEYS)?;
//!         Ok(Self { code: config.get("code").unwrap_or("key-required").to_owned() })
//!     }
//!
//!     fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>) {
//!         for record in batch.records().filter(|r| r.key().is_none()) {
//!             out.push(Violation::reject(record.index(), &self.code, "a key is required"));
//!         }
//!     }
//! }
//!
//! export_validator!(KeyRequired);
//! ```
//!
//! Build it as a `cdylib` with `cargo build --release --target wasm32-wasip2`; the
//! resulting `.wasm` is a component the broker loads.

mod batch;
mod config;
mod glue;

pub use batch::{Batch, HeaderRef, RecordRef};
pub use config::Config;

/// What the broker does with a failing record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Refuse the whole produce request.
    Reject,
    /// Send the record to the binding's dead-letter topic.
    DeadLetter,
    /// Accept the record and log a warning.
    Warn,
}

/// One failing record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Index of the record in the batch (`RecordRef::index`).
    pub index: u32,
    pub action: Action,
    /// Stable machine-readable code, e.g. `key-required`.
    pub code: String,
    /// Human-readable explanation.
    pub reason: String,
}

impl Violation {
    /// A violation with any action.
    pub fn new(index: u32, action: Action, code: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { index, action, code: code.into(), reason: reason.into() }
    }

    /// A violation that rejects the produce request.
    pub fn reject(index: u32, code: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(index, Action::Reject, code, reason)
    }
}

/// A record validator: configured once per instance, then called per batch.
pub trait RecordValidator: Sized + 'static {
    /// Short stable name, e.g. `rules`.
    const NAME: &'static str;
    /// The plugin's own version.
    const VERSION: &'static str;
    /// One sentence for humans.
    const DESCRIPTION: &'static str;
    /// Configuration keys the plugin understands.
    const CONFIG_KEYS: &'static [&'static str] = &[];

    /// Parses the binding's configuration. An error refuses the binding.
    fn configure(config: &Config) -> Result<Self, String>;

    /// Pushes one violation per failing record onto `out` (empty for a good batch).
    fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>);
}

/// Severity of a line sent to the broker's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Writes a line to the broker's log. The broker rate-limits plugin logs, so this
/// is for rare events (configuration, unexpected input), not per record.
pub fn log(level: Level, message: &str) {
    glue::log(level, message);
}

/// Exports a [`RecordValidator`] implementation as the component's
/// `record-validator` world. Use it once per plugin crate.
#[macro_export]
macro_rules! export_validator {
    ($ty:ty) => {
        const _: () = {
            struct EsPluginExport;

            impl $crate::__private::LifecycleGuest for EsPluginExport {
                fn info() -> $crate::__private::PluginInfo {
                    $crate::__private::info::<$ty>()
                }

                fn configure(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::configure::<$ty>(config)
                }
            }

            impl $crate::__private::ValidatorGuest for EsPluginExport {
                fn validate(
                    batch: $crate::__private::WitBatch,
                ) -> ::std::vec::Vec<$crate::__private::WitViolation> {
                    $crate::__private::validate::<$ty>(batch)
                }
            }

            $crate::__export_record_validator_impl!(
                EsPluginExport with_types_in $crate::__private::bindings
            );
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::glue::bindings;
    pub use crate::glue::{configure, info, validate};
    pub use bindings::exports::es::plugin::lifecycle::{Guest as LifecycleGuest, PluginInfo};
    pub use bindings::exports::es::plugin::validator::{
        Batch as WitBatch, Guest as ValidatorGuest, Violation as WitViolation,
    };
}
