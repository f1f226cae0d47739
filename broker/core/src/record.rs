//! A record as producers hand it to es: optional key, optional value (none is a
//! tombstone), headers and an optional timestamp the leader fills in when absent.

use bytes::Bytes;

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

    /// Bytes this record occupies in an uncompressed batch.
    pub fn encoded_len(&self) -> usize {
        let mut len = crate::batch::RECORD_FIXED_LEN
            + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len);
        for h in &self.headers {
            len += crate::batch::HEADER_FIXED_LEN + h.key.len() + h.value.as_ref().map_or(0, Bytes::len);
        }
        len
    }
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
