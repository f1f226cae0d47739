//! The `schema-registry` plugin: enforces registered schemas on a topic. Each
//! value (and, with `key.ids`, each key) must carry Confluent's wire format (magic
//! byte 0, a 4-byte big-endian schema id, then the payload; Protobuf payloads
//! start with their message indexes), the id must be one the topic's subject
//! allows, and the payload must decode with that schema.
//!
//! The broker configures it from its schema registry; a user binds it with only
//! the subject naming strategy. Configuration:
//! - `schemas`: JSON object, schema id → `{"type": "AVRO" | "JSON" | "PROTOBUF",
//!   "schema": "...", "subjects": [...]}`, every schema the allowed ids name;
//!   `subjects` (PROTOBUF only, optional) is set under RecordNameStrategy: the
//!   subjects the schema is registered under, one of which must be the full name
//!   of the message a record's indexes select;
//! - `value.ids`: comma-separated ids a value may carry (the subject's versions);
//! - `key.ids`: the same for keys; keys are not checked when it is absent.
//!
//! Every schema is parsed (compiled, for Protobuf) once, here. Avro payloads must
//! decode completely; JSON payloads must be JSON matching the schema; Protobuf
//! payloads must name a message of the schema with their indexes and decode as
//! that message, without fields it does not define (`protobuf` module).

use std::collections::{BTreeMap, BTreeSet};

use apache_avro::Schema as AvroSchema;
use apache_avro::reader::datum::GenericDatumReader;
use es_plugin_sdk::{Action, Batch, Config, RecordValidator, Violation, export_validator};
use serde::Deserialize;

mod protobuf;

use protobuf::{Finding, ProtobufSchema};

/// Magic byte plus schema id.
const HEADER_BYTES: usize = 5;

#[derive(Deserialize)]
struct Registered {
    #[serde(rename = "type")]
    schema_type: String,
    schema: String,
    #[serde(default)]
    subjects: Option<Vec<String>>,
}

enum Decoder {
    Avro { schema: &'static AvroSchema, reader: GenericDatumReader<'static> },
    Json(Box<jsonschema::Validator>),
    Protobuf(Box<ProtobufSchema>),
}

struct SchemaRegistry {
    decoders: BTreeMap<u32, Decoder>,
    value_ids: BTreeSet<u32>,
    key_ids: Option<BTreeSet<u32>>,
}

impl RecordValidator for SchemaRegistry {
    const NAME: &'static str = "schema-registry";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Each value (and optionally key) carries a registered schema id of the topic's subject and decodes with it.";
    const CONFIG_KEYS: &'static [&'static str] = &["schemas", "value.ids", "key.ids"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let schemas: BTreeMap<u32, Registered> = serde_json::from_str(config.get("schemas").unwrap_or("{}"))
            .map_err(|e| format!("schemas: expected a JSON object of id -> {{type, schema}}: {e}"))?;
        let mut decoders = BTreeMap::new();
        for (id, registered) in schemas {
            decoders.insert(id, decoder(registered).map_err(|e| format!("schema {id}: {e}"))?);
        }
        let ids = |key: &str| -> Result<BTreeSet<u32>, String> {
            let ids = config
                .list(key)
                .iter()
                .map(|id| id.parse::<u32>().map_err(|_| format!("{key}: {id:?} is not a schema id")))
                .collect::<Result<BTreeSet<u32>, String>>()?;
            match ids.iter().find(|id| !decoders.contains_key(id)) {
                Some(id) => Err(format!("{key}: schema {id} is not in `schemas`")),
                None => Ok(ids),
            }
        };
        let value_ids = ids("value.ids")?;
        let key_ids = config.get("key.ids").map(|_| ids("key.ids")).transpose()?;
        Ok(Self { decoders, value_ids, key_ids })
    }

    fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>) {
        for record in batch.records() {
            let checks = [
                ("value", record.value(), Some(&self.value_ids)),
                ("key", record.key(), self.key_ids.as_ref()),
            ];
            for (what, bytes, allowed) in checks {
                // A null value is a tombstone and a null key is unkeyed: nothing to decode.
                let (Some(bytes), Some(allowed)) = (bytes, allowed) else { continue };
                if let Err((code, reason)) = self.check(bytes, allowed) {
                    out.push(Violation::new(
                        record.index(),
                        Action::Reject,
                        code,
                        format!("{what}: {reason}"),
                    ));
                    break;
                }
            }
        }
    }
}

impl SchemaRegistry {
    fn check(&self, bytes: &[u8], allowed: &BTreeSet<u32>) -> Result<(), Finding> {
        let Some((header, payload)) = bytes.split_first_chunk::<HEADER_BYTES>() else {
            return Err((
                "wire-format",
                "shorter than the 5-byte Confluent header (magic byte, schema id)".into(),
            ));
        };
        if header[0] != 0 {
            return Err((
                "wire-format",
                format!("magic byte is {}, not 0: not serialized by a schema-registry client", header[0]),
            ));
        }
        let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        if !allowed.contains(&id) {
            let list: Vec<String> = allowed.iter().map(u32::to_string).collect();
            return Err((
                "schema-not-allowed",
                format!(
                    "schema id {id} is not registered under this topic's subject (allowed: [{}])",
                    list.join(", ")
                ),
            ));
        }
        match &self.decoders[&id] {
            Decoder::Avro { schema, reader } => {
                let mut body = payload;
                let decoded = reader.read_value(&mut body).map_err(|e| ("avro-decode", e.to_string()))?;
                if !body.is_empty() {
                    return Err((
                        "avro-trailing-bytes",
                        format!("{} bytes left after the datum", body.len()),
                    ));
                }
                // apache-avro decodes a string cut short as null; such a datum
                // does not match its schema.
                if !decoded.validate(schema) {
                    return Err(("avro-decode", "the datum is truncated or malformed".into()));
                }
                Ok(())
            }
            Decoder::Json(validator) => {
                let instance: serde_json::Value =
                    serde_json::from_slice(payload).map_err(|e| ("value-not-json", e.to_string()))?;
                validator.validate(&instance).map_err(|e| {
                    let path = e.instance_path().to_string();
                    ("schema-mismatch", format!("at `{}`: {e}", if path.is_empty() { "/" } else { &path }))
                })
            }
            Decoder::Protobuf(schema) => schema.check(id, payload),
        }
    }
}

fn decoder(registered: Registered) -> Result<Decoder, String> {
    if registered.subjects.is_some() && registered.schema_type != "PROTOBUF" {
        return Err("`subjects` is for PROTOBUF schemas only".into());
    }
    match registered.schema_type.as_str() {
        "AVRO" => {
            let schema =
                AvroSchema::parse_str(&registered.schema).map_err(|e| format!("invalid Avro schema: {e}"))?;
            // Configured once per instance, which lives until the host recycles
            // its whole memory: leaking the schema lets the reader borrow it.
            let schema: &'static AvroSchema = Box::leak(Box::new(schema));
            let reader = GenericDatumReader::builder(schema)
                .build()
                .map_err(|e| format!("invalid Avro schema: {e}"))?;
            Ok(Decoder::Avro { schema, reader })
        }
        "JSON" => {
            let schema: serde_json::Value = serde_json::from_str(&registered.schema)
                .map_err(|e| format!("JSON schema is not JSON: {e}"))?;
            let validator =
                jsonschema::validator_for(&schema).map_err(|e| format!("invalid JSON schema: {e}"))?;
            Ok(Decoder::Json(Box::new(validator)))
        }
        "PROTOBUF" => {
            Ok(Decoder::Protobuf(Box::new(ProtobufSchema::parse(&registered.schema, registered.subjects)?)))
        }
        other => Err(format!("unknown schema type {other:?} (AVRO, JSON or PROTOBUF)")),
    }
}

export_validator!(SchemaRegistry);
