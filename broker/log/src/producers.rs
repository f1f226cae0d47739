//! Idempotent-producer state of one partition: for each producer id, its epoch and
//! the last five batches it wrote (sequence range and offsets), as in Kafka. It
//! decides, under the partition lock and atomically with offset assignment, whether
//! a batch is new, a retry of a recent batch (answered with the original offsets),
//! out of order, or from a fenced (older) epoch.
//!
//! The state is derived from the log: every batch header carries producer id, epoch
//! and base sequence. A snapshot written at each segment roll and on clean close
//! bounds how much of the log a restart replays.

use std::collections::{HashMap, VecDeque};

use es_core::{BatchHeader, ProducerInfo};

use crate::error::{LogError, Result};

/// Batches remembered per producer (Kafka's `max.in.flight.requests.per.connection` bound).
pub const BATCHES_KEPT: usize = 5;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
    /// The batch's max timestamp (-1 when restored from an older snapshot).
    pub max_timestamp: i64,
}

/// What DescribeProducers reports of one producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Entry {
    epoch: i16,
    batches: VecDeque<ProducerBatch>,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    Fresh,
    Duplicate(ProducerBatch),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProducerTable {
    map: HashMap<i64, Entry>,
}

fn add_seq(seq: i32, delta: u32) -> i32 {
    es_core::add_sequence(seq, u64::from(delta))
}

impl ProducerTable {
    /// Classifies a leader-path batch with `last_offset_delta`.
    pub fn check(&self, p: &ProducerInfo, last_offset_delta: u32) -> Result<Check> {
        if p.producer_id < 0 {
            return Ok(Check::Fresh);
        }
        let out_of_order = |expected: i32| LogError::OutOfOrderSequence {
            producer_id: p.producer_id,
            expected,
            got: p.base_sequence,
        };
        let Some(entry) = self.map.get(&p.producer_id) else {
            return if p.base_sequence == 0 { Ok(Check::Fresh) } else { Err(out_of_order(0)) };
        };
        if p.producer_epoch < entry.epoch {
            return Err(LogError::ProducerFenced {
                producer_id: p.producer_id,
                epoch: p.producer_epoch,
                current: entry.epoch,
            });
        }
        if p.producer_epoch > entry.epoch {
            return if p.base_sequence == 0 { Ok(Check::Fresh) } else { Err(out_of_order(0)) };
        }
        let last_seq = add_seq(p.base_sequence, last_offset_delta);
        if let Some(b) =
            entry.batches.iter().find(|b| b.first_seq == p.base_sequence && b.last_seq == last_seq)
        {
            return Ok(Check::Duplicate(*b));
        }
        let expected = entry.batches.back().map_or(0, |b| add_seq(b.last_seq, 1));
        if p.base_sequence == expected { Ok(Check::Fresh) } else { Err(out_of_order(expected)) }
    }

    /// Remembers a batch that was appended (leader or replica path, or replay).
    pub fn record(&mut self, h: &BatchHeader) {
        let p = h.producer;
        if p.producer_id < 0 {
            return;
        }
        let entry = self.map.entry(p.producer_id).or_default();
        if entry.epoch != p.producer_epoch {
            entry.epoch = p.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(ProducerBatch {
            first_seq: p.base_sequence,
            last_seq: add_seq(p.base_sequence, h.last_offset_delta),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
        });
        while entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
    }

    /// The epoch and last sequence of a producer, if known.
    pub fn latest(&self, producer_id: i64) -> Option<(i16, i32)> {
        let e = self.map.get(&producer_id)?;
        Some((e.epoch, e.batches.back().map_or(-1, |b| b.last_seq)))
    }

    /// Every producer this partition remembers, by id.
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut out: Vec<ProducerSummary> = self
            .map
            .iter()
            .filter_map(|(&producer_id, e)| {
                let last = e.batches.back()?;
                Some(ProducerSummary {
                    producer_id,
                    epoch: e.epoch,
                    last_sequence: last.last_seq,
                    last_timestamp: last.max_timestamp,
                })
            })
            .collect();
        out.sort_by_key(|p| p.producer_id);
        out
    }

    /// Text snapshot: a first line `offset <n>` (the state covers the log below n),
    /// then one line per remembered batch (id, epoch, first and last sequence, base
    /// and last offset, max timestamp; snapshots before the timestamp have six fields).
    pub fn encode(&self, offset: u64) -> String {
        let mut out = format!("offset {offset}\n");
        let mut ids: Vec<&i64> = self.map.keys().collect();
        ids.sort();
        for id in ids {
            let e = &self.map[id];
            for b in &e.batches {
                out.push_str(&format!(
                    "{id} {} {} {} {} {} {}\n",
                    e.epoch, b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.max_timestamp
                ));
            }
        }
        out
    }

    /// Parses [`encode`]'s output; `None` if malformed (the caller replays the log).
    pub fn decode(text: &str) -> Option<(u64, ProducerTable)> {
        let mut lines = text.lines();
        let offset = lines.next()?.strip_prefix("offset ")?.parse().ok()?;
        let mut table = ProducerTable::default();
        for line in lines {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 6 && f.len() != 7 {
                return None;
            }
            let id: i64 = f[0].parse().ok()?;
            let entry = table.map.entry(id).or_default();
            entry.epoch = f[1].parse().ok()?;
            entry.batches.push_back(ProducerBatch {
                first_seq: f[2].parse().ok()?,
                last_seq: f[3].parse().ok()?,
                base_offset: f[4].parse().ok()?,
                last_offset: f[5].parse().ok()?,
                max_timestamp: f.get(6).map_or(Some(-1), |t| t.parse().ok())?,
            });
        }
        Some((offset, table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(base_offset: u64, id: i64, epoch: i16, seq: i32, count: u32) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 0,
            leader_epoch: es_core::LeaderEpoch::INITIAL,
            crc: 0,
            magic: es_core::batch::MAGIC,
            attributes: 0,
            last_offset_delta: count - 1,
            record_count: count,
            base_timestamp: 0,
            max_timestamp: 1_000 + base_offset as i64,
            producer: ProducerInfo { producer_id: id, producer_epoch: epoch, base_sequence: seq },
        }
    }

    fn info(id: i64, epoch: i16, seq: i32) -> ProducerInfo {
        ProducerInfo { producer_id: id, producer_epoch: epoch, base_sequence: seq }
    }

    #[test]
    fn sequences_duplicates_gaps_and_fencing() {
        let mut t = ProducerTable::default();
        assert_eq!(t.check(&info(7, 0, 0), 4).unwrap(), Check::Fresh);
        assert!(matches!(t.check(&info(7, 0, 3), 4), Err(LogError::OutOfOrderSequence { expected: 0, .. })));
        t.record(&header(100, 7, 0, 0, 5));
        assert_eq!(t.check(&info(7, 0, 5), 1).unwrap(), Check::Fresh);
        let dup = t.check(&info(7, 0, 0), 4).unwrap();
        assert!(matches!(dup, Check::Duplicate(ProducerBatch { base_offset: 100, last_offset: 104, .. })));
        assert!(matches!(t.check(&info(7, 0, 6), 0), Err(LogError::OutOfOrderSequence { expected: 5, .. })));
        // A new epoch starts over at 0; the old epoch is fenced afterwards.
        assert_eq!(t.check(&info(7, 1, 0), 0).unwrap(), Check::Fresh);
        t.record(&header(105, 7, 1, 0, 1));
        assert!(matches!(t.check(&info(7, 0, 5), 0), Err(LogError::ProducerFenced { current: 1, .. })));
        // Only the last five batches are remembered.
        for i in 1..=6 {
            t.record(&header(105 + i as u64, 7, 1, i, 1));
        }
        assert!(matches!(t.check(&info(7, 1, 1), 0), Err(LogError::OutOfOrderSequence { expected: 7, .. })));
        assert!(matches!(t.check(&info(7, 1, 2), 0).unwrap(), Check::Duplicate(_)));
        let (off, back) = ProducerTable::decode(&t.encode(42)).unwrap();
        assert_eq!((off, &back), (42, &t));
        let summary = ProducerSummary { producer_id: 7, epoch: 1, last_sequence: 6, last_timestamp: 1_111 };
        assert_eq!(t.summaries(), [summary]);
        // A snapshot written before timestamps were kept still loads.
        let (_, old) = ProducerTable::decode("offset 3\n7 0 0 2 0 2\n").unwrap();
        assert_eq!(old.summaries()[0].last_timestamp, -1);
        assert_eq!(add_seq(i32::MAX, 1), 0);
    }
}
