//! Per-topic configuration with Kafka's setting names, parsed from JSON (numbers,
//! booleans or their string forms, as Kafka tools send strings) and mapped onto the
//! log's [`LogConfig`].

use std::collections::BTreeMap;

use es_core::TimestampType;
use es_log::{CleanupPolicy, LogConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::service::error::{BrokerError, Result};

/// The settings a topic carries; stored in the topic's metadata file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TopicConfig {
    #[serde(rename = "retention.ms")]
    pub retention_ms: i64,
    #[serde(rename = "retention.bytes")]
    pub retention_bytes: i64,
    #[serde(rename = "segment.bytes")]
    pub segment_bytes: u64,
    #[serde(rename = "segment.ms")]
    pub segment_ms: i64,
    /// `delete`, `compact` or `compact,delete`.
    #[serde(rename = "cleanup.policy")]
    pub cleanup_policy: String,
    #[serde(rename = "delete.retention.ms")]
    pub delete_retention_ms: i64,
    /// The largest encoded batch one produce may write to a partition.
    #[serde(rename = "max.message.bytes")]
    pub max_message_bytes: u64,
    /// Move expired segments to the broker's cold tier instead of deleting them.
    #[serde(rename = "cold.tier.enable")]
    pub cold_tier: bool,
    /// `CreateTime` (the producer's timestamps) or `LogAppendTime` (the leader's clock).
    #[serde(rename = "message.timestamp.type", default = "create_time")]
    pub message_timestamp_type: String,
    /// Kafka's `compression.type`: `producer` keeps each batch as the producer
    /// compressed it; `uncompressed`, `gzip`, `snappy`, `lz4` or `zstd` re-encodes
    /// every batch in that codec before it is appended.
    #[serde(rename = "compression.type", default = "producer")]
    pub compression_type: String,
}

fn create_time() -> String {
    "CreateTime".into()
}

fn producer() -> String {
    "producer".into()
}

impl Default for TopicConfig {
    fn default() -> Self {
        let log = LogConfig::default();
        Self {
            retention_ms: log.retention_ms,
            retention_bytes: log.retention_bytes,
            segment_bytes: log.segment_bytes,
            segment_ms: log.segment_ms,
            cleanup_policy: "delete".into(),
            delete_retention_ms: log.delete_retention_ms,
            max_message_bytes: log.batch_bytes_max as u64,
            cold_tier: false,
            message_timestamp_type: create_time(),
            compression_type: producer(),
        }
    }
}

/// The setting names a client may set.
pub const KEYS: [&str; 10] = [
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "cleanup.policy",
    "delete.retention.ms",
    "max.message.bytes",
    "cold.tier.enable",
    "message.timestamp.type",
    "compression.type",
];

impl TopicConfig {
    /// This config with `changes` applied; unknown keys and ill-typed values are
    /// refused, and the result is checked as a whole.
    pub fn with_changes(&self, changes: &BTreeMap<String, Value>) -> Result<TopicConfig> {
        let mut c = self.clone();
        for (key, value) in changes {
            match key.as_str() {
                "retention.ms" => c.retention_ms = int(key, value)?,
                "retention.bytes" => c.retention_bytes = int(key, value)?,
                "segment.bytes" => c.segment_bytes = uint(key, value)?,
                "segment.ms" => c.segment_ms = int(key, value)?,
                "delete.retention.ms" => c.delete_retention_ms = int(key, value)?,
                "max.message.bytes" => c.max_message_bytes = uint(key, value)?,
                "cleanup.policy" => c.cleanup_policy = string(key, value)?,
                "cold.tier.enable" => c.cold_tier = boolean(key, value)?,
                "message.timestamp.type" => c.message_timestamp_type = string(key, value)?,
                "compression.type" => c.compression_type = string(key, value)?,
                other => {
                    return Err(BrokerError::InvalidConfig(format!(
                        "unknown setting {other:?}; known settings: {}",
                        KEYS.join(", ")
                    )));
                }
            }
        }
        c.to_log_config()?;
        c.compression()?;
        Ok(c)
    }

    /// The codec every batch is re-encoded in; `None` for `producer` (as sent).
    pub fn compression(&self) -> Result<Option<es_core::Compression>> {
        use es_core::Compression;
        match self.compression_type.as_str() {
            "producer" => Ok(None),
            "uncompressed" => Ok(Some(Compression::None)),
            "gzip" => Ok(Some(Compression::Gzip)),
            "snappy" => Ok(Some(Compression::Snappy)),
            "lz4" => Ok(Some(Compression::Lz4)),
            "zstd" => Ok(Some(Compression::Zstd)),
            other => Err(BrokerError::InvalidConfig(format!(
                "compression.type must be producer, uncompressed, gzip, snappy, lz4 or zstd; got {other:?}"
            ))),
        }
    }

    /// The log configuration for each partition of the topic.
    pub fn to_log_config(&self) -> Result<LogConfig> {
        let cleanup_policy: CleanupPolicy = self.cleanup_policy.parse()?;
        let batch_bytes_max = usize::try_from(self.max_message_bytes)
            .map_err(|_| BrokerError::InvalidConfig("max.message.bytes is out of range".into()))?;
        let defaults = LogConfig::default();
        let log = LogConfig {
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            cleanup_policy,
            delete_retention_ms: self.delete_retention_ms,
            batch_bytes_max,
            // As Kafka: `max.message.bytes` limits the batch, and one record may be as
            // large as the batch that carries it.
            record_bytes_max: batch_bytes_max.max(1),
            index_interval_bytes: defaults.index_interval_bytes,
            cold_tier: self.cold_tier,
            timestamp_type: timestamp_type(&self.message_timestamp_type)?,
        };
        log.validate()?;
        Ok(log)
    }
}

/// Kafka's names for the two timestamp types.
fn timestamp_type(name: &str) -> Result<TimestampType> {
    match name {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        other => Err(BrokerError::InvalidConfig(format!(
            "message.timestamp.type must be CreateTime or LogAppendTime; got {other:?}"
        ))),
    }
}

fn bad(key: &str, what: &str, value: &Value) -> BrokerError {
    BrokerError::InvalidConfig(format!("{key} takes {what}; got {value}"))
}

fn int(key: &str, value: &Value) -> Result<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(key, "an integer", value))
}

fn uint(key: &str, value: &Value) -> Result<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(key, "a non-negative integer", value))
}

fn string(key: &str, value: &Value) -> Result<String> {
    value.as_str().map(str::to_owned).ok_or_else(|| bad(key, "a string", value))
}

fn boolean(key: &str, value: &Value) -> Result<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(key, "true or false", value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn changes(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn accepts_numbers_and_strings() {
        let c = TopicConfig::default()
            .with_changes(&changes(
                json!({"retention.ms": "1000", "segment.bytes": 65536, "cleanup.policy": "compact"}),
            ))
            .unwrap();
        assert_eq!(c.retention_ms, 1000);
        assert_eq!(c.segment_bytes, 65536);
        assert_eq!(c.to_log_config().unwrap().cleanup_policy, CleanupPolicy::Compact);
    }

    #[test]
    fn compression_type_takes_kafkas_names() {
        let set = |v: &str| TopicConfig::default().with_changes(&changes(json!({"compression.type": v})));
        assert_eq!(TopicConfig::default().compression().unwrap(), None);
        assert_eq!(set("producer").unwrap().compression().unwrap(), None);
        assert_eq!(set("uncompressed").unwrap().compression().unwrap(), Some(es_core::Compression::None));
        assert_eq!(set("zstd").unwrap().compression().unwrap(), Some(es_core::Compression::Zstd));
        assert!(matches!(set("brotli"), Err(BrokerError::InvalidConfig(_))));
        // Topics stored before the setting existed read as `producer`.
        let mut old = serde_json::to_value(TopicConfig::default()).unwrap();
        old.as_object_mut().unwrap().remove("compression.type");
        let old: TopicConfig = serde_json::from_value(old).unwrap();
        assert_eq!(old.compression_type, "producer");
    }

    #[test]
    fn refuses_unknown_keys_bad_types_and_bounds() {
        let base = TopicConfig::default();
        for bad in [
            json!({"retention.msx": 1}),
            json!({"retention.ms": "soon"}),
            json!({"segment.bytes": 1}),
            json!({"cleanup.policy": "shred"}),
            json!({"max.message.bytes": -5}),
            json!({"message.timestamp.type": "WallTime"}),
        ] {
            let err = base.with_changes(&changes(bad.clone())).unwrap_err();
            assert_eq!(err.code(), "invalid_config", "{bad}");
        }
    }

    #[test]
    fn timestamp_type_maps_onto_the_log() {
        let default = TopicConfig::default().to_log_config().unwrap();
        assert_eq!(default.timestamp_type, TimestampType::CreateTime);
        let c = TopicConfig::default()
            .with_changes(&changes(json!({"message.timestamp.type": "LogAppendTime"})))
            .unwrap();
        assert_eq!(c.to_log_config().unwrap().timestamp_type, TimestampType::LogAppendTime);
        // Metadata written before the setting existed reads as CreateTime.
        let mut stored = serde_json::to_value(TopicConfig::default()).unwrap();
        stored.as_object_mut().unwrap().remove("message.timestamp.type");
        let back: TopicConfig = serde_json::from_value(stored).unwrap();
        assert_eq!(back, TopicConfig::default());
    }

    #[test]
    fn the_batch_limit_is_the_record_limit() {
        let c = TopicConfig::default().with_changes(&changes(json!({"max.message.bytes": 4096}))).unwrap();
        assert_eq!(c.to_log_config().unwrap().record_bytes_max, 4096);
        // Raised above the old 1 MiB record cap, a record may be as large as the batch.
        let c = TopicConfig::default()
            .with_changes(&changes(json!({"max.message.bytes": 10 * 1024 * 1024})))
            .unwrap();
        assert_eq!(c.to_log_config().unwrap().record_bytes_max, 10 * 1024 * 1024);
    }
}
