//! The log start offset set by DeleteRecords (Kafka's log-start-offset checkpoint):
//! a floor below which nothing is served, whatever segments still hold. It is made
//! durable before it takes effect, so a restart never serves a record that a
//! DeleteRecords answer said was gone. Whole segments below it are deleted at once;
//! the one holding it keeps its earlier batches on disk until retention removes it.

use std::path::Path;
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::partition::{PartitionLog, remove_segment_files};
use crate::segment::Segment;

/// The floor's file in a partition's directory: one decimal offset.
pub(crate) const LOG_START_FILE: &str = "log-start-offset";

/// The floor stored in `dir` (0 when none was ever set).
pub(crate) fn load(dir: &Path) -> Result<u64> {
    let path = dir.join(LOG_START_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| LogError::Corrupt {
            file: path.clone(),
            position: 0,
            reason: format!("expected one offset, found {:?}", text.trim()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(LogError::io(format!("reading {}", path.display()), e)),
    }
}

fn persist(dir: &Path, offset: u64) -> Result<()> {
    let path = dir.join(LOG_START_FILE);
    files::write_atomic(&path, format!("{offset}\n").as_bytes()).ctx(|| format!("writing {}", path.display()))
}

impl PartitionLog {
    /// Kafka's DeleteRecords: records below `before` are no longer served, and the
    /// log start offset (the answer) becomes `before`. `before` may be at most the
    /// high watermark; at or below the current start it changes nothing. Whole
    /// segments (local or cold) below it are deleted; the active one never is.
    pub fn delete_records_before(&self, before: u64) -> Result<u64> {
        let _guard = self.housekeeping.lock().expect("housekeeping lock");
        let hw = self.high_watermark();
        let start = self.inner.lock().expect("partition lock").log_start();
        if before > hw {
            return Err(LogError::OffsetOutOfRange {
                requested: before,
                log_start: start,
                high_watermark: hw,
            });
        }
        if before <= start {
            return Ok(start);
        }
        persist(&self.dir, before)?;
        let (local, cold) = {
            let mut inner = self.inner.lock().expect("partition lock");
            inner.start_floor = before;
            let active = inner.active().base_offset;
            let below = |seg: &Arc<Segment>| seg.base_offset != active && seg.next_offset() <= before;
            let local: Vec<u64> =
                inner.segments.values().filter(|s| below(s)).map(|s| s.base_offset).collect();
            let cold: Vec<u64> = inner.cold.values().filter(|s| below(s)).map(|s| s.base_offset).collect();
            local.iter().for_each(|b| drop(inner.segments.remove(b)));
            cold.iter().for_each(|b| drop(inner.cold.remove(b)));
            (local, cold)
        };
        // Each directory is synced once, after all its removals.
        if !local.is_empty() {
            for base in local {
                remove_segment_files(&self.dir, base)?;
            }
            files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        }
        if let Some(tier) = self.cold.as_ref().filter(|_| !cold.is_empty()) {
            tier.remove(&cold)?;
        }
        Ok(before)
    }
}
