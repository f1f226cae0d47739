//! Packs a batch into the shape of a `validate` call (wit/validator.wit): the bytes
//! the views point into, six words per record, four per header and one timestamp
//! per record. Four flat lists cross the boundary as four copies of contiguous
//! memory, with no allocation per record on either side.
//!
//! From a produce batch's plain records section ([`PackedBatch::from_plain`]) the
//! bytes are the section itself, borrowed, so the host copies no key or value:
//! the views point into the batch's own framing. From owned records (the HTTP
//! path, [`PackedBatch::from_records`]) keys, values and headers are packed into
//! one buffer.

use std::borrow::Cow;
use std::ops::Range;

use es_core::Record;
use es_core::batch::{CodecError, PlainRecords};

/// Words per record in `records`: key offset, key length, value offset, value
/// length, first header, header count.
pub const RECORD_WORDS: usize = 6;
/// Words per header in `headers`: key offset, key length, value offset, value length.
pub const HEADER_WORDS: usize = 4;
/// Guest memory a record takes in a call besides its bytes: words and timestamp.
const RECORD_OVERHEAD: usize = RECORD_WORDS * 4 + 8;
/// Guest memory a header takes besides its bytes.
const HEADER_OVERHEAD: usize = HEADER_WORDS * 4;
/// Offsets are 32-bit signed words.
const DATA_BYTES_MAX: usize = i32::MAX as usize;

/// Where a batch goes, besides its records.
#[derive(Debug, Clone, Copy)]
pub struct BatchTarget<'a> {
    pub topic: &'a str,
    pub partition: u32,
    pub schema_id: Option<u32>,
}

/// Why a batch could not be packed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// The produce batch itself is malformed.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// More bytes than 32-bit offsets address (the broker's batch limits keep
    /// batches far below this).
    #[error("the batch's records take {bytes} bytes; a validator call addresses at most {DATA_BYTES_MAX}")]
    TooLarge { bytes: usize },
}

/// A batch in the shape of a `validate` call. Build it once per produce batch and
/// run every validator of a topic's chain over it.
#[derive(Debug, Clone, Default)]
pub struct PackedBatch<'a> {
    data: Cow<'a, [u8]>,
    records: Vec<i32>,
    headers: Vec<i32>,
    timestamps: Vec<i64>,
    /// `bounds[i]..bounds[i + 1]` holds record i's bytes (and every offset of its
    /// views) in `data`, so a part of the batch is a contiguous slice.
    bounds: Vec<u32>,
}

/// One call's arguments: the whole batch borrowed, or a part of it with its views
/// shifted to the part's bytes.
pub(crate) struct Chunk<'p> {
    pub data: &'p [u8],
    pub records: Cow<'p, [i32]>,
    pub headers: Cow<'p, [i32]>,
    pub timestamps: &'p [i64],
}

impl PackedBatch<'static> {
    /// Packs owned records: every key, value and header copied into one buffer.
    pub fn from_records<'r, I>(records: I) -> Result<Self, PackError>
    where
        I: IntoIterator<Item = &'r Record>,
        I::IntoIter: Clone,
    {
        let records = records.into_iter();
        let (mut bytes, mut count) = (0, 0);
        for r in records.clone() {
            bytes += r.payload_len();
            count += 1;
        }
        if bytes > DATA_BYTES_MAX {
            return Err(PackError::TooLarge { bytes });
        }
        let mut data = Vec::with_capacity(bytes);
        let mut out = Self::with_capacity(count);
        for r in records {
            out.bounds.push(data.len() as u32);
            let key = push(&mut data, r.key.as_deref());
            let value = push(&mut data, r.value.as_deref());
            let first = out.headers.len() / HEADER_WORDS;
            for h in &r.headers {
                let hk = push(&mut data, Some(h.key.as_bytes()));
                let hv = push(&mut data, h.value.as_deref());
                out.headers.extend([hk.0, hk.1, hv.0, hv.1]);
            }
            out.records.extend([key.0, key.1, value.0, value.1, first as i32, r.headers.len() as i32]);
            out.timestamps.push(r.timestamp.unwrap_or(-1));
        }
        out.bounds.push(data.len() as u32);
        out.data = Cow::Owned(data);
        Ok(out)
    }
}

impl<'p> PackedBatch<'p> {
    /// Views over a produce batch's plain (v2, varint-framed) records section, which
    /// the batch borrows: nothing is copied. Each record's bytes start where the
    /// record iterator stood before it. Fails on a malformed record.
    pub fn from_plain(plain: &'p PlainRecords<'_>) -> Result<Self, PackError> {
        let section = plain.as_bytes();
        if section.len() > DATA_BYTES_MAX {
            return Err(PackError::TooLarge { bytes: section.len() });
        }
        let base = section.as_ptr() as usize;
        // Every slice a record view holds lies inside `section`.
        let at = |s: &[u8]| (s.as_ptr() as usize - base) as i32;
        let mut out = Self::with_capacity(0);
        let mut iter = plain.iter();
        loop {
            let start = iter.position();
            let Some(record) = iter.next() else { break };
            let record = record?;
            out.bounds.push(start as u32);
            let view = |b: Option<&[u8]>| b.map_or((start as i32, -1), |b| (at(b), b.len() as i32));
            let (key, value) = (view(record.key), view(record.value));
            let first = out.headers.len() / HEADER_WORDS;
            for (k, v) in &record.headers {
                let (hk, hv) = (view(Some(k.as_bytes())), view(*v));
                out.headers.extend([hk.0, hk.1, hv.0, hv.1]);
            }
            out.records.extend([key.0, key.1, value.0, value.1, first as i32, record.headers.len() as i32]);
            out.timestamps.push(record.timestamp);
        }
        out.bounds.push(iter.position() as u32);
        out.data = Cow::Borrowed(section);
        Ok(out)
    }

    fn with_capacity(records: usize) -> Self {
        Self {
            data: Cow::Borrowed(&[]),
            records: Vec::with_capacity(records * RECORD_WORDS),
            headers: Vec::new(),
            timestamps: Vec::with_capacity(records),
            bounds: Vec::with_capacity(records + 1),
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// Guest memory record `i` takes in a call.
    fn cost(&self, i: usize) -> usize {
        let bytes = (self.bounds[i + 1] - self.bounds[i]) as usize;
        let headers = self.records[i * RECORD_WORDS + 5] as usize;
        bytes + RECORD_OVERHEAD + headers * HEADER_OVERHEAD
    }

    /// Splits the records into consecutive ranges of at most `limit` bytes of guest
    /// memory each. Fails with the index and size of a record that alone exceeds it.
    pub(crate) fn chunks(&self, limit: usize) -> Result<Vec<Range<usize>>, (usize, usize)> {
        let mut out = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for i in 0..self.len() {
            let cost = self.cost(i);
            if cost > limit {
                return Err((i, cost));
            }
            if bytes + cost > limit {
                out.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += cost;
        }
        if start < self.len() {
            out.push(start..self.len());
        }
        Ok(out)
    }

    /// The arguments of the call for records `range`.
    pub(crate) fn chunk(&self, range: Range<usize>) -> Chunk<'_> {
        if range == (0..self.len()) {
            return Chunk {
                data: &self.data,
                records: Cow::Borrowed(&self.records),
                headers: Cow::Borrowed(&self.headers),
                timestamps: &self.timestamps,
            };
        }
        let (start, end) = (self.bounds[range.start], self.bounds[range.end]);
        let first_header = |i: usize| match self.records.get(i * RECORD_WORDS + 4) {
            Some(first) => *first as usize,
            None => self.headers.len() / HEADER_WORDS,
        };
        let (h0, h1) = (first_header(range.start), first_header(range.end));
        let shift = start as i32;
        let records = self.records[range.start * RECORD_WORDS..range.end * RECORD_WORDS]
            .chunks_exact(RECORD_WORDS)
            .flat_map(|w| [w[0] - shift, w[1], w[2] - shift, w[3], w[4] - h0 as i32, w[5]])
            .collect();
        let headers = self.headers[h0 * HEADER_WORDS..h1 * HEADER_WORDS]
            .chunks_exact(HEADER_WORDS)
            .flat_map(|w| [w[0] - shift, w[1], w[2] - shift, w[3]])
            .collect();
        Chunk {
            data: &self.data[start as usize..end as usize],
            records: Cow::Owned(records),
            headers: Cow::Owned(headers),
            timestamps: &self.timestamps[range],
        }
    }
}

/// Appends `bytes` and returns its (offset, length), with -1 for null. The caller
/// has checked the total fits in an i32.
fn push(data: &mut Vec<u8>, bytes: Option<&[u8]>) -> (i32, i32) {
    let offset = data.len() as i32;
    match bytes {
        None => (offset, -1),
        Some(b) => {
            data.extend_from_slice(b);
            (offset, b.len() as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use es_core::batch::{BatchView, encode};
    use es_core::{Header, ProducerInfo};

    use super::*;

    /// (key, value, headers, timestamp) of record `i`, read back through the views
    /// of one chunk the way a guest reads them.
    type Seen<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, Vec<(&'a [u8], Option<&'a [u8]>)>, i64);

    fn read<'c>(c: &'c Chunk<'_>, i: usize) -> Seen<'c> {
        let slice =
            |offset: i32, len: i32| (len >= 0).then(|| &c.data[offset as usize..(offset + len) as usize]);
        let w = &c.records[i * RECORD_WORDS..(i + 1) * RECORD_WORDS];
        let headers = (w[4]..w[4] + w[5])
            .map(|h| {
                let hw = &c.headers[h as usize * HEADER_WORDS..(h as usize + 1) * HEADER_WORDS];
                (slice(hw[0], hw[1]).unwrap(), slice(hw[2], hw[3]))
            })
            .collect();
        (slice(w[0], w[1]), slice(w[2], w[3]), headers, c.timestamps[i])
    }

    fn sample() -> Vec<Record> {
        let mut with_headers = Record::keyed("k1", "v1");
        with_headers.headers.push(Header { key: "h".into(), value: None });
        with_headers.headers.push(Header { key: "h2".into(), value: Some(Bytes::from_static(b"x")) });
        with_headers.timestamp = Some(42);
        let tombstone = Record { key: Some(Bytes::from_static(b"k2")), value: None, ..Record::default() };
        let mut last = Record::from_value(Bytes::from_static(b"v3"));
        last.headers.push(Header { key: "h3".into(), value: Some(Bytes::from_static(b"yy")) });
        vec![with_headers, tombstone, last]
    }

    fn check_sample(c: &Chunk<'_>, from: usize, timestamps: [i64; 3]) {
        let expect: Vec<Seen<'_>> = vec![
            (
                Some(&b"k1"[..]),
                Some(&b"v1"[..]),
                vec![(&b"h"[..], None), (&b"h2"[..], Some(&b"x"[..]))],
                timestamps[0],
            ),
            (Some(&b"k2"[..]), None, vec![], timestamps[1]),
            (None, Some(&b"v3"[..]), vec![(&b"h3"[..], Some(&b"yy"[..]))], timestamps[2]),
        ];
        assert!(!c.timestamps.is_empty());
        for (i, want) in expect[from..].iter().take(c.timestamps.len()).enumerate() {
            assert_eq!(&read(c, i), want, "record {}", from + i);
        }
    }

    #[test]
    fn owned_records_pack_into_one_buffer() {
        let packed = PackedBatch::from_records(&sample()).unwrap();
        assert_eq!(&packed.data[..], b"k1v1hh2xk2v3h3yy");
        assert_eq!(packed.len(), 3);
        check_sample(&packed.chunk(0..3), 0, [42, -1, -1]);
    }

    #[test]
    fn a_plain_section_is_borrowed_not_copied() {
        let batch = encode(&sample(), 7, ProducerInfo::NONE).unwrap();
        let view = BatchView::parse(&batch, batch.len()).unwrap();
        let plain = view.plain_records(batch.len()).unwrap();
        let packed = PackedBatch::from_plain(&plain).unwrap();
        assert!(matches!(packed.data, Cow::Borrowed(_)));
        assert_eq!(packed.data.as_ptr(), plain.as_bytes().as_ptr());
        // Records without a timestamp got the encoder's clock.
        check_sample(&packed.chunk(0..3), 0, [42, 7, 7]);
    }

    #[test]
    fn a_part_of_a_batch_is_rebased_to_its_own_bytes() {
        let packed = PackedBatch::from_records(&sample()).unwrap();
        let c = packed.chunk(1..3);
        assert_eq!((c.timestamps.len(), c.data.len()), (2, b"k2v3h3yy".len()));
        check_sample(&c, 1, [42, -1, -1]);
        let batch = encode(&sample(), 7, ProducerInfo::NONE).unwrap();
        let view = BatchView::parse(&batch, batch.len()).unwrap();
        let plain = view.plain_records(batch.len()).unwrap();
        let packed = PackedBatch::from_plain(&plain).unwrap();
        check_sample(&packed.chunk(1..3), 1, [42, 7, 7]);
        check_sample(&packed.chunk(0..1), 0, [42, 7, 7]);
    }

    #[test]
    fn chunks_respect_the_limit_and_report_oversized_records() {
        let records: Vec<Record> = (0..10).map(|_| Record::from_value(Bytes::from(vec![0u8; 60]))).collect();
        let packed = PackedBatch::from_records(&records).unwrap();
        let per = packed.cost(0);
        assert_eq!(per, 60 + RECORD_OVERHEAD);
        assert_eq!(packed.chunks(per * 4).unwrap(), vec![0..4, 4..8, 8..10]);
        assert_eq!(packed.chunks(per - 1), Err((0, per)));
        assert!(PackedBatch::from_records(&[]).unwrap().chunks(10).unwrap().is_empty());
    }

    #[test]
    fn a_malformed_section_is_a_codec_error() {
        let batch = encode(&sample(), 7, ProducerInfo::NONE).unwrap();
        let view = BatchView::parse(&batch, batch.len()).unwrap();
        let plain = view.plain_records(batch.len()).unwrap();
        let mut cut = plain.as_bytes().to_vec();
        cut.truncate(cut.len() - 3);
        let header = es_core::BatchHeader::parse(&batch, batch.len()).unwrap();
        let broken = PlainRecords::over(&header, &cut);
        assert!(matches!(PackedBatch::from_plain(&broken), Err(PackError::Codec(_))));
    }
}
