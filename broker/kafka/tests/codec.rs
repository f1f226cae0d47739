//! Black-box tests of the codec: golden bytes (hand-written from Kafka's protocol guide
//! and built with kafka-protocol's client encoders), round trips per API at the lowest
//! and highest version es decodes, typed errors, KIP-511, and the two tables.

use bytes::{BufMut, Bytes, BytesMut};
use es_kafka::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use es_kafka::kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest,
    DescribeProducersRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest, HeartbeatResponse,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, SyncGroupRequest, TopicName,
};
use es_kafka::kafka_protocol::protocol::{Encodable, StrBytes};
use es_kafka::{
    ACCESS_TABLE, API_TABLE, Access, KafkaRequest, KafkaWireError, api_row, api_versions_response_for,
    decode_request, encode_response,
};

fn hex(s: &str) -> Bytes {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>().into()
}

/// A request frame body (no size prefix) built with kafka-protocol's encoders.
fn frame<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("es-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

#[test]
fn golden_heartbeat_v0_from_the_protocol_guide() {
    // api_key 12, version 0, correlation id 42, null client id; group "g", generation 5,
    // member "m1".
    let frame = hex("000c 0000 0000002a ffff 0001 67 00000005 0002 6d31");
    let decoded = decode_request(frame).unwrap();
    assert_eq!(decoded.header.correlation_id, 42);
    assert_eq!(decoded.header.client_id, None);
    let KafkaRequest::Heartbeat(hb) = decoded.request else { panic!("{decoded:?}") };
    assert_eq!(hb.group_id.as_str(), "g");
    assert_eq!(hb.generation_id, 5);
    assert_eq!(hb.member_id.as_str(), "m1");
}

#[test]
fn golden_metadata_v1_from_the_protocol_guide() {
    // Empty client id; one topic "t".
    let frame = hex("0003 0001 00000007 0000 00000001 0001 74");
    let KafkaRequest::Metadata(m) = decode_request(frame).unwrap().request else { panic!() };
    let topics = m.topics.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].name.as_ref().unwrap().as_str(), "t");
}

#[test]
fn golden_api_versions_v3_flexible_header() {
    // Header v2: client id "rdkafka" (a classic string even here), empty tag section;
    // body: compact strings "librdkafka" and "2.6.1", empty tag section.
    let frame = hex("0012 0003 00000001 0007 72646b61666b61 00
         0b 6c696272646b61666b61 06 322e362e31 00");
    let decoded = decode_request(frame.clone()).unwrap();
    assert_eq!(decoded.header.client_id.as_deref(), Some("rdkafka"));
    let KafkaRequest::ApiVersions(av) = decoded.request else { panic!() };
    assert_eq!(av.client_software_name.as_str(), "librdkafka");
    assert_eq!(av.client_software_version.as_str(), "2.6.1");
    // The crate's own encoder writes the same bytes (apart from the client id).
    let built = frame_with_client(ApiKey::ApiVersions, 3, 1, "rdkafka", &av);
    assert_eq!(built, frame);
}

fn frame_with_client<R: Encodable>(key: ApiKey, v: i16, id: i32, client: &str, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(v)
        .with_correlation_id(id)
        .with_client_id(Some(StrBytes::from_string(client.to_owned())))
        .encode(&mut buf, key.request_header_version(v))
        .unwrap();
    body.encode(&mut buf, v).unwrap();
    buf.freeze()
}

/// Every API at the lowest and highest version es decodes: the default body round-trips.
macro_rules! round_trip_all {
    ($($key:ident => $ty:ident),* $(,)?) => {
        #[test]
        fn every_api_round_trips_at_its_min_and_max_version() {
            let mut seen = Vec::new();
            $(
                let row = api_row(ApiKey::$key).unwrap();
                for v in [row.decodable_from, row.advertised_max()] {
                    let body = $ty::default();
                    let decoded = decode_request(frame(ApiKey::$key, v, 7, &body))
                        .unwrap_or_else(|e| panic!("{:?} v{v}: {e}", ApiKey::$key));
                    assert_eq!(decoded.header.api_version, v);
                    assert_eq!(decoded.header.client_id.as_deref(), Some("es-test"));
                    assert_eq!(decoded.request, KafkaRequest::$key(body));
                }
                seen.push(ApiKey::$key);
            )*
            for row in API_TABLE {
                assert!(seen.contains(&row.key), "{:?} has no round trip", row.key);
            }
        }
    };
}

round_trip_all! {
    Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
    Metadata => MetadataRequest, OffsetCommit => OffsetCommitRequest,
    OffsetFetch => OffsetFetchRequest, FindCoordinator => FindCoordinatorRequest,
    JoinGroup => JoinGroupRequest, Heartbeat => HeartbeatRequest,
    LeaveGroup => LeaveGroupRequest, SyncGroup => SyncGroupRequest,
    DescribeGroups => DescribeGroupsRequest, ListGroups => ListGroupsRequest,
    SaslHandshake => SaslHandshakeRequest, ApiVersions => ApiVersionsRequest,
    CreateTopics => CreateTopicsRequest, DeleteTopics => DeleteTopicsRequest,
    InitProducerId => InitProducerIdRequest, OffsetForLeaderEpoch => OffsetForLeaderEpochRequest,
    DescribeConfigs => DescribeConfigsRequest, SaslAuthenticate => SaslAuthenticateRequest,
    CreatePartitions => CreatePartitionsRequest,
    OffsetDelete => OffsetDeleteRequest,
    DeleteGroups => DeleteGroupsRequest,
    DeleteRecords => DeleteRecordsRequest,
    AlterConfigs => AlterConfigsRequest,
    IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
    DescribeCluster => DescribeClusterRequest,
    DescribeLogDirs => DescribeLogDirsRequest,
    DescribeProducers => DescribeProducersRequest,
}

fn produce_with(records: &[u8]) -> ProduceRequest {
    let partition =
        PartitionProduceData::default().with_index(3).with_records(Some(Bytes::copy_from_slice(records)));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str("events")))
        .with_partition_data(vec![partition]);
    ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![topic])
}

#[test]
fn produce_records_are_a_zero_copy_slice_of_the_frame() {
    let batch = [0xabu8; 70];
    for v in [3, 9, 11] {
        let frame = frame(ApiKey::Produce, v, 1, &produce_with(&batch));
        let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let KafkaRequest::Produce(p) = decode_request(frame.clone()).unwrap().request else { panic!() };
        let records = p.topic_data[0].partition_data[0].records.clone().unwrap();
        assert_eq!(&records[..], &batch[..]);
        assert!(range.contains(&(records.as_ptr() as usize)), "v{v}: records were copied");
    }
}

#[test]
fn produce_v0_to_2_is_advertised_but_refused() {
    let row = api_row(ApiKey::Produce).unwrap();
    assert_eq!((row.min, row.decodable_from), (0, 3));
    let frame = hex("0000 0002 00000009 0000 ffff 0001 00000000 00000000");
    assert!(matches!(
        decode_request(frame),
        Err(KafkaWireError::RefusedVersion { version: 2, correlation_id: 9, .. })
    ));
}

#[test]
fn unknown_keys_and_versions_are_typed_errors() {
    let unknown = hex("03e7 0000 00000005 ffff");
    assert!(matches!(
        decode_request(unknown),
        Err(KafkaWireError::UnknownApiKey { api_key: 999, correlation_id: 5 })
    ));
    let end_txn = hex("001a 0000 00000006 ffff");
    assert!(matches!(
        decode_request(end_txn),
        Err(KafkaWireError::UnsupportedApi { api_key: ApiKey::EndTxn, correlation_id: 6 })
    ));
    let fetch_17 = frame(ApiKey::Fetch, 17, 8, &FetchRequest::default());
    assert!(matches!(
        decode_request(fetch_17),
        Err(KafkaWireError::UnsupportedVersion { api_key: ApiKey::Fetch, version: 17, .. })
    ));
    assert!(matches!(decode_request(hex("0012 00")), Err(KafkaWireError::HeaderTruncated { position: 3 })));
    let mut trailing = BytesMut::from(&frame(ApiKey::Heartbeat, 0, 1, &HeartbeatRequest::default())[..]);
    trailing.put_u8(0);
    // Ignored, as Apache Kafka ignores them, but counted.
    assert_eq!(decode_request(trailing.freeze()).unwrap().trailing_bytes, 1);
}

#[test]
fn a_frame_claiming_2_pow_31_elements_fails_before_decoding() {
    // Fetch v4: replica, max wait, min bytes, max bytes, isolation, then topics count.
    let fetch = hex("0001 0004 00000001 ffff ffffffff 000001f4 00000001 00100000 00 7fffffff");
    assert!(matches!(decode_request(fetch), Err(KafkaWireError::CountTooLarge { count: 2147483647, .. })));
    // Produce v9 (flexible): null transactional id, acks, timeout, compact count 2^32-1.
    let produce = hex("0000 0009 00000001 ffff 00 00 ffff 00007530 ffffffff0f");
    assert!(matches!(decode_request(produce), Err(KafkaWireError::CountTooLarge { count: 4294967294, .. })));
    // SaslAuthenticate v0: auth bytes claiming 2^31-1 bytes (the crate would zero that much).
    let sasl = hex("0024 0000 00000001 ffff 7fffffff 00");
    assert!(matches!(decode_request(sasl), Err(KafkaWireError::LengthTooLarge { length: 2147483647, .. })));
}

#[test]
fn api_versions_newer_than_es_gets_a_v0_body_with_error_35() {
    let (body, version) = api_versions_response_for(5, API_TABLE);
    assert_eq!(version, 0);
    assert_eq!(body.error_code, 35);
    assert_eq!(body.api_keys.len(), 1);
    assert_eq!(
        (body.api_keys[0].api_key, body.api_keys[0].min_version, body.api_keys[0].max_version),
        (18, 0, 4)
    );
    let header =
        decode_request(frame(ApiKey::ApiVersions, 3, 77, &ApiVersionsRequest::default())).unwrap().header;
    let bytes = encode_response(&header, version, &body).unwrap();
    // Size 16; response header v0 (correlation id only); error 35; one key: 18, 0-4.
    assert_eq!(bytes, hex("00000010 0000004d 0023 00000001 0012 0000 0004"));
}

#[test]
fn api_versions_lists_the_table_at_the_asked_version() {
    let (body, version) = api_versions_response_for(3, API_TABLE);
    assert_eq!((version, body.error_code, body.api_keys.len()), (3, 0, API_TABLE.len()));
    let produce = body.api_keys.iter().find(|k| k.api_key == 0).unwrap();
    assert_eq!((produce.min_version, produce.max_version), (0, 11));
    // The listener's answer advertises the served rows only.
    let (served, _) = es_kafka::api_versions_response(3);
    assert_eq!(served.api_keys.len(), es_kafka::served().count());
    assert!(served.api_keys.iter().any(|k| k.api_key == ApiKey::AlterConfigs as i16));
    // Transactions are not implemented: never advertised.
    assert!(served.api_keys.iter().all(|k| k.api_key != ApiKey::EndTxn as i16));
    // Even ApiVersions v3+ answers with a v0 response header (no tag section).
    let header =
        decode_request(frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default())).unwrap().header;
    let bytes = encode_response(&header, 3, &ApiVersionsResponse::default()).unwrap();
    assert_eq!(bytes, hex("0000000c 00000001 0000 01 00000000 00"));
}

#[test]
fn flexible_responses_carry_a_header_tag_section() {
    let header = decode_request(frame(ApiKey::Heartbeat, 4, 9, &HeartbeatRequest::default())).unwrap().header;
    let v4 = encode_response(&header, 4, &HeartbeatResponse::default()).unwrap();
    assert_eq!(v4, hex("0000000c 00000009 00 00000000 0000 00"));
    let v0 = encode_response(&header, 0, &HeartbeatResponse::default()).unwrap();
    assert_eq!(v0, hex("00000006 00000009 0000"));
    assert!(matches!(
        encode_response(&header, 99, &HeartbeatResponse::default()),
        Err(KafkaWireError::Encode { version: 99, .. })
    ));
}

#[test]
fn every_api_in_the_table_has_an_access_row() {
    for row in API_TABLE {
        assert!(es_kafka::access(row.key).is_some(), "{:?} has no access row", row.key);
    }
    for (key, access) in ACCESS_TABLE {
        assert!(api_row(*key).is_some(), "{key:?} has an access row but no API row");
        let pre_auth = matches!(key, ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate);
        assert_eq!(*access == Access::PreAuth, pre_auth, "{key:?}");
    }
}

#[test]
fn docs_kafka_md_carries_the_api_table() {
    let doc = include_str!("../../../docs/kafka.md");
    assert!(
        doc.contains(&es_kafka::markdown_table()),
        "docs/kafka.md's API table is stale; paste:\n{}",
        es_kafka::markdown_table()
    );
}
