//! The built-in plugins, compiled to wasm32-wasip2 by build.rs from the guest
//! workspace in `plugins/` and embedded in the broker binary.

/// The `rules` validator: key, size, header and value-format rules.
pub const RULES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_rules.wasm"));
/// The `json-schema` validator: each value must match the configured JSON Schema.
pub const JSON_SCHEMA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_json_schema.wasm"));
/// The `avro` validator: each value must decode with the configured Avro schema.
pub const AVRO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_avro.wasm"));

/// The `schema-registry` validator: values carry a registered schema id of the
/// topic's subject (Confluent's wire format) and decode with that schema. The
/// broker configures it from its schema registry.
pub const SCHEMA_REGISTRY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_schema_registry.wasm"));

/// Names of the built-in plugins, as `builtin` accepts them.
pub const NAMES: &[&str] = &["rules", "json-schema", "avro", "schema-registry"];

/// The component bytes of the built-in plugin `name`.
pub fn builtin(name: &str) -> Option<&'static [u8]> {
    match name {
        "rules" => Some(RULES),
        "json-schema" => Some(JSON_SCHEMA),
        "avro" => Some(AVRO),
        "schema-registry" => Some(SCHEMA_REGISTRY),
        _ => None,
    }
}
