//! Raft control batches: the blank and membership entries of a Raft group stored as
//! v2 control batches that take no Kafka offset (DESIGN §4, docs/storage.md
//! "Raft control entries").
//!
//! A Raft control batch has the control bit set, producer id -1 (a Kafka
//! transaction marker always carries its producer's id, so the header alone tells the
//! two apart without parsing a record) and one record whose key is Kafka's control
//! key (version int16 = 0, type int16) with an es type no Kafka client acts on
//! (Kafka uses 0-6). Its value is the entry's Raft index (uint64, big-endian) and then
//! the entry's payload (a membership's bytes; empty for a blank entry). The index is
//! in the batch because offsets cannot tell two control batches at the same offset
//! apart: replay of the journal uses it to know whether a control batch is held.
//! `lastOffsetDelta` stays 0 on the wire, but [`BatchHeader::next_offset`] of a Raft
//! control batch is its base offset: it spans no offset.
//!
//! A compaction entry (`0x4503`) is es's own: the leader's decision to compact every
//! data batch before it, with the tombstone horizon (i64 ms, after the index) every
//! replica applies, so they compact the same records the same way.

use super::*;

/// The control-record type of a Raft blank entry.
pub const RAFT_BLANK_TYPE: i16 = 0x4501;
/// The control-record type of a Raft membership entry.
pub const RAFT_MEMBERSHIP_TYPE: i16 = 0x4502;
/// The control-record type of an es compaction decision.
pub const RAFT_COMPACTION_TYPE: i16 = 0x4503;
/// Kafka's control-key version.
const CONTROL_KEY_VERSION: i16 = 0;

/// What a Raft control batch holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaftControl<'a> {
    Blank {
        index: u64,
    },
    Membership {
        index: u64,
        payload: &'a [u8],
    },
    /// Compact every data batch before this entry; tombstones older than
    /// `horizon_ms` (record timestamp) go.
    Compaction {
        index: u64,
        horizon_ms: i64,
    },
}

impl RaftControl<'_> {
    pub fn index(&self) -> u64 {
        match self {
            RaftControl::Blank { index }
            | RaftControl::Membership { index, .. }
            | RaftControl::Compaction { index, .. } => *index,
        }
    }
}

impl BatchHeader {
    /// A control batch es wrote for Raft (not a Kafka transaction marker).
    pub fn is_raft_control(&self) -> bool {
        self.is_control() && self.producer.producer_id == -1
    }
}

/// Encodes a Raft control batch (base offset 0 and leader epoch -1, stamped at
/// append like any batch) with timestamp `now_ms`.
pub fn encode_raft_control(control: RaftControl<'_>, now_ms: i64) -> Result<Vec<u8>, CodecError> {
    let horizon;
    let (kind, index, payload): (i16, u64, &[u8]) = match control {
        RaftControl::Blank { index } => (RAFT_BLANK_TYPE, index, &[]),
        RaftControl::Membership { index, payload } => (RAFT_MEMBERSHIP_TYPE, index, payload),
        RaftControl::Compaction { index, horizon_ms } => {
            horizon = horizon_ms.to_be_bytes();
            (RAFT_COMPACTION_TYPE, index, &horizon)
        }
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(8 + payload.len());
    value.extend_from_slice(&index.to_be_bytes());
    value.extend_from_slice(payload);
    let record = Record {
        key: Some(key.into()),
        value: Some(value.into()),
        headers: Vec::new(),
        timestamp: Some(now_ms),
    };
    encode::encode_plain(std::iter::once((0u32, &record)), now_ms, ProducerInfo::NONE, CONTROL_BIT)
}

/// The Raft control entry a batch holds, or `None` for any other batch. A batch that
/// claims to be a Raft control batch but does not parse as one is an error.
pub fn raft_control<'a>(view: &BatchView<'a>) -> Result<Option<RaftControl<'a>>, CodecError> {
    if !view.header.is_raft_control() {
        return Ok(None);
    }
    let bad = |reason| CodecError::BadRecord { position: 0, reason };
    if view.header.record_count != 1 || view.compression()? != Compression::None {
        return Err(bad("a Raft control batch holds one uncompressed record"));
    }
    let record = view.records().next().ok_or(bad("a Raft control batch holds one record"))??;
    let (key, value) = match (record.key, record.value) {
        (Some(k), Some(v)) if k.len() == 4 && v.len() >= 8 => (k, v),
        _ => return Err(bad("a Raft control record has a 4-byte key and an 8-byte index")),
    };
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let index = u64::from_be_bytes(value[..8].try_into().expect("8 bytes"));
    match kind {
        RAFT_BLANK_TYPE => Ok(Some(RaftControl::Blank { index })),
        RAFT_MEMBERSHIP_TYPE => Ok(Some(RaftControl::Membership { index, payload: &value[8..] })),
        RAFT_COMPACTION_TYPE => match <[u8; 8]>::try_from(&value[8..]) {
            Ok(h) => Ok(Some(RaftControl::Compaction { index, horizon_ms: i64::from_be_bytes(h) })),
            Err(_) => Err(bad("a Raft compaction record holds an index and an 8-byte horizon")),
        },
        _ => Err(bad("unknown Raft control record type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raft_control_batch_round_trips_and_takes_no_offset() {
        let payload = br#"{"voters":[1,2,3]}"#;
        let mut bytes = encode_raft_control(RaftControl::Membership { index: 42, payload }, 1_000).unwrap();
        stamp(&mut bytes, 7, LeaderEpoch(3));
        let view = BatchView::parse(&bytes, usize::MAX).unwrap();
        assert!(view.header.is_raft_control() && view.header.is_control());
        assert_eq!((view.header.base_offset, view.header.next_offset()), (7, 7));
        assert_eq!(raft_control(&view).unwrap(), Some(RaftControl::Membership { index: 42, payload }));
        let blank = encode_raft_control(RaftControl::Blank { index: 9 }, 1_000).unwrap();
        let view = BatchView::parse(&blank, usize::MAX).unwrap();
        assert_eq!(raft_control(&view).unwrap().map(|c| c.index()), Some(9));
        let decision = RaftControl::Compaction { index: 11, horizon_ms: -5 };
        let bytes = encode_raft_control(decision, 0).unwrap();
        let view = BatchView::parse(&bytes, usize::MAX).unwrap();
        assert!(view.header.is_raft_control());
        assert_eq!(raft_control(&view).unwrap(), Some(decision));
    }

    #[test]
    fn data_batches_and_transaction_markers_are_not_raft_control() {
        let data = encode(&[Record::from_value("v")], 0, ProducerInfo::NONE).unwrap();
        let view = BatchView::parse(&data, usize::MAX).unwrap();
        assert_eq!(raft_control(&view).unwrap(), None);
        assert_eq!(view.header.next_offset(), 1);
        let marker = ProducerInfo { producer_id: 5, producer_epoch: 0, base_sequence: -1 };
        let rec = Record::from_value("marker");
        let txn = encode::encode_plain(std::iter::once((0u32, &rec)), 0, marker, CONTROL_BIT).unwrap();
        let view = BatchView::parse(&txn, usize::MAX).unwrap();
        assert!(view.header.is_control() && !view.header.is_raft_control());
        assert_eq!(view.header.next_offset(), 1, "a transaction marker takes its offset");
    }
}
