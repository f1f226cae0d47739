//! The `json-schema` plugin: every non-null value must be JSON that matches the
//! schema given in the `schema` config key. The schema is compiled once per
//! instance, in `configure`.

use es_plugin_sdk::{Action, Batch, Config, RecordValidator, Violation, export_validator};

struct JsonSchema {
    validator: jsonschema::Validator,
    action: Action,
}

impl RecordValidator for JsonSchema {
    const NAME: &'static str = "json-schema";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Each value must be JSON matching a JSON Schema.";
    const CONFIG_KEYS: &'static [&'static str] = &["schema", "action"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let schema: serde_json::Value = serde_json::from_str(config.require("schema")?)
            .map_err(|e| format!("schema is not JSON: {e}"))?;
        // Without the crate's resolver features, remote `$ref`s cannot be fetched:
        // a plugin has no network, so only self-contained schemas compile.
        let validator = jsonschema::validator_for(&schema).map_err(|e| format!("invalid schema: {e}"))?;
        Ok(Self { validator, action: parse_action(config.get("action"))? })
    }

    fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>) {
        for record in batch.records() {
            // A tombstone (null value) deletes a key; there is nothing to check.
            let Some(value) = record.value() else { continue };
            let failure = match serde_json::from_slice::<serde_json::Value>(value) {
                Err(e) => Some(("value-not-json", e.to_string())),
                Ok(instance) => self.validator.validate(&instance).err().map(|e| {
                    let path = e.instance_path().to_string();
                    ("schema-mismatch", format!("at `{}`: {e}", if path.is_empty() { "/" } else { &path }))
                }),
            };
            if let Some((code, reason)) = failure {
                out.push(Violation::new(record.index(), self.action, code, reason));
            }
        }
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

export_validator!(JsonSchema);
