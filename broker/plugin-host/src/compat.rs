//! A loaded schema-compat plugin: the schema registry's checker for one or more
//! schema types (e.g. `AVRO`). It normalizes schemas and checks a proposed schema
//! against existing ones under a compatibility level, in the same sandbox, warm
//! pool and typed errors as a validator, with the compatibility deadline.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::bindings::compat::exports::es::plugin::compat as wit;
use crate::bindings::compat::{SchemaCompat, SchemaCompatPre};
use crate::engine::PluginEngine;
use crate::error::PluginError;
use crate::limits::{INCOMPATIBILITIES_MAX, PluginLimits, SCHEMA_TYPE_BYTES_MAX};
use crate::runtime::{self, Plugin, PluginInfo, PluginStats};

/// Counters of one checker (the same counters every plugin has).
pub type CompatStats = PluginStats;

runtime::impl_world!(
    SchemaCompat,
    SchemaCompatPre,
    "es:plugin/schema-compat@0.1.0",
    ["es:plugin/lifecycle@0.1.", "es:plugin/compat@0.1."]
);

/// Confluent's compatibility levels. `Display` and `FromStr` use Confluent's
/// spelling (`BACKWARD_TRANSITIVE`); parsing ignores case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompatLevel {
    /// The proposed schema can read data written with the latest one.
    Backward,
    /// ...with every existing one.
    BackwardTransitive,
    /// Data written with the proposed schema can be read with the latest one.
    Forward,
    /// ...with every existing one.
    ForwardTransitive,
    /// Backward and forward against the latest schema.
    Full,
    /// Backward and forward against every existing schema.
    FullTransitive,
    /// No check: every schema is compatible.
    None,
}

impl CompatLevel {
    /// Every level, in Confluent's order.
    pub const ALL: [CompatLevel; 7] = [
        Self::Backward,
        Self::BackwardTransitive,
        Self::Forward,
        Self::ForwardTransitive,
        Self::Full,
        Self::FullTransitive,
        Self::None,
    ];

    /// Confluent's name, e.g. `BACKWARD_TRANSITIVE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Backward => "BACKWARD",
            Self::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Self::Forward => "FORWARD",
            Self::ForwardTransitive => "FORWARD_TRANSITIVE",
            Self::Full => "FULL",
            Self::FullTransitive => "FULL_TRANSITIVE",
            Self::None => "NONE",
        }
    }

    /// Whether the proposed schema is checked against every existing version
    /// (the caller passes them all) rather than the latest only.
    pub fn is_transitive(self) -> bool {
        matches!(self, Self::BackwardTransitive | Self::ForwardTransitive | Self::FullTransitive)
    }

    fn to_wit(self) -> wit::Level {
        match self {
            Self::Backward => wit::Level::Backward,
            Self::BackwardTransitive => wit::Level::BackwardTransitive,
            Self::Forward => wit::Level::Forward,
            Self::ForwardTransitive => wit::Level::ForwardTransitive,
            Self::Full => wit::Level::Full,
            Self::FullTransitive => wit::Level::FullTransitive,
            Self::None => wit::Level::None,
        }
    }
}

impl fmt::Display for CompatLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A compatibility level name that is not one of Confluent's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown compatibility level `{0}` (expected one of BACKWARD, BACKWARD_TRANSITIVE, FORWARD, \
     FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE)"
)]
pub struct UnknownCompatLevel(pub String);

impl FromStr for CompatLevel {
    type Err = UnknownCompatLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownCompatLevel(s.to_owned()))
    }
}

/// One reason a proposed schema is incompatible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// Where in the schema, e.g. `/fields/2/type`.
    pub path: String,
    /// What is wrong, e.g. `READER_FIELD_MISSING_DEFAULT_VALUE: ...`.
    pub message: String,
}

/// A schema as a checker receives it: its text and, resolved, the schemas it
/// references (Confluent's schema `references`), transitively and in dependency
/// order: each referenced schema once, after those it references itself, never
/// the schema itself. `Schema::from("...")` is a schema without references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    pub text: String,
    pub references: Vec<SchemaReference>,
}

/// One referenced schema, under the name the referencing schema uses for it (the
/// URL of a JSON Schema `$ref`, the path of a Protobuf `import`; Avro ignores it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaReference {
    pub name: String,
    pub text: String,
}

impl Schema {
    /// A schema without references.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), references: Vec::new() }
    }

    /// Adds a referenced schema after those already there.
    pub fn with_reference(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.references.push(SchemaReference { name: name.into(), text: text.into() });
        self
    }

    fn to_wit(&self) -> wit::Schema {
        wit::Schema {
            text: self.text.clone(),
            references: self
                .references
                .iter()
                .map(|r| wit::Reference { name: r.name.clone(), text: r.text.clone() })
                .collect(),
        }
    }
}

impl From<&str> for Schema {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Schema {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

/// A schema-compat plugin ready to be called from any thread. Load it with
/// `PluginLimits::compat()` for the compatibility deadline.
pub struct CompatChecker {
    plugin: Plugin<SchemaCompat>,
    info: PluginInfo,
    supports: Vec<String>,
}

impl fmt::Debug for CompatChecker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompatChecker")
            .field("name", &self.plugin.name())
            .field("info", &self.info)
            .field("supports", &self.supports)
            .finish_non_exhaustive()
    }
}

impl CompatChecker {
    /// Loads `wasm` as the checker `name`: the same checks as `Validator::load`
    /// against the schema-compat world, then reads `info()` and `supports()` once
    /// (a checker that supports no schema type is refused as `Garbage`).
    pub fn load(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<Self, PluginError> {
        let (plugin, info) = Plugin::<SchemaCompat>::load(engine, name, wasm, config, limits)?;
        let supports = plugin.at_load(|b, s| b.es_plugin_compat().call_supports(s))?;
        if supports.is_empty() {
            return Err(plugin.garbage("supports() returned no schema type".to_owned()));
        }
        if let Some(bad) = supports.iter().find(|t| !schema_type_ok(t)) {
            let shown = runtime::cut(bad.clone());
            return Err(plugin.garbage(format!(
                "supports() returned `{shown}`, not a schema type name (1 to {SCHEMA_TYPE_BYTES_MAX} \
                 ASCII letters, digits, `_` or `-`)"
            )));
        }
        Ok(Self { plugin, info, supports })
    }

    /// Checks `wasm` as `load` does against the schema-compat world and returns
    /// what the plugin says about itself, without configuring it (for uploads).
    pub fn inspect(engine: &PluginEngine, name: &str, wasm: &[u8]) -> Result<PluginInfo, PluginError> {
        Plugin::<SchemaCompat>::inspect(engine, name, wasm)
    }

    /// The name the plugin was loaded under.
    pub fn name(&self) -> &str {
        self.plugin.name()
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The schema types this checker handles, e.g. `["AVRO"]`, as read at load.
    pub fn supports(&self) -> &[String] {
        &self.supports
    }

    pub fn limits(&self) -> &PluginLimits {
        self.plugin.limits()
    }

    pub fn stats(&self) -> CompatStats {
        self.plugin.stats()
    }

    /// Idle warm instances right now.
    pub fn warm_instances(&self) -> usize {
        self.plugin.warm_instances()
    }

    /// Parses `schema` (with its references) and returns the canonical form of
    /// its text (`Ok(Ok(..))`), or why the schema is invalid (`Ok(Err(message))`,
    /// for a 422 reply). `Err` is a failure of the plugin itself, not of the schema.
    pub fn normalize(&self, schema: &Schema) -> Result<Result<String, String>, PluginError> {
        let schema = schema.to_wit();
        match self.plugin.call(|b, s| b.es_plugin_compat().call_normalize(s, &schema))? {
            Ok(canonical) if canonical.trim().is_empty() => {
                Err(self.plugin.garbage("normalize returned an empty schema for a valid one".to_owned()))
            }
            Ok(canonical) => Ok(Ok(canonical)),
            Err(message) if message.trim().is_empty() => {
                Err(self.plugin.garbage("normalize refused a schema without saying why".to_owned()))
            }
            Err(message) => Ok(Err(runtime::cut(message))),
        }
    }

    /// Checks `proposed` against `existing` under `level` and returns every
    /// incompatibility found; empty means compatible. Pass the latest schema for
    /// plain levels and every version (oldest first, newest last) for transitive
    /// ones, each with its own references. Paths and messages are cut at 1 KiB,
    /// and at most `INCOMPATIBILITIES_MAX` are returned.
    pub fn check(
        &self,
        level: CompatLevel,
        proposed: &Schema,
        existing: &[Schema],
    ) -> Result<Vec<Incompatibility>, PluginError> {
        let proposed = proposed.to_wit();
        let existing: Vec<wit::Schema> = existing.iter().map(Schema::to_wit).collect();
        let found = self
            .plugin
            .call(|b, s| b.es_plugin_compat().call_check(s, level.to_wit(), &proposed, &existing))?;
        if let Some(i) = found.iter().position(|i| i.message.trim().is_empty()) {
            return Err(self.plugin.garbage(format!("incompatibility {i} has an empty message")));
        }
        Ok(found
            .into_iter()
            .take(INCOMPATIBILITIES_MAX)
            .map(|i| Incompatibility { path: runtime::cut(i.path), message: runtime::cut(i.message) })
            .collect())
    }

    /// `normalize` on tokio's blocking pool, for async callers that must not
    /// block their task for up to the deadline.
    pub async fn normalize_blocking(
        self: Arc<Self>,
        schema: Schema,
    ) -> Result<Result<String, String>, PluginError> {
        let name = self.name().to_owned();
        tokio::task::spawn_blocking(move || self.normalize(&schema)).await.map_err(|e| host_task(name, e))?
    }

    /// `check` on tokio's blocking pool.
    pub async fn check_blocking(
        self: Arc<Self>,
        level: CompatLevel,
        proposed: Schema,
        existing: Vec<Schema>,
    ) -> Result<Vec<Incompatibility>, PluginError> {
        let name = self.name().to_owned();
        tokio::task::spawn_blocking(move || self.check(level, &proposed, &existing))
            .await
            .map_err(|e| host_task(name, e))?
    }
}

fn host_task(plugin: String, e: tokio::task::JoinError) -> PluginError {
    PluginError::Trap { plugin, reason: format!("host task failed: {e}") }
}

/// A schema type name as the registry uses them: `AVRO`, `JSON`, `PROTOBUF`.
fn schema_type_ok(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= SCHEMA_TYPE_BYTES_MAX
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_in_confluent_spelling() {
        for level in CompatLevel::ALL {
            assert_eq!(level.to_string().parse::<CompatLevel>(), Ok(level));
        }
        assert_eq!("backward_transitive".parse(), Ok(CompatLevel::BackwardTransitive));
        assert_eq!(CompatLevel::FullTransitive.to_string(), "FULL_TRANSITIVE");
        let err = "SIDEWAYS".parse::<CompatLevel>().unwrap_err().to_string();
        assert!(err.contains("`SIDEWAYS`") && err.contains("FULL_TRANSITIVE"), "{err}");
        assert!(CompatLevel::ForwardTransitive.is_transitive() && !CompatLevel::Full.is_transitive());
    }

    #[test]
    fn schema_type_names_are_short_words() {
        assert!(schema_type_ok("AVRO") && schema_type_ok("PROTOBUF") && schema_type_ok("JSON"));
        assert!(!schema_type_ok("") && !schema_type_ok("AV RO") && !schema_type_ok(&"A".repeat(65)));
    }
}
