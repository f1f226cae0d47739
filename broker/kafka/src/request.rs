//! Request decoding: header, API table check, pre-scan, then kafka-protocol's decoder on
//! a frozen `Bytes`, so byte fields (Produce `records`) are slices of the frame.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest, DescribeProducersRequest,
    FetchRequest, FindCoordinatorRequest, HeartbeatRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest,
    MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Message, StrBytes, VersionRange};

use crate::apis::{ApiRow, api_row};
use crate::error::KafkaWireError;
use crate::prescan::{self, Field, Struct, Ty};
use crate::schema_gen as s;

/// The request header fields a listener needs to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<StrBytes>,
}

/// One decoded request frame.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    pub header: Header,
    pub request: KafkaRequest,
    /// Bytes left after the body, ignored as Apache Kafka's parser ignores them
    /// (librdkafka 2.16 sends three after an all-topics Metadata v12 body).
    pub trailing_bytes: usize,
}

/// For each API es decodes: the enum variant (named as the `ApiKey`), the crate's
/// message type and the generated wire layout the pre-scan walks.
macro_rules! requests {
    ($($key:ident => $message:ident, $schema:path;)*) => {
        /// A typed request body of one of the APIs in the API table.
        #[derive(Debug, Clone, PartialEq)]
        pub enum KafkaRequest {
            $($key($message),)*
        }

        impl KafkaRequest {
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(KafkaRequest::$key(_) => ApiKey::$key,)*
                }
            }
        }

        /// The wire layout of `key`'s request body, if es decodes it.
        pub(crate) fn schema(key: ApiKey) -> Option<&'static Struct> {
            match key {
                $(ApiKey::$key => Some(&$schema),)*
                _ => None,
            }
        }

        /// The stable versions kafka-protocol decodes for `key`'s request.
        pub fn message_versions(key: ApiKey) -> Option<VersionRange> {
            match key {
                $(ApiKey::$key => Some(<$message as Message>::VERSIONS),)*
                _ => None,
            }
        }

        #[cfg(test)]
        impl KafkaRequest {
            /// Encodes the body with the crate's (client-side) encoder, for tests.
            pub(crate) fn encode_body(&self, buf: &mut bytes::BytesMut, version: i16)
                -> Result<(), String> {
                use kafka_protocol::protocol::Encodable;
                match self {
                    $(KafkaRequest::$key(m) => m.encode(buf, version).map_err(|e| e.to_string()),)*
                }
            }
        }

        /// kafka-protocol reports failures as `anyhow::Error`; turning them into a
        /// message at once keeps that type out of this crate's API.
        fn decode_body(key: ApiKey, body: &mut Bytes, version: i16)
            -> Option<Result<KafkaRequest, String>> {
            match key {
                $(ApiKey::$key => Some(<$message as Decodable>::decode(body, version)
                    .map(KafkaRequest::$key)
                    .map_err(|e| e.to_string())),)*
                _ => None,
            }
        }
    };
}

requests! {
    Produce => ProduceRequest, s::PRODUCE__PRODUCE_REQUEST;
    Fetch => FetchRequest, s::FETCH__FETCH_REQUEST;
    ListOffsets => ListOffsetsRequest, s::LIST_OFFSETS__LIST_OFFSETS_REQUEST;
    Metadata => MetadataRequest, s::METADATA__METADATA_REQUEST;
    OffsetCommit => OffsetCommitRequest, s::OFFSET_COMMIT__OFFSET_COMMIT_REQUEST;
    OffsetFetch => OffsetFetchRequest, s::OFFSET_FETCH__OFFSET_FETCH_REQUEST;
    FindCoordinator => FindCoordinatorRequest, s::FIND_COORDINATOR__FIND_COORDINATOR_REQUEST;
    JoinGroup => JoinGroupRequest, s::JOIN_GROUP__JOIN_GROUP_REQUEST;
    Heartbeat => HeartbeatRequest, s::HEARTBEAT__HEARTBEAT_REQUEST;
    LeaveGroup => LeaveGroupRequest, s::LEAVE_GROUP__LEAVE_GROUP_REQUEST;
    SyncGroup => SyncGroupRequest, s::SYNC_GROUP__SYNC_GROUP_REQUEST;
    DescribeGroups => DescribeGroupsRequest, s::DESCRIBE_GROUPS__DESCRIBE_GROUPS_REQUEST;
    ListGroups => ListGroupsRequest, s::LIST_GROUPS__LIST_GROUPS_REQUEST;
    SaslHandshake => SaslHandshakeRequest, s::SASL_HANDSHAKE__SASL_HANDSHAKE_REQUEST;
    ApiVersions => ApiVersionsRequest, s::API_VERSIONS__API_VERSIONS_REQUEST;
    CreateTopics => CreateTopicsRequest, s::CREATE_TOPICS__CREATE_TOPICS_REQUEST;
    DeleteTopics => DeleteTopicsRequest, s::DELETE_TOPICS__DELETE_TOPICS_REQUEST;
    InitProducerId => InitProducerIdRequest, s::INIT_PRODUCER_ID__INIT_PRODUCER_ID_REQUEST;
    OffsetForLeaderEpoch => OffsetForLeaderEpochRequest,
        s::OFFSET_FOR_LEADER_EPOCH__OFFSET_FOR_LEADER_EPOCH_REQUEST;
    DescribeConfigs => DescribeConfigsRequest, s::DESCRIBE_CONFIGS__DESCRIBE_CONFIGS_REQUEST;
    SaslAuthenticate => SaslAuthenticateRequest, s::SASL_AUTHENTICATE__SASL_AUTHENTICATE_REQUEST;
    CreatePartitions => CreatePartitionsRequest, s::CREATE_PARTITIONS__CREATE_PARTITIONS_REQUEST;
    OffsetDelete => OffsetDeleteRequest, s::OFFSET_DELETE__OFFSET_DELETE_REQUEST;
    DeleteGroups => DeleteGroupsRequest, s::DELETE_GROUPS__DELETE_GROUPS_REQUEST;
    DeleteRecords => DeleteRecordsRequest, s::DELETE_RECORDS__DELETE_RECORDS_REQUEST;
    AlterConfigs => AlterConfigsRequest, s::ALTER_CONFIGS__ALTER_CONFIGS_REQUEST;
    IncrementalAlterConfigs => IncrementalAlterConfigsRequest, s::INCREMENTAL_ALTER_CONFIGS__INCREMENTAL_ALTER_CONFIGS_REQUEST;
    DescribeCluster => DescribeClusterRequest, s::DESCRIBE_CLUSTER__DESCRIBE_CLUSTER_REQUEST;
    DescribeLogDirs => DescribeLogDirsRequest, s::DESCRIBE_LOG_DIRS__DESCRIBE_LOG_DIRS_REQUEST;
    DescribeProducers => DescribeProducersRequest, s::DESCRIBE_PRODUCERS__DESCRIBE_PRODUCERS_REQUEST;
}

/// The crate's decoder alone, without the pre-scan: for the layout tests.
#[cfg(test)]
pub(crate) fn decode_body_for_tests(
    key: ApiKey,
    body: &mut Bytes,
    version: i16,
) -> Result<KafkaRequest, String> {
    decode_body(key, body, version).unwrap_or_else(|| Err(format!("{key:?} has no decoder")))
}

/// The request header's layout (versions 1 and 2; 2 adds a tagged-field section).
static HEADER: Struct = Struct {
    name: "RequestHeader",
    versions: (1, 2),
    flexible_from: 2,
    fields: &[
        Field { name: "request_api_key", versions: (0, i16::MAX), ty: Ty::Int16 },
        Field { name: "request_api_version", versions: (0, i16::MAX), ty: Ty::Int16 },
        Field { name: "correlation_id", versions: (0, i16::MAX), ty: Ty::Int32 },
        Field { name: "client_id", versions: (0, i16::MAX), ty: Ty::String },
    ],
    tags: &[],
};

/// The fixed prefix every header version shares: key, version, correlation id.
const FIXED_HEADER_BYTES: usize = 8;

/// Reads the key, version and correlation id, which sit at fixed offsets in every header
/// version, and checks them against the API table.
fn check_fixed_header(frame: &[u8]) -> Result<(&'static ApiRow, i16, i32), KafkaWireError> {
    let Some(fixed) = frame.first_chunk::<FIXED_HEADER_BYTES>() else {
        return Err(KafkaWireError::HeaderTruncated { position: frame.len() });
    };
    let api_key = i16::from_be_bytes([fixed[0], fixed[1]]);
    let version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let key =
        ApiKey::try_from(api_key).map_err(|()| KafkaWireError::UnknownApiKey { api_key, correlation_id })?;
    let row = api_row(key).ok_or(KafkaWireError::UnsupportedApi { api_key: key, correlation_id })?;
    if version < row.min || version > row.advertised_max() {
        return Err(KafkaWireError::UnsupportedVersion { api_key: key, version, correlation_id });
    }
    if version < row.decodable_from {
        return Err(KafkaWireError::RefusedVersion {
            api_key: key,
            version,
            correlation_id,
            reason: row.refused_reason,
        });
    }
    Ok((row, version, correlation_id))
}

/// Decodes the header only; on a body error the listener still has the correlation id.
pub fn decode_header(frame: &Bytes) -> Result<(Header, usize), KafkaWireError> {
    let (row, version, correlation_id) = check_fixed_header(frame)?;
    let header_version = row.key.request_header_version(version);
    let header_bytes = prescan::check(&HEADER, header_version, frame).map_err(|e| {
        // A header cut short keeps its position but says it is the header; every other
        // fault passes through unchanged.
        if let KafkaWireError::Truncated { position, .. } = e {
            KafkaWireError::HeaderTruncated { position }
        } else {
            e
        }
    })?;
    let mut raw = frame.slice(..header_bytes);
    let decoded = RequestHeader::decode(&mut raw, header_version).map_err(|e| KafkaWireError::Decode {
        api_key: row.key,
        version,
        reason: format!("request header: {e}"),
    })?;
    let header =
        Header { api_key: row.key, api_version: version, correlation_id, client_id: decoded.client_id };
    Ok((header, header_bytes))
}

/// Decodes one frame body (without its size prefix). The frame must be a frozen
/// `Bytes`: Produce `records` come back as slices of it, not copies.
pub fn decode_request(frame: Bytes) -> Result<DecodedRequest, KafkaWireError> {
    let (header, header_bytes) = decode_header(&frame)?;
    let (key, version) = (header.api_key, header.api_version);
    let mut body = frame.slice(header_bytes..);
    let schema = schema(key)
        .ok_or(KafkaWireError::UnsupportedApi { api_key: key, correlation_id: header.correlation_id })?;
    prescan::check(schema, version, &body)?;
    let request = decode_body(key, &mut body, version)
        .ok_or(KafkaWireError::UnsupportedApi { api_key: key, correlation_id: header.correlation_id })?
        .map_err(|reason| KafkaWireError::Decode { api_key: key, version, reason })?;
    Ok(DecodedRequest { header, request, trailing_bytes: body.remaining() })
}
