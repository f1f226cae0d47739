//! The built-in `jsonschema-compat` plugin: Confluent-style compatibility checks
//! for JSON Schema (`supports() = ["JSON"]`), in the `schema-compat` world.
//!
//! The rules live in binding-free modules, so they are unit-tested natively:
//! `normalize` (parse, validate, canonical text), `document` (`$ref`s), `shape`
//! (what a schema is), `check` (reader against writer) and `levels` (BACKWARD,
//! FORWARD, FULL over the existing schemas). docs/schema-registry.md lists the rules.
//!
//! Schema references: a `$ref` may name a referenced schema by its reference
//! name (`address.json`, `address.json#/definitions/Street`); the referenced
//! documents travel with each schema and are resolved in memory.

pub mod check;
pub mod document;
pub mod levels;
pub mod normalize;
pub mod report;
pub mod shape;

use es_plugin_sdk::{CompatLevel, Config, Incompatibility, Schema, SchemaCompat, export_schema_compat};
use levels::Directions;

struct JsonSchemaCompat;

impl SchemaCompat for JsonSchemaCompat {
    const NAME: &'static str = "jsonschema-compat";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Compatibility of JSON Schemas, with Confluent's reader/writer rules.";
    const SUPPORTS: &'static [&'static str] = &["JSON"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        Ok(Self)
    }

    fn normalize(&self, schema: &Schema) -> Result<String, String> {
        let references = schema.references().iter().map(|r| (r.name(), r.text()));
        normalize::externals(references)
            .and_then(|externals| normalize::parse_with(schema.text(), &externals))
            .map(|s| normalize::canonical(&s))
            .map_err(|e| e.to_string())
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &Schema,
        existing: &[Schema],
        out: &mut Vec<Incompatibility>,
    ) {
        let directions = Directions { backward: level.checks_backward(), forward: level.checks_forward() };
        out.extend(
            levels::check(directions, proposed, existing)
                .into_iter()
                .map(|f| Incompatibility::new(f.path, f.message)),
        );
    }
}

export_schema_compat!(JsonSchemaCompat);
