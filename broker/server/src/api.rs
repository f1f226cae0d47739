//! The JSON shapes of the HTTP API (requests, responses, the error body) and the
//! utf8/base64 codec for keys, values and header values.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::config::TopicConfig;
use crate::service::error::{BrokerError, Result};

/// Every error response: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `topic_not_found`.
    pub code: String,
    /// A sentence for people: what went wrong and what to do.
    pub message: String,
    /// For `validation_failed`: every validator finding on the request's records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<crate::plugins::binding::Finding>,
}

/// How keys, values and header values are written in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    #[default]
    Utf8,
    Base64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTopicRequest {
    /// 1 to 249 of `[A-Za-z0-9._-]`, not `.` or `..`.
    #[schema(pattern = "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,249}$")]
    pub name: String,
    /// Number of partitions (default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 1024)]
    pub partitions: u32,
    /// Settings by Kafka name, e.g. `{"retention.ms": 86400000}`.
    #[serde(default)]
    #[schema(schema_with = config_changes_schema)]
    pub config: BTreeMap<String, Value>,
    /// In a cluster, each partition's number of replicas (default 3, or every
    /// node of a smaller cluster); at most the number of nodes. A single node
    /// takes only 1. Same as `config` `replication.factor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub replication_factor: Option<u32>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlterConfigRequest {
    /// Settings to change, by Kafka name; others keep their value.
    #[schema(schema_with = config_changes_schema)]
    pub config: BTreeMap<String, Value>,
}

/// Grows a topic; partitions never shrink (keyed records would move).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddPartitionsRequest {
    /// The new partition count, above the current one.
    #[schema(minimum = 2, maximum = 1024)]
    pub count: u32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicSummary {
    pub name: String,
    pub partition_count: u32,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicList {
    pub topics: Vec<TopicSummary>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PartitionDescription {
    pub partition: u32,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    /// Bytes and segments on local disk.
    pub size_bytes: u64,
    pub segment_count: usize,
    /// Bytes and segments in the cold tier (below the local ones; read back transparently).
    pub cold_size_bytes: u64,
    pub cold_segment_count: usize,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicDescription {
    pub name: String,
    pub partition_count: u32,
    pub config: TopicConfig,
    pub partitions: Vec<PartitionDescription>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConfigResponse {
    pub config: TopicConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WireHeader {
    pub key: String,
    /// Encoded like the record's value; null for a null header value.
    pub value: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProduceRequest {
    /// How keys, values and header values of `records` are encoded (default utf8).
    #[serde(default)]
    pub encoding: Encoding,
    #[schema(min_items = 1, max_items = 100000)]
    pub records: Vec<ProduceRecord>,
    /// Idempotent producer (from `POST /producers`): every record must go to one
    /// partition; a retry of the same sequence is written once and answered with the
    /// original offsets.
    pub producer: Option<ProducerFields>,
}

/// An idempotent producer's identity and this batch's first sequence number.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProducerFields {
    pub id: i64,
    pub epoch: i16,
    /// Sequence of the first record; the next batch to this partition starts at
    /// this plus the number of records.
    #[schema(minimum = 0)]
    pub sequence: i32,
}

/// A new idempotent producer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProducerIdResponse {
    pub producer_id: i64,
    pub epoch: i16,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProduceRecord {
    pub key: Option<String>,
    /// Null writes a tombstone.
    pub value: Option<String>,
    #[serde(default)]
    pub headers: Vec<WireHeader>,
    /// Explicit partition; otherwise by key (murmur2, as Kafka), else one partition per batch.
    pub partition: Option<u32>,
    /// Milliseconds since the epoch; the broker's clock when absent.
    #[schema(minimum = 0)]
    pub timestamp: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecordOffset {
    pub partition: u32,
    pub offset: u64,
    /// Set only when the record went to a dead-letter topic instead of this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// Offsets in the order of the request's records, sent only once they are on disk.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProduceResponse {
    /// Where each record was written; a dead-lettered record's entry names the
    /// dead-letter topic in `topic`.
    pub offsets: Vec<RecordOffset>,
    /// Validator findings on records that were written anyway (`warn`) or sent to
    /// a dead-letter topic (`dead-letter`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<crate::plugins::binding::Finding>,
    /// True when this was an idempotent producer's retry: nothing new was written.
    #[serde(default)]
    pub duplicate: bool,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ConsumeQuery {
    /// `earliest` (default), `latest`, or an offset number.
    #[param(pattern = "^(earliest|latest|[0-9]{1,19})$")]
    pub offset: Option<String>,
    /// Start at the first record with a timestamp at or after this (ms), or at the
    /// high watermark when every record is older; -1 means latest and -2 earliest,
    /// as in Kafka. Excludes `offset`.
    #[param(minimum = -2)]
    pub timestamp: Option<i64>,
    /// Most records to return (default 500, at most 10000).
    #[param(minimum = 1, maximum = 10000)]
    pub max_records: Option<usize>,
    /// Most batch bytes to read (default 1 MiB, at most 16 MiB; at least one batch is read).
    #[param(minimum = 1, maximum = 16777216)]
    pub max_bytes: Option<usize>,
    /// Wait up to this long (ms, at most 60000) for data when there is none yet.
    #[param(minimum = 0, maximum = 60000)]
    pub wait_ms: Option<u64>,
    /// Preferred encoding; records that are not valid UTF-8 come back base64 anyway.
    pub encoding: Option<Encoding>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConsumedRecord {
    pub offset: u64,
    pub timestamp: i64,
    /// The encoding of this record's key, value and header values.
    pub encoding: Encoding,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<WireHeader>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConsumeResponse {
    pub topic: String,
    pub partition: u32,
    pub records: Vec<ConsumedRecord>,
    /// The offset to ask for next.
    pub next_offset: u64,
    pub high_watermark: u64,
    pub log_start_offset: u64,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OffsetsQuery {
    /// Also look up the first offset at or after this timestamp (ms); -1 looks up
    /// the latest offset and -2 the earliest, as in Kafka. Other negatives are refused.
    #[param(minimum = -2)]
    pub timestamp: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PartitionOffsets {
    pub partition: u32,
    pub earliest: u64,
    /// The high watermark: the offset the next record will get.
    pub latest: u64,
    /// With `timestamp`: the first offset at or after it, null if every record is
    /// older; absent without `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schema(value_type = Option<u64>, nullable)]
    pub timestamp_offset: Option<Option<u64>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OffsetsResponse {
    pub topic: String,
    pub partitions: Vec<PartitionOffsets>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Status {
    pub status: String,
    /// `/readyz` only: long polls (consume, fetch, session polls) parked right now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_polls: Option<usize>,
}

/// The topic settings a request may carry, with their types and bounds, so the
/// OpenAPI document says what the broker accepts. (The broker also takes numbers
/// and booleans as strings, as Kafka tools send them.)
fn config_changes_schema() -> utoipa::openapi::Object {
    use es_core::limits;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    let int = |min: i64, max: Option<u64>| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(min as f64))
            .maximum(max.map(|m| m as f64))
    };
    ObjectBuilder::new()
        .property("retention.ms", int(-1, None))
        .property("retention.bytes", int(-1, None))
        .property("segment.bytes", int(limits::SEGMENT_BYTES_MIN as i64, Some(limits::SEGMENT_BYTES_MAX)))
        .property("segment.ms", int(1, None))
        .property("delete.retention.ms", int(0, None))
        .property(
            "max.message.bytes",
            int(es_core::BatchHeader::LEN as i64, Some(limits::BATCH_BYTES_MAX_HARD as u64)),
        )
        .property(
            "cleanup.policy",
            ObjectBuilder::new().schema_type(Type::String).enum_values(Some([
                "delete",
                "compact",
                "compact,delete",
            ])),
        )
        .property(
            "compression.type",
            ObjectBuilder::new().schema_type(Type::String).enum_values(Some([
                "producer",
                "uncompressed",
                "gzip",
                "snappy",
                "lz4",
                "zstd",
            ])),
        )
        .property(
            "message.timestamp.type",
            ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["CreateTime", "LogAppendTime"])),
        )
        .property(
            "cold.tier.enable",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some("true needs a broker with a cold tier (--cold-dir, or cold.backend = s3)")),
        )
        .additional_properties(Some(AdditionalProperties::<utoipa::openapi::Schema>::FreeForm(false)))
        .build()
}

/// Decodes one field of a produce request; `what` names it in the error.
pub fn decode(encoding: Encoding, text: &str, what: impl FnOnce() -> String) -> Result<Bytes> {
    match encoding {
        Encoding::Utf8 => Ok(Bytes::copy_from_slice(text.as_bytes())),
        Encoding::Base64 => BASE64
            .decode(text)
            .map(Bytes::from)
            .map_err(|e| BrokerError::BadEncoding(format!("{} is not valid base64: {e}", what()))),
    }
}

/// Encodes one field of a consumed record.
pub fn encode(encoding: Encoding, bytes: &[u8]) -> String {
    match encoding {
        Encoding::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
        Encoding::Base64 => BASE64.encode(bytes),
    }
}

/// A field that is present (maybe null) is `Some`, so null and absent stay apart.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(d).map(Some)
}
