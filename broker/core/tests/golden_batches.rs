//! Golden bytes: v2 batches that real Kafka clients (the Java producer, librdkafka,
//! franz-go) sent to Apache Kafka, taken from Kafka's segment files (see
//! tests/golden-capture/README.md). es must parse them (CRC-32C), decode the records the
//! manifest lists (decompressing under a byte budget), re-stamp them without touching
//! a byte of what the client wrote, and, where the client's encoding is deterministic,
//! produce the very same bytes from the same records.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use es_core::LeaderEpoch;
use es_core::batch::{self, BatchHeader, BatchView};
use es_core::record::{Header, ProducerInfo, Record};
use serde::Deserialize;

/// Larger than any golden batch's plain records (about 500 bytes), far below the batch
/// limits: the budget must be enforced, not just configured.
const PLAIN_BUDGET: usize = 64 * 1024;
const MAX_BATCH: usize = 1 << 20;

#[derive(Debug, Deserialize)]
struct Manifest {
    vectors: Vec<Vector>,
}

#[derive(Debug, Deserialize)]
struct Vector {
    name: String,
    file: String,
    client: String,
    codec: String,
    attributes: u16,
    stored_base_offset: u64,
    stored_leader_epoch: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    last_offset_delta: u32,
    producer: Producer,
    record_count: u32,
    records: Vec<Expected>,
}

#[derive(Debug, Deserialize)]
struct Producer {
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

/// One record as the manifest states it: bytes in base64, null as JSON null.
#[derive(Debug, Deserialize)]
struct Expected {
    offset_delta: u64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, Option<String>)>,
}

/// A record in comparable, owned form.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plain {
    offset: u64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn golden_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/golden")
}

fn manifest() -> Manifest {
    let text = std::fs::read_to_string(golden_dir().join("manifest.json")).expect("read manifest.json");
    serde_json::from_str(&text).expect("parse manifest.json")
}

fn bytes_of(v: &Vector) -> Vec<u8> {
    std::fs::read(golden_dir().join(&v.file)).unwrap_or_else(|e| panic!("{}: {e}", v.file))
}

fn unbase64(s: &Option<String>) -> Option<Vec<u8>> {
    s.as_ref().map(|s| STANDARD.decode(s).expect("manifest base64"))
}

fn expected(v: &Vector) -> Vec<Plain> {
    v.records
        .iter()
        .map(|r| Plain {
            offset: v.stored_base_offset + r.offset_delta,
            timestamp: r.timestamp,
            key: unbase64(&r.key),
            value: unbase64(&r.value),
            headers: r.headers.iter().map(|(k, hv)| (k.clone(), unbase64(hv))).collect(),
        })
        .collect()
}

fn producer_of(v: &Vector) -> ProducerInfo {
    ProducerInfo {
        producer_id: v.producer.producer_id,
        producer_epoch: v.producer.producer_epoch,
        base_sequence: v.producer.base_sequence,
    }
}

/// The records of a parsed batch, decompressed under [`PLAIN_BUDGET`].
fn decoded(view: &BatchView<'_>) -> Vec<Plain> {
    let plain = view.plain_records(PLAIN_BUDGET).expect("decompress within the budget");
    plain
        .iter()
        .map(|r| {
            let r = r.expect("record decodes");
            Plain {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r.headers.iter().map(|(k, hv)| ((*k).to_owned(), hv.map(<[u8]>::to_vec))).collect(),
            }
        })
        .collect()
}

/// The manifest's records as es records, for es's own encoder.
fn to_records(v: &Vector) -> Vec<Record> {
    expected(v)
        .into_iter()
        .map(|p| Record {
            key: p.key.map(Bytes::from),
            value: p.value.map(Bytes::from),
            headers: p
                .headers
                .into_iter()
                .map(|(key, value)| Header { key, value: value.map(Bytes::from) })
                .collect(),
            timestamp: Some(p.timestamp),
        })
        .collect()
}

#[test]
fn the_vectors_cover_every_client_and_codec() {
    let m = manifest();
    let has = |client: &str, codec: &str| m.vectors.iter().any(|v| v.client == client && v.codec == codec);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        assert!(has("kafka-clients", codec), "no Java vector for {codec}");
        assert!(has("librdkafka", codec), "no librdkafka vector for {codec}");
    }
    assert!(has("franz-go", "snappy") && has("franz-go", "zstd"), "franz-go vectors missing");
    assert!(m.vectors.iter().any(|v| v.producer.producer_id >= 0), "no idempotent vector");
    let total: u64 = m.vectors.iter().map(|v| bytes_of(v).len() as u64).sum();
    assert!(total < 200 * 1024, "golden vectors grew to {total} bytes");
}

#[test]
fn every_vector_parses_with_the_manifest_header() {
    for v in manifest().vectors {
        let bytes = bytes_of(&v);
        let view = BatchView::parse(&bytes, MAX_BATCH).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let h = &view.header;
        assert_eq!(h.magic, 2, "{}", v.name);
        assert_eq!(h.base_offset, v.stored_base_offset, "{}", v.name);
        assert_eq!(h.leader_epoch, LeaderEpoch(v.stored_leader_epoch), "{}", v.name);
        assert_eq!(h.attributes, v.attributes, "{}", v.name);
        assert_eq!(h.last_offset_delta, v.last_offset_delta, "{}", v.name);
        assert_eq!(h.record_count, v.record_count, "{}", v.name);
        assert_eq!(h.base_timestamp, v.base_timestamp, "{}", v.name);
        assert_eq!(h.max_timestamp, v.max_timestamp, "{}", v.name);
        assert_eq!(h.producer, producer_of(&v), "{}", v.name);
        assert_eq!(h.total_len(), bytes.len(), "{}", v.name);
    }
}

#[test]
fn every_vector_decodes_to_the_manifest_records() {
    for v in manifest().vectors {
        let bytes = bytes_of(&v);
        let view = BatchView::parse(&bytes, MAX_BATCH).unwrap();
        assert_eq!(decoded(&view), expected(&v), "{}", v.name);
    }
}

#[test]
fn compressed_vectors_are_refused_past_the_budget() {
    for v in manifest().vectors.iter().filter(|v| v.codec != "none") {
        let bytes = bytes_of(v);
        let view = BatchView::parse(&bytes, MAX_BATCH).unwrap();
        let plain_len = view.plain_records(PLAIN_BUDGET).unwrap().as_bytes().len();
        assert!(view.plain_records(plain_len).is_ok(), "{}: exact budget", v.name);
        assert!(view.plain_records(plain_len - 1).is_err(), "{}: one byte short must be refused", v.name);
    }
}

#[test]
fn a_flipped_bit_after_the_epoch_fails_the_crc() {
    for v in manifest().vectors {
        let mut bytes = bytes_of(&v);
        // The CRC covers attributes to the end; flip one bit in the last record.
        let at = bytes.len() - 1;
        bytes[at] ^= 0x01;
        assert!(BatchView::parse(&bytes, MAX_BATCH).is_err(), "{}", v.name);
    }
}

#[test]
fn stamping_and_stamping_back_is_byte_identical() {
    for v in manifest().vectors {
        let original = bytes_of(&v);
        let mut bytes = original.clone();
        let before = BatchView::parse(&original, MAX_BATCH).unwrap();
        batch::stamp(&mut bytes, 987_654_321, LeaderEpoch(42));
        let view = BatchView::parse(&bytes, MAX_BATCH).expect("the CRC does not cover the stamped fields");
        // Only the two stamped fields change; what the client wrote is untouched.
        let want = BatchHeader { base_offset: 987_654_321, leader_epoch: LeaderEpoch(42), ..before.header };
        assert_eq!(view.header, want, "{}", v.name);
        assert_eq!(view.records_section(), before.records_section(), "{}", v.name);
        batch::stamp(&mut bytes, v.stored_base_offset, LeaderEpoch(v.stored_leader_epoch));
        assert_eq!(bytes, original, "{}", v.name);
    }
}

/// es's encoder, given a client's records, timestamps and producer fields, writes the
/// client's bytes. All three clients choose the same for these records: record
/// attributes 0, timestamp deltas from the first record, offset deltas 0..n, and
/// varint lengths; base offset and leader epoch are the broker's, so both sides are
/// stamped with Kafka's values before comparing.
#[test]
fn es_encodes_the_uncompressed_vectors_byte_for_byte() {
    let m = manifest();
    let plain: Vec<&Vector> = m.vectors.iter().filter(|v| v.codec == "none").collect();
    assert!(plain.len() >= 3, "expected an uncompressed vector per client");
    for v in plain {
        let mut ours = batch::encode(&to_records(v), 0, producer_of(v)).unwrap();
        batch::stamp(&mut ours, v.stored_base_offset, LeaderEpoch(v.stored_leader_epoch));
        assert_eq!(ours, bytes_of(v), "{} ({})", v.name, v.client);
    }
}

/// Compressed vectors are skipped by the test above: each client's compressor (and its
/// level, block size and framing) decides the compressed bytes. What es can match is
/// the records section before compression.
#[test]
fn es_encodes_the_plain_records_of_compressed_vectors() {
    for v in manifest().vectors.iter().filter(|v| v.codec != "none") {
        let bytes = bytes_of(v);
        let view = BatchView::parse(&bytes, MAX_BATCH).unwrap();
        let theirs = view.plain_records(PLAIN_BUDGET).unwrap();
        let ours = batch::encode(&to_records(v), 0, producer_of(v)).unwrap();
        let ours = BatchView::parse(&ours, MAX_BATCH).unwrap();
        assert_eq!(ours.records_section(), theirs.as_bytes(), "{} ({})", v.name, v.client);
    }
}

/// The manifest itself, checked by an independent decoder (kafka-protocol, with its own
/// CRC-32C and codecs): what es is held to is what the clients sent. Headers of a
/// record with a duplicate key are skipped there: that decoder collapses them.
#[test]
fn kafka_protocol_agrees_with_the_manifest() {
    use kafka_protocol::records::RecordBatchDecoder;
    for v in manifest().vectors {
        let mut buf = Bytes::from(bytes_of(&v));
        let set = RecordBatchDecoder::decode(&mut buf).unwrap_or_else(|e| panic!("{}: {e:#}", v.name));
        assert_eq!(set.compression as u16, v.attributes & 0b111, "{}", v.name);
        assert_eq!(set.records.len(), v.records.len(), "{}", v.name);
        for (theirs, want) in set.records.iter().zip(expected(&v)) {
            assert_eq!(theirs.offset as u64, want.offset, "{}", v.name);
            assert_eq!(theirs.timestamp, want.timestamp, "{}", v.name);
            assert_eq!(theirs.key.as_deref(), want.key.as_deref(), "{}", v.name);
            assert_eq!(theirs.value.as_deref(), want.value.as_deref(), "{}", v.name);
            if theirs.headers.len() == want.headers.len() {
                let headers: Vec<(String, Option<Vec<u8>>)> = theirs
                    .headers
                    .iter()
                    .map(|(k, hv)| (k.to_string(), hv.as_ref().map(|b| b.to_vec())))
                    .collect();
                assert_eq!(headers, want.headers, "{}", v.name);
            }
        }
    }
}
