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
//!
//! The config key `form` picks what `normalize` returns: `normalized` (the
//! default: sorted keys, no whitespace) or `canonical` (`print`: the schema as
//! written, compact, as Confluent stores it); `serialized` is the canonical
//! print too, as Confluent answers formats a type does not have.

pub mod check;
pub mod document;
pub mod levels;
pub mod normalize;
pub mod print;
pub mod report;
pub mod shape;

use es_plugin_sdk::{CompatLevel, Config, Incompatibility, Schema, SchemaCompat, export_schema_compat};
use levels::Directions;

struct JsonSchemaCompat {
    /// `normalize` answers the print as written rather than the sorted form.
    as_written: bool,
}

impl SchemaCompat for JsonSchemaCompat {
    const NAME: &'static str = "jsonschema-compat";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Compatibility of JSON Schemas, with Confluent's reader/writer rules.";
    const SUPPORTS: &'static [&'static str] = &["JSON"];

    const CONFIG_KEYS: &'static [&'static str] = &["form"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let as_written = match config.get("form") {
            None | Some("normalized") => false,
            Some("canonical" | "serialized") => true,
            Some(other) => {
                return Err(format!(
                    "config key `form`: expected normalized, canonical or serialized, got `{other}`"
                ));
            }
        };
        Ok(Self { as_written })
    }

    fn normalize(&self, schema: &Schema) -> Result<String, String> {
        let references = schema.references().iter().map(|r| (r.name(), r.text()));
        normalize::externals(references)
            .and_then(|externals| normalize::parse_with(schema.text(), &externals))
            .map_err(|e| e.to_string())
            .and_then(|s| {
                if self.as_written { print::as_written(schema.text()) } else { Ok(normalize::canonical(&s)) }
            })
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
