//! es-encoded v2 batches decode with an independent implementation: the
//! `kafka-protocol` crate's `RecordBatchDecoder` (which also checks the CRC-32C). Random
//! record sets, uncompressed and in every codec the crate supports, are encoded and
//! stamped by es; keys, values, headers, timestamps, offsets, sequences and producer
//! fields must come back as given.
//!
//! The crate's known quirks (DESIGN.md §5) are not tested through: it keeps headers in
//! an `IndexMap`, so a duplicate header key collapses (the strategy below generates
//! distinct keys per record; duplicates are covered by the golden vectors), and it
//! drops lastOffsetDelta (compared against es's own header instead), and it derives a
//! record sequence from a base sequence of -1 as if it were one (compared only for
//! idempotent batches).

use bytes::Bytes;
use es_core::LeaderEpoch;
use es_core::batch::{self, BatchView};
use es_core::compression::Compression;
use es_core::record::{Header, ProducerInfo, Record};
use kafka_protocol::records::{Compression as KpCompression, RecordBatchDecoder, TimestampType};
use proptest::prelude::*;

const MAX_BATCH: usize = 1 << 20;
/// Every codec es and the crate both have.
const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

fn header_strategy() -> impl Strategy<Value = Vec<Header>> {
    // Distinct keys (a map from key to value), in a random order.
    prop::collection::btree_map(
        "[a-z]{1,6}|[\\u{80}-\\u{7ff}]{1,3}",
        prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        0..4,
    )
    .prop_flat_map(|map| {
        let headers: Vec<Header> =
            map.into_iter().map(|(key, value)| Header { key, value: value.map(Bytes::from) }).collect();
        Just(headers).prop_shuffle()
    })
}

fn record_strategy() -> impl Strategy<Value = Record> {
    (
        prop::option::of(prop::collection::vec(any::<u8>(), 0..32)),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..200)),
        header_strategy(),
        // Timestamps need not be in order; deltas may be negative.
        -100_000i64..100_000,
    )
        .prop_map(|(key, value, headers, delta)| Record {
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers,
            timestamp: Some(1_767_225_600_000 + delta),
        })
}

fn producer_strategy() -> impl Strategy<Value = ProducerInfo> {
    prop_oneof![
        Just(ProducerInfo::NONE),
        (0i64..1_000_000, 0i16..100, 0i32..1_000_000).prop_map(
            |(producer_id, producer_epoch, base_sequence)| {
                ProducerInfo { producer_id, producer_epoch, base_sequence }
            }
        ),
    ]
}

fn codec_strategy() -> impl Strategy<Value = Compression> {
    prop::sample::select(CODECS.to_vec())
}

/// The codec as the other crate names it; exhaustive, so a new es codec must be mapped.
fn kp_compression(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
    }
}

/// Encodes with es, compresses with es, stamps as a leader would.
fn es_batch(
    records: &[Record],
    producer: ProducerInfo,
    codec: Compression,
    base_offset: u64,
    epoch: i32,
) -> Vec<u8> {
    let plain = batch::encode(records, 0, producer).unwrap();
    let mut bytes = batch::compress(&plain, codec).unwrap();
    batch::stamp(&mut bytes, base_offset, LeaderEpoch(epoch));
    bytes
}

fn check_against_kafka_protocol(
    records: &[Record],
    producer: ProducerInfo,
    codec: Compression,
    base_offset: u64,
    epoch: i32,
) -> Result<(), TestCaseError> {
    let bytes = es_batch(records, producer, codec, base_offset, epoch);
    // es reads its own batch, and lastOffsetDelta (which the other crate drops) is right.
    let view = BatchView::parse(&bytes, MAX_BATCH).unwrap();
    prop_assert_eq!(view.header.last_offset_delta as usize, records.len() - 1);

    let mut buf = Bytes::from(bytes);
    let set = RecordBatchDecoder::decode(&mut buf).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    prop_assert!(buf.is_empty(), "the decoder left {} bytes", buf.len());
    prop_assert_eq!(set.version, 2);
    prop_assert_eq!(set.compression, kp_compression(codec));
    prop_assert_eq!(set.records.len(), records.len());
    for (i, (theirs, ours)) in set.records.iter().zip(records).enumerate() {
        prop_assert_eq!(theirs.offset, base_offset as i64 + i as i64);
        prop_assert_eq!(Some(theirs.timestamp), ours.timestamp);
        prop_assert_eq!(theirs.timestamp_type, TimestampType::Creation);
        prop_assert_eq!(&theirs.key, &ours.key);
        prop_assert_eq!(&theirs.value, &ours.value);
        let headers: Vec<(&str, Option<&Bytes>)> =
            theirs.headers.iter().map(|(k, v)| (k.as_str(), v.as_ref())).collect();
        let want: Vec<(&str, Option<&Bytes>)> =
            ours.headers.iter().map(|h| (h.key.as_str(), h.value.as_ref())).collect();
        prop_assert_eq!(headers, want);
        prop_assert_eq!(theirs.partition_leader_epoch, epoch);
        prop_assert_eq!(theirs.producer_id, producer.producer_id);
        prop_assert_eq!(theirs.producer_epoch, producer.producer_epoch);
        // The crate adds the offset delta to a base sequence of -1 too (Kafka keeps -1:
        // no sequence), so sequences are compared only for idempotent batches.
        if producer.base_sequence >= 0 {
            prop_assert_eq!(theirs.sequence, producer.base_sequence + i as i32);
        }
        prop_assert!(!theirs.transactional && !theirs.control);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn es_batches_decode_with_kafka_protocol(
        records in prop::collection::vec(record_strategy(), 1..24),
        producer in producer_strategy(),
        codec in codec_strategy(),
        base_offset in 0u64..(1 << 40),
        epoch in 0i32..1000,
    ) {
        check_against_kafka_protocol(&records, producer, codec, base_offset, epoch)?;
    }
}

/// One large record set per codec (multi-byte varints, a snappy input past one xerial
/// block of 32 KiB), outside the random cases.
#[test]
fn a_large_batch_decodes_in_every_codec() {
    let records: Vec<Record> = (0..300u32)
        .map(|i| Record {
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![(i % 251) as u8; 150 + i as usize])),
            headers: vec![Header { key: "n".into(), value: Some(Bytes::from(i.to_string())) }],
            timestamp: Some(1_767_225_600_000 + i64::from(i)),
        })
        .collect();
    for codec in CODECS {
        let producer = ProducerInfo { producer_id: 7, producer_epoch: 1, base_sequence: 100 };
        check_against_kafka_protocol(&records, producer, codec, 1_000, 3).unwrap();
    }
}
