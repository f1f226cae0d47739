//! The `avro` plugin: every non-null value must decode, completely, as a datum of
//! the Avro schema in the `schema` config key. With `wire.format = confluent` the
//! value must carry Confluent's header (magic byte 0 and a 4-byte schema id,
//! which must equal the batch's schema id when the topic has one).

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use es_plugin_sdk::{Action, Batch, Config, RecordValidator, Violation, export_validator};

/// Bytes of Confluent's wire-format header: magic byte plus schema id.
const CONFLUENT_HEADER_BYTES: usize = 5;

struct Avro {
    schema: &'static Schema,
    reader: GenericDatumReader<'static>,
    confluent: bool,
    action: Action,
}

impl RecordValidator for Avro {
    const NAME: &'static str = "avro";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Each value must decode with an Avro schema.";
    const CONFIG_KEYS: &'static [&'static str] = &["schema", "wire.format", "action"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let schema =
            Schema::parse_str(config.require("schema")?).map_err(|e| format!("invalid schema: {e}"))?;
        // The reader borrows its schema. An instance is configured once and lives
        // until the host recycles it (dropping its whole memory), so leaking the
        // schema costs nothing and avoids re-resolving names per batch.
        let schema: &'static Schema = Box::leak(Box::new(schema));
        let reader =
            GenericDatumReader::builder(schema).build().map_err(|e| format!("invalid schema: {e}"))?;
        let confluent = match config.get("wire.format").unwrap_or("raw") {
            "raw" => false,
            "confluent" => true,
            other => return Err(format!("wire.format: expected raw or confluent, got `{other}`")),
        };
        Ok(Self { schema, reader, confluent, action: parse_action(config.get("action"))? })
    }

    fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>) {
        for record in batch.records() {
            // A tombstone (null value) deletes a key; there is nothing to decode.
            let Some(value) = record.value() else { continue };
            if let Err((code, reason)) = self.check(value, batch.schema_id()) {
                out.push(Violation::new(record.index(), self.action, code, reason));
            }
        }
    }
}

impl Avro {
    fn check(&self, value: &[u8], schema_id: Option<u32>) -> Result<(), (&'static str, String)> {
        let mut body = if self.confluent { strip_header(value, schema_id)? } else { value };
        let decoded = self.reader.read_value(&mut body).map_err(|e| ("avro-decode", e.to_string()))?;
        if !body.is_empty() {
            return Err(("avro-trailing-bytes", format!("{} bytes left after the datum", body.len())));
        }
        // apache-avro decodes a string cut short by the end of the input as a
        // null instead of failing; a datum that does not match its own schema was
        // truncated or malformed.
        if !decoded.validate(self.schema) {
            return Err((
                "avro-decode",
                "the datum is truncated or malformed: it does not match the schema".into(),
            ));
        }
        Ok(())
    }
}

fn strip_header(value: &[u8], schema_id: Option<u32>) -> Result<&[u8], (&'static str, String)> {
    let Some((header, body)) = value.split_first_chunk::<CONFLUENT_HEADER_BYTES>() else {
        return Err(("wire-format", "value is shorter than the 5-byte Confluent header".into()));
    };
    if header[0] != 0 {
        return Err(("wire-format", format!("magic byte is {}, not 0", header[0])));
    }
    let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    match schema_id {
        Some(expected) if expected != id => {
            Err(("schema-id-mismatch", format!("value has schema id {id}, the topic uses {expected}")))
        }
        _ => Ok(body),
    }
}

fn parse_action(value: Option<&str>) -> Result<Action, String> {
    match value {
        None | Some("reject") => Ok(Action::Reject),
        Some("dead-letter") => Ok(Action::DeadLetter),
        Some("warn") => Ok(Action::Warn),
        Some(other) => Err(format!("action: expected reject, dead-letter or warn, got `{other}`")),
    }
}

export_validator!(Avro);
