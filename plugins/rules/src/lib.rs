//! The `rules` plugin: cheap structural checks on every record (key present,
//! value and header sizes, required headers, value is JSON or UTF-8).

use es_plugin_sdk::{Action, Batch, Config, RecordRef, RecordValidator, Violation, export_validator};
use serde::de::{Deserialize, IgnoredAny};

/// What a value must be, beyond its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Any,
    Utf8,
    Json,
}

struct Rules {
    key_required: bool,
    value_max_bytes: Option<usize>,
    headers_max_bytes: Option<usize>,
    headers_required: Vec<String>,
    format: Format,
    action: Action,
}

impl RecordValidator for Rules {
    const NAME: &'static str = "rules";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Key, size, header and value-format rules.";
    const CONFIG_KEYS: &'static [&'static str] = &[
        "key.required",
        "value.max.bytes",
        "headers.max.bytes",
        "headers.required",
        "value.format",
        "action",
    ];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        Ok(Self {
            key_required: config.flag("key.required", false)?,
            value_max_bytes: config.parse("value.max.bytes")?,
            headers_max_bytes: config.parse("headers.max.bytes")?,
            headers_required: config.list("headers.required"),
            format: parse_format(config.get("value.format"))?,
            action: parse_action(config.get("action"))?,
        })
    }

    fn validate(&self, batch: &Batch<'_>, out: &mut Vec<Violation>) {
        for record in batch.records() {
            if let Some((code, reason)) = self.check(&record) {
                out.push(Violation::new(record.index(), self.action, code, reason));
            }
        }
    }
}

impl Rules {
    /// The first rule `record` breaks, as (code, reason).
    fn check(&self, record: &RecordRef<'_>) -> Option<(&'static str, String)> {
        if self.key_required && record.key().is_none() {
            return Some(("key-required", "the record has no key".into()));
        }
        if let Some(broken) = self.check_headers(record) {
            return Some(broken);
        }
        // A tombstone (null value) has nothing to check: it deletes a key.
        let value = record.value()?;
        if let Some(max) = self.value_max_bytes.filter(|max| value.len() > *max) {
            return Some(("value-too-large", format!("value is {} bytes, more than {max}", value.len())));
        }
        match self.format {
            Format::Any => None,
            Format::Utf8 => std::str::from_utf8(value).err().map(|e| ("value-not-utf8", e.to_string())),
            Format::Json => check_json(value).err().map(|e| ("value-not-json", e)),
        }
    }

    fn check_headers(&self, record: &RecordRef<'_>) -> Option<(&'static str, String)> {
        if let Some(missing) = self.headers_required.iter().find(|name| record.header(name).is_none()) {
            return Some(("header-required", format!("header `{missing}` is missing")));
        }
        let max = self.headers_max_bytes?;
        let size: usize = record.headers().map(|h| h.key().len() + h.value().map_or(0, <[u8]>::len)).sum();
        (size > max).then(|| ("headers-too-large", format!("headers are {size} bytes, more than {max}")))
    }
}

/// Checks that `value` is one JSON document without building it in memory.
fn check_json(value: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(value);
    IgnoredAny::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())
}

fn parse_format(value: Option<&str>) -> Result<Format, String> {
    match value {
        None | Some("any") => Ok(Format::Any),
        Some("utf8") => Ok(Format::Utf8),
        Some("json") => Ok(Format::Json),
        Some(other) => Err(format!("value.format: expected any, utf8 or json, got `{other}`")),
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

export_validator!(Rules);
