//! Borrowed views of a batch: each record's key, value and headers as slices of
//! the bytes the host sends. The host sends flat lists (wit/validator.wit): six
//! words per record, four per header, one timestamp per record; these types read
//! them without allocating.

use crate::glue::bindings::exports::es::plugin::validator as wit;

/// Words per record in the host's `records` list.
const RECORD_WORDS: usize = 6;
/// Words per header in the host's `headers` list.
const HEADER_WORDS: usize = 4;

/// A batch of records, as handed to [`crate::RecordValidator::validate`].
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    info: &'a wit::BatchInfo,
    data: &'a [u8],
    records: &'a [i32],
    headers: &'a [i32],
    timestamps: &'a [i64],
}

impl<'a> Batch<'a> {
    pub(crate) fn new(
        info: &'a wit::BatchInfo,
        data: &'a [u8],
        records: &'a [i32],
        headers: &'a [i32],
        timestamps: &'a [i64],
    ) -> Self {
        Self { info, data, records, headers, timestamps }
    }

    pub fn topic(&self) -> &'a str {
        &self.info.topic
    }

    pub fn partition(&self) -> u32 {
        self.info.partition
    }

    /// The schema the topic is bound to, if any.
    pub fn schema_id(&self) -> Option<u32> {
        self.info.schema_id
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.timestamps.len().min(self.records.len() / RECORD_WORDS)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records, in batch order.
    pub fn records(&self) -> impl Iterator<Item = RecordRef<'a>> + 'a {
        let batch = *self;
        self.records
            .chunks_exact(RECORD_WORDS)
            .take(self.len())
            .enumerate()
            .map(move |(i, words)| RecordRef { batch, words, index: i as u32 })
    }
}

/// One record of a batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    batch: Batch<'a>,
    /// The record's six words: key offset and length, value offset and length,
    /// first header, header count.
    words: &'a [i32],
    index: u32,
}

impl<'a> RecordRef<'a> {
    /// Position in the batch, for [`crate::Violation::index`].
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The key; `None` when null.
    pub fn key(&self) -> Option<&'a [u8]> {
        slice(self.batch.data, self.words[0], self.words[1])
    }

    /// The value; `None` for a tombstone.
    pub fn value(&self) -> Option<&'a [u8]> {
        slice(self.batch.data, self.words[2], self.words[3])
    }

    /// Milliseconds since the epoch, when the producer set it.
    pub fn timestamp(&self) -> Option<i64> {
        self.batch.timestamps.get(self.index as usize).copied().filter(|t| *t >= 0)
    }

    /// The headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = HeaderRef<'a>> + 'a {
        let data = self.batch.data;
        let first = usize::try_from(self.words[4]).unwrap_or(0);
        let count = usize::try_from(self.words[5]).unwrap_or(0);
        let words = first
            .checked_mul(HEADER_WORDS)
            .and_then(|start| Some(start..start.checked_add(count.checked_mul(HEADER_WORDS)?)?))
            .and_then(|range| self.batch.headers.get(range))
            .unwrap_or_default();
        words.chunks_exact(HEADER_WORDS).map(move |words| HeaderRef { data, words })
    }

    /// The first header named `key`, if any.
    pub fn header(&self, key: &str) -> Option<HeaderRef<'a>> {
        self.headers().find(|h| h.key() == key.as_bytes())
    }
}

/// One header of a record.
#[derive(Debug, Clone, Copy)]
pub struct HeaderRef<'a> {
    data: &'a [u8],
    /// Key offset and length, value offset and length.
    words: &'a [i32],
}

impl<'a> HeaderRef<'a> {
    /// The header name's bytes (UTF-8, as the broker only accepts string keys).
    pub fn key(&self) -> &'a [u8] {
        slice(self.data, self.words[0], self.words[1]).unwrap_or_default()
    }

    /// The header value; `None` when null.
    pub fn value(&self) -> Option<&'a [u8]> {
        slice(self.data, self.words[2], self.words[3])
    }
}

/// The bytes at `offset..offset+len` of the data; `None` for a null (-1) or for a
/// view outside the data, which a correct host never sends.
fn slice(data: &[u8], offset: i32, len: i32) -> Option<&[u8]> {
    let len = usize::try_from(len).ok()?;
    let start = usize::try_from(offset).ok()?;
    data.get(start..start.checked_add(len)?)
}
