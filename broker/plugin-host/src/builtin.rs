//! The built-in plugins, compiled to wasm32-wasip2 by build.rs from the guest
//! workspace in `plugins/` and embedded in the broker binary. Validators and
//! schema-compat checkers are listed apart: they implement different worlds and
//! load through different handles (`Validator`, `CompatChecker`).

/// The `rules` validator: key, size, header and value-format rules.
pub const RULES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_rules.wasm"));
/// The `json-schema` validator: each value must match the configured JSON Schema.
pub const JSON_SCHEMA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_json_schema.wasm"));
/// The `avro` validator: each value must decode with the configured Avro schema.
pub const AVRO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_avro.wasm"));
/// The `avro-compat` schema-compat checker: Avro's reader/writer resolution
/// rules for the `AVRO` schema type.
pub const AVRO_COMPAT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_avro_compat.wasm"));
/// The `jsonschema-compat` schema-compat checker: JSON Schema reader/writer rules
/// for the `JSON` schema type.
pub const JSONSCHEMA_COMPAT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_jsonschema_compat.wasm"));
/// The `protobuf-compat` schema-compat checker: Confluent's Protobuf diff rules
/// for the `PROTOBUF` schema type, on `.proto` text or base64 descriptors.
pub const PROTOBUF_COMPAT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_protobuf_compat.wasm"));

/// The `schema-registry` validator: values carry a registered schema id of the
/// topic's subject (Confluent's wire format) and decode with that schema. The
/// broker configures it from its schema registry.
pub const SCHEMA_REGISTRY: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/es_plugin_schema_registry.wasm"));

/// Names of the built-in validators, as `builtin` accepts them.
pub const NAMES: &[&str] = &["rules", "json-schema", "avro", "schema-registry"];

/// The component bytes of the built-in validator `name`.
pub fn builtin(name: &str) -> Option<&'static [u8]> {
    match name {
        "rules" => Some(RULES),
        "json-schema" => Some(JSON_SCHEMA),
        "avro" => Some(AVRO),
        "schema-registry" => Some(SCHEMA_REGISTRY),
        _ => None,
    }
}

/// Names of the built-in schema-compat checkers, as `compat` accepts them.
pub const COMPAT_NAMES: &[&str] = &["avro-compat", "jsonschema-compat", "protobuf-compat"];

/// The schema types each built-in checker supports (what its `supports()`
/// answers; a test holds the two together), so the broker can install a built-in
/// for its types without compiling it first.
pub const COMPAT_TYPES: &[(&str, &[&str])] =
    &[("avro-compat", &["AVRO"]), ("jsonschema-compat", &["JSON"]), ("protobuf-compat", &["PROTOBUF"])];

/// The component bytes of the built-in schema-compat checker `name`.
pub fn compat(name: &str) -> Option<&'static [u8]> {
    match name {
        "avro-compat" => Some(AVRO_COMPAT),
        "jsonschema-compat" => Some(JSONSCHEMA_COMPAT),
        "protobuf-compat" => Some(PROTOBUF_COMPAT),
        _ => None,
    }
}
