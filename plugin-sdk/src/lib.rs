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
//!
//! A schema compatibility checker for the schema registry implements
//! [`SchemaCompat`] and calls [`export_schema_compat!`] instead (one world per
//! plugin crate). A toy checker for a made-up `LINES` type, where a schema is a
//! list of required field names, one per line:
//!
//! ```ignore
//! use es_plugin_sdk::{export_schema_compat, CompatLevel, Config, Incompatibility, Schema, SchemaCompat};
//!
//! struct Lines;
//!
//! impl SchemaCompat for Lines {
//!     const NAME: &'static str = "lines-compat";
//!     const VERSION: &'static str = "0.1.0";
//!     const DESCRIPTION: &'static str = "Compatibility of LINES schemas.";
//!     const SUPPORTS: &'static [&'static str] = &["LINES"];
//!
//!     fn configure(config: &Config) -> Result<Self, String> {
//!         config.reject_unknown(Self::CONFIG_KEYS)?;
//!         Ok(Lines)
//!     }
//!
//!     fn normalize(&self, schema: &Schema) -> Result<String, String> {
//!         let lines = schema.text().lines().map(str::trim);
//!         let mut fields: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
//!         fields.sort_unstable();
//!         Ok(fields.join("\n"))
//!     }
//!
//!     fn check(&self, level: CompatLevel, proposed: &Schema, existing: &[Schema], out: &mut Vec<Incompatibility>) {
//!         if !level.checks_backward() {
//!             return;
//!         }
//!         // Backward: the proposed (reader) schema may only require fields every
//!         // existing (writer) schema has. (LINES has no references; a type that
//!         // has them finds each schema's in `Schema::references`.)
//!         for (i, writer) in existing.iter().enumerate() {
//!             let missing = |f: &&str| !writer.text().lines().any(|w| w == *f);
//!             for field in proposed.text().lines().filter(missing) {
//!                 out.push(Incompatibility::new(format!("/{field}"), format!("field `{field}` is missing in version {i}")));
//!             }
//!         }
//!     }
//! }
//!
//! export_schema_compat!(Lines);
//! ```

pub mod auth;
mod batch;
mod config;
mod glue;
mod schema;

pub use auth::{AuthSession, AuthStep, Authenticator};
pub use batch::{Batch, HeaderRef, RecordRef};
pub use config::Config;
pub use schema::{Reference, Schema};

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

/// Confluent's compatibility levels, as the host passes them to
/// [`SchemaCompat::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompatLevel {
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

impl CompatLevel {
    /// Whether the proposed schema must read data written with the existing ones
    /// (proposed = reader, existing = writer): BACKWARD and FULL, transitive or not.
    pub fn checks_backward(self) -> bool {
        matches!(self, Self::Backward | Self::BackwardTransitive | Self::Full | Self::FullTransitive)
    }

    /// Whether the existing schemas must read data written with the proposed one
    /// (existing = reader, proposed = writer): FORWARD and FULL, transitive or not.
    pub fn checks_forward(self) -> bool {
        matches!(self, Self::Forward | Self::ForwardTransitive | Self::Full | Self::FullTransitive)
    }

    /// Whether the host passed every existing version rather than the latest. A
    /// checker needs no special case for it: it checks every schema it is given.
    pub fn is_transitive(self) -> bool {
        matches!(self, Self::BackwardTransitive | Self::ForwardTransitive | Self::FullTransitive)
    }
}

/// One reason a proposed schema is incompatible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// Where in the schema, JSON-pointer-like, e.g. `/fields/2/type`.
    pub path: String,
    /// What is wrong, e.g. `READER_FIELD_MISSING_DEFAULT_VALUE: field `id` ...`.
    /// Never empty (the host refuses an empty message as garbage).
    pub message: String,
}

impl Incompatibility {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

/// A schema compatibility checker for the schema registry: configured once per
/// instance, then asked to normalize schemas and to check a proposed schema
/// against existing ones.
pub trait SchemaCompat: Sized + 'static {
    /// Short stable name, e.g. `avro-compat`.
    const NAME: &'static str;
    /// The plugin's own version.
    const VERSION: &'static str;
    /// One sentence for humans.
    const DESCRIPTION: &'static str;
    /// Configuration keys the plugin understands.
    const CONFIG_KEYS: &'static [&'static str] = &[];
    /// Schema types handled, as the registry names them: `AVRO`, `JSON`, `PROTOBUF`.
    const SUPPORTS: &'static [&'static str];

    /// Parses the configuration. An error refuses the plugin.
    fn configure(config: &Config) -> Result<Self, String>;

    /// Parses `schema` (with the definitions its references bring) and returns
    /// the canonical text of `schema.text()` alone (two schemas with the same
    /// meaning should give the same text; references are not inlined), or why
    /// it is invalid, e.g. because it uses a name no reference defines.
    fn normalize(&self, schema: &Schema) -> Result<String, String>;

    /// Pushes every incompatibility of `proposed` against `existing` under
    /// `level` onto `out` (nothing when compatible). `existing` holds the latest
    /// schema for plain levels and every version, newest last, for transitive ones;
    /// check each of them. Each schema carries its own references (a new version
    /// may reference a newer version of a referenced schema). `CompatLevel::None`
    /// accepts everything.
    fn check(
        &self,
        level: CompatLevel,
        proposed: &Schema,
        existing: &[Schema],
        out: &mut Vec<Incompatibility>,
    );
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
                    batch: $crate::__private::WitBatchInfo,
                    data: ::std::vec::Vec<u8>,
                    records: ::std::vec::Vec<i32>,
                    headers: ::std::vec::Vec<i32>,
                    timestamps: ::std::vec::Vec<i64>,
                ) -> ::std::vec::Vec<$crate::__private::WitViolation> {
                    $crate::__private::validate::<$ty>(batch, data, records, headers, timestamps)
                }
            }

            $crate::__export_record_validator_impl!(
                EsPluginExport with_types_in $crate::__private::bindings
            );
        };
    };
}

/// Exports a [`SchemaCompat`] implementation as the component's `schema-compat`
/// world. Use it once per plugin crate, instead of [`export_validator!`].
#[macro_export]
macro_rules! export_schema_compat {
    ($ty:ty) => {
        const _: () = {
            struct EsPluginExport;

            impl $crate::__private::CompatLifecycleGuest for EsPluginExport {
                fn info() -> $crate::__private::CompatPluginInfo {
                    $crate::__private::compat_info::<$ty>()
                }

                fn configure(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::compat_configure::<$ty>(config)
                }
            }

            impl $crate::__private::CompatGuest for EsPluginExport {
                fn supports() -> ::std::vec::Vec<::std::string::String> {
                    $crate::__private::compat_supports::<$ty>()
                }

                fn normalize(
                    schema: $crate::__private::WitSchema,
                ) -> ::std::result::Result<::std::string::String, ::std::string::String> {
                    $crate::__private::compat_normalize::<$ty>(schema)
                }

                fn check(
                    level: $crate::__private::WitLevel,
                    proposed: $crate::__private::WitSchema,
                    existing: ::std::vec::Vec<$crate::__private::WitSchema>,
                ) -> ::std::vec::Vec<$crate::__private::WitIncompatibility> {
                    $crate::__private::compat_check::<$ty>(level, proposed, existing)
                }
            }

            $crate::__private::compat_bindings::__export_schema_compat_impl!(
                EsPluginExport with_types_in $crate::__private::compat_bindings
            );
        };
    };
}

/// Exports an [`Authenticator`] implementation as the component's `authenticator`
/// world. Use it once per plugin crate, instead of [`export_validator!`].
#[macro_export]
macro_rules! export_authenticator {
    ($ty:ty) => {
        const _: () = {
            struct EsPluginExport;

            /// One handshake: the plugin's session behind the `&self` the
            /// generated resource trait hands out (a guest is single-threaded).
            struct EsSession(::std::cell::RefCell<<$ty as $crate::Authenticator>::Session>);

            impl $crate::__private::AuthLifecycleGuest for EsPluginExport {
                fn info() -> $crate::__private::AuthPluginInfo {
                    $crate::__private::auth_info::<$ty>()
                }

                fn configure(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::auth_configure::<$ty>(config)
                }
            }

            impl $crate::__private::AuthGuest for EsPluginExport {
                type Session = EsSession;

                fn mechanisms() -> ::std::vec::Vec<::std::string::String> {
                    $crate::__private::auth_mechanisms::<$ty>()
                }
            }

            impl $crate::__private::AuthGuestSession for EsSession {
                fn new(mechanism: ::std::string::String) -> Self {
                    EsSession(::std::cell::RefCell::new($crate::__private::auth_start::<$ty>(&mechanism)))
                }

                fn step(&self, response: ::std::vec::Vec<u8>) -> $crate::__private::WitStepResult {
                    $crate::__private::auth_step(&mut *self.0.borrow_mut(), &response)
                }
            }

            $crate::__private::auth_bindings::__export_authenticator_impl!(
                EsPluginExport with_types_in $crate::__private::auth_bindings
            );
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::glue::{auth_bindings, bindings, compat_bindings};
    pub use crate::glue::{auth_configure, auth_info, auth_mechanisms, auth_start, auth_step};
    pub use crate::glue::{
        compat_check, compat_configure, compat_info, compat_normalize, compat_supports, configure, info,
        validate,
    };
    pub use auth_bindings::exports::es::plugin::auth::{
        Guest as AuthGuest, GuestSession as AuthGuestSession, StepResult as WitStepResult,
    };
    pub use auth_bindings::exports::es::plugin::lifecycle::{
        Guest as AuthLifecycleGuest, PluginInfo as AuthPluginInfo,
    };
    pub use bindings::exports::es::plugin::lifecycle::{Guest as LifecycleGuest, PluginInfo};
    pub use bindings::exports::es::plugin::validator::{
        BatchInfo as WitBatchInfo, Guest as ValidatorGuest, Violation as WitViolation,
    };
    pub use compat_bindings::exports::es::plugin::compat::{
        Guest as CompatGuest, Incompatibility as WitIncompatibility, Level as WitLevel, Schema as WitSchema,
    };
    pub use compat_bindings::exports::es::plugin::lifecycle::{
        Guest as CompatLifecycleGuest, PluginInfo as CompatPluginInfo,
    };
}
