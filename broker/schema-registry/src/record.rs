//! The records of the internal compacted topic `__es_schemas`. Every change to the
//! registry is one keyed record, so compaction keeps the newest value per key:
//!
//! | key (JSON) | value (JSON) | null value (tombstone) |
//! |---|---|---|
//! | `{"keytype":"SCHEMA","subject":s,"version":v}` | [`SchemaValue`] (`deleted` marks a soft delete) | hard delete of the version |
//! | `{"keytype":"CONFIG","subject":s}` (`null` = global) | [`ConfigValue`] | the subject's config removed |
//! | `{"keytype":"MODE","subject":s}` (`null` = global) | [`ModeValue`] | the subject's mode removed |
//! | `{"keytype":"NEXT_ID"}` | [`NextIdValue`] | never written |
//!
//! `NEXT_ID` is written with every new id, so an id stays used even after every
//! version holding it was hard-deleted and compacted away: ids are never reused.

use serde::{Deserialize, Serialize};

use crate::types::{CompatLevel, Mode, Reference, SchemaType};

/// What a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "keytype", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Key {
    Schema { subject: String, version: i32 },
    Config { subject: Option<String> },
    Mode { subject: Option<String> },
    NextId,
}

/// One version of one subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaValue {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    /// The text served back, identical for every version holding this id.
    pub schema: String,
    pub schema_type: SchemaType,
    #[serde(default)]
    pub references: Vec<Reference>,
    /// What identifies the schema's text: the checker's print of it as written
    /// (`Form::Canonical`, Confluent's stored text) or, with `normalize` or for a
    /// type without such a print, its normalized form. Two schemas are the same
    /// schema when type, this and references are equal.
    pub canonical: String,
    /// Confluent's data-contract `metadata` and `ruleSet`, as registered (after
    /// the config's default and override metadata were merged in); part of what
    /// makes two registrations the same schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<serde_json::Value>,
    #[serde(default)]
    pub deleted: bool,
}

/// A config (global, or a subject's), Confluent's fields; each is optional, as
/// `PUT /config` may set any one of them alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigValue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility_level: Option<CompatLevel>,
    /// Normalize schemas on register and lookup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
    /// Another subject this one stands for, on reads and registrations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// A metadata property: only versions with the same value are checked for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_rule_set: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_rule_set: Option<serde_json::Value>,
}

impl ConfigValue {
    /// A config with only a level.
    pub fn level(level: CompatLevel) -> ConfigValue {
        ConfigValue { compatibility_level: Some(level), ..ConfigValue::default() }
    }

    /// This config with the fields `update` sets replaced.
    pub fn updated(self, update: &ConfigValue) -> ConfigValue {
        let u = update.clone();
        ConfigValue {
            compatibility_level: u.compatibility_level.or(self.compatibility_level),
            normalize: u.normalize.or(self.normalize),
            alias: u.alias.or(self.alias),
            compatibility_group: u.compatibility_group.or(self.compatibility_group),
            default_metadata: u.default_metadata.or(self.default_metadata),
            override_metadata: u.override_metadata.or(self.override_metadata),
            default_rule_set: u.default_rule_set.or(self.default_rule_set),
            override_rule_set: u.override_rule_set.or(self.override_rule_set),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeValue {
    pub mode: Mode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextIdValue {
    /// Every id below this one was handed out.
    pub next_id: i32,
}

/// One record: a key and its new value, `None` for a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Schema { subject: String, version: i32, value: Option<SchemaValue> },
    Config { subject: Option<String>, value: Option<ConfigValue> },
    Mode { subject: Option<String>, value: Option<ModeValue> },
    NextId(NextIdValue),
}

/// A record that does not decode: the topic is corrupt or from a newer broker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable schemas record: {0}")]
pub struct DecodeError(pub String);

impl Change {
    pub fn key(&self) -> Key {
        match self {
            Change::Schema { subject, version, .. } => {
                Key::Schema { subject: subject.clone(), version: *version }
            }
            Change::Config { subject, .. } => Key::Config { subject: subject.clone() },
            Change::Mode { subject, .. } => Key::Mode { subject: subject.clone() },
            Change::NextId(_) => Key::NextId,
        }
    }

    /// The record's key and value bytes.
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let key = serde_json::to_vec(&self.key()).expect("plain types serialize");
        let value = match self {
            Change::Schema { value, .. } => value.as_ref().map(to_json),
            Change::Config { value, .. } => value.as_ref().map(to_json),
            Change::Mode { value, .. } => value.as_ref().map(to_json),
            Change::NextId(v) => Some(to_json(v)),
        };
        (key, value)
    }

    /// Reads a record back; `value` is `None` for a tombstone.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Change, DecodeError> {
        let key: Key = serde_json::from_slice(key).map_err(|e| DecodeError(format!("key: {e}")))?;
        Ok(match key {
            Key::Schema { subject, version } => Change::Schema { subject, version, value: from_json(value)? },
            Key::Config { subject } => Change::Config { subject, value: from_json(value)? },
            Key::Mode { subject } => Change::Mode { subject, value: from_json(value)? },
            Key::NextId => Change::NextId(
                from_json(value)?.ok_or_else(|| DecodeError("a NEXT_ID record without a value".into()))?,
            ),
        })
    }
}

fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("plain types serialize")
}

fn from_json<T: serde::de::DeserializeOwned>(value: Option<&[u8]>) -> Result<Option<T>, DecodeError> {
    value.map(serde_json::from_slice).transpose().map_err(|e| DecodeError(format!("value: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_keys_are_confluent_like() {
        let changes = [
            Change::Schema {
                subject: "s".into(),
                version: 2,
                value: Some(SchemaValue {
                    subject: "s".into(),
                    version: 2,
                    id: 7,
                    schema: "\"int\"".into(),
                    schema_type: SchemaType::Avro,
                    references: vec![Reference { name: "n".into(), subject: "r".into(), version: 1 }],
                    canonical: "\"int\"".into(),
                    metadata: Some(serde_json::json!({"properties": {"owner": "x"}})),
                    rule_set: None,
                    deleted: true,
                }),
            },
            Change::Schema { subject: "s".into(), version: 1, value: None },
            Change::Config {
                subject: None,
                value: Some(ConfigValue { normalize: Some(true), ..ConfigValue::level(CompatLevel::Full) }),
            },
            Change::Config { subject: Some("s".into()), value: None },
            Change::Mode { subject: Some("s".into()), value: Some(ModeValue { mode: Mode::Import }) },
            Change::NextId(NextIdValue { next_id: 8 }),
        ];
        for c in changes {
            let (k, v) = c.encode();
            assert_eq!(Change::decode(&k, v.as_deref()).unwrap(), c);
        }
        let (k, _) = Change::Schema { subject: "s".into(), version: 2, value: None }.encode();
        assert_eq!(String::from_utf8(k).unwrap(), r#"{"keytype":"SCHEMA","subject":"s","version":2}"#);
        assert!(Change::decode(b"{\"keytype\":\"NEXT_ID\"}", None).is_err());
        assert!(Change::decode(b"not json", None).is_err());
        // A config written before the optional fields decodes as it did.
        let old = Change::decode(
            br#"{"keytype":"CONFIG","subject":null}"#,
            Some(br#"{"compatibilityLevel":"FULL"}"#),
        )
        .unwrap();
        assert_eq!(old, Change::Config { subject: None, value: Some(ConfigValue::level(CompatLevel::Full)) });
    }
}
