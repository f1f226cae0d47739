//! Retention by age and size, and the cold tier. Both act on sealed local segments
//! only; the active segment is never touched. With the cold tier on, an expired
//! segment is copied (with its indexes) to the cold directory and then removed
//! locally; reads below the local start offset are served from there.

use std::sync::Arc;

use crate::error::{IoContext, Result};
use crate::files::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::partition::PartitionLog;
use crate::segment::Segment;

/// What one housekeeping round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HousekeepingReport {
    pub deleted_segments: Vec<u64>,
    pub tiered_segments: Vec<u64>,
    pub compacted_segments: Vec<u64>,
    pub records_removed: u64,
}

impl PartitionLog {
    /// Runs retention (or tiering) and compaction once, with the manager's clock.
    pub fn housekeeping(&self) -> Result<HousekeepingReport> {
        let _guard = self.housekeeping.lock().expect("housekeeping lock");
        let now = self.shared.clock.now_ms();
        let mut report = HousekeepingReport::default();
        self.enforce_retention(now, &mut report)?;
        self.compact(now, &mut report)?;
        Ok(report)
    }

    fn enforce_retention(&self, now: i64, report: &mut HousekeepingReport) -> Result<()> {
        let cfg = self.config();
        if !cfg.cleanup_policy.deletes() {
            return Ok(());
        }
        let (sealed, mut total) = {
            let inner = self.inner.lock().expect("partition lock");
            let total: u64 = inner.segments.values().map(|s| s.size()).sum();
            let sealed: Vec<Arc<Segment>> = inner
                .segments
                .values()
                .filter(|s| s.state.read().expect("segment state lock").sealed)
                .cloned()
                .collect();
            (sealed, total)
        };
        for seg in sealed {
            let size = seg.size();
            let by_size =
                cfg.retention_bytes >= 0 && total.saturating_sub(size) >= cfg.retention_bytes as u64;
            let by_age = cfg.retention_ms >= 0
                && seg.max_timestamp().is_some_and(|m| now.saturating_sub(m) > cfg.retention_ms);
            if !(by_size || by_age) {
                break;
            }
            if cfg.cold_tier {
                self.move_to_cold(&seg)?;
                report.tiered_segments.push(seg.base_offset);
            } else {
                self.inner.lock().expect("partition lock").segments.remove(&seg.base_offset);
                self.remove_files(seg.base_offset)?;
                report.deleted_segments.push(seg.base_offset);
            }
            total -= size;
        }
        Ok(())
    }

    /// Copies a sealed segment and its indexes to the cold directory durably, then
    /// swaps it from the local list to the cold list and deletes the local files.
    fn move_to_cold(&self, seg: &Arc<Segment>) -> Result<()> {
        let cold_dir = self.cold_dir.as_ref().expect("cold tier checked at config time");
        let base = seg.base_offset;
        let dst = files::segment_path(cold_dir, base, LOG_EXT);
        let mut tmp = dst.as_os_str().to_owned();
        tmp.push(files::TMP_SUFFIX);
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::copy(&seg.log_path, &tmp)
            .ctx(|| format!("copying {} to the cold tier", seg.log_path.display()))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).ctx(|| format!("syncing {}", tmp.display()))?;
        seg.write_indexes(cold_dir)?;
        if seg.state.read().expect("segment state lock").compacted {
            let marker = files::segment_path(cold_dir, base, files::COMPACTED_EXT);
            files::write_atomic(&marker, b"").ctx(|| format!("writing {}", marker.display()))?;
        }
        std::fs::rename(&tmp, &dst).ctx(|| format!("renaming {}", tmp.display()))?;
        files::fsync_dir(cold_dir).ctx(|| format!("syncing {}", cold_dir.display()))?;
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_MAX_DEFAULT);
        let cold =
            Segment::open_sealed(cold_dir, base, seg.next_offset(), self.shared.open_files.clone(), max)?;
        {
            let mut inner = self.inner.lock().expect("partition lock");
            inner.segments.remove(&base);
            inner.cold.insert(base, cold);
        }
        for ext in [INDEX_EXT, TIME_INDEX_EXT, LOG_EXT, files::COMPACTED_EXT] {
            let p = files::segment_path(&self.dir, base, ext);
            files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))
    }
}
