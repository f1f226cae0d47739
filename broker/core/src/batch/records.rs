//! The records inside a v2 batch: borrowed views and the varint record parser.

use bytes::Bytes;

use super::*;
use crate::record::Header;
use crate::varint::VarintError;

/// One record inside a batch, borrowed. Header keys may repeat; they stay in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: u64,
    /// The record's timestamp: base + delta, or the batch's LogAppendTime.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: HeaderViews<'a>,
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
    base_timestamp: i64,
    log_append_time: Option<i64>,
    /// Set when the section is compressed: iteration yields one error.
    pub(super) compressed: Option<Compression>,
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let result = self.next_checked();
        self.remaining = if result.is_err() { 0 } else { self.remaining - 1 };
        Some(result)
    }
}

impl<'a> RecordIter<'a> {
    pub(super) fn new(header: &BatchHeader, buf: &'a [u8]) -> Self {
        RecordIter {
            buf,
            position: 0,
            remaining: header.record_count,
            base_offset: header.base_offset,
            base_timestamp: header.base_timestamp,
            log_append_time: header.log_append_time(),
            compressed: None,
        }
    }

    /// Where the next record starts in the plain records section (after the last
    /// one, its end): lets a caller map each record to its bytes.
    pub fn position(&self) -> usize {
        self.position
    }

    fn next_checked(&mut self) -> Result<RecordView<'a>, CodecError> {
        if let Some(compression) = self.compressed {
            return Err(CodecError::Compressed { compression });
        }
        // The count claims at least this many bytes; refuse before parsing any.
        let left = self.buf.len() - self.position;
        if (self.remaining as usize).saturating_mul(RECORD_MIN_LEN) > left {
            return Err(CodecError::BadRecord {
                position: self.position,
                reason: "recordCount claims more records than the bytes left hold",
            });
        }
        self.parse_one()
    }

    fn parse_one(&mut self) -> Result<RecordView<'a>, CodecError> {
        let start = self.position;
        let mut cur = Cursor { buf: self.buf, pos: start };
        let length = cur.length("negative record length")?;
        let end = cur.pos.checked_add(length).filter(|e| *e <= self.buf.len());
        let end =
            end.ok_or(CodecError::BadRecord { position: start, reason: "record length past the batch end" })?;
        let mut cur = Cursor { buf: &self.buf[..end], pos: cur.pos };
        cur.take(1)?; // record attributes: unused by Kafka, kept as sent
        let timestamp_delta = cur.varlong()?;
        let offset_delta = cur.varint()?;
        if offset_delta < 0 {
            return Err(CodecError::BadRecord { position: cur.pos, reason: "negative offset delta" });
        }
        let key = cur.nullable()?;
        let value = cur.nullable()?;
        let headers = cur.headers()?;
        if cur.pos != end {
            return Err(CodecError::BadRecord {
                position: cur.pos,
                reason: "record length does not match its fields",
            });
        }
        self.position = end;
        let timestamp = self.log_append_time.unwrap_or(self.base_timestamp.wrapping_add(timestamp_delta));
        let offset = self.base_offset.wrapping_add(offset_delta as u64);
        Ok(RecordView { offset, timestamp, key, value, headers })
    }
}

/// A record's headers as views: (key, value), duplicates kept in order.
pub type HeaderViews<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

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

    fn varint(&mut self) -> Result<i32, CodecError> {
        let (v, n) = varint::get32(&self.buf[self.pos..]).map_err(|e| self.bad_varint(e))?;
        self.pos += n;
        Ok(v)
    }

    fn varlong(&mut self) -> Result<i64, CodecError> {
        let (v, n) = varint::get64(&self.buf[self.pos..]).map_err(|e| self.bad_varint(e))?;
        self.pos += n;
        Ok(v)
    }

    fn bad_varint(&self, e: VarintError) -> CodecError {
        let reason = match e {
            VarintError::Truncated => "varint past the record end",
            VarintError::Overlong => "varint longer than its type",
        };
        CodecError::BadRecord { position: self.pos, reason }
    }

    /// A non-negative length or count; `negative` says what a negative one means.
    fn length(&mut self, negative: &'static str) -> Result<usize, CodecError> {
        let at = self.pos;
        let n = self.varint()?;
        usize::try_from(n).map_err(|_| CodecError::BadRecord { position: at, reason: negative })
    }

    fn nullable(&mut self) -> Result<Option<&'a [u8]>, CodecError> {
        let at = self.pos;
        match self.varint()? {
            -1 => Ok(None),
            n if n < 0 => Err(CodecError::BadRecord { position: at, reason: "negative length" }),
            n => Ok(Some(self.take(n as usize)?)),
        }
    }

    /// The header list; the count is bounded by the limit and by the bytes left.
    fn headers(&mut self) -> Result<HeaderViews<'a>, CodecError> {
        let at = self.pos;
        let count = self.length("negative header count")?;
        if count > crate::limits::RECORD_HEADERS_MAX {
            return Err(CodecError::BadRecord { position: at, reason: "too many headers" });
        }
        if count.saturating_mul(HEADER_MIN_LEN) > self.buf.len() - self.pos {
            return Err(CodecError::BadRecord { position: at, reason: "header count past the record end" });
        }
        let mut headers = Vec::with_capacity(count);
        for _ in 0..count {
            let key_len = self.length("negative or null header key length")?;
            let key_at = self.pos;
            let key = std::str::from_utf8(self.take(key_len)?)
                .map_err(|_| CodecError::BadRecord { position: key_at, reason: "header key is not UTF-8" })?;
            headers.push((key, self.nullable()?));
        }
        Ok(headers)
    }
}
