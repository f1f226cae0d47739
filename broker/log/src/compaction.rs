//! Key compaction. For a topic with `cleanup.policy=compact`, each sealed local
//! segment is rewritten to keep only the newest record of each key (looking at the
//! whole log, active segment included), and tombstones older than
//! `delete.retention.ms` (by record timestamp) are dropped. Offsets never change:
//! surviving records keep their offset deltas, so batches may have gaps. Records
//! without a key, and control batches, are kept. A rewritten segment is written to
//! a temporary file, synced, and renamed over the old one; its indexes are rebuilt.
//!
//! In Raft mode compaction is a replicated decision (docs/storage.md, "Compaction
//! in Raft mode"): the leader appends a compaction entry (`RaftControl::Compaction`)
//! when sealed data is not yet covered by one, and every replica, once the entry is
//! committed and applied, compacts the batches before it with the newest record of
//! each key *before the entry* and the entry's tombstone horizon. Every replica
//! thus removes the same records from the same batches, whatever its segment
//! boundaries or when its housekeeping runs. Every batch is a Raft entry, so none
//! is dropped: a batch keeps its offset span and one that lost every record stays
//! empty (`batch::encode_compacted`). Compacting under a later decision gives the
//! same bytes whether or not an earlier one was applied first, so a replica whose
//! active segment held some of those batches when a decision came compacts them
//! once the segment is sealed, and ends byte-identical to the others.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use es_core::Record;
use es_core::batch::{self, BatchView};

use crate::error::{IoContext, Result};
use crate::files::{self, INDEX_EXT, TIME_INDEX_EXT};
use crate::partition::PartitionLog;
use crate::retention::HousekeepingReport;
use crate::segment::Segment;

/// The file holding a Raft group's last applied compaction decision:
/// `<index> <offset> <horizon ms>`, one line.
pub(crate) const DECISION_FILE: &str = "raft-compaction";

const READ_CHUNK: usize = 1 << 20;

/// A replicated compaction decision: compact every data batch before Raft index
/// `index` (offsets below `offset`, the entry's own base offset), dropping
/// tombstones whose timestamp is below `horizon_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionDecision {
    pub index: u64,
    pub offset: u64,
    pub horizon_ms: i64,
}

/// A Raft group's compaction state in its log.
#[derive(Debug, Default)]
pub(crate) struct RaftCompaction {
    decision: Mutex<Option<CompactionDecision>>,
    /// The segments (base offsets) already compacted under the decision of this index.
    done: Mutex<(u64, BTreeSet<u64>)>,
    /// The Raft index after the last sealed segment housekeeping saw: a decision
    /// below it leaves sealed data uncovered.
    sealed_end: AtomicU64,
}

impl RaftCompaction {
    /// The decision stored in `dir` (none when the file is absent or unreadable:
    /// the next decision covers everything again).
    pub(crate) fn load(dir: &std::path::Path) -> Self {
        let decision = std::fs::read_to_string(dir.join(DECISION_FILE)).ok().and_then(|s| {
            let mut f = s.split_whitespace();
            Some(CompactionDecision {
                index: f.next()?.parse().ok()?,
                offset: f.next()?.parse().ok()?,
                horizon_ms: f.next()?.parse().ok()?,
            })
        });
        RaftCompaction { decision: Mutex::new(decision), ..RaftCompaction::default() }
    }

    fn decision(&self) -> Option<CompactionDecision> {
        *self.decision.lock().expect("compaction decision lock")
    }

    /// Forgets every decision (the replica's log was discarded).
    pub(crate) fn clear(&self, dir: &std::path::Path) -> Result<()> {
        let path = dir.join(DECISION_FILE);
        files::remove_if_exists(&path).ctx(|| format!("removing {}", path.display()))?;
        *self.decision.lock().expect("compaction decision lock") = None;
        *self.done.lock().expect("compaction lock") = (0, BTreeSet::new());
        self.sealed_end.store(0, Ordering::Release);
        Ok(())
    }
}

impl PartitionLog {
    /// Raft mode: applies a committed compaction entry at Raft index `index` and
    /// base offset `offset`. Stored durably; the next housekeeping round compacts.
    /// An entry applied again (after a restart) or older than the last one is
    /// ignored; the horizon never moves back, so a later decision removes at least
    /// what an earlier one did.
    pub fn apply_compaction(&self, index: u64, offset: u64, horizon_ms: i64) -> Result<()> {
        let mut current = self.compaction.decision.lock().expect("compaction decision lock");
        if current.is_some_and(|c| c.index >= index) {
            return Ok(());
        }
        let horizon_ms = current.map_or(horizon_ms, |c| c.horizon_ms.max(horizon_ms));
        let decision = CompactionDecision { index, offset, horizon_ms };
        let path = self.dir.join(DECISION_FILE);
        files::write_atomic(&path, format!("{index} {offset} {horizon_ms}\n").as_bytes())
            .ctx(|| format!("writing {}", path.display()))?;
        *current = Some(decision);
        Ok(())
    }

    /// Raft mode: the last compaction decision applied here.
    pub fn compaction_decision(&self) -> Option<CompactionDecision> {
        self.compaction.decision()
    }

    /// Raft mode, on the leader: the tombstone horizon of the compaction entry to
    /// append, when the topic compacts and a sealed segment holds entries no
    /// decision covers yet (`None`: nothing to decide).
    pub fn compaction_wants(&self) -> Option<i64> {
        let cfg = self.config();
        if !cfg.cleanup_policy.compacts() {
            return None;
        }
        let decision = self.compaction.decision();
        if self.compaction.sealed_end.load(Ordering::Acquire) <= decision.map_or(0, |d| d.index) {
            return None;
        }
        let horizon = self.shared.clock.now_ms().saturating_sub(cfg.delete_retention_ms);
        Some(decision.map_or(horizon, |d| d.horizon_ms.max(horizon)))
    }

    pub(crate) fn compact(&self, now: i64, report: &mut HousekeepingReport) -> Result<()> {
        let cfg = self.config();
        if !cfg.cleanup_policy.compacts() {
            return Ok(());
        }
        if self.is_raft_log() {
            return self.compact_raft(report);
        }
        let hw = self.high_watermark();
        let (sealed, all) = self.segments_for_compaction();
        if sealed.is_empty() {
            return Ok(());
        }
        let latest = latest_offsets(&all, hw)?;
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

    /// The sealed local segments, and all of them, oldest first.
    fn segments_for_compaction(&self) -> (Vec<Arc<Segment>>, Vec<Arc<Segment>>) {
        let inner = self.inner.lock().expect("partition lock");
        let all: Vec<Arc<Segment>> = inner.segments.values().cloned().collect();
        let sealed =
            all.iter().filter(|s| s.state.read().expect("segment state lock").sealed).cloned().collect();
        (sealed, all)
    }

    /// Compacts the sealed segments whose entries all come before the last applied
    /// decision and are committed, under that decision, and notes how far the
    /// sealed segments reach (what the leader's next decision must cover).
    fn compact_raft(&self, report: &mut HousekeepingReport) -> Result<()> {
        let (sealed, all) = self.segments_for_compaction();
        let raft_end = |s: &Arc<Segment>| s.state.read().expect("segment state lock").raft.end();
        let sealed_end = sealed.iter().map(raft_end).max().unwrap_or(0);
        self.compaction.sealed_end.store(sealed_end, Ordering::Release);
        let Some(d) = self.compaction.decision() else { return Ok(()) };
        // The decision is committed, so is every entry before it; the committed
        // offset is checked as well, so nothing uncommitted is ever rewritten.
        let committed = self.committed_offset().unwrap_or(0);
        let mut done = self.compaction.done.lock().expect("compaction lock");
        if done.0 != d.index {
            *done = (d.index, BTreeSet::new());
        }
        let due: Vec<Arc<Segment>> = sealed
            .into_iter()
            .filter(|s| raft_end(s) <= d.index && s.next_offset() <= committed)
            .filter(|s| !done.1.contains(&s.base_offset))
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let latest = latest_offsets(&all, d.offset)?;
        for seg in due {
            let (out, removed) = rewrite_entries(&seg, &latest, d.horizon_ms)?;
            if removed > 0 {
                self.replace_segment(&seg, &out)?;
                report.compacted_segments.push(seg.base_offset);
                report.records_removed += removed;
            }
            done.1.insert(seg.base_offset);
        }
        Ok(())
    }

    /// Renames `bytes`, written and synced aside, over `old`'s file and swaps in the
    /// reopened segment. The rename happens under the partition lock, and only
    /// while `old` is still the partition's: a Raft log that started over
    /// (`restart_entries_at`) may have removed it meanwhile, and its file must not
    /// come back.
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
        let current =
            |inner: &crate::partition::Inner| inner.segments.get(&base).is_some_and(|s| Arc::ptr_eq(s, old));
        {
            let inner = self.inner.lock().expect("partition lock");
            if !current(&inner) {
                let gone = !inner.segments.contains_key(&base);
                drop(inner);
                let _ = std::fs::remove_file(&tmp);
                if gone {
                    files::remove_if_exists(&marker).ctx(|| format!("removing {}", marker.display()))?;
                }
                return Ok(());
            }
            std::fs::rename(&tmp, &old.log_path).ctx(|| format!("renaming {}", tmp.display()))?;
            old.retire();
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        let max = self.config().batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let new =
            Segment::open_sealed(&self.dir, base, old.next_offset(), self.shared.open_files.clone(), max)?;
        let mut inner = self.inner.lock().expect("partition lock");
        if current(&inner) {
            inner.segments.insert(base, new);
        } else if !inner.segments.contains_key(&base) {
            // Removed after the rename: so are the files the reopening wrote.
            crate::partition::remove_segment_files(&self.dir, base)?;
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

/// The newest offset of every key in `segments` below `limit`. Control batches
/// (Raft entries, transaction markers) hold no keys of the topic.
fn latest_offsets(segments: &[Arc<Segment>], limit: u64) -> Result<HashMap<Vec<u8>, u64>> {
    let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
    for seg in segments {
        for_each_batch(seg, limit, |view| {
            if view.header.is_control() {
                return Ok(());
            }
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
    Ok(latest)
}

/// Records compaction keeps, with their offset deltas in their batch.
type Survivors = Vec<(u32, Record)>;

/// The records of one batch that compaction keeps (with their offset deltas), and
/// how many it drops: `None` when it keeps them all.
fn survivors(
    view: &BatchView<'_>,
    latest: &HashMap<Vec<u8>, u64>,
    tombstone_horizon: i64,
) -> Result<Option<(Survivors, u64)>> {
    if view.header.is_control() {
        return Ok(None);
    }
    let base = view.header.base_offset;
    let mut kept: Vec<(u32, Record)> = Vec::new();
    let mut removed = 0u64;
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
    Ok((removed > 0).then_some((kept, removed)))
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
        match survivors(view, latest, tombstone_horizon)? {
            None => out.extend_from_slice(view.bytes()),
            Some((kept, dropped)) => {
                removed += dropped;
                if !kept.is_empty() {
                    // Survivors keep their offsets, timestamps, producer fields, flags and codec.
                    let like = batch::encode_like(&view.header, kept.iter().map(|(d, r)| (*d, r)))?;
                    out.extend_from_slice(&like);
                }
            }
        }
        Ok(())
    })?;
    Ok((out, removed))
}

/// Raft mode: the compacted bytes of one segment, entry by entry (control batches
/// included, none dropped), and how many records were dropped.
fn rewrite_entries(
    seg: &Arc<Segment>,
    latest: &HashMap<Vec<u8>, u64>,
    tombstone_horizon: i64,
) -> Result<(Vec<u8>, u64)> {
    let range = {
        let st = seg.state.read().expect("segment state lock");
        st.raft.first()..st.raft.end()
    };
    let mut out = Vec::new();
    let mut removed = 0u64;
    for index in range {
        let Some(bytes) = seg.read_entry(index)? else {
            return Err(crate::error::LogError::Corrupt {
                file: seg.log_path.clone(),
                position: 0,
                reason: format!("Raft entry {index} is missing from its segment"),
            });
        };
        let view = BatchView::parse(&bytes, usize::MAX)?;
        match survivors(&view, latest, tombstone_horizon)? {
            None => out.extend_from_slice(&bytes),
            Some((kept, dropped)) => {
                removed += dropped;
                out.extend_from_slice(&batch::encode_compacted(
                    &view.header,
                    kept.iter().map(|(d, r)| (*d, r)),
                )?);
            }
        }
    }
    Ok((out, removed))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use es_core::batch::{self, RaftControl};
    use es_core::{BatchHeader, LeaderEpoch, ProducerInfo, Record};

    use crate::config::{CleanupPolicy, LogConfig};
    use crate::manager::{LogManager, ManagerOptions};
    use crate::partition::PartitionLog;
    use crate::raft::{EntryRange, EntryStamp};

    const E1: LeaderEpoch = LeaderEpoch(1);

    fn manager(dir: &std::path::Path) -> LogManager {
        let opts =
            ManagerOptions { housekeeping_interval: None, journal: false, ..ManagerOptions::default() };
        LogManager::new(dir, opts).unwrap()
    }

    fn open(m: &LogManager) -> std::sync::Arc<PartitionLog> {
        let config = LogConfig { cleanup_policy: CleanupPolicy::Compact, ..LogConfig::default() };
        m.open_partition("t-0", config).unwrap().0
    }

    fn keyed(pairs: &[(&str, Option<&str>)]) -> Vec<u8> {
        let records: Vec<Record> = pairs
            .iter()
            .map(|(k, v)| Record {
                key: Some(Bytes::copy_from_slice(k.as_bytes())),
                value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
                headers: Vec::new(),
                timestamp: Some(1_000),
            })
            .collect();
        batch::encode(&records, 1_000, ProducerInfo::NONE).unwrap()
    }

    fn control(c: RaftControl<'_>) -> Vec<u8> {
        batch::encode_raft_control(c, 0).unwrap()
    }

    fn append(p: &PartitionLog, index: u64, bytes: Vec<u8>) {
        p.append_entry(bytes, index, EntryStamp::Leader(E1)).unwrap().wait().unwrap();
    }

    /// Index 0 blank; 1 a=1 (offset 0); 2 b=1, a=2 (1-2); 3 b's tombstone (3);
    /// 4 c=1 (4); a roll; 5 a=3 (5); 6 a compaction decision (takes no offset).
    fn first_segments(p: &PartitionLog) {
        append(p, 0, control(RaftControl::Blank { index: 0 }));
        append(p, 1, keyed(&[("a", Some("1"))]));
        append(p, 2, keyed(&[("b", Some("1")), ("a", Some("2"))]));
        append(p, 3, keyed(&[("b", None)]));
        append(p, 4, keyed(&[("c", Some("1"))]));
        p.force_roll().unwrap();
        append(p, 5, keyed(&[("a", Some("3"))]));
        append(p, 6, control(RaftControl::Compaction { index: 6, horizon_ms: 0 }));
        p.set_committed_offset(6);
    }

    /// Runs housekeeping until the flusher sealed what was rolled and the log asks
    /// for a decision (bounded).
    fn until_a_decision_is_wanted(p: &PartitionLog) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while p.compaction_wants().is_none() {
            p.housekeeping().unwrap();
            assert!(std::time::Instant::now() < deadline, "the log never asked for a compaction decision");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn entries(p: &PartitionLog) -> Vec<(u64, Bytes)> {
        let range = p.entry_range();
        p.read_entries(range.first, range.next, usize::MAX).unwrap()
    }

    /// What a consumer reads: (offset, key, value).
    fn served(p: &PartitionLog) -> Vec<(u64, String, Option<String>)> {
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
        let mut out = Vec::new();
        let mut next = 0;
        while next < p.high_watermark() {
            let read = p.read(next, 1 << 20).unwrap();
            for b in read.batches() {
                assert!(!b.header.is_control(), "a reader never gets a control batch");
                next = b.header.next_offset();
                for r in b.records() {
                    let r = r.unwrap();
                    out.push((r.offset, text(r.key).unwrap(), text(r.value)));
                }
            }
        }
        out
    }

    #[test]
    fn raft_compaction_follows_the_decision_and_keeps_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let p = open(&m);
        first_segments(&p);
        until_a_decision_is_wanted(&p);
        let horizon = p.shared.clock.now_ms() - LogConfig::default().delete_retention_ms;
        assert!(p.compaction_wants().is_some_and(|h| (horizon..horizon + 10_000).contains(&h)));
        let before = entries(&p);
        assert!(p.housekeeping().unwrap().compacted_segments.is_empty(), "no decision applied yet");
        assert_eq!(entries(&p), before);

        p.apply_compaction(6, 6, 0).unwrap();
        let report = p.housekeeping().unwrap();
        assert_eq!((report.compacted_segments, report.records_removed), (vec![0], 3));
        assert_eq!(p.compaction_wants(), None, "the decision covers every sealed segment");
        assert_eq!(p.entry_range(), EntryRange { first: 0, next: 7 });
        let after = entries(&p);
        let shape: Vec<(u64, u64, u64, u32, bool)> = after
            .iter()
            .map(|(i, b)| {
                let h = BatchHeader::parse(b, usize::MAX).unwrap();
                (*i, h.base_offset, h.next_offset(), h.record_count, h.is_raft_control())
            })
            .collect();
        assert_eq!(
            shape,
            [
                (0, 0, 0, 1, true),
                (1, 0, 1, 0, false),
                (2, 1, 3, 0, false),
                (3, 3, 4, 1, false),
                (4, 4, 5, 1, false),
                (5, 5, 6, 1, false),
                (6, 6, 6, 1, true),
            ],
            "every entry stays, with its offsets; emptied batches keep their span"
        );
        assert_eq!(after[0], before[0], "a control batch is kept as it was");
        let want = [
            (3, "b".to_owned(), None),
            (4, "c".to_owned(), Some("1".to_owned())),
            (5, "a".to_owned(), Some("3".to_owned())),
        ];
        assert_eq!(served(&p), want);
        // A read that would answer only emptied batches passes over them.
        let first = p.read(0, 1).unwrap();
        let first: Vec<_> = first.batches().map(|b| (b.header.base_offset, b.header.record_count)).collect();
        assert_eq!(first, [(3, 1)], "emptied batches are passed over");
        // Nothing to do again under the same decision.
        assert!(p.housekeeping().unwrap().compacted_segments.is_empty());

        p.write_raft_file(crate::raft::RaftFile::Vote, b"{}").unwrap();
        drop(p);
        m.shutdown().unwrap();
        let m = manager(dir.path());
        let p = open(&m);
        assert_eq!(entries(&p), after, "the rewritten segment reopens with every entry");
        // Before its group opens again the log is not in Raft mode, but it holds a
        // vote: housekeeping must not compact it as a plain log (that would drop
        // the emptied batches, Raft entries).
        p.housekeeping().unwrap();
        assert_eq!(entries(&p), after);
        assert_eq!(p.compaction_decision().map(|d| (d.index, d.offset, d.horizon_ms)), Some((6, 6, 0)));
        // A decision applied again after a restart, or an older one, changes nothing.
        p.apply_compaction(6, 6, 5_000).unwrap();
        p.apply_compaction(3, 3, 5_000).unwrap();
        assert_eq!(p.compaction_decision().map(|d| d.horizon_ms), Some(0));
    }

    /// A follower whose copy of the leader's compacted entries was only in the
    /// journal when it crashed gets them back from the replay, emptied batches and
    /// batches that end before their span included.
    #[test]
    fn a_follower_replays_compacted_entries_from_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let leader = open(&m);
        first_segments(&leader);
        until_a_decision_is_wanted(&leader);
        leader.apply_compaction(6, 6, 0).unwrap();
        append(&leader, 7, keyed(&[("c", Some("2")), ("e", Some("1"))]));
        append(&leader, 8, keyed(&[("e", Some("2"))]));
        leader.force_roll().unwrap();
        leader.housekeeping().unwrap();
        append(&leader, 9, control(RaftControl::Compaction { index: 9, horizon_ms: 0 }));
        leader.set_committed_offset(9);
        until_a_decision_is_wanted(&leader);
        leader.apply_compaction(9, 9, 0).unwrap();
        leader.housekeeping().unwrap();
        let want = entries(&leader);
        let shape: Vec<(u32, u64)> = want
            .iter()
            .map(|(_, b)| BatchHeader::parse(b, usize::MAX).unwrap())
            .filter(|h| !h.is_raft_control())
            .map(|h| (h.record_count, h.next_offset()))
            .collect();
        assert!(shape.contains(&(0, 1)), "an emptied batch: {shape:?}");
        assert!(shape.contains(&(1, 8)), "a batch that lost its last record keeps its span: {shape:?}");

        let follower_dir = tempfile::tempdir().unwrap();
        {
            let m = crate::manager::journal_only(follower_dir.path());
            let follower = open(&m);
            for (index, bytes) in &want {
                follower
                    .append_entry(bytes.to_vec(), *index, EntryStamp::Follower(E1))
                    .unwrap()
                    .wait()
                    .unwrap();
            }
            m.stop_without_checkpoint();
        }
        // The segment loses everything not checkpointed; the journal has it all.
        let active = crate::files::segment_path(&follower_dir.path().join("t-0"), 0, crate::files::LOG_EXT);
        std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(0).unwrap();
        let opts = ManagerOptions { housekeeping_interval: None, journal: true, ..ManagerOptions::default() };
        let m = LogManager::new(follower_dir.path(), opts).unwrap();
        assert_eq!(entries(&open(&m)), want);
    }

    /// Compacting under a later decision gives the same bytes whether an earlier one
    /// ran first or not, so replicas whose housekeeping ran at different times, or
    /// whose segments rolled elsewhere, end byte-identical; and a follower takes the
    /// leader's compacted entries.
    #[test]
    fn a_later_decision_gives_the_same_bytes_whether_or_not_an_earlier_one_ran() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let managers: Vec<LogManager> = dirs.iter().map(|d| manager(d.path())).collect();
        let logs: Vec<_> = managers.iter().map(open).collect();
        for p in &logs {
            first_segments(p);
        }
        until_a_decision_is_wanted(&logs[0]);
        logs[0].apply_compaction(6, 6, 0).unwrap();
        assert_eq!(logs[0].housekeeping().unwrap().records_removed, 3);
        for p in &logs {
            append(p, 7, keyed(&[("c", Some("2"))]));
            append(p, 8, keyed(&[("b", Some("2")), ("d", Some("1"))]));
            p.force_roll().unwrap();
            append(p, 9, keyed(&[("d", Some("2"))]));
            append(p, 10, control(RaftControl::Compaction { index: 10, horizon_ms: 2_000 }));
            p.set_committed_offset(10);
            until_a_decision_is_wanted(p);
            p.apply_compaction(10, 10, 2_000).unwrap();
            p.housekeeping().unwrap();
        }
        let (one, two) = (entries(&logs[0]), entries(&logs[1]));
        assert_eq!(one.len(), 11);
        assert_eq!(one, two, "the same bytes for every entry");
        let want: Vec<(u64, String, Option<String>)> =
            [(5, "a", "3"), (6, "c", "2"), (7, "b", "2"), (9, "d", "2")]
                .iter()
                .map(|(o, k, v)| (*o, k.to_string(), Some(v.to_string())))
                .collect();
        assert_eq!(served(&logs[0]), want, "a tombstone past the horizon is gone");

        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let follower = open(&m);
        for (index, bytes) in &one {
            follower.append_entry(bytes.to_vec(), *index, EntryStamp::Follower(E1)).unwrap().wait().unwrap();
        }
        assert_eq!(entries(&follower), one);
        let (_, emptied) = &one[1];
        let mut unstamped = emptied.to_vec();
        batch::stamp(&mut unstamped, 0, LeaderEpoch::UNKNOWN);
        assert!(
            follower.append_entry(unstamped, 11, EntryStamp::Leader(E1)).is_err(),
            "a producer's batch must hold what its header says"
        );
    }
}
