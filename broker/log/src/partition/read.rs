//! Reads of a partition: whole batches by offset, never past the high watermark
//! (Raft control batches stripped), and offsets by timestamp; a cold segment is
//! fetched (and verified) before it is read.

use super::*;

impl PartitionLog {
    /// Reads whole batches starting with the one that contains `offset`, up to
    /// `max_bytes` (always at least one whole batch), never past the high watermark.
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<ReadResult> {
        match self.read_once(offset, max_bytes) {
            // Retention or compaction replaced a segment under this read: try once more.
            Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                self.read_once(offset, max_bytes)
            }
            other => other,
        }
    }

    fn read_once(&self, offset: u64, max_bytes: usize) -> Result<ReadResult> {
        let hw = self.high_watermark();
        let (candidates, log_start) = {
            let inner = self.inner.lock().expect("partition lock");
            let log_start = inner.log_start();
            if offset < log_start || offset > hw {
                return Err(LogError::OffsetOutOfRange { requested: offset, log_start, high_watermark: hw });
            }
            let cold = inner.cold.iter().map(|(b, s)| (b, s, true));
            let all = cold.chain(inner.segments.iter().map(|(b, s)| (b, s, false)));
            let floor = all.clone().take_while(|(b, ..)| **b <= offset).count().saturating_sub(1);
            let candidates: Vec<(Arc<Segment>, bool)> =
                all.skip(floor).map(|(_, s, c)| (s.clone(), c)).collect();
            (candidates, log_start)
        };
        let mut data = Vec::new();
        // Batches that compaction emptied (Raft mode keeps them: `compaction.rs`) are
        // passed over while nothing else was found, so a reader is not answered
        // batch after batch of nothing (librdkafka takes that for a record too
        // large to fetch); the last one passed over is the answer if nothing follows
        // within the scan budget, so the reader still moves on.
        let (mut at, mut passed, mut scanned) = (offset, None, 0usize);
        if offset < hw {
            'segments: for (seg, is_cold) in candidates {
                if is_cold {
                    self.fetch_cold(&seg)?;
                }
                while at < hw {
                    let got = strip_raft_control(seg.read(at, max_bytes, hw)?);
                    if got.is_empty() {
                        break;
                    }
                    match emptied_only(&got) {
                        Some((last, next)) if next > at && scanned < EMPTIED_SCAN_MAX_BYTES => {
                            scanned += got.len();
                            passed = Some(got[last..].to_vec());
                            at = next;
                        }
                        _ => {
                            data = got;
                            break 'segments;
                        }
                    }
                }
            }
        }
        if data.is_empty()
            && let Some(last) = passed
        {
            data = last;
        }
        Ok(ReadResult { data: Bytes::from(data), high_watermark: hw, log_start_offset: log_start })
    }

    /// The first offset whose record timestamp is >= `timestamp`, or `None` if every
    /// durable record is older.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<u64>> {
        let hw = self.high_watermark();
        let segments: Vec<(Arc<Segment>, bool)> = {
            let inner = self.inner.lock().expect("partition lock");
            let cold = inner.cold.values().map(|s| (s.clone(), true));
            cold.chain(inner.segments.values().map(|s| (s.clone(), false))).collect()
        };
        for (seg, is_cold) in segments {
            // A cold segment whose newest record is older needs no fetch.
            if is_cold && seg.max_timestamp().is_some_and(|m| m < timestamp) {
                continue;
            }
            if is_cold {
                self.fetch_cold(&seg)?;
            }
            if let Some(o) = seg.offset_for_timestamp(timestamp, hw)? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// Kafka's ListOffsets "max timestamp" (KIP-734): the greatest record timestamp
    /// and the first offset holding it, or `None` for an empty log. The segments'
    /// indexes give the maximum; while the batch holding it is not yet durable the
    /// answer is `None`, as for an empty log (it is, to readers).
    pub fn max_timestamp_offset(&self) -> Result<Option<(u64, i64)>> {
        let max = {
            let inner = self.inner.lock().expect("partition lock");
            inner.cold.values().chain(inner.segments.values()).filter_map(|s| s.max_timestamp()).max()
        };
        let Some(max) = max else { return Ok(None) };
        Ok(self.offset_for_timestamp(max)?.map(|offset| (offset, max)))
    }

    /// Makes a cold segment's `.log` local (fetched into the cache and verified).
    fn fetch_cold(&self, seg: &Arc<Segment>) -> Result<()> {
        match &self.cold {
            Some(tier) => tier.ensure_local(seg),
            None => Ok(()),
        }
    }
}

/// How many bytes of emptied batches one read passes over before it answers the
/// last of them.
const EMPTIED_SCAN_MAX_BYTES: usize = 64 << 20;

/// When every batch of `data` is a data batch compaction emptied (no records):
/// where the last one starts, and the offset after it.
fn emptied_only(data: &[u8]) -> Option<(usize, u64)> {
    let (mut at, mut last) = (0, None);
    while let Ok(h) = es_core::BatchHeader::parse(&data[at..], usize::MAX) {
        if h.record_count > 0 || h.is_control() {
            return None;
        }
        last = Some((at, h.next_offset()));
        at += h.total_len();
        if at >= data.len() {
            break;
        }
    }
    last
}

/// Drops Raft control batches from served bytes: they hold no records a reader may
/// see (docs/storage.md, "Raft control entries"). Copies only when one is present.
fn strip_raft_control(data: Vec<u8>) -> Vec<u8> {
    let mut at = 0;
    let mut any = false;
    while let Ok(h) = es_core::BatchHeader::parse(&data[at..], usize::MAX) {
        any |= h.is_raft_control();
        at += h.total_len();
        if at >= data.len() || any {
            break;
        }
    }
    if !any {
        return data;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut at = 0;
    while let Ok(h) = es_core::BatchHeader::parse(&data[at..], usize::MAX) {
        let end = (at + h.total_len()).min(data.len());
        if !h.is_raft_control() {
            out.extend_from_slice(&data[at..end]);
        }
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};

    use es_core::{LeaderEpoch, Record};

    use crate::manager::{LogManager, ManagerOptions};
    use crate::{LogConfig, LogError};

    fn config() -> LogConfig {
        LogConfig { segment_bytes: 4096, index_interval_bytes: 256, ..LogConfig::default() }
    }

    /// A batch is CRC-checked once per process: appended ones when they are
    /// appended, others (a segment opened sealed) on their first read. A damaged
    /// batch never read yet is refused; the prefix before it is served and stays
    /// verified.
    #[test]
    fn a_read_checks_each_batch_of_an_opened_segment_once_and_refuses_a_damaged_one() {
        let dir = tempfile::tempdir().unwrap();
        let opts = || ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
        {
            let m = LogManager::new(dir.path(), opts()).unwrap();
            let (p, _) = m.open_partition("t-0", config()).unwrap();
            for i in 0..200 {
                let r = Record::from_value(format!("value-{i:04}").into_bytes());
                p.append_records(&[r], LeaderEpoch(1)).unwrap().wait().unwrap();
            }
            let inner = p.inner.lock().unwrap();
            assert!(inner.segments.len() >= 2, "the test needs a sealed segment");
            let active = inner.active();
            assert!(!active.needs_check(0, 100, 0), "appended in this process: checked already");
        }
        let m = LogManager::new(dir.path(), opts()).unwrap();
        let (p, _) = m.open_partition("t-0", config()).unwrap();
        let first = p.inner.lock().unwrap().segments.values().next().unwrap().clone();
        let (size, last_batch) = (first.size(), first.next_offset() - 1);
        assert!(first.needs_check(0, 1, 0), "opened sealed: not checked yet");
        // Damage the last byte of the first segment (inside its last batch's CRC).
        let mut f = std::fs::OpenOptions::new().write(true).open(&first.log_path).unwrap();
        f.seek(SeekFrom::Start(size - 1)).unwrap();
        f.write_all(&[0xAA]).unwrap();
        f.sync_all().unwrap();
        for round in 0..2 {
            for offset in 0..last_batch {
                let r = p.read(offset, 1).unwrap();
                assert!(!r.data.is_empty(), "round {round}: offset {offset}");
            }
            let refused = p.read(last_batch, 1);
            assert!(matches!(refused, Err(LogError::Corrupt { .. })), "round {round}: {refused:?}");
            let verified = first.verified_to();
            assert!(
                verified > 0 && verified < size,
                "verified up to the damaged batch: {verified} of {size}"
            );
            assert!(!first.needs_check(0, verified as usize, verified));
        }
    }
}
