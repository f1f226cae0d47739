//! The record-batch codec: the byte layout es stores on disk, replicates and serves.
//!
//! ```text
//! offset size field              notes
//!      0    8 base_offset        set by the leader; not covered by the CRC
//!      8    4 batch_length       bytes after this field; total = 12 + batch_length
//!     12    8 term               leader epoch; set by the leader; not covered by the CRC
//!     20    4 crc                CRC-32 (IEEE, crc32fast) of bytes [24, end)
//!     24    1 magic              1
//!     25    1 attributes         bits 0-2: compression (0 none); other bits 0
//!     26    4 last_offset_delta  offset of the last record minus base_offset
//!     30    4 record_count
//!     34    8 first_timestamp    ms since the epoch
//!     42    8 max_timestamp
//!     50    8 producer_id        -1 when not idempotent
//!     58    2 producer_epoch
//!     60    4 base_sequence
//!     64      records
//!
//! record: length u32 (bytes after it), offset_delta u32, timestamp i64,
//!         key_len i32 (-1 null) + key, value_len i32 (-1 null) + value,
//!         header_count u32, then per header: key_len u32 + key (UTF-8),
//!         value_len i32 (-1 null) + value
//! ```
//!
//! All integers are big-endian. As in Kafka's v2 batches, the fields the leader fills
//! in (base offset and term) sit before the CRC, so the leader stamps a batch that was
//! encoded and checksummed outside the partition lock without re-hashing it. A
//! corrupted base offset is caught by the log's offset-continuity check instead.
//! Compaction may remove records from a batch, so offsets inside a batch can have
//! gaps: `last_offset_delta`, not `record_count`, gives the batch's offset span.

use std::borrow::Cow;

use bytes::Bytes;

use crate::record::{Header, ProducerInfo, Record};

pub const HEADER_LEN: usize = 64;
pub const MAGIC: u8 = 1;
/// Bytes of a batch before `batch_length` counts (base_offset + batch_length).
pub const LENGTH_PREFIX: usize = 12;
/// Bytes the CRC does not cover.
pub const CRC_START: usize = 24;
pub(crate) const RECORD_FIXED_LEN: usize = 4 + 4 + 8 + 4 + 4 + 4;
pub(crate) const HEADER_FIXED_LEN: usize = 4 + 4;
const COMPRESSION_MASK: u8 = 0b111;

/// A malformed batch: what is wrong and at which byte of the batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {length} is outside 64..={max} bytes")]
    BadLength { length: u64, max: usize },
    #[error("unknown batch magic {magic}")]
    BadMagic { magic: u8 },
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("unsupported batch attributes {attributes:#04x}")]
    BadAttributes { attributes: u8 },
    #[error("malformed record at byte {position}: {reason}")]
    BadRecord { position: usize, reason: &'static str },
    #[error("batch has {count} records; the limit is {max}")]
    TooManyRecords { count: usize, max: usize },
    #[error("empty batch: a batch needs at least one record")]
    Empty,
    #[error("bad compressed records: {reason}")]
    BadCompression { reason: &'static str },
}

/// The fixed header of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    pub batch_length: u32,
    pub term: u64,
    pub crc: u32,
    pub magic: u8,
    pub attributes: u8,
    pub last_offset_delta: u32,
    pub record_count: u32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer: ProducerInfo,
}

impl BatchHeader {
    /// Parses the fixed header without checking the CRC. `max_len` bounds the total
    /// batch size so a corrupt length field cannot make a reader allocate gigabytes.
    pub fn parse(buf: &[u8], max_len: usize) -> Result<Self, CodecError> {
        if buf.len() < HEADER_LEN {
            return Err(CodecError::Truncated { needed: HEADER_LEN, available: buf.len() });
        }
        let batch_length = be_u32(buf, 8);
        let total = LENGTH_PREFIX as u64 + u64::from(batch_length);
        if total < HEADER_LEN as u64 || total > max_len as u64 {
            return Err(CodecError::BadLength { length: total, max: max_len });
        }
        let magic = buf[24];
        if magic != MAGIC {
            return Err(CodecError::BadMagic { magic });
        }
        Ok(Self {
            base_offset: be_u64(buf, 0),
            batch_length,
            term: be_u64(buf, 12),
            crc: be_u32(buf, 20),
            magic,
            attributes: buf[25],
            last_offset_delta: be_u32(buf, 26),
            record_count: be_u32(buf, 30),
            first_timestamp: be_u64(buf, 34) as i64,
            max_timestamp: be_u64(buf, 42) as i64,
            producer: ProducerInfo {
                producer_id: be_u64(buf, 50) as i64,
                producer_epoch: u16::from_be_bytes([buf[58], buf[59]]) as i16,
                base_sequence: be_u32(buf, 60) as i32,
            },
        })
    }

    /// Total bytes of the batch, header included.
    pub fn total_len(&self) -> usize {
        LENGTH_PREFIX + self.batch_length as usize
    }

    /// Offset of the last record (the batch's offset span survives compaction).
    pub fn last_offset(&self) -> u64 {
        // Saturating: a damaged header must not overflow; callers bound-check offsets.
        self.base_offset.saturating_add(u64::from(self.last_offset_delta))
    }

    /// The offset after this batch.
    pub fn next_offset(&self) -> u64 {
        self.last_offset().saturating_add(1)
    }
}

/// A whole, CRC-checked batch borrowed from a buffer.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Checks length, magic, attributes and CRC of the batch at the start of `buf`.
    pub fn parse(buf: &'a [u8], max_len: usize) -> Result<Self, CodecError> {
        let header = BatchHeader::parse(buf, max_len)?;
        let total = header.total_len();
        if buf.len() < total {
            return Err(CodecError::Truncated { needed: total, available: buf.len() });
        }
        let bytes = &buf[..total];
        let computed = crc32fast::hash(&bytes[CRC_START..]);
        if computed != header.crc {
            return Err(CodecError::BadCrc { stored: header.crc, computed });
        }
        if header.attributes & !COMPRESSION_MASK != 0 || header.attributes & COMPRESSION_MASK > 1 {
            return Err(CodecError::BadAttributes { attributes: header.attributes });
        }
        Ok(Self { header, bytes })
    }

    /// The batch's bytes, header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Iterates the records of an uncompressed batch; a malformed record ends the
    /// iteration with an error. A compressed batch yields `BadAttributes`: use
    /// [`BatchView::plain_records`].
    pub fn records(&self) -> RecordIter<'a> {
        RecordIter {
            buf: &self.bytes[HEADER_LEN..],
            position: 0,
            remaining: self.header.record_count,
            base_offset: self.header.base_offset,
            compressed: self.header.attributes & COMPRESSION_MASK != 0,
            attributes: self.header.attributes,
        }
    }

    /// How the records section is compressed.
    pub fn compression(&self) -> Result<Compression, CodecError> {
        Compression::from_attributes(self.header.attributes)
    }

    /// The records section, decompressed when needed, never larger than `max_plain`
    /// bytes (a decompression bomb is an error, not an allocation).
    pub fn plain_records(&self, max_plain: usize) -> Result<PlainRecords<'a>, CodecError> {
        let section = &self.bytes[HEADER_LEN..];
        let buf = match self.compression()? {
            Compression::None => Cow::Borrowed(section),
            Compression::Gzip => Cow::Owned(gunzip(section, max_plain)?),
        };
        Ok(PlainRecords { header: self.header, buf })
    }

    /// Checks that the records section parses exactly: `record_count` records, each
    /// within its length, offsets increasing and within `last_offset_delta`.
    /// Compressed batches are decompressed (up to the hard batch limit) to check.
    pub fn validate_records(&self) -> Result<(), CodecError> {
        self.plain_records(crate::limits::BATCH_BYTES_MAX_HARD)?.validate()
    }
}

/// Record-section compression, in attribute bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

impl Compression {
    fn from_attributes(attributes: u8) -> Result<Self, CodecError> {
        match attributes & COMPRESSION_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            _ => Err(CodecError::BadAttributes { attributes }),
        }
    }

    fn bits(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
        }
    }
}

/// The records of a batch in plain (decompressed) form.
#[derive(Debug, Clone)]
pub struct PlainRecords<'a> {
    header: BatchHeader,
    buf: Cow<'a, [u8]>,
}

impl<'a> PlainRecords<'a> {
    /// Records of `header` whose plain records section is `section`: for callers
    /// that keep the section in a buffer of their own.
    pub fn over(header: &BatchHeader, section: &'a [u8]) -> PlainRecords<'a> {
        PlainRecords { header: *header, buf: Cow::Borrowed(section) }
    }

    /// True when the records were not compressed (the section borrows the batch).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.buf, Cow::Borrowed(_))
    }

    /// The plain records section.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter {
            buf: &self.buf,
            position: 0,
            remaining: self.header.record_count,
            base_offset: self.header.base_offset,
            compressed: false,
            attributes: 0,
        }
    }

    /// Bytes of the plain records section.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// See [`BatchView::validate_records`].
    pub fn validate(&self) -> Result<(), CodecError> {
        self.validate_sizes().map(drop)
    }

    /// Validates like [`PlainRecords::validate`] and, in the same pass, returns the
    /// largest record's payload (key + value + header keys and values), so the log
    /// checks its record limit without walking the records twice.
    pub fn validate_sizes(&self) -> Result<usize, CodecError> {
        let mut last_delta: Option<u32> = None;
        let mut largest = 0usize;
        let mut iter = self.iter();
        for record in iter.by_ref() {
            let record = record?;
            largest = largest.max(record.payload_len());
            let delta = (record.offset - self.header.base_offset) as u32;
            if last_delta.is_some_and(|d| d >= delta) || delta > self.header.last_offset_delta {
                return Err(CodecError::BadRecord {
                    position: iter.position,
                    reason: "offset delta out of order",
                });
            }
            last_delta = Some(delta);
        }
        if iter.position != self.buf.len() {
            return Err(CodecError::BadRecord {
                position: iter.position,
                reason: "trailing bytes after the last record",
            });
        }
        if last_delta != Some(self.header.last_offset_delta) {
            return Err(CodecError::BadRecord {
                position: iter.position,
                reason: "last_offset_delta does not match the records",
            });
        }
        Ok(largest)
    }
}

fn gunzip(section: &[u8], max_plain: usize) -> Result<Vec<u8>, CodecError> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut decoder = flate2::read::GzDecoder::new(section).take(max_plain as u64 + 1);
    decoder.read_to_end(&mut out).map_err(|_| CodecError::BadCompression { reason: "not valid gzip" })?;
    if out.len() > max_plain {
        return Err(CodecError::BadCompression {
            reason: "decompressed records exceed the batch size limit",
        });
    }
    Ok(out)
}

/// Re-encodes a plain batch with its records section compressed. The header keeps
/// counts, offsets and timestamps; only attributes, length and CRC change.
pub fn compress(plain: &[u8], compression: Compression) -> Result<Vec<u8>, CodecError> {
    use std::io::Write;
    if compression == Compression::None {
        return Ok(plain.to_vec());
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let section = &plain[HEADER_LEN..];
    encoder.write_all(section).map_err(|_| CodecError::BadCompression { reason: "gzip failed" })?;
    let packed = encoder.finish().map_err(|_| CodecError::BadCompression { reason: "gzip failed" })?;
    let mut out = Vec::with_capacity(HEADER_LEN + packed.len());
    out.extend_from_slice(&plain[..HEADER_LEN]);
    out.extend_from_slice(&packed);
    let batch_length = (out.len() - LENGTH_PREFIX) as u32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[25] = (out[25] & !COMPRESSION_MASK) | compression.bits();
    let crc = crc32fast::hash(&out[CRC_START..]);
    out[20..24].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// One record inside a batch, borrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

impl RecordView<'_> {
    /// Bytes of key, value, header keys and header values: what a record size limit counts.
    pub fn payload_len(&self) -> usize {
        self.key.map_or(0, <[u8]>::len)
            + self.value.map_or(0, <[u8]>::len)
            + self.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len)).sum::<usize>()
    }

    /// An owned copy, for callers that outlive the read buffer.
    pub fn to_record(&self) -> Record {
        Record {
            key: self.key.map(Bytes::copy_from_slice),
            value: self.value.map(Bytes::copy_from_slice),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| Header { key: (*k).to_owned(), value: v.map(Bytes::copy_from_slice) })
                .collect(),
            timestamp: Some(self.timestamp),
        }
    }
}

/// Iterator over the records of a batch.
#[derive(Debug)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    position: usize,
    remaining: u32,
    base_offset: u64,
    compressed: bool,
    attributes: u8,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        if self.compressed {
            self.remaining = 0;
            return Some(Err(CodecError::BadAttributes { attributes: self.attributes }));
        }
        self.remaining -= 1;
        let result = self.parse_one();
        if result.is_err() {
            self.remaining = 0;
        }
        Some(result)
    }
}

impl<'a> RecordIter<'a> {
    /// Where the next record starts in the plain records section (after the last
    /// one, its end): lets a caller map each record to its bytes.
    pub fn position(&self) -> usize {
        self.position
    }

    fn parse_one(&mut self) -> Result<RecordView<'a>, CodecError> {
        let start = self.position;
        let mut cur = Cursor { buf: self.buf, pos: start };
        let length = cur.u32()? as usize;
        let end = cur.pos.checked_add(length).filter(|e| *e <= self.buf.len());
        let end =
            end.ok_or(CodecError::BadRecord { position: start, reason: "record length past the batch end" })?;
        let mut cur = Cursor { buf: &self.buf[..end], pos: cur.pos };
        let offset_delta = cur.u32()?;
        let timestamp = cur.u64()? as i64;
        let key = cur.nullable()?;
        let value = cur.nullable()?;
        let header_count = cur.u32()? as usize;
        if header_count > crate::limits::RECORD_HEADERS_MAX {
            return Err(CodecError::BadRecord { position: cur.pos, reason: "too many headers" });
        }
        let mut headers = Vec::with_capacity(header_count);
        for _ in 0..header_count {
            let key_len = cur.u32()? as usize;
            let key = cur.take(key_len)?;
            let key = std::str::from_utf8(key).map_err(|_| CodecError::BadRecord {
                position: cur.pos,
                reason: "header key is not UTF-8",
            })?;
            headers.push((key, cur.nullable()?));
        }
        if cur.pos != end {
            return Err(CodecError::BadRecord {
                position: cur.pos,
                reason: "record length does not match its fields",
            });
        }
        self.position = end;
        Ok(RecordView { offset: self.base_offset + u64::from(offset_delta), timestamp, key, value, headers })
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let end =
            end.ok_or(CodecError::BadRecord { position: self.pos, reason: "field past the record end" })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, CodecError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, CodecError> {
        let b = self.take(8)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn nullable(&mut self) -> Result<Option<&'a [u8]>, CodecError> {
        let len = self.u32()? as i32;
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(CodecError::BadRecord { position: self.pos, reason: "negative length" }),
            n => Ok(Some(self.take(n as usize)?)),
        }
    }
}

/// Encodes records into one uncompressed batch with base offset 0 and term 0, CRC
/// filled in. The leader later stamps base offset and term with [`stamp`]. Records
/// without a timestamp get `now_ms`.
pub fn encode(records: &[Record], now_ms: i64, producer: ProducerInfo) -> Result<Vec<u8>, CodecError> {
    encode_with_deltas(records.iter().enumerate().map(|(i, r)| (i as u32, r)), now_ms, producer)
}

/// Like [`encode`], with explicit offset deltas (compaction keeps the original
/// offsets of surviving records). Deltas must increase.
pub fn encode_with_deltas<'r>(
    records: impl IntoIterator<Item = (u32, &'r Record)> + Clone,
    now_ms: i64,
    producer: ProducerInfo,
) -> Result<Vec<u8>, CodecError> {
    let mut size = HEADER_LEN;
    let mut count = 0usize;
    for (_, r) in records.clone() {
        size += r.encoded_len();
        count += 1;
    }
    if count == 0 {
        return Err(CodecError::Empty);
    }
    if count > crate::limits::BATCH_RECORDS_MAX {
        return Err(CodecError::TooManyRecords { count, max: crate::limits::BATCH_RECORDS_MAX });
    }
    let mut buf = Vec::with_capacity(size);
    buf.resize(HEADER_LEN, 0);
    let (mut first_ts, mut max_ts, mut last_delta) = (None, i64::MIN, 0u32);
    for (delta, r) in records {
        let ts = r.timestamp.unwrap_or(now_ms);
        first_ts.get_or_insert(ts);
        max_ts = max_ts.max(ts);
        last_delta = delta;
        encode_record(&mut buf, delta, ts, r);
    }
    debug_assert_eq!(buf.len(), size);
    let batch_length = u32::try_from(buf.len() - LENGTH_PREFIX)
        .map_err(|_| CodecError::BadLength { length: buf.len() as u64, max: u32::MAX as usize })?;
    buf[8..12].copy_from_slice(&batch_length.to_be_bytes());
    buf[24] = MAGIC;
    buf[25] = 0;
    buf[26..30].copy_from_slice(&last_delta.to_be_bytes());
    buf[30..34].copy_from_slice(&(count as u32).to_be_bytes());
    buf[34..42].copy_from_slice(&first_ts.unwrap_or(now_ms).to_be_bytes());
    buf[42..50].copy_from_slice(&max_ts.to_be_bytes());
    buf[50..58].copy_from_slice(&producer.producer_id.to_be_bytes());
    buf[58..60].copy_from_slice(&producer.producer_epoch.to_be_bytes());
    buf[60..64].copy_from_slice(&producer.base_sequence.to_be_bytes());
    let crc = crc32fast::hash(&buf[CRC_START..]);
    buf[20..24].copy_from_slice(&crc.to_be_bytes());
    Ok(buf)
}

fn encode_record(buf: &mut Vec<u8>, delta: u32, ts: i64, r: &Record) {
    let length = (r.encoded_len() - 4) as u32;
    buf.extend_from_slice(&length.to_be_bytes());
    buf.extend_from_slice(&delta.to_be_bytes());
    buf.extend_from_slice(&ts.to_be_bytes());
    put_nullable(buf, r.key.as_deref());
    put_nullable(buf, r.value.as_deref());
    buf.extend_from_slice(&(r.headers.len() as u32).to_be_bytes());
    for h in &r.headers {
        buf.extend_from_slice(&(h.key.len() as u32).to_be_bytes());
        buf.extend_from_slice(h.key.as_bytes());
        put_nullable(buf, h.value.as_deref());
    }
}

fn put_nullable(buf: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(v) => {
            buf.extend_from_slice(&(v.len() as u32).to_be_bytes());
            buf.extend_from_slice(v);
        }
    }
}

/// Writes the leader-assigned base offset and term into an encoded batch. These
/// fields are outside the CRC, so the checksum stays valid.
pub fn stamp(batch: &mut [u8], base_offset: u64, term: u64) {
    assert!(batch.len() >= HEADER_LEN, "stamp on a buffer shorter than a batch header");
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..20].copy_from_slice(&term.to_be_bytes());
}

fn be_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn be_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    fn sample() -> Vec<Record> {
        vec![
            Record::keyed("k1", "v1"),
            Record {
                key: None,
                value: None,
                headers: vec![Header { key: "h".into(), value: None }],
                timestamp: Some(7),
            },
            Record {
                key: Some(Bytes::from_static(b"")),
                value: Some(Bytes::from_static(&[0xff, 0x00])),
                headers: vec![Header { key: "trace".into(), value: Some(Bytes::from_static(b"abc")) }],
                timestamp: Some(3),
            },
        ]
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let records = sample();
        let mut buf = encode(&records, 100, ProducerInfo::NONE).unwrap();
        stamp(&mut buf, 42, 9);
        let view = BatchView::parse(&buf, MAX).unwrap();
        assert_eq!(view.header.base_offset, 42);
        assert_eq!(view.header.term, 9);
        assert_eq!(view.header.record_count, 3);
        assert_eq!(view.header.last_offset(), 44);
        assert_eq!(view.header.first_timestamp, 100);
        assert_eq!(view.header.max_timestamp, 100);
        view.validate_records().unwrap();
        let decoded: Vec<Record> = view.records().map(|r| r.unwrap().to_record()).collect();
        let mut expected = records.clone();
        expected[0].timestamp = Some(100);
        assert_eq!(decoded, expected);
        let offsets: Vec<u64> = view.records().map(|r| r.unwrap().offset).collect();
        assert_eq!(offsets, vec![42, 43, 44]);
    }

    #[test]
    fn golden_header_bytes() {
        let mut buf = encode(&[Record::from_value("x")], 5, ProducerInfo::NONE).unwrap();
        stamp(&mut buf, 1, 2);
        assert_eq!(&buf[0..8], &1u64.to_be_bytes());
        assert_eq!(&buf[8..12], &((buf.len() - 12) as u32).to_be_bytes());
        assert_eq!(&buf[12..20], &2u64.to_be_bytes());
        assert_eq!(buf[24], MAGIC);
        assert_eq!(buf.len(), HEADER_LEN + RECORD_FIXED_LEN + 1);
    }

    #[test]
    fn gzip_batches_round_trip_and_bombs_are_refused() {
        let records: Vec<Record> =
            (0..100).map(|i| Record::keyed(format!("k{i}"), "v".repeat(200))).collect();
        let mut plain = encode(&records, 9, ProducerInfo::NONE).unwrap();
        stamp(&mut plain, 10, 1);
        let packed = compress(&plain, Compression::Gzip).unwrap();
        assert!(packed.len() < plain.len() / 4);
        let view = BatchView::parse(&packed, MAX).unwrap();
        assert_eq!(view.compression().unwrap(), Compression::Gzip);
        assert!(view.records().next().unwrap().is_err(), "plain iteration refuses compressed data");
        view.validate_records().unwrap();
        let got: Vec<Record> =
            view.plain_records(MAX).unwrap().iter().map(|r| r.unwrap().to_record()).collect();
        let want: Vec<Record> =
            BatchView::parse(&plain, MAX).unwrap().records().map(|r| r.unwrap().to_record()).collect();
        assert_eq!(got, want);
        assert!(matches!(view.plain_records(1000), Err(CodecError::BadCompression { .. })));
        let mut garbage = packed.clone();
        garbage[HEADER_LEN + 12] ^= 0xff;
        let crc = crc32fast::hash(&garbage[CRC_START..]);
        garbage[20..24].copy_from_slice(&crc.to_be_bytes());
        assert!(BatchView::parse(&garbage, MAX).unwrap().validate_records().is_err());
    }

    #[test]
    fn empty_batch_is_refused() {
        assert_eq!(encode(&[], 0, ProducerInfo::NONE), Err(CodecError::Empty));
    }

    #[test]
    fn corrupt_length_cannot_request_huge_reads() {
        let mut buf = encode(&sample(), 1, ProducerInfo::NONE).unwrap();
        buf[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(BatchHeader::parse(&buf, MAX), Err(CodecError::BadLength { .. })));
    }

    proptest! {
        #[test]
        fn any_flipped_bit_after_the_crc_field_is_detected(byte in 0usize..200, bit in 0u8..8) {
            let buf = encode(&sample(), 1, ProducerInfo::NONE).unwrap();
            let at = CRC_START + byte % (buf.len() - CRC_START);
            let mut bad = buf.clone();
            bad[at] ^= 1 << bit;
            prop_assert!(BatchView::parse(&bad, MAX).is_err());
        }

        #[test]
        fn random_records_round_trip(
            recs in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
                 proptest::collection::vec(("[a-z]{0,5}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..5))), 0..3),
                 proptest::option::of(any::<i64>())),
                1..20)
        ) {
            let records: Vec<Record> = recs.into_iter().map(|(k, v, h, ts)| Record {
                key: k.map(Bytes::from), value: v.map(Bytes::from),
                headers: h.into_iter().map(|(key, value)| Header { key, value: value.map(Bytes::from) }).collect(),
                timestamp: ts,
            }).collect();
            let buf = encode(&records, 77, ProducerInfo::NONE).unwrap();
            let view = BatchView::parse(&buf, MAX).unwrap();
            view.validate_records().unwrap();
            let back: Vec<Record> = view.records().map(|r| r.unwrap().to_record()).collect();
            prop_assert_eq!(back.len(), records.len());
            for (a, b) in back.iter().zip(&records) {
                prop_assert_eq!(&a.key, &b.key);
                prop_assert_eq!(&a.value, &b.value);
                prop_assert_eq!(&a.headers, &b.headers);
                prop_assert_eq!(a.timestamp, Some(b.timestamp.unwrap_or(77)));
            }
        }

        #[test]
        fn truncated_batches_never_parse(cut in 0usize..400) {
            let buf = encode(&sample(), 1, ProducerInfo::NONE).unwrap();
            let cut = cut % buf.len();
            prop_assert!(BatchView::parse(&buf[..cut], MAX).is_err());
        }
    }
}
