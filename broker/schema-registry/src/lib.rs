//! The schema registry's state machine, with no I/O: Confluent Schema Registry's
//! model (subjects, versions, global schema ids, references, compatibility levels,
//! modes, soft and hard deletes) and its wire types.
//!
//! - [`record`]: the keyed records of the internal compacted topic `__es_schemas`
//!   (schema versions, configs, modes, the id high-water mark; tombstones for hard
//!   deletes). The broker appends them and fsyncs before it answers.
//! - [`State`]: the index rebuilt by applying those records in log order, the read
//!   queries, and the planners that validate a write and return the records that
//!   carry it out (applied to the state only once they are durable).
//! - [`checker`]: the [`SchemaChecker`] trait the compatibility checks and schema
//!   normalization go through (the broker backs it with Wasm plugins) and the
//!   per-type table [`SchemaCheckers`].
//! - [`RegistryError`]: every refusal with Confluent's `error_code`.

pub mod checker;
mod error;
mod plan;
pub mod record;
mod state;
pub mod tags;
pub mod types;

pub use checker::{
    CheckerError, Form, Incompatibility, ResolvedReference, ResolvedSchema, SchemaChecker, SchemaCheckers,
};
pub use error::{RegistryError, Result};
pub use plan::{CompatibilityResult, Plan, Registered};
pub use record::{Change, Key};
pub use state::State;
pub use types::{CompatLevel, Mode, Reference, SchemaType, VersionSpec};

#[cfg(test)]
mod tests;
