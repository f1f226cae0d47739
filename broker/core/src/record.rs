//! A record as producers hand it to es: optional key, optional value (none is a
//! tombstone), headers and an optional timestamp the leader fills in when absent.

use bytes::Bytes;

use crate::varint;

/// One record header. Keys are strings, as in Kafka; values are bytes or null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Bytes>,
}

/// A record before it has an offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub key: Option<Bytes>,
    /// `None` is a tombstone: compaction removes the key after `delete.retention`.
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
    /// Milliseconds since the epoch; the leader uses its clock when this is `None`.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a value and no key, headers or timestamp.
    pub fn from_value(value: impl Into<Bytes>) -> Self {
        Self { value: Some(value.into()), ..Self::default() }
    }

    /// A record with a key and a value.
    pub fn keyed(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Self { key: Some(key.into()), value: Some(value.into()), ..Self::default() }
    }

    /// Most bytes this record can occupy in an uncompressed v2 batch, whatever its
    /// offset and timestamp deltas (they are varints: this counts their widest form).
    /// What producers add up to stay under a batch size limit.
    pub fn encoded_len(&self) -> usize {
        let body = self.fields_len() + varint::VARINT_MAX + varint::VARLONG_MAX;
        varint::len32(body as i32) + body
    }

    /// Exact bytes of this record in a v2 batch at the given deltas, length field included.
    pub fn encoded_len_at(&self, offset_delta: i32, timestamp_delta: i64) -> usize {
        let body = self.body_len(offset_delta, timestamp_delta);
        varint::len32(body as i32) + body
    }

    /// Bytes after the record's length field.
    pub(crate) fn body_len(&self, offset_delta: i32, timestamp_delta: i64) -> usize {
        self.fields_len() + varint::len32(offset_delta) + varint::len64(timestamp_delta)
    }

    /// Bytes of a v2 record besides its length and its two deltas.
    fn fields_len(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|h| varint::len32(h.key.len() as i32) + h.key.len() + nullable_len(h.value.as_deref()))
            .sum();
        1 + nullable_len(self.key.as_deref())
            + nullable_len(self.value.as_deref())
            + varint::len32(self.headers.len() as i32)
            + headers
    }

    /// Bytes of key, value, header keys and header values: what a record size limit
    /// counts (the same sum as `RecordView::payload_len`).
    pub fn payload_len(&self) -> usize {
        let headers: usize =
            self.headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len)).sum();
        self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len) + headers
    }
}

/// A nullable byte field: its length varint (-1 for null) and its bytes.
fn nullable_len(v: Option<&[u8]>) -> usize {
    v.map_or(1, |v| varint::len32(v.len() as i32) + v.len())
}

/// Idempotent-producer identity carried by a batch; `NONE` for ordinary producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerInfo {
    pub const NONE: ProducerInfo = ProducerInfo { producer_id: -1, producer_epoch: -1, base_sequence: -1 };
}

/// Kafka's sequence arithmetic: a producer's sequence wraps from i32::MAX to 0.
pub fn add_sequence(seq: i32, delta: u64) -> i32 {
    ((i64::from(seq) + delta as i64) % (i64::from(i32::MAX) + 1)) as i32
}

impl Default for ProducerInfo {
    fn default() -> Self {
        Self::NONE
    }
}
