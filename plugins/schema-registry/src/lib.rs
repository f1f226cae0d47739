//! The `schema-registry` plugin: enforces registered schemas on a topic. Each
//! value (and, with `key.ids`, each key) must carry Confluent's wire format (magic
//! byte 0, a 4-byte big-endian schema id, then the payload; Protobuf payloads
//! start with their message indexes), the id must be one the topic's subject
//! allows, and the payload must decode with that schema.
//!
//! The broker configures it from its schema registry; a user binds it with only
//! the subject naming strategy. Configuration:
//! - `schemas`: JSON object, schema id → `{"type": "AVRO" | "JSON" | "PROTOBUF",
//!   "schema": "...", "references": [...], "subjects": [...]}`, every schema the
//!   allowed ids name; `references` (optional) are the schemas it references,
//!   `{"name", "schema"}` each, resolved by the registry as the compatibility
//!   checkers get them (transitively, dependencies first): Avro parses them first
//!   and may use the named types they define, a JSON Schema `$ref` names one by
//!   its name (or `$id`), a `.proto` file imports one by its name; `subjects`
//!   (PROTOBUF only, optional) is set under RecordNameStrategy: the subjects the
//!   schema is registered under, one of which must be the full name of the
//!   message a record's indexes select;
//! - `value.ids`: comma-separated ids a value may carry (the subject's versions);
//! - `key.ids`: the same for keys; keys are not checked when it is absent.
//!
//! Every schema is parsed (compiled, for Protobuf) once, with its references,
//! here. Avro payloads must
//! decode completely; JSON payloads must be JSON matching the schema; Protobuf
//! payloads must name a message of the schema with their indexes and decode as
//! that message, without fields it does not define (`protobuf` module).

use std::collections::{BTreeMap, BTreeSet};

use apache_avro::Schema as AvroSchema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::ResolvedSchema as AvroNames;
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
    references: Vec<Reference>,
    #[serde(default)]
    subjects: Option<Vec<String>>,
}

/// A schema a registered schema references: the reference's name and the text
/// of the version it points at.
#[derive(Deserialize)]
struct Reference {
    name: String,
    schema: String,
}

enum Decoder {
    Avro(Box<AvroDecoder>),
    Json(Box<jsonschema::Validator>),
    Protobuf(Box<ProtobufSchema>),
}

struct AvroDecoder {
    schema: &'static AvroSchema,
    /// Every named type the schema and its references define, for checking a
    /// decoded datum without resolving them again per record.
    names: AvroNames<'static>,
    reader: GenericDatumReader<'static>,
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
            .map_err(|e| {
                format!(
                    "schemas: expected a JSON object of id -> {{type, schema, references?, subjects?}}: {e}"
                )
            })?;
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
            Decoder::Avro(avro) => {
                let AvroDecoder { schema, names, reader } = &**avro;
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
                if !decoded.validate_with_names(schema, names.get_names()) {
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
        "AVRO" => avro_decoder(&registered.schema, &registered.references),
        "JSON" => {
            let schema: serde_json::Value = serde_json::from_str(&registered.schema)
                .map_err(|e| format!("JSON schema is not JSON: {e}"))?;
            let documents = registered
                .references
                .into_iter()
                .map(|r| match serde_json::from_str(&r.schema) {
                    Ok(document) => Ok((r.name, document)),
                    Err(e) => Err(format!("the referenced JSON schema `{}` is not JSON: {e}", r.name)),
                })
                .collect::<Result<Vec<_>, String>>()?;
            // A schema without `$schema` is draft 7, Confluent's default, as the
            // registry's jsonschema-compat checker reads it.
            let options = match schema.get("$schema") {
                Some(_) => jsonschema::options(),
                None => jsonschema::options().with_draft(jsonschema::Draft::Draft7),
            };
            let validator = options
                .with_retriever(JsonReferences(documents))
                .build(&schema)
                .map_err(|e| format!("invalid JSON schema: {e}"))?;
            Ok(Decoder::Json(Box::new(validator)))
        }
        "PROTOBUF" => {
            let references: Vec<(&str, &str)> =
                registered.references.iter().map(|r| (r.name.as_str(), r.schema.as_str())).collect();
            let schema = ProtobufSchema::parse(&registered.schema, &references, registered.subjects)?;
            Ok(Decoder::Protobuf(Box::new(schema)))
        }
        other => Err(format!("unknown schema type {other:?} (AVRO, JSON or PROTOBUF)")),
    }
}

/// An Avro schema parsed with the named types its references define (as the
/// `avro-compat` checker parses it), and a reader that resolves those names.
fn avro_decoder(text: &str, references: &[Reference]) -> Result<Decoder, String> {
    let invalid = |e: apache_avro::Error| format!("invalid Avro schema: {e}");
    for reference in references {
        let named = serde_json::from_str::<serde_json::Value>(&reference.schema)
            .is_ok_and(|v| v.get("name").is_some_and(serde_json::Value::is_string));
        if !named {
            return Err(format!(
                "invalid Avro schema: the referenced schema `{}` is not a named type (record, enum or fixed)",
                reference.name
            ));
        }
    }
    let (schema, referenced) = if references.is_empty() {
        (AvroSchema::parse_str(text).map_err(invalid)?, Vec::new())
    } else {
        AvroSchema::parse_str_with_list(text, references.iter().map(|r| r.schema.as_str()))
            .map_err(invalid)?
    };
    // Configured once per instance, which lives until the host recycles its whole
    // memory: leaking the schemas lets the reader and the names borrow them.
    let schema: &'static AvroSchema = Box::leak(Box::new(schema));
    let referenced: &'static [AvroSchema] = referenced.leak();
    // Names resolve in order: the references (dependencies first, as the host
    // sends them, so each one's names are known before those that use them),
    // then the schema.
    let schemata: Vec<&'static AvroSchema> = referenced.iter().chain([schema]).collect();
    let names = AvroNames::new_with_schemata(schemata).map_err(invalid)?;
    let reader = GenericDatumReader::builder(schema)
        .resolved_writer_schemata(names.clone())
        .build()
        .map_err(invalid)?;
    Ok(Decoder::Avro(Box::new(AvroDecoder { schema, names, reader })))
}

/// Serves a JSON schema's referenced documents to the validator, which asks for
/// a `$ref`'s URL resolved against the schema's base (`json-schema:///address.json`
/// for `address.json` in a schema without an `$id`): a document matches by its
/// reference name, its `$id`, or as the last segments of that URL, as in the
/// `jsonschema-compat` checker. Nothing else is fetched.
struct JsonReferences(Vec<(String, serde_json::Value)>);

impl jsonschema::Retrieve for JsonReferences {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        let wanted = uri.as_str();
        let found = self.0.iter().find(|(name, document)| {
            let name = name.trim_start_matches("./");
            wanted == name
                || document.get("$id").and_then(serde_json::Value::as_str) == Some(wanted)
                || wanted.strip_suffix(name).is_some_and(|rest| rest.ends_with('/'))
        });
        match found {
            Some((_, document)) => Ok(document.clone()),
            None => Err(format!("`{wanted}` is not among the schema's references").into()),
        }
    }
}

export_validator!(SchemaRegistry);

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(schema_type: &str, schema: &str, references: &[(&str, &str)]) -> Registered {
        Registered {
            schema_type: schema_type.into(),
            schema: schema.into(),
            references: references
                .iter()
                .map(|(name, schema)| Reference { name: (*name).into(), schema: (*schema).into() })
                .collect(),
            subjects: None,
        }
    }

    fn framed(id: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend(id.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn registry(id: u32, decoder: Decoder) -> SchemaRegistry {
        SchemaRegistry {
            decoders: BTreeMap::from([(id, decoder)]),
            value_ids: BTreeSet::from([id]),
            key_ids: None,
        }
    }

    #[test]
    fn avro_schemas_use_the_named_types_their_references_define() {
        let currency = r#"{"type": "enum", "name": "Currency", "namespace": "m", "symbols": ["EUR", "USD"]}"#;
        let money = r#"{"type": "record", "name": "Money", "namespace": "m",
            "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "m.Currency"}]}"#;
        let order = r#"{"type": "record", "name": "Order",
            "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "m.Money"}]}"#;
        let references = [("m.Currency", currency), ("m.Money", money)];
        let r = registry(3, decoder(registered("AVRO", order, &references)).unwrap());
        let allowed = BTreeSet::from([3]);
        // id "ab", cents 21 (zigzag 42), currency USD (index 1, zigzag 2).
        r.check(&framed(3, &[4, b'a', b'b', 42, 2]), &allowed).unwrap();
        // Enum index 5: no such symbol in the referenced enum.
        assert_eq!(r.check(&framed(3, &[4, b'a', b'b', 42, 10]), &allowed).unwrap_err().0, "avro-decode");
        // Cut short inside the referenced record.
        assert_eq!(r.check(&framed(3, &[4, b'a', b'b', 42]), &allowed).unwrap_err().0, "avro-decode");

        let err = decoder(registered("AVRO", order, &[])).err().unwrap();
        assert!(err.starts_with("invalid Avro schema: "), "{err}");
        let err = decoder(registered("AVRO", order, &[("m.Money", "\"long\"")])).err().unwrap();
        assert_eq!(
            err,
            "invalid Avro schema: the referenced schema `m.Money` is not a named type (record, enum or fixed)"
        );
    }

    #[test]
    fn json_refs_name_referenced_documents() {
        let address = r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
            "definitions": {"Zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}"#;
        let customer = r#"{"type": "object", "properties": {
            "address": {"$ref": "address.json"},
            "zip": {"$ref": "address.json#/definitions/Zip"}}}"#;
        let r = registry(4, decoder(registered("JSON", customer, &[("address.json", address)])).unwrap());
        let allowed = BTreeSet::from([4]);
        r.check(&framed(4, br#"{"address": {"city": "Oslo"}, "zip": "01234"}"#), &allowed).unwrap();
        let err = r.check(&framed(4, br#"{"address": {}}"#), &allowed).unwrap_err();
        assert_eq!(err.0, "schema-mismatch");
        assert!(err.1.starts_with("at `/address`: "), "{}", err.1);
        let err = r.check(&framed(4, br#"{"zip": "x"}"#), &allowed).unwrap_err();
        assert!(err.1.starts_with("at `/zip`: "), "{}", err.1);

        let err = decoder(registered("JSON", customer, &[])).err().unwrap();
        assert!(err.starts_with("invalid JSON schema: "), "{err}");
        let err = decoder(registered("JSON", customer, &[("address.json", "{")])).err().unwrap();
        assert!(err.starts_with("the referenced JSON schema `address.json` is not JSON: "), "{err}");
    }

    #[test]
    fn json_schemas_without_a_draft_are_draft_7() {
        // Draft 7's tuple form of `items`: the first item must be an integer. A
        // 2020-12 reading would ignore the array form's meaning.
        let tuple = r#"{"type": "array", "items": [{"type": "integer"}]}"#;
        let r = registry(5, decoder(registered("JSON", tuple, &[])).unwrap());
        let allowed = BTreeSet::from([5]);
        r.check(&framed(5, b"[1, \"x\"]"), &allowed).unwrap();
        assert_eq!(r.check(&framed(5, b"[\"x\"]"), &allowed).unwrap_err().0, "schema-mismatch");
    }
}
