//! The partition log as a Raft log (docs/storage.md, "The Raft log"): every stored
//! batch is one entry, addressed by its Raft index; blank and membership entries are
//! control batches that take no offset. es-raft builds openraft's storage on these
//! calls; the log itself knows nothing of openraft.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use es_core::LeaderEpoch;
use es_core::batch::{self, BatchView, TimestampType};

use crate::epochs::EpochStart;
use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::partition::{Inner, PartitionLog, PendingAppend};
use crate::segment::Segment;

/// Who stamps an entry's base offset and leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryStamp {
    /// The leader stamps the next offset and this epoch (its term).
    Leader(LeaderEpoch),
    /// A follower stores the leader's bytes: their base offset must be the log's
    /// next offset and their epoch this one (the entry's term).
    Follower(LeaderEpoch),
}

/// A small durable Raft file in the partition directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaftFile {
    /// The last vote (term, node, committed).
    Vote,
    /// The last purged log id.
    Purged,
    /// The last committed log id.
    Committed,
    /// The state machine's last snapshot (metadata only).
    Snapshot,
}

impl RaftFile {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RaftFile::Vote => "raft-vote",
            RaftFile::Purged => "raft-purged",
            RaftFile::Committed => "raft-committed",
            RaftFile::Snapshot => "raft-snapshot",
        }
    }
}

/// The committed id is rewritten on every commit, so it lives in a slot file
/// (`slots.rs`: one `pwrite` and one `fdatasync` per write) instead of an atomic
/// replace. A `raft-committed` file of an earlier es is read while no slot holds
/// a value.
const COMMITTED_SLOTS: &str = "raft-committed.slots";

/// The Raft indexes a partition holds: `[first, next)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRange {
    pub first: u64,
    pub next: u64,
}

impl PartitionLog {
    /// Marks this partition as a Raft group's log (compaction then follows the
    /// group's decisions; see `raft_mode`).
    /// From then on readers see only committed records: the committed offset starts
    /// at 0 and grows by [`PartitionLog::set_committed_offset`] (the state machine
    /// re-applies committed entries after a restart).
    pub fn set_raft_mode(&self) {
        if !self.raft_mode.swap(true, Ordering::AcqRel) {
            self.progress.committed.store(0, Ordering::Release);
            self.progress.notify.send_replace(self.progress.visible());
        }
    }

    /// Whether this is a Raft group's log: in Raft mode, or opened holding a vote
    /// (its group has not opened yet since a restart). Housekeeping never treats
    /// such a log as a plain one (retention would delete what the group did not
    /// purge, plain compaction drop whole entries).
    pub(crate) fn is_raft_log(&self) -> bool {
        self.opened_with_vote || self.raft_mode.load(Ordering::Acquire)
    }

    /// Raft mode: records below `offset` are committed. Monotonic (a lower value is
    /// ignored); readers get min(durable end, committed), so it never exposes a
    /// record that is not on this replica's disk.
    pub fn set_committed_offset(&self, offset: u64) {
        self.set_raft_mode();
        let prev = self.progress.committed.fetch_max(offset, Ordering::AcqRel);
        if offset > prev {
            self.progress.publish();
        }
    }

    /// The committed offset of a Raft group's log (`None` outside Raft mode).
    pub fn committed_offset(&self) -> Option<u64> {
        let c = self.progress.committed.load(Ordering::Acquire);
        (c != u64::MAX).then_some(c)
    }

    /// The idempotent-producer check a Raft leader runs before proposing `bytes`:
    /// `Some((base, last))` when it retries a batch already in the log (answer its
    /// original offsets), `None` when it is new. An out-of-order sequence or a fenced
    /// producer epoch is the same error as a local append. Sees appended entries,
    /// committed or not: a proposal not yet appended is not known here.
    pub fn check_duplicate(&self, bytes: &[u8]) -> Result<Option<(u64, u64)>> {
        let header = es_core::BatchHeader::parse(bytes, usize::MAX)?;
        let inner = self.inner.lock().expect("partition lock");
        match inner.producers.check(&header.producer, header.last_offset_delta)? {
            crate::producers::Check::Duplicate(b) => Ok(Some((b.base_offset, b.last_offset))),
            crate::producers::Check::Fresh => Ok(None),
        }
    }

    /// The Raft indexes this log holds, cold tier included.
    pub fn entry_range(&self) -> EntryRange {
        let inner = self.inner.lock().expect("partition lock");
        EntryRange { first: inner.first_index(), next: inner.next_index() }
    }

    /// Appends one Raft entry, which must get Raft index `index` (the next one).
    /// Resolves, like any append, once the group commit made it durable.
    pub fn append_entry(&self, mut bytes: Vec<u8>, index: u64, stamp: EntryStamp) -> Result<PendingAppend> {
        self.set_raft_mode();
        let (header, timestamp_type) = self.check_entry(&bytes, matches!(stamp, EntryStamp::Follower(_)))?;
        match stamp {
            EntryStamp::Leader(epoch) => {
                if timestamp_type == TimestampType::LogAppendTime && !header.is_raft_control() {
                    batch::set_log_append_time(&mut bytes, self.shared.clock.now_ms());
                }
                self.append_inner(&mut bytes, false, Some(index), |next| (next, epoch))
            }
            EntryStamp::Follower(epoch) => {
                if header.leader_epoch != epoch {
                    return Err(LogError::EpochMismatch {
                        index,
                        stored: header.leader_epoch,
                        expected: epoch,
                    });
                }
                self.append_inner(&mut bytes, false, Some(index), |_| (header.base_offset, epoch))
            }
        }
    }

    /// `from_leader`: a follower's copy, which compaction on the leader may have
    /// rewritten (`compaction.rs`).
    fn check_entry(&self, bytes: &[u8], from_leader: bool) -> Result<(es_core::BatchHeader, TimestampType)> {
        let header = es_core::BatchHeader::parse(bytes, usize::MAX)?;
        if header.is_raft_control() {
            // Control batches are es's own: only their shape is checked.
            let view = BatchView::parse(bytes, usize::MAX)?;
            batch::raft_control(&view)?;
            return Ok((header, TimestampType::CreateTime));
        }
        self.check_batch(bytes, from_leader)
    }

    /// The entries with Raft indexes in `[from, to)`, whole and CRC-checked, up to
    /// `max_bytes` (at least one). Waits for the group commit when the range reaches
    /// entries not yet durable: a Raft reader only ever sees what is on disk.
    pub fn read_entries(&self, from: u64, to: u64, max_bytes: usize) -> Result<Vec<(u64, Bytes)>> {
        match self.read_entries_once(from, to, max_bytes) {
            // Compaction replaced a segment under this read (`Segment::retire`).
            Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                self.read_entries_once(from, to, max_bytes)
            }
            other => other,
        }
    }

    fn read_entries_once(&self, from: u64, to: u64, max_bytes: usize) -> Result<Vec<(u64, Bytes)>> {
        let range = self.entry_range();
        let to = to.min(range.next);
        if from >= to {
            return Ok(Vec::new());
        }
        if from < range.first {
            return Err(LogError::EntryOutOfRange { index: from, first: range.first, next: range.next });
        }
        let mut out = Vec::new();
        let mut size = 0usize;
        let mut index = from;
        let mut segments = self.segments_from(from).into_iter();
        let mut seg = segments.next();
        while index < to && (out.is_empty() || size < max_bytes) {
            let Some(s) = seg.as_ref() else { break };
            if index >= s.state.read().expect("segment state lock").raft.end() {
                seg = segments.next();
                continue;
            }
            let bytes = match s.read_entry(index)? {
                Some(b) => b,
                None => {
                    // Queued but not yet durable: wait for the flusher, then read again.
                    self.wait_appended_durable()?;
                    s.read_entry(index)?.ok_or(LogError::EntryOutOfRange {
                        index,
                        first: range.first,
                        next: range.next,
                    })?
                }
            };
            size += bytes.len();
            out.push((index, Bytes::from(bytes)));
            index += 1;
        }
        Ok(out)
    }

    /// The segments (cold tier first) from the one holding Raft index `index` on.
    fn segments_from(&self, index: u64) -> Vec<Arc<Segment>> {
        let inner = self.inner.lock().expect("partition lock");
        let all: Vec<Arc<Segment>> = inner.cold.values().chain(inner.segments.values()).cloned().collect();
        let skip = all
            .iter()
            .take_while(|s| s.state.read().expect("segment state lock").raft.end() <= index)
            .count();
        all.into_iter().skip(skip).collect()
    }

    /// The leader-epoch (term) starts with their first offset and Raft index.
    pub fn entry_epochs(&self) -> Vec<EpochStart> {
        self.inner.lock().expect("partition lock").epochs.entries.clone()
    }

    /// Discards every entry with Raft index >= `index` (openraft's `truncate_after`
    /// keeps `index - 1`). The journal records it before the segments change.
    pub fn truncate_entries_from(&self, index: u64) -> Result<()> {
        let mut inner = self.inner.lock().expect("partition lock");
        if index >= inner.next_index() {
            return Ok(());
        }
        let target = inner
            .segments
            .values()
            .find(|s| s.state.read().expect("segment state lock").raft.end() > index)
            .cloned()
            .expect("the active segment ends at the next index");
        let (first, mut pos) = {
            let st = target.state.read().expect("segment state lock");
            (st.raft.first(), st.raft.position(index))
        };
        let mut index = index;
        // The segment held before this one (cold tier included) ends at or before `index`.
        let in_gap = pos.is_none() && index < first && {
            let before =
                inner.cold.values().chain(inner.segments.values()).take_while(|s| !Arc::ptr_eq(s, &target));
            before.last().is_some_and(|s| s.state.read().expect("segment state lock").raft.end() <= index)
        };
        if in_gap {
            // In a gap between two segments' indexes (the log continued past purged
            // entries, `restart_entries_at`): nothing is held from `index` up to
            // this segment's first, so cutting from there is the same cut.
            if first >= inner.next_index() {
                return Ok(());
            }
            index = first;
            pos = target.state.read().expect("segment state lock").raft.position(first);
        }
        let Some(cut) = pos else {
            // Below the local segments (cold tier) or before this segment's first.
            return Err(LogError::EntryOutOfRange { index, first, next: inner.next_index() });
        };
        for seg in inner.segments.values() {
            crate::partition::wait_drained(seg);
        }
        self.progress.check()?;
        let offset = {
            let file = target.reader()?;
            target.header_at(&file, cut)?.base_offset
        };
        if let Some(journal) = self.shared.flusher.journal() {
            journal.record_truncate_entries(&self.name, offset, index)?;
        }
        self.cut_at(&mut inner, &target, cut, offset, index)
    }

    /// Makes the next appended entry get Raft index `index` and offset `offset`,
    /// past the log's end: a Raft group whose every entry was purged (a snapshot was
    /// installed) continues there. At the log's next offset, the entries already
    /// stored keep their indexes and a segment holding only purged control batches
    /// (no offset, so no record a consumer could read) is emptied so its first index
    /// can move. Past it (the leader's retention removed the records in between,
    /// Kafka's "truncate fully and start at"), every record held is below the
    /// leader's log start: the log starts over at `offset`.
    pub fn restart_entries_at(&self, index: u64, offset: u64) -> Result<()> {
        let mut inner = self.inner.lock().expect("partition lock");
        let next = inner.next_index();
        if index <= next {
            return if index == next {
                Ok(())
            } else {
                Err(LogError::NotContiguous { expected: next, got: index })
            };
        }
        if offset < inner.next_offset {
            return Err(LogError::NotContiguous { expected: inner.next_offset, got: offset });
        }
        for seg in inner.segments.values() {
            crate::partition::wait_drained(seg);
        }
        self.progress.check()?;
        if offset > inner.next_offset {
            return self.start_over_at(&mut inner, index, offset);
        }
        let active = inner.active().clone();
        let (size, holds_offsets) = (active.size(), active.next_offset() > active.base_offset);
        if size > 0 && holds_offsets {
            return self.roll_at_index(&mut inner, index);
        }
        if size > 0 {
            let offset = inner.next_offset;
            let first = active.state.read().expect("segment state lock").raft.first();
            self.cut_at(&mut inner, &active, 0, offset, first)?;
        }
        let active = inner.active().clone();
        let mut st = active.state.write().expect("segment state lock");
        st.raft = crate::raft_index::RaftPositions::new(index);
        st.raft.write(&self.dir, active.base_offset, false)
    }

    /// Replaces every segment with an empty one at `offset`, first index `index`.
    /// The new segment is made durable before the old ones go: a crash in between
    /// leaves old segments below a gap, all of them purged for Raft, which
    /// retention removes; the journal's older batches then lie below the log end
    /// and are skipped on replay.
    fn start_over_at(&self, inner: &mut Inner, index: u64, offset: u64) -> Result<()> {
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let fresh = Segment::create(&self.dir, offset, index, self.shared.open_files.clone(), max)?;
        let old = std::mem::take(&mut inner.segments);
        let cold: Vec<u64> = std::mem::take(&mut inner.cold).into_keys().collect();
        crate::failpoint::hit("raft-start-over");
        inner.segments.insert(offset, fresh);
        inner.next_offset = offset;
        inner.epochs.truncate_from(0, 0)?;
        inner.producers = crate::producers::ProducerTable::default();
        for (base, seg) in old {
            seg.close_reader();
            crate::partition::remove_segment_files(&self.dir, base)?;
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        if let (Some(tier), false) = (&self.cold, cold.is_empty()) {
            tier.remove(&cold)?;
        }
        self.progress.durable_offset.store(offset, Ordering::Release);
        self.progress.notify.send_replace(self.progress.visible());
        self.snapshot_producers(inner)
    }

    /// Raft mode: the group purged its log up to `index`, inclusive; retention may
    /// delete the segments whose entries are all at or below it.
    pub fn set_raft_purged(&self, index: u64) {
        self.raft_purged_next.fetch_max(index.saturating_add(1), Ordering::AcqRel);
    }

    /// Raft mode: the first index retention would keep if the group purged below it
    /// (`None`: retention waits for nothing). Set by each housekeeping round.
    pub fn retention_wants(&self) -> Option<u64> {
        let wants = self.retention_wants.load(Ordering::Acquire);
        (wants > self.raft_purged_next.load(Ordering::Acquire)).then_some(wants)
    }

    fn roll_at_index(&self, inner: &mut Inner, index: u64) -> Result<()> {
        let active = inner.active().clone();
        self.roll(inner, &active)?;
        let fresh = inner.active().clone();
        let mut st = fresh.state.write().expect("segment state lock");
        st.raft = crate::raft_index::RaftPositions::new(index);
        st.raft.write(&self.dir, fresh.base_offset, false)
    }

    /// Writes a small Raft file atomically and durably, after every append queued
    /// before it is durable: a vote never overtakes an append (openraft#1252).
    pub fn write_raft_file(&self, file: RaftFile, bytes: &[u8]) -> Result<()> {
        self.wait_appended_durable()?;
        if file == RaftFile::Committed {
            return self.write_committed_covered(bytes);
        }
        let path = self.raft_file_path(file);
        files::write_atomic(&path, bytes).ctx(|| format!("writing {}", path.display()))
    }

    /// Writes the committed id durably without waiting for the appends queued
    /// now: the caller has seen every entry the id covers durable (es-raft orders
    /// the write behind those entries' completions), and appends queued since
    /// (entries past the id) need not hold it back.
    pub fn write_committed_covered(&self, bytes: &[u8]) -> Result<()> {
        // A log whose flusher failed holds no promise of durability any more.
        self.progress.check()?;
        let path = self.dir.join(COMMITTED_SLOTS);
        let mut slots = self.raft_committed.lock().expect("committed slots lock");
        let write = |slots: &mut Option<crate::slots::SlotFile>| match slots {
            Some(f) => f.write(bytes),
            None => slots.insert(crate::slots::SlotFile::open(&path)?).write(bytes),
        };
        write(&mut slots).ctx(|| format!("writing {}", path.display()))
    }

    /// The content of a Raft file, `None` if it was never written.
    pub fn read_raft_file(&self, file: RaftFile) -> Result<Option<Vec<u8>>> {
        if file == RaftFile::Committed {
            let path = self.dir.join(COMMITTED_SLOTS);
            if let Some(value) = crate::slots::read(&path).ctx(|| format!("reading {}", path.display()))? {
                return Ok(Some(value));
            }
        }
        let path = self.raft_file_path(file);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LogError::io(format!("reading {}", path.display()), e)),
        }
    }

    /// Removes a Raft file (for the committed id, its slot file too). Durable once
    /// the caller syncs the directory.
    pub(crate) fn remove_raft_file(&self, file: RaftFile) -> Result<()> {
        let mut paths = vec![self.raft_file_path(file)];
        if file == RaftFile::Committed {
            paths.push(self.dir.join(COMMITTED_SLOTS));
        }
        for path in paths {
            files::remove_if_exists(&path).ctx(|| format!("removing {}", path.display()))?;
        }
        Ok(())
    }

    fn raft_file_path(&self, file: RaftFile) -> PathBuf {
        self.dir.join(file.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::manager::{LogManager, ManagerOptions, journal_only};
    use es_core::Record;
    use es_core::batch::RaftControl;

    const E1: LeaderEpoch = LeaderEpoch(1);

    fn manager(dir: &std::path::Path, journal: bool) -> LogManager {
        let opts = ManagerOptions { housekeeping_interval: None, journal, ..ManagerOptions::default() };
        LogManager::new(dir, opts).unwrap()
    }

    fn blank(index: u64) -> Vec<u8> {
        batch::encode_raft_control(RaftControl::Blank { index }, 1_000).unwrap()
    }

    fn data(value: &str) -> Vec<u8> {
        batch::encode(&[Record::from_value(value.to_owned())], 1_000, es_core::ProducerInfo::NONE).unwrap()
    }

    /// index 0 blank, 1 data "a" (offset 0), 2 membership, 3 data "b" (offset 1).
    fn fill(p: &PartitionLog) {
        let member =
            batch::encode_raft_control(RaftControl::Membership { index: 2, payload: b"{}" }, 1_000).unwrap();
        for (i, bytes) in [blank(0), data("a"), member, data("b")].into_iter().enumerate() {
            p.append_entry(bytes, i as u64, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        }
        p.set_committed_offset(2);
    }

    fn values(p: &PartitionLog, offset: u64) -> Vec<String> {
        let read = p.read(offset, 1 << 20).unwrap();
        assert!(read.batches().all(|b| !b.header.is_control()), "a reader never gets a control batch");
        read.batches()
            .flat_map(|b| {
                b.records()
                    .map(|r| String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn control_entries_take_no_offset_and_are_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p);
        assert_eq!(p.info().log_end_offset, 2, "two data batches, two offsets");
        assert_eq!(p.high_watermark(), 2);
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 4 });
        assert_eq!(values(&p, 0), ["a", "b"]);
        assert_eq!(values(&p, 1), ["b"]);
        // The smallest read still makes progress past a control batch.
        let one = p.read(1, 1).unwrap();
        assert_eq!(one.batches().map(|b| b.header.base_offset).collect::<Vec<_>>(), [1]);
        assert_eq!(p.offset_for_timestamp(0).unwrap(), Some(0));
        let entries = p.read_entries(0, 10, 1 << 20).unwrap();
        let bases: Vec<(u64, u64, bool)> = entries
            .iter()
            .map(|(i, b)| {
                let h = es_core::BatchHeader::parse(b, usize::MAX).unwrap();
                (*i, h.base_offset, h.is_raft_control())
            })
            .collect();
        assert_eq!(bases, [(0, 0, true), (1, 0, false), (2, 1, true), (3, 1, false)]);
        let starts = p.entry_epochs();
        assert_eq!(starts, [EpochStart { epoch: E1, offset: 0, index: Some(0) }]);
    }

    #[test]
    fn appends_must_be_contiguous_and_followers_keep_the_leaders_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p);
        let err = p.append_entry(blank(5), 5, EntryStamp::Leader(E1)).unwrap_err();
        assert!(matches!(err, LogError::NotContiguous { expected: 4, got: 5 }), "{err:?}");
        let err = p.append_entry(blank(5), 4, EntryStamp::Leader(E1)).unwrap_err();
        assert!(
            matches!(err, LogError::NotContiguous { .. }),
            "a control batch names its own index: {err:?}"
        );
        // A follower stores the leader's stamped bytes as they are.
        let (f, _) = m.open_partition("t-1", LogConfig::default()).unwrap();
        for (i, bytes) in p.read_entries(0, 4, 1 << 20).unwrap() {
            f.append_entry(bytes.to_vec(), i, EntryStamp::Follower(E1)).unwrap().wait().unwrap();
        }
        assert_eq!(f.read_entries(0, 4, 1 << 20).unwrap(), p.read_entries(0, 4, 1 << 20).unwrap());
        let wrong = p.read_entries(3, 4, 1 << 20).unwrap()[0].1.to_vec();
        let err = f.append_entry(wrong, 4, EntryStamp::Follower(E1)).unwrap_err();
        assert!(matches!(err, LogError::OffsetMismatch { expected: 2, got: 1 }), "{err:?}");
    }

    #[test]
    fn truncation_by_index_keeps_control_entries_at_the_same_offset() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p);
        // Cut data "b" (index 3, offset 1); membership (index 2, also offset 1) stays.
        p.truncate_entries_from(3).unwrap();
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 3 });
        assert_eq!((p.info().log_end_offset, p.high_watermark()), (1, 1));
        p.append_entry(data("c"), 3, EntryStamp::Leader(LeaderEpoch(2))).unwrap().wait().unwrap();
        assert_eq!(values(&p, 0), ["a", "c"]);
        let starts: Vec<_> = p.entry_epochs().iter().map(|e| (e.epoch, e.offset, e.index)).collect();
        assert_eq!(starts, [(E1, 0, Some(0)), (LeaderEpoch(2), 1, Some(3))]);
        p.truncate_entries_from(0).unwrap();
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 0 });
        assert_eq!(p.info().log_end_offset, 0);
    }

    #[test]
    fn recovery_after_a_torn_tail_keeps_the_raft_index_of_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let before = {
            let m = manager(dir.path(), false);
            let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
            fill(&p);
            p.force_roll().unwrap();
            p.append_entry(blank(4), 4, EntryStamp::Leader(LeaderEpoch(2))).unwrap().wait().unwrap();
            p.append_entry(data("d"), 5, EntryStamp::Leader(LeaderEpoch(2))).unwrap().wait().unwrap();
            p.flush().unwrap();
            p.read_entries(0, 6, 1 << 20).unwrap()
            // Dropped without a clean close.
        };
        let pdir = dir.path().join("t-0");
        // A torn tail: half a batch after the last one.
        let active = crate::files::segment_path(&pdir, 2, crate::files::LOG_EXT);
        let mut f = std::fs::OpenOptions::new().append(true).open(&active).unwrap();
        std::io::Write::write_all(&mut f, &blank(6)[..30]).unwrap();
        // And the sealed segment's sidecar lost its positions.
        let sealed = crate::files::segment_path(&pdir, 0, crate::raft_index::RAFT_EXT);
        let bytes = std::fs::read(&sealed).unwrap();
        std::fs::write(&sealed, &bytes[..20]).unwrap();
        let m = manager(dir.path(), false);
        let (p, report) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert!(report.trimmed.is_some(), "the torn tail is trimmed");
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 6 });
        assert_eq!(p.read_entries(0, 6, 1 << 20).unwrap(), before);
        assert_eq!(
            (values(&p, 0), values(&p, 2)),
            (vec!["a".to_owned(), "b".to_owned()], vec!["d".to_owned()])
        );
        p.append_entry(blank(6), 6, EntryStamp::Leader(LeaderEpoch(2))).unwrap().wait().unwrap();
    }

    #[test]
    fn the_journal_replays_control_entries_by_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let before = {
            let m = journal_only(dir.path());
            let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
            fill(&p);
            p.truncate_entries_from(3).unwrap();
            p.append_entry(blank(3), 3, EntryStamp::Leader(LeaderEpoch(2))).unwrap().wait().unwrap();
            let entries = p.read_entries(0, 4, 1 << 20).unwrap();
            m.stop_without_checkpoint();
            entries
        };
        // The segments lose everything not checkpointed; the journal has it all.
        let active = crate::files::segment_path(&dir.path().join("t-0"), 0, crate::files::LOG_EXT);
        std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(0).unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert_eq!(p.read_entries(0, 10, 1 << 20).unwrap(), before);
        assert_eq!(p.info().log_end_offset, 1);
    }

    #[test]
    fn a_log_restarts_past_its_end_and_keeps_what_consumers_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p);
        p.restart_entries_at(20, 2).unwrap();
        assert_eq!(values(&p, 0), ["a", "b"], "records stay readable");
        assert_eq!(p.entry_range().next, 20);
        p.append_entry(blank(20), 20, EntryStamp::Leader(LeaderEpoch(3))).unwrap().wait().unwrap();
        // A log of control batches only restarts in place.
        p.restart_entries_at(30, 2).unwrap();
        assert_eq!(p.entry_range().next, 30);
        p.append_entry(blank(30), 30, EntryStamp::Leader(LeaderEpoch(3))).unwrap().wait().unwrap();
        assert_eq!(p.read_entries(30, 31, 1 << 20).unwrap().len(), 1);
        assert!(p.restart_entries_at(5, 2).is_err());
    }

    /// `fill`, then the log continues at index 20 (offset 2, a new segment): a
    /// blank and "c". Indexes 4-19 are a gap.
    fn fill_past_a_gap(p: &PartitionLog) {
        fill(p);
        p.restart_entries_at(20, 2).unwrap();
        p.append_entry(blank(20), 20, EntryStamp::Leader(LeaderEpoch(3))).unwrap().wait().unwrap();
        p.append_entry(data("c"), 21, EntryStamp::Leader(LeaderEpoch(3))).unwrap().wait().unwrap();
    }

    /// A log that continued past purged entries has a gap in its indexes; a
    /// truncation from inside the gap cuts everything after it (a snapshot past the
    /// log's end drops the entries after the committed id, es-raft's
    /// `drop_unmatched_tail`, whose committed id may fall there).
    #[test]
    fn a_truncation_from_inside_an_index_gap_cuts_the_entries_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill_past_a_gap(&p);
        assert_eq!(p.info().log_end_offset, 3);
        p.truncate_entries_from(10).unwrap();
        assert_eq!(p.entry_range().next, 20, "nothing from index 20 on");
        assert_eq!(p.info().log_end_offset, 2);
        assert_eq!(values(&p, 0), ["a", "b"], "what came before the gap stays");
        p.truncate_entries_from(10).unwrap();
        p.append_entry(blank(20), 20, EntryStamp::Leader(LeaderEpoch(4))).unwrap().wait().unwrap();
        assert_eq!(p.entry_range().next, 21);
    }

    /// The same gap with the segment below it in the cold tier (tiering does not
    /// wait for a purge in Raft mode).
    #[test]
    fn a_truncation_from_a_gap_after_the_cold_tier_cuts_the_entries_after_it() {
        let (dir, cold) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let opts = ManagerOptions {
            housekeeping_interval: None,
            cold_dir: Some(cold.path().to_owned()),
            ..ManagerOptions::default()
        };
        let m = LogManager::new(dir.path(), opts).unwrap();
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill_past_a_gap(&p);
        p.set_config(LogConfig { cold_tier: true, retention_bytes: 1, ..LogConfig::default() }).unwrap();
        // The flusher seals the rolled segment on its own thread (bounded wait).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.housekeeping().unwrap().tiered_segments.is_empty() {
            assert!(std::time::Instant::now() < deadline, "the first segment never went cold");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        p.truncate_entries_from(10).unwrap();
        assert_eq!(p.entry_range().next, 20, "nothing from index 20 on");
        assert_eq!(p.info().log_end_offset, 2);
        assert!(p.truncate_entries_from(2).is_err(), "an index in the cold tier is not cut");
    }

    #[test]
    fn a_log_starts_over_past_its_end_when_the_records_between_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        {
            let m = manager(dir.path(), true);
            let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
            fill(&p);
            p.force_roll().unwrap();
            p.append_entry(data("c"), 4, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
            // The leader's log starts at offset 100, index 20: everything here is below.
            assert!(p.restart_entries_at(20, 1).is_err(), "an offset below the log end is refused");
            p.restart_entries_at(20, 100).unwrap();
            assert_eq!(p.entry_range(), EntryRange { first: 20, next: 20 });
            assert_eq!(p.info().log_start_offset, 100);
            assert!(p.entry_epochs().is_empty(), "the old terms went with their entries");
            let mut bytes = data("z");
            batch::stamp(&mut bytes, 100, LeaderEpoch(3));
            p.append_entry(bytes, 20, EntryStamp::Follower(LeaderEpoch(3))).unwrap().wait().unwrap();
            p.set_committed_offset(101);
            assert_eq!(values(&p, 100), ["z"]);
            // Dropped without a clean close: the journal still holds the old batches.
        }
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert_eq!(p.entry_range(), EntryRange { first: 20, next: 21 });
        assert_eq!(p.info().log_start_offset, 100);
        assert_eq!(p.info().log_end_offset, 101);
        assert!(matches!(p.read(0, 1 << 20), Err(LogError::OffsetOutOfRange { .. })));
        let files: Vec<String> = std::fs::read_dir(dir.path().join("t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        assert_eq!(files, [format!("{:020}.log", 100)], "the old segments are gone");
    }

    #[test]
    fn the_committed_id_is_rewritten_in_place_and_an_earlier_files_value_is_read_until_then() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), false);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        let part = dir.path().join("t-0");
        // What an earlier es wrote (an atomic JSON file) is read while no slot holds one.
        std::fs::write(part.join("raft-committed"), b"old").unwrap();
        assert_eq!(p.read_raft_file(RaftFile::Committed).unwrap().as_deref(), Some(&b"old"[..]));
        for v in ["one", "two", "three"] {
            p.write_raft_file(RaftFile::Committed, v.as_bytes()).unwrap();
            assert_eq!(p.read_raft_file(RaftFile::Committed).unwrap().as_deref(), Some(v.as_bytes()));
        }
        let slots = std::fs::metadata(part.join(COMMITTED_SLOTS)).unwrap();
        assert_eq!(slots.len(), 2 * crate::slots::SLOT_BYTES as u64, "two slots, rewritten in place");
        // The other Raft files are still replaced atomically.
        p.write_raft_file(RaftFile::Vote, b"vote").unwrap();
        assert_eq!(std::fs::read(part.join("raft-vote")).unwrap(), b"vote");
        drop(p);
        m.shutdown().unwrap();
        let m = manager(dir.path(), false);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert_eq!(p.read_raft_file(RaftFile::Committed).unwrap().as_deref(), Some(&b"three"[..]));
    }

    #[test]
    fn retention_in_raft_mode_waits_for_the_purge() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), false);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p);
        p.force_roll().unwrap();
        p.append_entry(data("c"), 4, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        p.set_config(LogConfig { retention_bytes: 1, ..LogConfig::default() }).unwrap();
        // The flusher seals the rolled segment on its own thread (bounded wait).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.retention_wants().is_none() {
            assert!(p.housekeeping().unwrap().deleted_segments.is_empty(), "nothing purged yet");
            assert!(std::time::Instant::now() < deadline, "retention never asked for a purge");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(p.retention_wants(), Some(4), "the first segment holds indexes 0-3");
        p.set_raft_purged(2);
        assert!(p.housekeeping().unwrap().deleted_segments.is_empty(), "index 3 is not purged");
        p.set_raft_purged(3);
        assert_eq!(p.housekeeping().unwrap().deleted_segments, [0]);
        assert_eq!(p.retention_wants(), None);
        assert_eq!(p.entry_range().first, 4);
    }

    #[test]
    fn raft_files_are_written_after_queued_appends() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        assert_eq!(p.read_raft_file(RaftFile::Vote).unwrap(), None);
        let pending = p.append_entry(blank(0), 0, EntryStamp::Leader(E1)).unwrap();
        p.write_raft_file(RaftFile::Vote, b"vote").unwrap();
        assert!(p.read_entries(0, 1, 1).unwrap().len() == 1, "the append was durable before the vote");
        pending.wait().unwrap();
        assert_eq!(p.read_raft_file(RaftFile::Vote).unwrap().as_deref(), Some(&b"vote"[..]));
    }

    #[test]
    fn raft_readers_stop_at_the_committed_offset() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        let mut rx = p.subscribe();
        p.append_entry(blank(0), 0, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        p.append_entry(data("a"), 1, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        p.append_entry(data("b"), 2, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        assert_eq!(p.committed_offset(), Some(0));
        assert_eq!((p.high_watermark(), p.info().high_watermark, p.info().log_end_offset), (0, 0, 2));
        assert!(values(&p, 0).is_empty(), "nothing is committed yet");
        assert!(matches!(p.read(1, 1 << 20), Err(LogError::OffsetOutOfRange { .. })));
        assert_eq!(p.offset_for_timestamp(0).unwrap(), None);
        rx.borrow_and_update();
        p.set_committed_offset(1);
        assert!(rx.has_changed().unwrap(), "readers wake when the commit moves");
        assert_eq!(*rx.borrow_and_update(), 1);
        assert_eq!(values(&p, 0), ["a"]);
        assert_eq!(p.offset_for_timestamp(0).unwrap(), Some(0));
        p.set_committed_offset(0);
        assert_eq!(p.high_watermark(), 1, "the committed offset never moves back");
        // Committed past what this replica holds durably: readers get the durable end.
        p.set_committed_offset(10);
        assert_eq!((p.high_watermark(), p.committed_offset()), (2, Some(10)));
        assert_eq!(values(&p, 0), ["a", "b"]);
    }

    #[test]
    fn outside_raft_mode_the_durable_end_is_the_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        p.append(data("a"), E1).unwrap().wait().unwrap();
        assert_eq!((p.high_watermark(), p.committed_offset()), (1, None));
    }

    fn idempotent(seq: i32, value: &str) -> Vec<u8> {
        let producer = es_core::ProducerInfo { producer_id: 7, producer_epoch: 1, base_sequence: seq };
        batch::encode(&[Record::from_value(value.to_owned())], 1_000, producer).unwrap()
    }

    #[test]
    fn the_leader_checks_duplicates_before_proposing() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        p.append_entry(blank(0), 0, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        assert_eq!(p.check_duplicate(&data("plain")).unwrap(), None, "not idempotent");
        let first = idempotent(0, "a");
        assert_eq!(p.check_duplicate(&first).unwrap(), None);
        p.append_entry(first.clone(), 1, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        p.append_entry(idempotent(1, "b"), 2, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
        assert_eq!(p.check_duplicate(&first).unwrap(), Some((0, 0)), "a retry gets its offsets");
        assert_eq!(p.check_duplicate(&idempotent(1, "b")).unwrap(), Some((1, 1)));
        assert_eq!(p.check_duplicate(&idempotent(2, "c")).unwrap(), None);
        let err = p.check_duplicate(&idempotent(5, "gap")).unwrap_err();
        assert!(matches!(err, LogError::OutOfOrderSequence { expected: 2, got: 5, .. }), "{err:?}");
        let old = es_core::ProducerInfo { producer_id: 7, producer_epoch: 0, base_sequence: 2 };
        let fenced = batch::encode(&[Record::from_value("x".to_owned())], 1_000, old).unwrap();
        let err = p.check_duplicate(&fenced).unwrap_err();
        assert!(matches!(err, LogError::ProducerFenced { .. }), "{err:?}");
        assert!(p.check_duplicate(b"not a batch").is_err());
    }
}
