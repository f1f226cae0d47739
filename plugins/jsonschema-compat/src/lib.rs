//! The built-in `jsonschema-compat` plugin: Confluent-style compatibility checks
//! for JSON Schema (`supports() = ["JSON"]`), in the `schema-compat` world.
//!
//! The rules live in binding-free modules, so they are unit-tested natively:
//! `normalize` (parse, validate, canonical text), `document` (`$ref`s), `shape`
//! (what a schema is), `check` (reader against writer) and `levels` (BACKWARD,
//! FORWARD, FULL over the existing schemas). docs/schema-registry.md lists the rules.

pub mod check;
pub mod document;
pub mod levels;
pub mod normalize;
pub mod report;
pub mod shape;

use es_plugin_sdk::{CompatLevel, Config, Incompatibility, SchemaCompat, export_schema_compat};
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

    fn normalize(&self, schema: &str) -> Result<String, String> {
        normalize::parse(schema).map(|s| normalize::canonical(&s)).map_err(|e| e.to_string())
    }

    fn check(&self, level: CompatLevel, proposed: &str, existing: &[String], out: &mut Vec<Incompatibility>) {
        let directions = Directions { backward: level.checks_backward(), forward: level.checks_forward() };
        out.extend(
            levels::check(directions, proposed, existing)
                .into_iter()
                .map(|f| Incompatibility::new(f.path, f.message)),
        );
    }
}

export_schema_compat!(JsonSchemaCompat);
