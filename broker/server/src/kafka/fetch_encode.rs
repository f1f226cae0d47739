//! The Fetch response (v4-16), encoded by hand so that stored batches reach the
//! socket as they were read: the frame is a list of chunks, and each partition's
//! records of at least [`SPLICE_MIN`] bytes are a chunk of their own (the `Bytes`
//! of the log read, never copied into a response buffer; the connection writes the
//! chunks with vectored writes). The bytes are exactly kafka-protocol's encoding
//! (the tests compare both, every version); a response holding anything this
//! encoder does not write (tagged fields with values, node endpoints, unknown
//! tagged fields) is left to kafka-protocol.

use bytes::{BufMut, Bytes, BytesMut};
use es_kafka::Header;
use es_kafka::kafka_protocol::messages::FetchResponse;
use es_kafka::kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use es_kafka::kafka_protocol::protocol::HeaderVersion;

/// Records of at least this many bytes are a chunk of their own; smaller ones are
/// copied into the response buffer (a chunk costs an iovec and a reference count).
pub const SPLICE_MIN: usize = 16 * 1024;

/// The versions this encoder writes (the ones the listener serves).
const VERSIONS: std::ops::RangeInclusive<i16> = 4..=16;

/// The response frame for `header`'s Fetch at `version`, size prefix included, as
/// chunks to write in order; `None` when the response needs kafka-protocol's
/// encoder (see the module documentation) or does not fit a frame.
pub fn encode(header: &Header, version: i16, resp: &FetchResponse) -> Option<Vec<Bytes>> {
    if !VERSIONS.contains(&version) || !plain(resp, version) {
        return None;
    }
    let flexible = version >= 12;
    let mut w = Chunks::default();
    w.head.put_i32(header.correlation_id);
    if FetchResponse::header_version(version) >= 1 {
        w.uvarint(0);
    }
    w.head.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        w.head.put_i16(resp.error_code);
        w.head.put_i32(resp.session_id);
    }
    w.array_len(Some(resp.responses.len()), flexible)?;
    for t in &resp.responses {
        topic(&mut w, t, version)?;
    }
    if flexible {
        w.uvarint(0);
    }
    w.finish()
}

fn topic(w: &mut Chunks, t: &FetchableTopicResponse, version: i16) -> Option<()> {
    let flexible = version >= 12;
    if version <= 12 {
        let name = t.topic.as_bytes();
        if flexible {
            w.uvarint(u32::try_from(name.len()).ok()?.checked_add(1)?);
        } else {
            w.head.put_i16(i16::try_from(name.len()).ok()?);
        }
        w.head.put_slice(name);
    }
    if version >= 13 {
        w.head.put_slice(t.topic_id.as_bytes());
    }
    w.array_len(Some(t.partitions.len()), flexible)?;
    for p in &t.partitions {
        partition(w, p, version)?;
    }
    if flexible {
        w.uvarint(0);
    }
    Some(())
}

fn partition(w: &mut Chunks, p: &PartitionData, version: i16) -> Option<()> {
    let flexible = version >= 12;
    w.head.put_i32(p.partition_index);
    w.head.put_i16(p.error_code);
    w.head.put_i64(p.high_watermark);
    w.head.put_i64(p.last_stable_offset);
    if version >= 5 {
        w.head.put_i64(p.log_start_offset);
    }
    let aborted = p.aborted_transactions.as_ref();
    w.array_len(aborted.map(Vec::len), flexible)?;
    for a in aborted.into_iter().flatten() {
        w.head.put_i64(a.producer_id.0);
        w.head.put_i64(a.first_offset);
        if flexible {
            w.uvarint(0);
        }
    }
    if version >= 11 {
        w.head.put_i32(p.preferred_read_replica.0);
    }
    match &p.records {
        None if flexible => w.uvarint(0),
        None => w.head.put_i32(-1),
        Some(r) => {
            let len = u32::try_from(r.len()).ok()?;
            if flexible {
                w.uvarint(len.checked_add(1)?);
            } else {
                w.head.put_i32(i32::try_from(len).ok()?);
            }
            w.splice(r);
        }
    }
    if flexible {
        w.uvarint(0);
    }
    Some(())
}

/// Whether every field of `resp` is one this encoder writes at `version`.
fn plain(resp: &FetchResponse, version: i16) -> bool {
    let top = resp.unknown_tagged_fields.is_empty()
        && resp.node_endpoints.is_empty()
        && (version >= 7 || resp.session_id == 0);
    top && resp.responses.iter().all(|t| {
        t.unknown_tagged_fields.is_empty()
            && t.partitions.iter().all(|p| {
                p.unknown_tagged_fields.is_empty()
                    && p.diverging_epoch == Default::default()
                    && p.current_leader == Default::default()
                    && p.snapshot_id == Default::default()
                    && (version >= 11 || p.preferred_read_replica.0 == -1)
                    && p.aborted_transactions.iter().flatten().all(|a| a.unknown_tagged_fields.is_empty())
            })
    })
}

/// The frame being built: finished chunks and the buffer of the current one.
#[derive(Default)]
struct Chunks {
    done: Vec<Bytes>,
    head: BytesMut,
}

impl Chunks {
    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.head.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.head.put_u8(v as u8);
    }

    /// An array's count: `None` is a null array.
    fn array_len(&mut self, len: Option<usize>, flexible: bool) -> Option<()> {
        match (len, flexible) {
            (None, true) => self.uvarint(0),
            (None, false) => self.head.put_i32(-1),
            (Some(n), true) => self.uvarint(u32::try_from(n).ok()?.checked_add(1)?),
            (Some(n), false) => self.head.put_i32(i32::try_from(n).ok()?),
        }
        Some(())
    }

    /// Appends `bytes`: copied when small, else a chunk of its own (no copy).
    fn splice(&mut self, bytes: &Bytes) {
        if bytes.len() < SPLICE_MIN {
            self.head.put_slice(bytes);
            return;
        }
        if !self.head.is_empty() {
            self.done.push(self.head.split().freeze());
        }
        self.done.push(bytes.clone());
    }

    /// The chunks behind a size prefix (a chunk of its own; the writer coalesces it).
    fn finish(mut self) -> Option<Vec<Bytes>> {
        if !self.head.is_empty() {
            self.done.push(self.head.freeze());
        }
        let size: usize = self.done.iter().map(Bytes::len).sum();
        let size = i32::try_from(size).ok()?;
        let mut out = Vec::with_capacity(self.done.len() + 1);
        out.push(Bytes::copy_from_slice(&size.to_be_bytes()));
        out.extend(self.done);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_kafka::kafka_protocol::messages::ResponseHeader;
    use es_kafka::kafka_protocol::messages::fetch_response::{AbortedTransaction, LeaderIdAndEpoch};
    use es_kafka::kafka_protocol::messages::{ApiKey, BrokerId, ProducerId, TopicName};
    use es_kafka::kafka_protocol::protocol::{Decodable, StrBytes};

    fn header() -> Header {
        Header { api_key: ApiKey::Fetch, api_version: 12, correlation_id: 0x0102_0304, client_id: None }
    }

    /// Records of `n` bytes (no batch structure is needed to encode them).
    fn records(n: usize) -> Bytes {
        Bytes::from((0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
    }

    fn part(index: i32, recs: Option<Bytes>) -> PartitionData {
        PartitionData::default()
            .with_partition_index(index)
            .with_high_watermark(1000 + i64::from(index))
            .with_last_stable_offset(999)
            .with_log_start_offset(7)
            .with_preferred_read_replica(BrokerId(-1))
            .with_aborted_transactions(Some(Vec::new()))
            .with_records(recs)
    }

    /// Two topics: big records (spliced), small ones (copied), empty and null
    /// records, an error partition, aborted transactions and a null list of them.
    fn sample() -> FetchResponse {
        let aborted =
            vec![AbortedTransaction::default().with_producer_id(ProducerId(42)).with_first_offset(3)];
        let t1 = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("orders")))
            .with_topic_id(uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788))
            .with_partitions(vec![
                part(0, Some(records(SPLICE_MIN * 3 + 5))),
                part(1, Some(records(100))).with_aborted_transactions(Some(aborted)),
                part(2, Some(Bytes::new())).with_error_code(1).with_aborted_transactions(None),
            ]);
        let t2 = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("payments")))
            .with_partitions(vec![part(5, None), part(6, Some(records(SPLICE_MIN)))]);
        FetchResponse::default().with_throttle_time_ms(17).with_responses(vec![t1, t2])
    }

    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    #[test]
    fn every_version_encodes_byte_for_byte_as_kafka_protocol_and_decodes_back() {
        let resp = sample();
        for version in VERSIONS {
            let mut h = header();
            h.api_version = version;
            let chunks = encode(&h, version, &resp).expect("a plain response");
            let ours = joined(&chunks);
            let theirs = es_kafka::encode_response(&h, version, &resp).unwrap();
            assert_eq!(ours, theirs.as_ref(), "version {version}");
            // And it decodes to the same value (fields the version has).
            let mut body = Bytes::from(ours).split_off(4);
            let rh = ResponseHeader::decode(&mut body, FetchResponse::header_version(version)).unwrap();
            assert_eq!(rh.correlation_id, h.correlation_id);
            let back = FetchResponse::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "version {version}: bytes left over");
            let recs: Vec<_> =
                back.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.records.clone())).collect();
            let want: Vec<_> =
                resp.responses.iter().flat_map(|t| t.partitions.iter().map(|p| p.records.clone())).collect();
            assert_eq!(recs, want, "version {version}");
        }
    }

    #[test]
    fn large_records_are_their_own_chunk_and_small_ones_are_copied() {
        let resp = sample();
        let chunks = encode(&header(), 12, &resp).unwrap();
        let big = resp.responses[0].partitions[0].records.clone().unwrap();
        let edge = resp.responses[1].partitions[1].records.clone().unwrap();
        // The same memory, not a copy of it.
        assert!(chunks.iter().any(|c| c.as_ptr() == big.as_ptr() && c.len() == big.len()));
        assert!(chunks.iter().any(|c| c.as_ptr() == edge.as_ptr() && c.len() == edge.len()));
        assert_eq!(chunks[0].len(), 4, "the size prefix");
        let size = i32::from_be_bytes(chunks[0][..].try_into().unwrap()) as usize;
        assert_eq!(size, chunks[1..].iter().map(Bytes::len).sum::<usize>());
    }

    #[test]
    fn fields_it_does_not_write_are_left_to_kafka_protocol() {
        let mut leader = sample();
        leader.responses[0].partitions[0].current_leader =
            LeaderIdAndEpoch::default().with_leader_id(BrokerId(1)).with_leader_epoch(2);
        assert!(encode(&header(), 12, &leader).is_none());
        let mut tagged = sample();
        tagged.unknown_tagged_fields.insert(9, Bytes::from_static(b"x"));
        assert!(encode(&header(), 12, &tagged).is_none());
        let mut replica = sample();
        replica.responses[0].partitions[0].preferred_read_replica = BrokerId(3);
        assert!(encode(&header(), 10, &replica).is_none());
        assert!(encode(&header(), 11, &replica).is_some());
        assert!(encode(&header(), 17, &sample()).is_none());
        assert!(encode(&header(), 3, &sample()).is_none());
    }
}
