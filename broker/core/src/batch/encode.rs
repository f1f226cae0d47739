//! Writing v2 batches: encoding records, compressing a records section, and the
//! fields the leader stamps (base offset, epoch, LogAppendTime).

use super::*;

/// Encodes records into one uncompressed CreateTime batch with base offset 0 and
/// leader epoch -1 (as a Kafka producer sends it), CRC filled in. The leader later
/// stamps base offset and epoch with [`stamp`]. Records without a timestamp get
/// `now_ms`.
pub fn encode(records: &[Record], now_ms: i64, producer: ProducerInfo) -> Result<Vec<u8>, CodecError> {
    encode_with_deltas(records.iter().enumerate().map(|(i, r)| (i as u32, r)), now_ms, producer)
}

/// Like [`encode`], with explicit offset deltas (compaction keeps the original
/// offsets of surviving records). Deltas must increase and fit an i32.
pub fn encode_with_deltas<'r>(
    records: impl IntoIterator<Item = (u32, &'r Record)> + Clone,
    now_ms: i64,
    producer: ProducerInfo,
) -> Result<Vec<u8>, CodecError> {
    encode_plain(records, now_ms, producer, 0)
}

/// Re-encodes `records` (with their offset deltas) as a batch like `like`: its base
/// offset, leader epoch, producer fields, transactional and control bits, timestamp
/// type (and LogAppendTime) and codec. What compaction writes for a batch that lost
/// records.
pub fn encode_like<'r>(
    like: &BatchHeader,
    records: impl IntoIterator<Item = (u32, &'r Record)> + Clone,
) -> Result<Vec<u8>, CodecError> {
    let flags = like.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT);
    let mut plain = encode_plain(records, like.base_timestamp, like.producer, flags)?;
    if let Some(at) = like.log_append_time() {
        set_log_append_time(&mut plain, at);
    }
    let mut out = compress(&plain, like.compression()?)?;
    stamp(&mut out, like.base_offset, like.leader_epoch);
    Ok(out)
}

/// What compaction writes for a batch that is a Raft entry and lost records: like
/// [`encode_like`], but the batch keeps its offset span (`lastOffsetDelta`, as
/// Kafka's cleaner keeps a batch's last offset), so the batches around it stay
/// contiguous, and a batch that lost every record stays, as an empty batch (no
/// records, uncompressed, its producer fields kept; timestamps -1, or the
/// LogAppendTime), which Kafka clients step over as they do Kafka's own. The output
/// depends only on `like` and `records`, and compacting its output again with the
/// same survivors gives the same bytes.
pub fn encode_compacted<'r>(
    like: &BatchHeader,
    records: impl IntoIterator<Item = (u32, &'r Record)> + Clone,
) -> Result<Vec<u8>, CodecError> {
    if records.clone().into_iter().next().is_none() {
        let at = like.log_append_time().unwrap_or(-1);
        let header = BatchHeader {
            base_offset: like.base_offset,
            batch_length: (HEADER_LEN - LENGTH_PREFIX) as u32,
            leader_epoch: like.leader_epoch,
            magic: MAGIC,
            crc: 0,
            attributes: like.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT | TIMESTAMP_TYPE_BIT),
            last_offset_delta: like.last_offset_delta,
            base_timestamp: at,
            max_timestamp: at,
            producer: like.producer,
            record_count: 0,
        };
        let mut buf = vec![0u8; HEADER_LEN];
        write_header(&mut buf, &header);
        write_crc(&mut buf);
        return Ok(buf);
    }
    let mut out = encode_like(like, records)?;
    out[LAST_DELTA_AT..BASE_TIMESTAMP_AT].copy_from_slice(&like.last_offset_delta.to_be_bytes());
    write_crc(&mut out);
    Ok(out)
}

pub(super) fn encode_plain<'r>(
    records: impl IntoIterator<Item = (u32, &'r Record)> + Clone,
    now_ms: i64,
    producer: ProducerInfo,
    attributes: u16,
) -> Result<Vec<u8>, CodecError> {
    let base_ts = records.clone().into_iter().next().map_or(now_ms, |(_, r)| r.timestamp.unwrap_or(now_ms));
    let (mut size, mut count, mut previous) = (HEADER_LEN, 0usize, None::<u32>);
    for (delta, r) in records.clone() {
        if delta > i32::MAX as u32 || previous.is_some_and(|p| p >= delta) {
            return Err(CodecError::BadRecord {
                position: count,
                reason: "offset deltas must increase within i32",
            });
        }
        previous = Some(delta);
        size += r.encoded_len_at(delta as i32, r.timestamp.unwrap_or(now_ms).wrapping_sub(base_ts));
        count += 1;
    }
    if count == 0 {
        return Err(CodecError::Empty);
    }
    if count > crate::limits::BATCH_RECORDS_MAX {
        return Err(CodecError::TooManyRecords { count, max: crate::limits::BATCH_RECORDS_MAX });
    }
    if size > i32::MAX as usize {
        return Err(CodecError::BadLength { length: size as u64, max: i32::MAX as usize });
    }
    let mut buf = Vec::with_capacity(size);
    buf.resize(HEADER_LEN, 0);
    let mut max_ts = i64::MIN;
    for (delta, r) in records {
        let ts = r.timestamp.unwrap_or(now_ms);
        max_ts = max_ts.max(ts);
        encode_record(&mut buf, delta as i32, ts.wrapping_sub(base_ts), r);
    }
    debug_assert_eq!(buf.len(), size);
    let header = BatchHeader {
        base_offset: 0,
        batch_length: (size - LENGTH_PREFIX) as u32,
        leader_epoch: LeaderEpoch::UNKNOWN,
        magic: MAGIC,
        crc: 0,
        attributes,
        last_offset_delta: previous.unwrap_or(0),
        base_timestamp: base_ts,
        max_timestamp: max_ts,
        producer,
        record_count: count as u32,
    };
    write_header(&mut buf, &header);
    write_crc(&mut buf);
    Ok(buf)
}

/// Writes every header field but the CRC.
fn write_header(buf: &mut [u8], h: &BatchHeader) {
    buf[..LENGTH_AT].copy_from_slice(&h.base_offset.to_be_bytes());
    buf[LENGTH_AT..EPOCH_AT].copy_from_slice(&h.batch_length.to_be_bytes());
    buf[EPOCH_AT..MAGIC_AT].copy_from_slice(&h.leader_epoch.0.to_be_bytes());
    buf[MAGIC_AT] = h.magic;
    buf[ATTRIBUTES_AT..LAST_DELTA_AT].copy_from_slice(&h.attributes.to_be_bytes());
    buf[LAST_DELTA_AT..BASE_TIMESTAMP_AT].copy_from_slice(&h.last_offset_delta.to_be_bytes());
    buf[BASE_TIMESTAMP_AT..MAX_TIMESTAMP_AT].copy_from_slice(&h.base_timestamp.to_be_bytes());
    buf[MAX_TIMESTAMP_AT..PRODUCER_ID_AT].copy_from_slice(&h.max_timestamp.to_be_bytes());
    buf[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&h.producer.producer_id.to_be_bytes());
    buf[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT].copy_from_slice(&h.producer.producer_epoch.to_be_bytes());
    buf[BASE_SEQUENCE_AT..RECORD_COUNT_AT].copy_from_slice(&h.producer.base_sequence.to_be_bytes());
    buf[RECORD_COUNT_AT..HEADER_LEN].copy_from_slice(&h.record_count.to_be_bytes());
}

pub(super) fn write_crc(buf: &mut [u8]) {
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    buf[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
}

fn encode_record(buf: &mut Vec<u8>, offset_delta: i32, timestamp_delta: i64, r: &Record) {
    varint::put32(buf, r.body_len(offset_delta, timestamp_delta) as i32);
    buf.push(0);
    varint::put64(buf, timestamp_delta);
    varint::put32(buf, offset_delta);
    put_nullable(buf, r.key.as_deref());
    put_nullable(buf, r.value.as_deref());
    varint::put32(buf, r.headers.len() as i32);
    for h in &r.headers {
        varint::put32(buf, h.key.len() as i32);
        buf.extend_from_slice(h.key.as_bytes());
        put_nullable(buf, h.value.as_deref());
    }
}

fn put_nullable(buf: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => varint::put32(buf, -1),
        Some(v) => {
            varint::put32(buf, v.len() as i32);
            buf.extend_from_slice(v);
        }
    }
}

/// Re-encodes a plain batch with its records section compressed by `compression`.
/// The header keeps counts, offsets and timestamps; only the codec bits, length and
/// CRC change. A batch that is already compressed is refused.
pub fn compress(plain: &[u8], compression: Compression) -> Result<Vec<u8>, CodecError> {
    let mut header = BatchHeader::parse(plain, usize::MAX)?;
    let total = header.total_len();
    if plain.len() < total {
        return Err(CodecError::Truncated { needed: total, available: plain.len() });
    }
    let current = header.compression()?;
    if current != Compression::None {
        return Err(CodecError::Compressed { compression: current });
    }
    if compression == Compression::None {
        return Ok(plain[..total].to_vec());
    }
    let packed = compression::compress(compression, &plain[HEADER_LEN..total])?;
    let mut out = Vec::with_capacity(HEADER_LEN + packed.len());
    out.extend_from_slice(&plain[..HEADER_LEN]);
    out.extend_from_slice(&packed);
    let length = out.len() - LENGTH_PREFIX;
    if length > i32::MAX as usize {
        return Err(CodecError::BadLength { length: out.len() as u64, max: i32::MAX as usize });
    }
    header.batch_length = length as u32;
    header.attributes = (header.attributes & !COMPRESSION_MASK) | u16::from(compression.bits());
    write_header(&mut out, &header);
    write_crc(&mut out);
    Ok(out)
}

/// Re-encodes one batch with its records section compressed by `to` (Kafka's topic
/// `compression.type` other than `producer`): the section is decompressed (never to
/// more than `max_plain` bytes: a bomb is an error, not an allocation) and
/// compressed again; every header field but the codec bits, length and CRC is kept
/// (producer id, epoch and sequence, timestamps, offsets). The records are checked
/// to parse exactly first, so a batch is never re-sealed with a valid CRC over
/// records that do not parse. `None`: the batch is already in `to`, keep it.
pub fn recompress(batch: &[u8], to: Compression, max_plain: usize) -> Result<Option<Vec<u8>>, CodecError> {
    let view = BatchView::parse(batch, batch.len())?;
    if view.compression()? == to {
        return Ok(None);
    }
    let records = view.plain_records(max_plain)?;
    records.validate()?;
    let section = records.as_bytes();
    let mut plain = Vec::with_capacity(HEADER_LEN + section.len());
    plain.extend_from_slice(&batch[..HEADER_LEN]);
    plain.extend_from_slice(section);
    let length = plain.len() - LENGTH_PREFIX;
    if length > i32::MAX as usize {
        return Err(CodecError::BadLength { length: plain.len() as u64, max: i32::MAX as usize });
    }
    let mut header = view.header;
    header.batch_length = length as u32;
    header.attributes &= !COMPRESSION_MASK;
    write_header(&mut plain, &header);
    write_crc(&mut plain);
    compress(&plain, to).map(Some)
}

/// Writes the leader-assigned base offset and leader epoch into an encoded batch.
/// Both fields are outside the CRC, so the checksum stays valid.
pub fn stamp(batch: &mut [u8], base_offset: u64, epoch: LeaderEpoch) {
    assert!(batch.len() >= HEADER_LEN, "stamp on a buffer shorter than a batch header");
    batch[..LENGTH_AT].copy_from_slice(&base_offset.to_be_bytes());
    batch[EPOCH_AT..MAGIC_AT].copy_from_slice(&epoch.0.to_be_bytes());
}

/// Rewrites an encoded batch's producer id, epoch and base sequence (a batch
/// encoded once and sent many times by one idempotent producer, as es-bench does),
/// then recomputes the CRC (the three are inside it). `batch` holds exactly one
/// batch.
pub fn set_producer(batch: &mut [u8], producer: ProducerInfo) {
    assert!(batch.len() >= HEADER_LEN, "set_producer on a buffer shorter than a batch header");
    batch[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&producer.producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT].copy_from_slice(&producer.producer_epoch.to_be_bytes());
    batch[BASE_SEQUENCE_AT..RECORD_COUNT_AT].copy_from_slice(&producer.base_sequence.to_be_bytes());
    write_crc(batch);
}

/// Marks a batch LogAppendTime at `now_ms`, as a Kafka leader does for a topic with
/// `message.timestamp.type=LogAppendTime`: sets the timestamp-type bit and
/// `maxTimestamp`, then recomputes the CRC (both fields are inside it). `batch` holds
/// exactly one batch.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    assert!(batch.len() >= HEADER_LEN, "set_log_append_time on a buffer shorter than a batch header");
    let attributes =
        u16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_AT..LAST_DELTA_AT].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..PRODUCER_ID_AT].copy_from_slice(&now_ms.to_be_bytes());
    write_crc(batch);
}
