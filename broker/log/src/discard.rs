//! A replica moved away drops its copy (Kafka's StopReplica with delete): every
//! segment, cold object and Raft file goes, and the log is empty at offset 0 and
//! Raft index 0, as a partition never written. Should the partition be placed here
//! again, the node joins its group as a new replica and the leader sends it the
//! log from the start.

use std::sync::atomic::Ordering;

use crate::error::{IoContext, Result};
use crate::files;
use crate::log_start::LOG_START_FILE;
use crate::partition::{Inner, PRODUCER_STATE_FILE, PartitionLog, remove_segment_files};
use crate::raft::RaftFile;
use crate::segment::Segment;

impl PartitionLog {
    /// Drops everything this log holds, Raft state included. The caller has closed
    /// the partition's Raft group (and its last write ended) and no longer serves it.
    ///
    /// Crash-safe: the vote goes first, so from then on a start finds a log that
    /// is no replica's and discards what is left (a node holding no vote for a
    /// partition not placed on it has no part in its group). The journal records
    /// a truncation of every entry before a segment goes, so its replay never
    /// brings back a batch it still holds. A failure once segments are being
    /// removed poisons the partition until it is reopened.
    pub fn discard_replica(&self) -> Result<()> {
        let _housekeeping = self.housekeeping.lock().expect("housekeeping lock");
        let mut inner = self.inner.lock().expect("partition lock");
        for seg in inner.segments.values() {
            crate::partition::wait_drained(seg);
        }
        self.progress.check()?;
        self.raft_committed.lock().expect("committed slots lock").take();
        for file in [RaftFile::Vote, RaftFile::Committed, RaftFile::Purged, RaftFile::Snapshot] {
            self.remove_raft_file(file)?;
        }
        self.compaction.clear(&self.dir)?;
        for name in [LOG_START_FILE, PRODUCER_STATE_FILE] {
            let path = self.dir.join(name);
            files::remove_if_exists(&path).ctx(|| format!("removing {}", path.display()))?;
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        let cold: Vec<u64> = inner.cold.keys().copied().collect();
        if let (Some(tier), false) = (&self.cold, cold.is_empty()) {
            tier.remove(&cold)?;
        }
        inner.cold.clear();
        if let Some(journal) = self.shared.flusher.journal() {
            journal.record_truncate_entries(&self.name, 0, 0)?;
        }
        let emptied = self.empty_segments(&mut inner);
        if let Err(e) = &emptied {
            *self.progress.failed.lock().expect("failed lock") = Some(format!("discarding the replica: {e}"));
        }
        emptied?;
        self.raft_purged_next.store(0, Ordering::Release);
        self.retention_wants.store(0, Ordering::Release);
        self.progress.durable_offset.store(0, Ordering::Release);
        self.progress.committed.store(0, Ordering::Release);
        self.progress.notify.send_replace(self.progress.visible());
        self.snapshot_producers(&inner)
    }

    /// Replaces every local segment with an empty one at offset 0, Raft index 0.
    fn empty_segments(&self, inner: &mut Inner) -> Result<()> {
        for (base, seg) in &inner.segments {
            seg.close_reader();
            remove_segment_files(&self.dir, *base)?;
        }
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let fresh = Segment::create(&self.dir, 0, 0, self.shared.open_files.clone(), max)?;
        inner.segments = std::collections::BTreeMap::from([(0, fresh)]);
        inner.next_offset = 0;
        inner.start_floor = 0;
        inner.epochs.truncate_from(0, 0)?;
        inner.producers = crate::producers::ProducerTable::default();
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))
    }

    /// Whether this log holds anything a replica would have written: an entry
    /// (data or Raft control) or a Raft file.
    pub fn holds_replica_state(&self) -> Result<bool> {
        if self.entry_range().next > 0 || self.log_end() > 0 {
            return Ok(true);
        }
        for file in [RaftFile::Vote, RaftFile::Committed, RaftFile::Purged, RaftFile::Snapshot] {
            if self.read_raft_file(file)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use es_core::batch::{self, RaftControl};
    use es_core::{LeaderEpoch, Record};

    use crate::config::LogConfig;
    use crate::manager::{LogManager, ManagerOptions};
    use crate::raft::{EntryRange, EntryStamp, RaftFile};

    fn manager(dir: &std::path::Path) -> LogManager {
        let opts = ManagerOptions { housekeeping_interval: None, journal: true, ..ManagerOptions::default() };
        LogManager::new(dir, opts).unwrap()
    }

    /// Four entries: blank, data, blank, data (offsets 0 and 1).
    fn fill(p: &crate::PartitionLog, first: u64, epoch: LeaderEpoch) {
        for i in first..first + 4 {
            let bytes = if i % 2 == 0 {
                batch::encode_raft_control(RaftControl::Blank { index: i }, 1_000).unwrap()
            } else {
                let value = format!("v{i}");
                batch::encode(&[Record::from_value(value)], 1_000, es_core::ProducerInfo::NONE).unwrap()
            };
            p.append_entry(bytes, i, EntryStamp::Leader(epoch)).unwrap().wait().unwrap();
        }
    }

    /// A discarded replica is empty at offset 0 and Raft index 0 with no Raft
    /// file, takes a new group's log from the start, and neither a restart that
    /// replays the journal (nothing checkpointed) nor a clean one brings back what
    /// it held.
    #[test]
    fn a_discarded_replica_is_empty_and_stays_empty_across_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        {
            let m = manager(dir.path());
            let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
            fill(&p, 0, LeaderEpoch(1));
            p.write_raft_file(RaftFile::Vote, b"{\"vote\":1}").unwrap();
            p.write_raft_file(RaftFile::Committed, b"{\"index\":3}").unwrap();
            p.set_committed_offset(2);
            assert!(p.holds_replica_state().unwrap());
            p.discard_replica().unwrap();
            assert!(!p.holds_replica_state().unwrap());
            assert_eq!(p.entry_range(), EntryRange { first: 0, next: 0 });
            assert_eq!((p.info().log_end_offset, p.high_watermark()), (0, 0));
            assert_eq!(p.read_raft_file(RaftFile::Committed).unwrap(), None);
            assert!(p.entry_epochs().is_empty());
            // Placed here again: the new group's entries land from index 0.
            fill(&p, 0, LeaderEpoch(3));
            p.set_committed_offset(2);
            assert_eq!(p.entry_range(), EntryRange { first: 0, next: 4 });
            assert_eq!(p.entry_epochs().len(), 1);
            p.discard_replica().unwrap();
            m.stop_without_checkpoint();
        }
        let m = manager(dir.path());
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert!(!p.holds_replica_state().unwrap(), "the journal replay brought entries back");
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 0 });
        m.shutdown().unwrap();
        drop(p);
        let m = manager(dir.path());
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert!(!p.holds_replica_state().unwrap());
    }
}
