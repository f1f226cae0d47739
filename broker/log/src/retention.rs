//! Retention by age and size, and the cold tier. Both act on sealed local segments
//! only; the active segment is never touched. With the cold tier on, an expired
//! segment is uploaded (with its indexes) to the cold store and then removed
//! locally; reads below the local start offset are fetched from there (`cold/`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::partition::PartitionLog;
use crate::segment::Segment;

/// What one housekeeping round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HousekeepingReport {
    pub deleted_segments: Vec<u64>,
    pub tiered_segments: Vec<u64>,
    /// Cold segments deleted by the cold tier's retention.
    pub deleted_cold_segments: Vec<u64>,
    pub compacted_segments: Vec<u64>,
    pub records_removed: u64,
}

impl PartitionLog {
    /// Runs retention (or tiering) and compaction once, with the manager's clock.
    pub fn housekeeping(&self) -> Result<HousekeepingReport> {
        let retired = self.housekeeping.lock().expect("housekeeping lock");
        let mut report = HousekeepingReport::default();
        if *retired {
            // Its topic is being deleted: nothing may be written to it or its store.
            return Ok(report);
        }
        let now = self.shared.clock.now_ms();
        self.enforce_retention(now, &mut report)?;
        self.enforce_cold_retention(now, &mut report)?;
        self.compact(now, &mut report)?;
        Ok(report)
    }

    /// Retention keeps every segment holding an offset at or past `offset`,
    /// whatever its config says: for a log whose reader must have consumed what
    /// goes (the cluster's metadata log, whose records are applied to the
    /// registry before they may be purged).
    pub fn set_retention_floor(&self, offset: u64) {
        self.retention_floor.store(offset, Ordering::Release);
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
        // In Raft mode a segment goes only once the group purged every entry in it
        // (the snapshot moved past it): a follower that still needs those entries is
        // sent the snapshot instead of a log with a hole. Tiering keeps the entries
        // readable, so it need not wait.
        let raft = self.is_raft_log() && !cfg.cold_tier;
        let purged_next = self.raft_purged_next.load(Ordering::Acquire);
        let floor = self.retention_floor.load(Ordering::Acquire);
        let mut wants = 0;
        for seg in sealed {
            if seg.next_offset() > floor {
                break;
            }
            let size = seg.size();
            let by_size =
                cfg.retention_bytes >= 0 && total.saturating_sub(size) >= cfg.retention_bytes as u64;
            let by_age = cfg.retention_ms >= 0
                && seg.max_timestamp().is_some_and(|m| now.saturating_sub(m) > cfg.retention_ms);
            if !(by_size || by_age) {
                break;
            }
            if raft {
                let end = seg.state.read().expect("segment state lock").raft.end();
                if wants > 0 || end > purged_next {
                    // Retention wants it gone; the group purges up to here first.
                    wants = end;
                    total -= size;
                    continue;
                }
            }
            if cfg.cold_tier {
                if !self.move_to_cold(&seg, now)? {
                    break;
                }
                report.tiered_segments.push(seg.base_offset);
            } else {
                self.inner.lock().expect("partition lock").segments.remove(&seg.base_offset);
                self.remove_files(seg.base_offset)?;
                report.deleted_segments.push(seg.base_offset);
            }
            total -= size;
        }
        self.retention_wants.store(wants, Ordering::Release);
        Ok(())
    }

    /// Uploads a sealed segment and its indexes to the cold store and publishes the
    /// manifest; only then swaps it from the local list to the cold list (its
    /// `.log` moved into the cold cache) and deletes the other local files. While
    /// the store fails, the segment stays local and keeps being served.
    fn move_to_cold(&self, seg: &Arc<Segment>, now: i64) -> Result<bool> {
        let tier = self.cold.as_ref().expect("cold tier checked at config time");
        if !tier.may_upload(now) {
            return Ok(false);
        }
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let cold = tier.upload(seg, &self.dir, now, max)?;
        let base = seg.base_offset;
        {
            let mut inner = self.inner.lock().expect("partition lock");
            inner.segments.remove(&base);
            inner.cold.insert(base, cold);
        }
        seg.close_reader();
        self.remove_files(base)?;
        Ok(true)
    }

    /// Deletes cold segments past the cold tier's own retention (age or size).
    fn enforce_cold_retention(&self, now: i64, report: &mut HousekeepingReport) -> Result<()> {
        let Some(tier) = &self.cold else { return Ok(()) };
        let mut expired = tier.expired(now);
        if self.is_raft_log() {
            // As for local segments: only what the group purged (oldest first).
            let purged_next = self.raft_purged_next.load(Ordering::Acquire);
            let inner = self.inner.lock().expect("partition lock");
            let end =
                |b: &u64| inner.cold.get(b).map(|s| s.state.read().expect("segment state lock").raft.end());
            if let Some(cut) = expired.iter().position(|b| end(b).is_none_or(|e| e > purged_next)) {
                if let Some(e) = expired.last().and_then(end) {
                    self.retention_wants.fetch_max(e, Ordering::AcqRel);
                }
                expired.truncate(cut);
            }
        }
        if expired.is_empty() {
            return Ok(());
        }
        {
            let mut inner = self.inner.lock().expect("partition lock");
            expired.iter().for_each(|b| drop(inner.cold.remove(b)));
        }
        tier.remove(&expired)?;
        report.deleted_cold_segments.extend(expired);
        Ok(())
    }

    /// Deletes every object this partition has in the cold store (its topic is being
    /// deleted) and retires it: a housekeeping round in progress finishes first, and
    /// none runs after, so no upload lands after the deletion. The local files are
    /// the caller's to remove.
    pub fn delete_cold(&self) -> Result<()> {
        let mut retired = self.housekeeping.lock().expect("housekeeping lock");
        *retired = true;
        let Some(tier) = &self.cold else { return Ok(()) };
        self.inner.lock().expect("partition lock").cold.clear();
        tier.delete_all()
    }
}
