//! Key compaction. For a topic with `cleanup.policy=compact`, each sealed local
//! segment is rewritten to keep only the newest record of each key (looking at the
//! whole log, active segment included), and tombstones older than
//! `delete.retention.ms` (by record timestamp) are dropped. Offsets never change:
//! surviving records keep their offset deltas, so batches may have gaps. Records
//! without a key are kept. A rewritten segment is written to a temporary file,
//! synced, and renamed over the old one; its indexes are rebuilt.

use std::collections::HashMap;
use std::sync::Arc;

use es_core::Record;
use es_core::batch::{self, BatchView};

use crate::error::{IoContext, Result};
use crate::files::{self, INDEX_EXT, TIME_INDEX_EXT};
use crate::partition::PartitionLog;
use crate::retention::HousekeepingReport;
use crate::segment::Segment;

const READ_CHUNK: usize = 1 << 20;

impl PartitionLog {
    pub(crate) fn compact(&self, now: i64, report: &mut HousekeepingReport) -> Result<()> {
        let cfg = self.config();
        // Compaction may drop whole batches, which are Raft entries in a Raft group.
        if !cfg.cleanup_policy.compacts() || self.raft_mode.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let hw = self.high_watermark();
        let (sealed, all) = {
            let inner = self.inner.lock().expect("partition lock");
            let all: Vec<Arc<Segment>> = inner.segments.values().cloned().collect();
            let sealed: Vec<Arc<Segment>> =
                all.iter().filter(|s| s.state.read().expect("segment state lock").sealed).cloned().collect();
            (sealed, all)
        };
        if sealed.is_empty() {
            return Ok(());
        }
        // Newest offset of every key in the local log.
        let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
        for seg in &all {
            for_each_batch(seg, hw, |view| {
                let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)?;
                for r in plain.iter() {
                    let r = r?;
                    if let Some(k) = r.key {
                        latest.insert(k.to_vec(), r.offset);
                    }
                }
                Ok(())
            })?;
        }
        let tombstone_horizon = now.saturating_sub(cfg.delete_retention_ms);
        for seg in sealed {
            let (out, removed) = rewrite(&seg, hw, &latest, tombstone_horizon)?;
            if removed == 0 {
                continue;
            }
            self.replace_segment(&seg, &out)?;
            report.compacted_segments.push(seg.base_offset);
            report.records_removed += removed;
        }
        Ok(())
    }

    fn replace_segment(&self, old: &Arc<Segment>, bytes: &[u8]) -> Result<()> {
        let base = old.base_offset;
        let mut tmp = old.log_path.as_os_str().to_owned();
        tmp.push(files::TMP_SUFFIX);
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, bytes).ctx(|| format!("writing {}", tmp.display()))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).ctx(|| format!("syncing {}", tmp.display()))?;
        // Readers of the old segment keep their handle on the old file.
        let _ = old.reader();
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            let p = files::segment_path(&self.dir, base, ext);
            files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
        }
        // Mark the segment before its gaps appear, so recovery never mistakes a
        // compaction gap for damage.
        let marker = files::segment_path(&self.dir, base, files::COMPACTED_EXT);
        files::write_atomic(&marker, b"").ctx(|| format!("writing {}", marker.display()))?;
        std::fs::rename(&tmp, &old.log_path).ctx(|| format!("renaming {}", tmp.display()))?;
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let new =
            Segment::open_sealed(&self.dir, base, old.next_offset(), self.shared.open_files.clone(), max)?;
        let mut inner = self.inner.lock().expect("partition lock");
        if inner.segments.get(&base).is_some_and(|s| Arc::ptr_eq(s, old)) {
            inner.segments.insert(base, new);
        }
        Ok(())
    }
}

/// Calls `f` for every batch of `seg` below `hw`.
fn for_each_batch(
    seg: &Arc<Segment>,
    hw: u64,
    mut f: impl FnMut(&BatchView<'_>) -> Result<()>,
) -> Result<()> {
    let mut offset = seg.base_offset;
    loop {
        let data = seg.read(offset, READ_CHUNK, hw)?;
        if data.is_empty() {
            return Ok(());
        }
        let mut at = 0;
        while at < data.len() {
            let view = BatchView::parse(&data[at..], usize::MAX)?;
            f(&view)?;
            offset = view.header.next_offset();
            at += view.header.total_len();
        }
    }
}

/// The compacted bytes of one segment and how many records were dropped.
fn rewrite(
    seg: &Arc<Segment>,
    hw: u64,
    latest: &HashMap<Vec<u8>, u64>,
    tombstone_horizon: i64,
) -> Result<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut removed = 0u64;
    for_each_batch(seg, hw, |view| {
        let base = view.header.base_offset;
        let mut kept: Vec<(u32, Record)> = Vec::new();
        let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)?;
        for r in plain.iter() {
            let r = r?;
            let keep = match r.key {
                None => true,
                Some(k) => {
                    let newest = latest.get(k) == Some(&r.offset);
                    let expired_tombstone = r.value.is_none() && r.timestamp < tombstone_horizon;
                    newest && !expired_tombstone
                }
            };
            if keep {
                kept.push(((r.offset - base) as u32, r.to_record()));
            } else {
                removed += 1;
            }
        }
        if kept.len() == view.header.record_count as usize {
            out.extend_from_slice(view.bytes());
        } else if !kept.is_empty() {
            // Survivors keep their offsets, timestamps, producer fields, flags and codec.
            out.extend_from_slice(&batch::encode_like(&view.header, kept.iter().map(|(d, r)| (*d, r)))?);
        }
        Ok(())
    })?;
    Ok((out, removed))
}
