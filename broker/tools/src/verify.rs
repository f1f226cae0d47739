//! What a dump records and a restore checks about each file: its sha256, and for a
//! segment, that it is whole Kafka v2 batches back to back, each with a good
//! CRC-32C, in rising offset order. Both are computed as the bytes stream by, so a
//! restore checks an archive without reading any file twice.

use es_core::batch::{BatchHeader, BatchView};
use sha2::{Digest, Sha256};

use crate::limits::BATCH_BYTES_MAX;

/// The lowercase hex of a finished sha256.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A running sha256 of a stream.
#[derive(Debug, Default, Clone)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub fn finish(self) -> String {
        hex(&self.0.finalize())
    }
}

/// Where a segment stops being valid batches, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchFault {
    pub position: u64,
    pub reason: String,
}

/// The offsets a checked segment holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentSpan {
    /// The first batch's base offset, if the segment holds any batch.
    pub first_offset: Option<u64>,
    /// The offset after the last batch.
    pub next_offset: Option<u64>,
    pub batches: u64,
}

/// Checks a segment's batches as its bytes arrive in arbitrary pieces.
#[derive(Debug, Default)]
pub struct BatchChecker {
    /// Bytes of a batch not yet complete (at most one batch, bounded by the limit).
    pending: Vec<u8>,
    /// The file position of `pending[0]`.
    position: u64,
    span: SegmentSpan,
}

impl BatchChecker {
    pub fn push(&mut self, data: &[u8]) -> Result<(), BatchFault> {
        self.pending.extend_from_slice(data);
        let mut at = 0;
        while self.pending.len() - at >= BatchHeader::LEN {
            let rest = &self.pending[at..];
            let position = self.position + at as u64;
            let fault = |reason: String| BatchFault { position, reason };
            let header = BatchHeader::parse(rest, BATCH_BYTES_MAX).map_err(|e| fault(e.to_string()))?;
            if rest.len() < header.total_len() {
                break;
            }
            BatchView::parse(rest, BATCH_BYTES_MAX).map_err(|e| fault(e.to_string()))?;
            if let Some(next) = self.span.next_offset
                && header.base_offset < next
            {
                return Err(fault(format!(
                    "base offset {} goes back before {next}, where the previous batch ended",
                    header.base_offset
                )));
            }
            self.span.first_offset.get_or_insert(header.base_offset);
            self.span.next_offset = Some(header.next_offset());
            self.span.batches += 1;
            at += header.total_len();
        }
        self.pending.drain(..at);
        self.position += at as u64;
        Ok(())
    }

    /// The segment's span, or a fault if it ends inside a batch.
    pub fn finish(self) -> Result<SegmentSpan, BatchFault> {
        if !self.pending.is_empty() {
            return Err(BatchFault {
                position: self.position,
                reason: format!("the file ends {} bytes into a batch (a torn write)", self.pending.len()),
            });
        }
        Ok(self.span)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use es_core::{LeaderEpoch, ProducerInfo, Record};

    /// A valid v2 batch of `count` records starting at `base`.
    pub(crate) fn batch(base: u64, count: usize) -> Vec<u8> {
        let records: Vec<Record> =
            (0..count).map(|i| Record::from_value(format!("value {i}").into_bytes())).collect();
        let mut bytes = es_core::batch::encode(&records, 1_700_000_000_000, ProducerInfo::NONE).unwrap();
        es_core::batch::stamp(&mut bytes, base, LeaderEpoch(0));
        bytes
    }

    fn check_in_pieces(data: &[u8], piece: usize) -> Result<SegmentSpan, BatchFault> {
        let mut checker = BatchChecker::default();
        for chunk in data.chunks(piece) {
            checker.push(chunk)?;
        }
        checker.finish()
    }

    #[test]
    fn whole_batches_give_their_span_whatever_the_piece_size() {
        let data = [batch(0, 3), batch(3, 2), batch(10, 1)].concat();
        for piece in [1, 7, 61, 62, 4096] {
            let span = check_in_pieces(&data, piece).unwrap();
            assert_eq!(span, SegmentSpan { first_offset: Some(0), next_offset: Some(11), batches: 3 });
        }
        assert_eq!(check_in_pieces(&[], 1).unwrap(), SegmentSpan::default());
    }

    #[test]
    fn a_flipped_bit_fails_the_crc_at_its_batch() {
        let first = batch(0, 3);
        let mut data = [first.clone(), batch(3, 2)].concat();
        let last = data.len() - 1;
        data[last] ^= 1;
        let fault = check_in_pieces(&data, 100).unwrap_err();
        assert_eq!(fault.position, first.len() as u64);
        assert!(fault.reason.contains("crc mismatch"), "{}", fault.reason);
    }

    #[test]
    fn a_torn_tail_and_a_backwards_offset_are_faults() {
        let data = [batch(0, 3), batch(3, 2)].concat();
        let fault = check_in_pieces(&data[..data.len() - 5], 64).unwrap_err();
        assert!(fault.reason.contains("torn"), "{}", fault.reason);
        let backwards = [batch(5, 3), batch(6, 1)].concat();
        let fault = check_in_pieces(&backwards, 64).unwrap_err();
        assert!(fault.reason.contains("goes back"), "{}", fault.reason);
    }

    #[test]
    fn hashes_are_lowercase_hex_sha256() {
        let mut h = Hasher::default();
        h.update(b"abc");
        assert_eq!(h.finish(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
