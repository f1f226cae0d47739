//! Packs records into the wire shape of a `validate` call: every key, value and
//! header in one buffer, plus fixed-size views into it. One copy into the guest
//! per batch instead of one allocation per record.

use std::ops::Range;

use es_core::Record;

use crate::bindings::validator::exports::es::plugin::validator::{Batch, HeaderView, RecordView};

/// Guest memory one record view takes in the canonical ABI (4 x u32, a list
/// pointer and length, an option<s64>).
const RECORD_VIEW_BYTES: usize = 40;
/// Guest memory one header view takes (4 x u32).
const HEADER_VIEW_BYTES: usize = 16;

/// Bytes `record` adds to a call: its data plus its views.
pub(crate) fn packed_len(record: &Record) -> usize {
    let data = record.key.as_ref().map_or(0, |k| k.len()) + record.value.as_ref().map_or(0, |v| v.len());
    let headers: usize = record
        .headers
        .iter()
        .map(|h| HEADER_VIEW_BYTES + h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
        .sum();
    RECORD_VIEW_BYTES + data + headers
}

/// Splits `records` into consecutive ranges of at most `limit` packed bytes each.
/// Fails with the index and size of a record that alone exceeds the limit.
pub(crate) fn chunks(records: &[Record], limit: usize) -> Result<Vec<Range<usize>>, (usize, usize)> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, record) in records.iter().enumerate() {
        let len = packed_len(record);
        if len > limit {
            return Err((i, len));
        }
        if bytes + len > limit {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += len;
    }
    if start < records.len() {
        out.push(start..records.len());
    }
    Ok(out)
}

/// Where a batch goes, besides its records.
#[derive(Debug, Clone, Copy)]
pub struct BatchTarget<'a> {
    pub topic: &'a str,
    pub partition: u32,
    pub schema_id: Option<u32>,
}

/// Builds one call's batch. The caller has bounded its size with `chunks`, so
/// every offset fits in a u32.
pub(crate) fn pack(target: BatchTarget<'_>, records: &[Record]) -> Batch {
    let data_len: usize = records.iter().map(packed_len).sum();
    let mut data = Vec::with_capacity(data_len);
    let views = records.iter().map(|r| pack_record(&mut data, r)).collect();
    Batch {
        topic: target.topic.to_owned(),
        partition: target.partition,
        schema_id: target.schema_id,
        data,
        records: views,
    }
}

fn pack_record(data: &mut Vec<u8>, record: &Record) -> RecordView {
    let (key_offset, key_len) = push(data, record.key.as_deref());
    let (value_offset, value_len) = push(data, record.value.as_deref());
    let headers = record
        .headers
        .iter()
        .map(|h| {
            let (key_offset, key_len) = push(data, Some(h.key.as_bytes()));
            let (value_offset, value_len) = push(data, h.value.as_deref());
            HeaderView { key_offset, key_len: key_len as u32, value_offset, value_len }
        })
        .collect();
    RecordView { key_offset, key_len, value_offset, value_len, headers, timestamp: record.timestamp }
}

/// Appends `bytes` and returns its (offset, length), with -1 for null.
fn push(data: &mut Vec<u8>, bytes: Option<&[u8]>) -> (u32, i32) {
    let offset = u32::try_from(data.len()).expect("batch cap keeps offsets in u32");
    match bytes {
        None => (offset, -1),
        Some(b) => {
            data.extend_from_slice(b);
            (offset, i32::try_from(b.len()).expect("batch cap keeps lengths in i32"))
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use es_core::Header;

    use super::*;

    fn target() -> BatchTarget<'static> {
        BatchTarget { topic: "t", partition: 3, schema_id: Some(7) }
    }

    #[test]
    fn packs_keys_values_and_headers_into_one_buffer() {
        let mut with_header = Record::keyed("k1", "v1");
        with_header.headers.push(Header { key: "h".into(), value: None });
        let records = vec![with_header, Record { key: None, value: None, ..Record::default() }];
        let batch = pack(target(), &records);
        assert_eq!(batch.data, b"k1v1h");
        let (a, b) = (&batch.records[0], &batch.records[1]);
        assert_eq!((a.key_offset, a.key_len, a.value_offset, a.value_len), (0, 2, 2, 2));
        assert_eq!((a.headers[0].key_offset, a.headers[0].key_len, a.headers[0].value_len), (4, 1, -1));
        assert_eq!((b.key_len, b.value_len), (-1, -1));
        assert_eq!((batch.partition, batch.schema_id), (3, Some(7)));
    }

    #[test]
    fn chunks_respect_the_limit_and_report_oversized_records() {
        let records: Vec<Record> = (0..10).map(|_| Record::from_value(Bytes::from(vec![0u8; 60]))).collect();
        let per = packed_len(&records[0]);
        let ranges = chunks(&records, per * 4).unwrap();
        assert_eq!(ranges, vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(&records, per - 1), Err((0, per)));
        assert!(chunks(&[], 10).unwrap().is_empty());
    }
}
