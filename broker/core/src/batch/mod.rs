//! The record-batch codec: Apache Kafka's v2 RecordBatch, byte for byte — what es
//! stores on disk, replicates, carries in its binary protocol and serves to Kafka.
//!
//! ```text
//! offset size field                 notes
//!      0    8 baseOffset            set by the leader; outside the CRC
//!      8    4 batchLength           bytes after this field; total = 12 + batchLength
//!     12    4 partitionLeaderEpoch  set by the leader; outside the CRC; -1 from producers
//!     16    1 magic                 2
//!     17    4 crc                   CRC-32C (Castagnoli) of bytes [21, end)
//!     21    2 attributes            bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4,
//!                                   4 zstd), 3 timestamp type (1 = LogAppendTime),
//!                                   4 transactional, 5 control, 6 delete horizon
//!     23    4 lastOffsetDelta       offset of the last record minus baseOffset
//!     27    8 baseTimestamp         ms since the epoch (first record's timestamp)
//!     35    8 maxTimestamp          largest record timestamp, or the LogAppendTime
//!     43    8 producerId            -1 when not idempotent
//!     51    2 producerEpoch
//!     53    4 baseSequence
//!     57    4 recordCount
//!     61      records               compressed as a whole when bits 0-2 say so
//!
//! record: length varint (bytes after it), attributes int8 (0), timestampDelta
//!         varlong, offsetDelta varint, keyLength varint (-1 null) + key,
//!         valueLength varint (-1 null) + value, headersCount varint, then per header:
//!         keyLength varint + key (UTF-8), valueLength varint (-1 null) + value
//! ```
//!
//! Fixed-width integers are big-endian; varints are zig-zag (see `varint.rs`). The
//! fields the leader fills in (base offset and leader epoch) sit before the CRC, so a
//! batch encoded and checksummed outside the partition lock is stamped without
//! re-hashing; a corrupted base offset is caught by the log's offset-continuity check
//! instead. Compaction may remove records from a batch, so offsets inside a batch can
//! have gaps: `lastOffsetDelta`, not `recordCount`, gives the batch's offset span.
//! Byte positions stay private to this file: other crates use the methods.

use std::borrow::Cow;

use crate::compression;
pub use crate::compression::{Compression, CompressionError};
use crate::epoch::LeaderEpoch;
use crate::record::{ProducerInfo, Record};
use crate::varint;

mod encode;
mod raft;
mod records;
#[cfg(test)]
mod tests;

pub use encode::{
    compress, encode, encode_compacted, encode_like, encode_with_deltas, recompress, set_log_append_time,
    set_producer, stamp,
};
pub use raft::{
    RAFT_BLANK_TYPE, RAFT_COMPACTION_TYPE, RAFT_MEMBERSHIP_TYPE, RaftControl, encode_raft_control,
    raft_control,
};
pub use records::{RecordIter, RecordView};

// Byte positions of the header fields.
const LENGTH_AT: usize = 8;
const EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
const HEADER_LEN: usize = 61;
/// Bytes of a batch before `batchLength` counts (baseOffset + batchLength).
const LENGTH_PREFIX: usize = 12;
/// The CRC covers attributes to the end.
const CRC_START: usize = ATTRIBUTES_AT;
/// The v2 batch magic.
pub const MAGIC: u8 = 2;
/// The smallest record: seven one-byte fields (length, attributes, timestamp delta,
/// offset delta, null key, null value, no headers). Bounds counts by bytes left.
const RECORD_MIN_LEN: usize = 7;
/// The smallest header: an empty key and a null value.
const HEADER_MIN_LEN: usize = 2;

const COMPRESSION_MASK: u16 = 0x07;
const TIMESTAMP_TYPE_BIT: u16 = 0x08;
const TRANSACTIONAL_BIT: u16 = 0x10;
const CONTROL_BIT: u16 = 0x20;
const DELETE_HORIZON_BIT: u16 = 0x40;

/// A malformed batch: what is wrong and at which byte (of the batch for header
/// fields, of the plain records section for records).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {length} is outside {HEADER_LEN}..={max} bytes")]
    BadLength { length: u64, max: usize },
    #[error("unknown batch magic {magic} (es stores Kafka v2 batches, magic 2)")]
    BadMagic { magic: u8 },
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("batch header field {field} at byte {position} holds {value}, which is not allowed")]
    BadHeader { field: &'static str, position: usize, value: i64 },
    #[error("the records are compressed ({compression:?}); read them with plain_records")]
    Compressed { compression: Compression },
    #[error("malformed record at byte {position}: {reason}")]
    BadRecord { position: usize, reason: &'static str },
    #[error("batch has {count} records; the limit is {max}")]
    TooManyRecords { count: usize, max: usize },
    #[error("empty batch: a batch needs at least one record")]
    Empty,
    #[error("bad compressed records: {0}")]
    Compression(#[from] CompressionError),
}

/// How a batch's timestamps were set (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Each record carries the time its producer gave it.
    CreateTime,
    /// The leader set `maxTimestamp` at append; every record reads as that time.
    LogAppendTime,
}

/// The fixed 61-byte header of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    pub batch_length: u32,
    pub leader_epoch: LeaderEpoch,
    pub magic: u8,
    pub crc: u32,
    pub attributes: u16,
    pub last_offset_delta: u32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer: ProducerInfo,
    pub record_count: u32,
}

impl BatchHeader {
    /// Bytes to read to parse a header.
    pub const LEN: usize = HEADER_LEN;

    /// Parses the fixed header without checking the CRC. `max_len` bounds the total
    /// batch size so a corrupt length field cannot make a reader allocate gigabytes.
    pub fn parse(buf: &[u8], max_len: usize) -> Result<Self, CodecError> {
        if buf.len() < HEADER_LEN {
            return Err(CodecError::Truncated { needed: HEADER_LEN, available: buf.len() });
        }
        let batch_length = be_i32(buf, LENGTH_AT);
        let total = LENGTH_PREFIX as i64 + i64::from(batch_length);
        if total < HEADER_LEN as i64 || total > max_len.min(i32::MAX as usize) as i64 {
            return Err(CodecError::BadLength { length: total.max(0) as u64, max: max_len });
        }
        let magic = buf[MAGIC_AT];
        if magic != MAGIC {
            return Err(CodecError::BadMagic { magic });
        }
        Ok(Self {
            base_offset: be_u64(buf, 0),
            batch_length: batch_length as u32,
            leader_epoch: LeaderEpoch(be_i32(buf, EPOCH_AT)),
            magic,
            crc: be_i32(buf, CRC_AT) as u32,
            attributes: u16::from_be_bytes([buf[ATTRIBUTES_AT], buf[ATTRIBUTES_AT + 1]]),
            last_offset_delta: non_negative(buf, LAST_DELTA_AT, "lastOffsetDelta")?,
            base_timestamp: be_u64(buf, BASE_TIMESTAMP_AT) as i64,
            max_timestamp: be_u64(buf, MAX_TIMESTAMP_AT) as i64,
            producer: ProducerInfo {
                producer_id: be_u64(buf, PRODUCER_ID_AT) as i64,
                producer_epoch: i16::from_be_bytes([buf[PRODUCER_EPOCH_AT], buf[PRODUCER_EPOCH_AT + 1]]),
                base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            },
            record_count: non_negative(buf, RECORD_COUNT_AT, "recordCount")?,
        })
    }

    /// Total bytes of the batch, header included.
    pub fn total_len(&self) -> usize {
        LENGTH_PREFIX + self.batch_length as usize
    }

    /// Bytes of the records section as stored (compressed or not).
    pub fn records_len(&self) -> usize {
        self.total_len() - HEADER_LEN
    }

    /// Offset of the last record (the batch's offset span survives compaction).
    pub fn last_offset(&self) -> u64 {
        // Saturating: a damaged header must not overflow; callers bound-check offsets.
        self.base_offset.saturating_add(u64::from(self.last_offset_delta))
    }

    /// The offset after this batch. A Raft control batch takes no offset, so its
    /// next offset is its base offset (see `raft.rs`).
    pub fn next_offset(&self) -> u64 {
        if self.is_raft_control() {
            return self.base_offset;
        }
        self.last_offset().saturating_add(1)
    }

    /// The records section's codec; unknown codes (5-7) are an error.
    pub fn compression(&self) -> Result<Compression, CodecError> {
        Ok(Compression::from_bits((self.attributes & COMPRESSION_MASK) as u8)?)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT == 0 {
            TimestampType::CreateTime
        } else {
            TimestampType::LogAppendTime
        }
    }

    /// Part of a transaction (es does not implement transactions yet).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// A control batch (transaction markers), not user records.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Compaction set a delete horizon: `base_timestamp` is then that horizon.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_BIT != 0
    }

    /// The timestamp every record reads as, when the leader set one.
    fn log_append_time(&self) -> Option<i64> {
        (self.timestamp_type() == TimestampType::LogAppendTime).then_some(self.max_timestamp)
    }
}

/// A whole, CRC-checked batch borrowed from a buffer.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Checks length, magic, CRC and codec of the batch at the start of `buf`.
    pub fn parse(buf: &'a [u8], max_len: usize) -> Result<Self, CodecError> {
        let header = BatchHeader::parse(buf, max_len)?;
        let total = header.total_len();
        if buf.len() < total {
            return Err(CodecError::Truncated { needed: total, available: buf.len() });
        }
        let bytes = &buf[..total];
        let computed = crc32c::crc32c(&bytes[CRC_START..]);
        if computed != header.crc {
            return Err(CodecError::BadCrc { stored: header.crc, computed });
        }
        header.compression()?;
        Ok(Self { header, bytes })
    }

    /// The batch's bytes, header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records section as stored (compressed when the header says so).
    pub fn records_section(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..]
    }

    /// Iterates the records of an uncompressed batch; a malformed record ends the
    /// iteration with an error. A compressed batch yields `Compressed`: use
    /// [`BatchView::plain_records`].
    pub fn records(&self) -> RecordIter<'a> {
        let mut iter = RecordIter::new(&self.header, self.records_section());
        if let Ok(c @ (Compression::Gzip | Compression::Snappy | Compression::Lz4 | Compression::Zstd)) =
            self.header.compression()
        {
            iter.compressed = Some(c);
        }
        iter
    }

    /// How the records section is compressed.
    pub fn compression(&self) -> Result<Compression, CodecError> {
        self.header.compression()
    }

    /// The records section, decompressed when needed, never larger than `max_plain`
    /// bytes (a decompression bomb is an error, not an allocation).
    pub fn plain_records(&self, max_plain: usize) -> Result<PlainRecords<'a>, CodecError> {
        let section = self.records_section();
        let buf = match self.compression()? {
            Compression::None => Cow::Borrowed(section),
            c @ (Compression::Gzip | Compression::Snappy | Compression::Lz4 | Compression::Zstd) => {
                Cow::Owned(compression::decompress(c, section, max_plain)?)
            }
        };
        Ok(PlainRecords { header: self.header, buf })
    }

    /// Checks that the records section parses exactly: `recordCount` records, each
    /// within its length, offsets increasing and ending at `lastOffsetDelta`.
    /// Compressed batches are decompressed (up to the hard batch limit) to check.
    pub fn validate_records(&self) -> Result<(), CodecError> {
        self.plain_records(crate::limits::BATCH_BYTES_MAX_HARD)?.validate()
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
        RecordIter::new(&self.header, &self.buf)
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
        self.check_records(true)
    }

    /// [`PlainRecords::validate_sizes`] for a batch compaction may have rewritten
    /// (`batch::encode_compacted`): the records may end before `lastOffsetDelta`
    /// and there may be none. What a follower accepts from its leader.
    pub fn validate_sizes_compacted(&self) -> Result<usize, CodecError> {
        self.check_records(false)
    }

    fn check_records(&self, whole_span: bool) -> Result<usize, CodecError> {
        let count = self.header.record_count as usize;
        if count > crate::limits::BATCH_RECORDS_MAX {
            return Err(CodecError::TooManyRecords { count, max: crate::limits::BATCH_RECORDS_MAX });
        }
        let mut last_delta: Option<u32> = None;
        let mut largest = 0usize;
        let mut iter = self.iter();
        for record in iter.by_ref() {
            let record = record?;
            largest = largest.max(record.payload_len());
            let delta = (record.offset - self.header.base_offset) as u32;
            if last_delta.is_some_and(|d| d >= delta) || delta > self.header.last_offset_delta {
                return Err(CodecError::BadRecord {
                    position: iter.position(),
                    reason: "offset delta out of order",
                });
            }
            last_delta = Some(delta);
        }
        if iter.position() != self.buf.len() {
            return Err(CodecError::BadRecord {
                position: iter.position(),
                reason: "trailing bytes after the last record",
            });
        }
        if whole_span && last_delta != Some(self.header.last_offset_delta) {
            return Err(CodecError::BadRecord {
                position: iter.position(),
                reason: "lastOffsetDelta does not match the records",
            });
        }
        Ok(largest)
    }
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn be_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// A count or delta field that Kafka defines as a non-negative i32.
fn non_negative(buf: &[u8], at: usize, field: &'static str) -> Result<u32, CodecError> {
    let value = be_i32(buf, at);
    u32::try_from(value).map_err(|_| CodecError::BadHeader { field, position: at, value: i64::from(value) })
}
