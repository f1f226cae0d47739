//! Hostile frames: random and mutated frames never panic, and a decode never allocates
//! more than a linear bound in the frame size (a counting allocator watches this
//! thread). One test function only, so no other test's allocations are counted.
#![allow(unsafe_code)] // The counting allocator; it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use es_kafka::kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use es_kafka::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use es_kafka::kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use es_kafka::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use es_kafka::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use es_kafka::kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, FetchRequest, JoinGroupRequest, MetadataRequest, ProduceRequest,
    RequestHeader, TopicName,
};
use es_kafka::kafka_protocol::protocol::{Encodable, StrBytes};
use es_kafka::{API_TABLE, decode_request};
use proptest::prelude::*;

/// Allocation bound per decode: `FACTOR` bytes per frame byte plus `SLACK`. The factor
/// covers the crate's in-memory types against their smallest encodings (a one-byte
/// compact string becomes a 32-byte `Bytes`); the slack covers fixed costs and the few
/// unknown tagged fields allowed (a BTreeMap node each). What it excludes is any
/// count-driven allocation out of proportion to the frame.
const FACTOR: usize = 64;
const SLACK: usize = 64 * 1024;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    if COUNTING.with(Cell::get) {
        let live = LIVE.with(|l| {
            l.set(l.get() + delta);
            l.get()
        });
        PEAK.with(|p| p.set(p.get().max(live)));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Decodes `frame` and returns the peak bytes allocated meanwhile.
fn peak_during_decode(frame: Bytes) -> usize {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    COUNTING.with(|c| c.set(true));
    let outcome = decode_request(frame);
    COUNTING.with(|c| c.set(false));
    drop(outcome);
    PEAK.with(Cell::get).max(0) as usize
}

fn check(frame: Vec<u8>) -> Result<(), TestCaseError> {
    let len = frame.len();
    let peak = peak_during_decode(Bytes::from(frame));
    prop_assert!(peak <= FACTOR * len + SLACK, "{peak} bytes allocated for a {len}-byte frame");
    Ok(())
}

fn encode<R: Encodable>(key: ApiKey, version: i16, body: &R) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("hostile")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

/// Valid frames with nested arrays, strings and byte fields, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let produce = ProduceRequest::default().with_topic_data(vec![
        TopicProduceData::default().with_name(name("a")).with_partition_data(vec![
            PartitionProduceData::default().with_records(Some(Bytes::from_static(&[1; 61]))),
        ]),
    ]);
    let fetch = FetchRequest::default().with_topics(vec![
        FetchTopic::default()
            .with_topic(name("a"))
            .with_partitions(vec![FetchPartition::default(), FetchPartition::default()]),
    ]);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name("a"))),
        MetadataRequestTopic::default().with_name(Some(name("bb"))),
    ]));
    let join = JoinGroupRequest::default()
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(b"meta")),
        ]);
    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default().with_name(name("t")).with_configs(vec![
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("1"))),
        ]),
    ]);
    let mut out = Vec::new();
    for v in [3, 8, 9, 11] {
        out.push(encode(ApiKey::Produce, v, &produce));
    }
    for v in [4, 11, 12] {
        out.push(encode(ApiKey::Fetch, v, &fetch));
    }
    for v in [1, 9, 12] {
        out.push(encode(ApiKey::Metadata, v, &metadata));
    }
    for v in [0, 5, 6, 9] {
        out.push(encode(ApiKey::JoinGroup, v, &join));
    }
    for v in [2, 5, 7] {
        out.push(encode(ApiKey::CreateTopics, v, &create));
    }
    out
}

/// A header for some API in the table at a version near its range, then random bytes.
fn random_frame() -> impl Strategy<Value = Vec<u8>> {
    (0..API_TABLE.len(), -1i16..=2, any::<bool>(), proptest::collection::vec(any::<u8>(), 0..600)).prop_map(
        |(i, off, at_max, body)| {
            let row = &API_TABLE[i];
            let v = if at_max { row.max + off - 1 } else { row.min + off };
            let mut f = Vec::new();
            f.extend_from_slice(&(row.key as i16).to_be_bytes());
            f.extend_from_slice(&v.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 1, 0xff, 0xff]);
            if row.key.request_header_version(v) >= 2 {
                f.push(0);
            }
            f.extend_from_slice(&body);
            f
        },
    )
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Big(usize),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Big),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(mut f: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if f.is_empty() {
            break;
        }
        let n = f.len();
        match *m {
            Mutation::Set(i, b) => f[i % n] = b,
            // Plant a huge count or length: 0x7fffffff, or a 5-byte varint of 2^32-1.
            Mutation::Big(i) => {
                let at = i % n;
                let big: &[u8] =
                    if i % 2 == 0 { &[0x7f, 0xff, 0xff, 0xff] } else { &[0xff, 0xff, 0xff, 0xff, 0x0f] };
                for (k, b) in big.iter().enumerate() {
                    if at + k < n {
                        f[at + k] = *b;
                    }
                }
            }
            Mutation::Insert(i, b) => f.insert(i % (n + 1), b),
            Mutation::Remove(i) => {
                f.remove(i % n);
            }
            Mutation::Truncate(i) => f.truncate(i % n),
        }
    }
    f
}

#[test]
fn hostile_frames_never_panic_and_allocate_at_most_linearly() {
    // Every seed is valid and decodes.
    let seeds = seeds();
    for s in &seeds {
        decode_request(Bytes::from(s.clone())).unwrap();
    }
    // Frames claiming 2^31 elements fail with almost nothing allocated.
    for f in [
        "0001000400000001ffffffffffff000001f40000000100100000007fffffff",
        "00000009000000010000ffff0000ffff00007530ffffffff0f",
    ] {
        let bytes: Vec<u8> =
            (0..f.len()).step_by(2).map(|i| u8::from_str_radix(&f[i..i + 2], 16).unwrap()).collect();
        let peak = peak_during_decode(Bytes::from(bytes));
        assert!(peak < 4096, "{peak} bytes allocated refusing a 2^31 count");
    }
    // DescribeConfigs v4 with 1,000 tiny resources, each carrying one unknown tagged
    // field: 82 bytes allocated per wire byte (a BTreeMap node apiece) if it were
    // decoded; the pre-scan refuses it (at most 64 unknown tagged fields per request).
    let mut dense = vec![0x00, 0x20, 0x00, 0x04, 0, 0, 0, 1, 0xff, 0xff, 0x00, 0xe9, 0x07];
    for _ in 0..1000 {
        dense.extend_from_slice(&[0x00, 0x01, 0x01, 0x01, 0x05, 0x00]);
    }
    dense.extend_from_slice(&[0x00, 0x00, 0x00]);
    assert!(matches!(
        decode_request(Bytes::from(dense.clone())),
        Err(es_kafka::KafkaWireError::TooManyTaggedFields { .. })
    ));
    let peak = peak_during_decode(Bytes::from(dense));
    assert!(peak < 4096, "{peak} bytes allocated refusing 1,000 tagged fields");
    // The densest accepted shape: DescribeConfigs v4 asking 5,000 one-byte config keys
    // (an empty compact string becomes a 32-byte `Bytes`).
    let mut keys = vec![0x00, 0x20, 0x00, 0x04, 0, 0, 0, 1, 0xff, 0xff, 0x00, 0x02, 0x02, 0x01];
    keys.extend_from_slice(&[0x89, 0x27]); // compact count 5,001 = 5,000 keys
    keys.extend_from_slice(&[0x01; 5000]);
    keys.extend_from_slice(&[0x00, 0x00, 0x00, 0x00]);
    decode_request(Bytes::from(keys.clone())).unwrap();
    let peak = peak_during_decode(Bytes::from(keys.clone()));
    assert!(peak <= FACTOR * keys.len(), "{peak} bytes for {} (x{})", keys.len(), peak / keys.len());
    let config = ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config.clone(), |(frame in random_frame())| check(frame)?);
    let n = seeds.len();
    proptest!(config, |(i in 0..n, ms in proptest::collection::vec(mutation(), 1..6))| {
        check(apply(seeds[i].clone(), &ms))?;
    });
}
