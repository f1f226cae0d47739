//! The API table: every Kafka API es will advertise, the versions, and whether the
//! listener serves it yet. The single source for ApiVersions and for docs/kafka.md.

use kafka_protocol::messages::ApiKey;

use crate::request::message_versions;

/// Whether the listener answers an API yet. Until it does, the codec decodes and tests
/// the API but ApiVersions does not advertise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Codec only: decoded, pre-scanned and tested; no listener serves it.
    Planned,
    /// The listener serves it end to end; advertised in ApiVersions.
    Served,
}

/// One API es will advertise: `min..=max` (before intersecting `max` with the crate's
/// stable versions), and `decodable_from` for a floor advertised lower than es serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRow {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    /// Versions in `min..decodable_from` are advertised but refused with a clear error.
    pub decodable_from: i16,
    /// What that error says.
    pub refused_reason: &'static str,
    pub status: Status,
    /// Why the range is what it is (shown in docs/kafka.md).
    pub note: &'static str,
}

const fn row(key: ApiKey, min: i16, max: i16, note: &'static str) -> ApiRow {
    ApiRow { key, min, max, decodable_from: min, refused_reason: "", status: Status::Planned, note }
}

/// A row the listener serves, flipped only once a real-client test exercises it.
const fn served_row(r: ApiRow) -> ApiRow {
    ApiRow { status: Status::Served, ..r }
}

/// The table, in API-key order. Floors and ceilings come from DESIGN §5: the versions
/// librdkafka 2.15/2.16, the Java 4.x client, kafkajs and Sarama need.
pub static API_TABLE: &[ApiRow] = &[
    ApiRow {
        decodable_from: 3,
        refused_reason: "Produce v0-2 (message formats v0/v1) is not supported; use v3 or newer",
        status: Status::Served,
        ..row(
            ApiKey::Produce,
            0,
            11,
            "min 0 advertised (a floor of 3 disables compression in librdkafka < 2.11.1, \
             KAFKA-18659); v0-2 refused",
        )
    },
    served_row(row(ApiKey::Fetch, 4, 16, "Java floor 4; librdkafka up to 16 (topic ids from 13)")),
    served_row(row(ApiKey::ListOffsets, 1, 8, "Java floor 1; librdkafka 7")),
    served_row(row(ApiKey::Metadata, 0, 12, "v7+ carries leader epochs")),
    served_row(row(ApiKey::OffsetCommit, 2, 9, "Java floor 2; librdkafka 9")),
    served_row(row(ApiKey::OffsetFetch, 1, 9, "Java floor 1; v8+ batches groups")),
    served_row(row(ApiKey::FindCoordinator, 0, 5, "v4+ batches keys")),
    served_row(row(ApiKey::JoinGroup, 0, 9, "librdkafka 5+")),
    served_row(row(ApiKey::Heartbeat, 0, 4, "")),
    served_row(row(ApiKey::LeaveGroup, 0, 5, "v3+ batches members (KIP-345)")),
    served_row(row(ApiKey::SyncGroup, 0, 5, "")),
    served_row(row(ApiKey::DescribeGroups, 0, 5, "")),
    served_row(row(ApiKey::ListGroups, 0, 5, "")),
    // librdkafka looks for v0 in the range before it uses SASL at all, then sends v1.
    ApiRow {
        decodable_from: 1,
        refused_reason: "SaslHandshake v0 (raw SASL tokens after the handshake) is not supported; use v1",
        ..served_row(row(
            ApiKey::SaslHandshake,
            0,
            1,
            "v0 advertised (librdkafka requires it) but refused: v1 then SaslAuthenticate, as every \
             client since Kafka 1.0",
        ))
    },
    served_row(row(ApiKey::ApiVersions, 0, 4, "KIP-511 fallback: newer requests get a v0 body, error 35")),
    served_row(row(ApiKey::CreateTopics, 2, 7, "Java floor 2")),
    served_row(row(ApiKey::DeleteTopics, 1, 6, "topic ids from 6")),
    served_row(row(ApiKey::DeleteRecords, 0, 2, "offset -1: the high watermark")),
    served_row(row(ApiKey::InitProducerId, 0, 5, "idempotent producers only, no transactional id")),
    served_row(row(
        ApiKey::OffsetForLeaderEpoch,
        2,
        4,
        "Java floor 2; a consumer validates its position after a leader change (KIP-320)",
    )),
    served_row(row(ApiKey::DescribeConfigs, 1, 4, "")),
    served_row(row(
        ApiKey::AlterConfigs,
        0,
        2,
        "replaces a topic's whole config; librdkafka, kafka-python and kadm send it",
    )),
    served_row(row(ApiKey::DescribeLogDirs, 1, 4, "one log dir: the data directory's partitions/")),
    served_row(row(
        ApiKey::SaslAuthenticate,
        0,
        2,
        "v1+ carries session_lifetime_ms (KIP-368 re-authentication)",
    )),
    served_row(row(ApiKey::CreatePartitions, 0, 3, "")),
    served_row(row(ApiKey::DeleteGroups, 0, 2, "")),
    served_row(row(ApiKey::IncrementalAlterConfigs, 0, 1, "")),
    served_row(row(ApiKey::OffsetDelete, 0, 0, "")),
    served_row(row(ApiKey::DescribeCluster, 0, 2, "")),
    served_row(row(ApiKey::DescribeProducers, 0, 0, "idempotent producers; no transaction fields")),
];

/// The row for `key`, if es has one.
pub fn api_row(key: ApiKey) -> Option<&'static ApiRow> {
    API_TABLE.iter().find(|r| r.key == key)
}

impl ApiRow {
    /// The highest version es advertises: the table's ceiling, never above what the
    /// crate decodes as a stable version.
    pub fn advertised_max(&self) -> i16 {
        message_versions(self.key).map_or(-1, |v| v.max.min(self.max))
    }
}

/// The rows ApiVersions advertises: those the listener serves.
pub fn served() -> impl Iterator<Item = &'static ApiRow> {
    API_TABLE.iter().filter(|r| r.status == Status::Served)
}

/// The API table section of docs/kafka.md, generated so that file cannot drift.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| API | key | versions | decoded from | status | note |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for r in API_TABLE {
        let status = match r.status {
            Status::Planned => "planned (codec only)",
            Status::Served => "served",
        };
        out.push_str(&format!(
            "| {:?} | {} | {}-{} | {} | {} | {} |\n",
            r.key,
            r.key as i16,
            r.min,
            r.advertised_max(),
            r.decodable_from,
            status,
            r.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_key_order_without_duplicates() {
        for pair in API_TABLE.windows(2) {
            assert!((pair[0].key as i16) < (pair[1].key as i16), "{:?} then {:?}", pair[0].key, pair[1].key);
        }
    }

    #[test]
    fn end_txn_5_and_later_is_never_advertised() {
        // EndTxn v5 is KIP-890's transactions v2, which es does not implement.
        assert!(api_row(ApiKey::EndTxn).is_none_or(|r| r.max < 5));
    }
}
