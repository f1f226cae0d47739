//! Borrowed views of a batch: each record's key, value and headers as slices of
//! the one packed buffer the host sends.

use crate::glue::bindings::exports::es::plugin::validator as wit;

/// A batch of records, as handed to [`crate::RecordValidator::validate`].
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    raw: &'a wit::Batch,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(raw: &'a wit::Batch) -> Self {
        Self { raw }
    }

    pub fn topic(&self) -> &'a str {
        &self.raw.topic
    }

    pub fn partition(&self) -> u32 {
        self.raw.partition
    }

    /// The schema the topic is bound to, if any.
    pub fn schema_id(&self) -> Option<u32> {
        self.raw.schema_id
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.raw.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.records.is_empty()
    }

    /// The records, in batch order.
    pub fn records(&self) -> impl Iterator<Item = RecordRef<'a>> + 'a {
        let data = self.raw.data.as_slice();
        self.raw.records.iter().enumerate().map(move |(i, view)| RecordRef { data, view, index: i as u32 })
    }
}

/// One record of a batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    data: &'a [u8],
    view: &'a wit::RecordView,
    index: u32,
}

impl<'a> RecordRef<'a> {
    /// Position in the batch, for [`crate::Violation::index`].
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The key; `None` when null.
    pub fn key(&self) -> Option<&'a [u8]> {
        slice(self.data, self.view.key_offset, i64::from(self.view.key_len))
    }

    /// The value; `None` for a tombstone.
    pub fn value(&self) -> Option<&'a [u8]> {
        slice(self.data, self.view.value_offset, i64::from(self.view.value_len))
    }

    /// Milliseconds since the epoch, when the producer set it.
    pub fn timestamp(&self) -> Option<i64> {
        self.view.timestamp
    }

    /// The headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = HeaderRef<'a>> + 'a {
        let data = self.data;
        self.view.headers.iter().map(move |view| HeaderRef { data, view })
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
    view: &'a wit::HeaderView,
}

impl<'a> HeaderRef<'a> {
    /// The header name's bytes (UTF-8, as the broker only accepts string keys).
    pub fn key(&self) -> &'a [u8] {
        slice(self.data, self.view.key_offset, i64::from(self.view.key_len)).unwrap_or_default()
    }

    /// The header value; `None` when null.
    pub fn value(&self) -> Option<&'a [u8]> {
        slice(self.data, self.view.value_offset, i64::from(self.view.value_len))
    }
}

/// The bytes at `offset..offset+len` of the packed buffer; `None` for a null (-1)
/// or for a view outside the buffer, which a correct host never sends.
fn slice(data: &[u8], offset: u32, len: i64) -> Option<&[u8]> {
    let len = usize::try_from(len).ok()?;
    let start = offset as usize;
    data.get(start..start.checked_add(len)?)
}
