//! Journal replay at start, before any partition is served. The journal files are
//! read oldest first and every record is applied to its partition in order: a batch
//! the segments already hold (write-behind that reached the disk) is skipped, the
//! next one is appended, a truncation is applied. So replay is idempotent: a second
//! replay of the same files, or of files a crashed checkpoint failed to delete,
//! changes nothing. Reading stops at the first torn or CRC-failing record (the tail
//! of the round the crash interrupted, never acknowledged). Every touched segment
//! is synced before the journal files are removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_core::batch::BatchHeader;
use es_core::limits;

use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::flusher::{FlushStats, Flusher};
use crate::journal;
use crate::journal_file::{self, Entry, Next, RecordReader};
use crate::manager::{ManagerOptions, Shared};
use crate::open_files::OpenFiles;
use crate::partition::PartitionLog;

/// What a start-up replay of the journal did.
#[derive(Debug, Clone, Default)]
pub struct JournalReplay {
    /// Journal files found (all removed once replayed).
    pub files: usize,
    /// Valid records read.
    pub records: u64,
    /// Journal bytes holding them.
    pub bytes: u64,
    /// Batches the segments lacked and got from the journal.
    pub appended: u64,
    pub truncations: u64,
    /// Batches the segments held garbled outside their CRC, rewritten from the journal.
    pub repaired: u64,
    pub partitions: usize,
    /// Where reading stopped early: file, position, reason (a torn tail).
    pub torn: Option<(PathBuf, u64, String)>,
    pub elapsed: Duration,
    /// The sequence number the next journal file gets.
    pub(crate) next_seq: u64,
}

/// Replays `journal_dir` into the partitions under `root`, then removes its files.
pub(crate) fn replay(root: &Path, journal_dir: &Path, options: &ManagerOptions) -> Result<JournalReplay> {
    let started = Instant::now();
    let found = journal_file::list_files(journal_dir)?;
    let mut report =
        JournalReplay { next_seq: found.last().map_or(1, |(seq, _)| seq + 1), ..JournalReplay::default() };
    if found.is_empty() {
        return Ok(report);
    }
    let stats = Arc::new(FlushStats::default());
    let shared = Arc::new(Shared {
        flusher: Flusher::start(None, stats.clone()),
        open_files: OpenFiles::new(options.open_segment_files_max),
        clock: options.clock.clone(),
        // Replay only appends to the tail: the cold tier is not needed.
        cold: None,
    });
    let mut replayer = Replayer { root, shared: shared.clone(), parts: HashMap::new(), gaps: HashMap::new() };
    let result = replayer.run(&found, &mut report).and_then(|()| replayer.finish(&stats));
    report.partitions = replayer.parts.values().flatten().count();
    drop(replayer);
    shared.flusher.shutdown();
    result?;
    for (_, path) in &found {
        files::remove_if_exists(path).ctx(|| format!("removing {}", path.display()))?;
    }
    files::fsync_dir(journal_dir).ctx(|| format!("syncing {}", journal_dir.display()))?;
    report.elapsed = started.elapsed();
    tracing::info!(
        files = report.files,
        records = report.records,
        appended = report.appended,
        ms = report.elapsed.as_millis() as u64,
        "replayed the journal"
    );
    Ok(report)
}

/// Whether the segments hold the batch at `header.base_offset` with the same CRC
/// (so the same records) but different bytes: the fields before the CRC (base
/// offset, length, leader epoch) are not covered by it, so a torn write there passes
/// the segment's own recovery.
fn holds_garbled_copy(log: &PartitionLog, header: &BatchHeader, bytes: &[u8]) -> Result<bool> {
    let read = match log.read(header.base_offset, 1) {
        Ok(read) => read,
        // Retention removed it since: nothing held to compare.
        Err(LogError::OffsetOutOfRange { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let Some(held) = read.batches().next() else {
        return Ok(false);
    };
    let same_batch = held.header.base_offset == header.base_offset && held.header.crc == header.crc;
    let len = held.header.total_len().min(read.data.len());
    Ok(same_batch && read.data[..len] != *bytes)
}

struct Replayer<'a> {
    root: &'a Path,
    shared: Arc<Shared>,
    /// Partitions touched so far; `None` for a name with no directory (deleted).
    parts: HashMap<String, Option<Arc<PartitionLog>>>,
    /// Partitions whose segments disagree with a journal batch (they end before it,
    /// or inside it): (lowest offset in dispute, batch base). Legal only if a later
    /// truncation cuts at or below that offset.
    gaps: HashMap<String, (u64, u64)>,
}

impl Replayer<'_> {
    fn run(&mut self, found: &[(u64, PathBuf)], report: &mut JournalReplay) -> Result<()> {
        for (i, (_, path)) in found.iter().enumerate() {
            report.files += 1;
            let mut reader = RecordReader::open(path)?;
            loop {
                match reader.next_record().ctx(|| format!("reading {}", path.display()))? {
                    Next::End => break,
                    Next::Torn(reason) => {
                        let later = found.len() - i - 1;
                        tracing::warn!(file = %path.display(), position = reader.position, reason, later_files = later, "journal replay stops at a torn record");
                        report.bytes += reader.position;
                        report.torn = Some((path.clone(), reader.position, reason));
                        return Ok(());
                    }
                    Next::Entry(entry) => {
                        report.records += 1;
                        self.apply(entry, report)?;
                    }
                }
            }
            report.bytes += reader.position;
        }
        Ok(())
    }

    /// A Raft control batch takes no offset, so whether the segments hold it is a
    /// question of its Raft index (named in the batch), not of offsets.
    fn apply_control(
        &mut self,
        log: &Arc<PartitionLog>,
        partition: String,
        bytes: Vec<u8>,
        report: &mut JournalReplay,
    ) -> Result<()> {
        let view = es_core::BatchView::parse(&bytes, usize::MAX)?;
        let index = es_core::batch::raft_control(&view)?.map_or(0, |c| c.index());
        let base_offset = view.header.base_offset;
        let next = log.entry_range().next;
        if index < next {
            return Ok(());
        }
        let end = log.log_end();
        if index == next && base_offset == end {
            drop(log.append_replica(bytes)?);
            report.appended += 1;
            return Ok(());
        }
        let gap = self.gaps.entry(partition).or_insert((end, base_offset));
        gap.0 = gap.0.min(base_offset.min(end));
        Ok(())
    }

    fn apply(&mut self, entry: Entry, report: &mut JournalReplay) -> Result<()> {
        match entry {
            Entry::Batch { partition, base_offset, bytes, .. } => {
                let Some(log) = self.partition(&partition)? else {
                    return Ok(());
                };
                let header = BatchHeader::parse(&bytes, usize::MAX)?;
                if header.is_raft_control() {
                    return self.apply_control(&log, partition, bytes, report);
                }
                if header.next_offset() <= log.log_end() {
                    if !holds_garbled_copy(&log, &header, &bytes)? {
                        return Ok(());
                    }
                    // The segment's copy differs outside the CRC (its leader epoch): an
                    // unsynced write the crash garbled. The journal's copy is the one that
                    // was acknowledged; what followed it is re-applied by later records.
                    tracing::warn!(
                        partition,
                        base_offset,
                        "segment batch garbled outside its CRC; rewritten from the journal"
                    );
                    log.truncate_from(base_offset)?;
                    report.repaired += 1;
                }
                let end = log.log_end();
                if base_offset == end {
                    // The durability wait is the final flush of `finish`.
                    match log.append_replica(bytes) {
                        Ok(pending) => {
                            drop(pending);
                            report.appended += 1;
                            return Ok(());
                        }
                        // Segments newer than this record (see below).
                        Err(LogError::StaleEpoch { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                // The segments and this record disagree: legal only when the record
                // comes from before a truncation that a later record applies (the
                // segments hold what came after it). Such a truncation, at or below
                // the first offset in dispute, resolves it; otherwise `finish` fails.
                let disputed_from = base_offset.min(end);
                let gap = self.gaps.entry(partition).or_insert((end, base_offset));
                gap.0 = gap.0.min(disputed_from);
                Ok(())
            }
            Entry::TruncateEntries { partition, offset, index } => {
                let Some(log) = self.partition(&partition)? else {
                    return Ok(());
                };
                report.truncations += 1;
                if self.gaps.get(&partition).is_some_and(|(from, _)| offset <= *from) {
                    self.gaps.remove(&partition);
                }
                match log.truncate_entries_from(index) {
                    Ok(()) => Ok(()),
                    Err(LogError::EntryOutOfRange { .. }) => {
                        tracing::warn!(
                            partition,
                            index,
                            "journal Raft truncation below the local log; skipped"
                        );
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Entry::Truncate { partition, offset } => {
                let Some(log) = self.partition(&partition)? else {
                    return Ok(());
                };
                report.truncations += 1;
                if self.gaps.get(&partition).is_some_and(|(from, _)| offset <= *from) {
                    self.gaps.remove(&partition);
                }
                if offset >= log.log_end() {
                    return Ok(());
                }
                match log.truncate_from(offset) {
                    Ok(()) => Ok(()),
                    // Retention removed the segments below the cut since: nothing to cut.
                    Err(LogError::OffsetOutOfRange { .. }) => {
                        tracing::warn!(
                            partition,
                            offset,
                            "journal truncation below the local log start; skipped"
                        );
                        Ok(())
                    }
                    // The segments already went through a later, lower truncation and
                    // new batches: disputed until that truncation's record is replayed.
                    Err(LogError::NotBatchBoundary { .. }) => {
                        let gap = self.gaps.entry(partition).or_insert((offset, offset));
                        gap.0 = gap.0.min(offset);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn partition(&mut self, name: &str) -> Result<Option<Arc<PartitionLog>>> {
        if let Some(p) = self.parts.get(name) {
            return Ok(p.clone());
        }
        let valid = !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != "..";
        let dir = self.root.join(name);
        let log = if valid && dir.is_dir() {
            let config = LogConfig {
                batch_bytes_max: limits::BATCH_BYTES_MAX_HARD,
                record_bytes_max: limits::BATCH_BYTES_MAX_HARD,
                ..LogConfig::default()
            };
            Some(PartitionLog::open(name.to_owned(), dir, config, self.shared.clone())?.0)
        } else {
            None
        };
        self.parts.insert(name.to_owned(), log.clone());
        Ok(log)
    }

    /// Waits for the replayed appends, then syncs every segment of every touched
    /// partition: bytes skipped because the segment held them may have been written
    /// behind and never synced, and the journal is about to go.
    fn finish(&mut self, stats: &FlushStats) -> Result<()> {
        if let Some((name, (from, base))) = self.gaps.iter().next() {
            return Err(LogError::Corrupt {
                file: self.root.join(name),
                position: *from,
                reason: format!(
                    "the segments and the journal disagree from offset {from} (journal batch at {base}), and no later truncation resolves it: acknowledged data is missing"
                ),
            });
        }
        let mut segments = Vec::new();
        for log in self.parts.values().flatten() {
            log.flush()?;
            for entry in std::fs::read_dir(log.dir()).ctx(|| format!("listing {}", log.dir().display()))? {
                let path = entry.ctx(|| format!("listing {}", log.dir().display()))?.path();
                if path.extension().is_some_and(|e| e == files::LOG_EXT) {
                    segments.push(path);
                }
            }
        }
        journal::sync_files(&segments, stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::LogManager;
    use es_core::{LeaderEpoch, Record};
    use proptest::prelude::*;
    use std::os::unix::fs::FileExt;

    const PARTS: usize = 3;
    const EPOCH: LeaderEpoch = LeaderEpoch(1);

    #[derive(Debug, Clone)]
    enum Op {
        Append {
            part: usize,
            records: usize,
            size: usize,
        },
        /// Truncate the last `back` acknowledged batches.
        Truncate {
            part: usize,
            back: usize,
        },
        Roll {
            part: usize,
        },
        /// One batch to every partition at once: a round may hold several (and, with
        /// bypass, sync their segments instead of the journal).
        Burst {
            records: usize,
            size: usize,
        },
        /// Copy the journal files aside: restored after the crash, they stand for a
        /// checkpoint that synced the segments but died before deleting its files.
        Snapshot,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => (0..PARTS, 1..4usize, 1..400usize).prop_map(|(part, records, size)| Op::Append { part, records, size }),
            1 => (0..PARTS, 1..4usize).prop_map(|(part, back)| Op::Truncate { part, back }),
            1 => (0..PARTS).prop_map(|part| Op::Roll { part }),
            3 => (1..4usize, 1..400usize).prop_map(|(records, size)| Op::Burst { records, size }),
            1 => Just(Op::Snapshot),
        ]
    }

    /// Where the crash leaves the files: per partition, how much of the newest
    /// segment's unsynced part survives (a fraction) and whether a byte in it is
    /// flipped; and the round in flight in the journal: cut after some bytes, or
    /// whole with one bit flipped.
    #[derive(Debug, Clone)]
    struct Crash {
        segments: Vec<(f64, bool, f64)>,
        journal_tail: Option<(f64, bool)>,
    }

    fn crash() -> impl Strategy<Value = Crash> {
        (
            proptest::collection::vec((0.0..=1.0f64, any::<bool>(), 0.0..1.0f64), PARTS),
            proptest::option::of((0.0..1.0f64, any::<bool>())),
        )
            .prop_map(|(segments, journal_tail)| Crash { segments, journal_tail })
    }

    fn options(bypass: bool) -> ManagerOptions {
        ManagerOptions {
            housekeeping_interval: None,
            journal_file_bytes: 8 * 1024,
            journal_bypass: bypass,
            // Rounds of several partitions skip the journal however small their batches.
            journal_direct_bytes: 0,
            ..ManagerOptions::default()
        }
    }

    fn config() -> LogConfig {
        LogConfig { segment_bytes: 6 * 1024, ..LogConfig::default() }
    }

    /// The acknowledged batches of each partition, byte for byte as read back.
    type Model = Vec<Vec<(u64, Vec<u8>)>>;

    /// Per partition, the active segment's base offset and its bytes fsynced in the
    /// segment file itself (a round that bypassed the journal): a crash keeps them.
    type Synced = Vec<(u64, u64)>;

    /// Runs `ops`, then stops like a crash. With `bypass`, single-partition rounds
    /// may skip the journal, and snapshots are not kept: restoring a journal file
    /// after its deletion was durable stands for no crash once a round relied on
    /// that deletion (see `Journal::bypass`).
    fn run_ops(root: &Path, ops: &[Op], side: &Path, bypass: bool) -> (Model, Synced) {
        let m = LogManager::new(root, options(bypass)).unwrap();
        let parts: Vec<_> =
            (0..PARTS).map(|i| m.open_partition(&format!("p{i}"), config()).unwrap().0).collect();
        let mut model: Model = vec![Vec::new(); PARTS];
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Append { part, records, size } => {
                    let recs: Vec<Record> =
                        (0..records).map(|r| Record::from_value(vec![(n + r) as u8; size])).collect();
                    let a = parts[part].append_records(&recs, EPOCH).unwrap().wait().unwrap();
                    let read = parts[part].read(a.base_offset, 1).unwrap();
                    let len = read.batches().next().unwrap().header.total_len();
                    model[part].push((a.base_offset, read.data[..len].to_vec()));
                }
                Op::Truncate { part, back } => {
                    let keep = model[part].len().saturating_sub(back);
                    if let Some(&(offset, _)) = model[part].get(keep) {
                        parts[part].truncate_from(offset).unwrap();
                        model[part].truncate(keep);
                    }
                }
                Op::Roll { part } => parts[part].force_roll().unwrap(),
                Op::Burst { records, size } => {
                    let recs: Vec<Record> =
                        (0..records).map(|r| Record::from_value(vec![(n + r) as u8; size])).collect();
                    let pending: Vec<_> =
                        parts.iter().map(|p| p.append_records(&recs, EPOCH).unwrap()).collect();
                    for (part, a) in pending.into_iter().enumerate() {
                        let a = a.wait().unwrap();
                        let read = parts[part].read(a.base_offset, 1).unwrap();
                        let len = read.batches().next().unwrap().header.total_len();
                        model[part].push((a.base_offset, read.data[..len].to_vec()));
                    }
                }
                Op::Snapshot if bypass => {}
                Op::Snapshot => {
                    // Not the current file: it still grows, and a surviving file is whole.
                    let mut found = journal_file::list_files(&root.join(crate::JOURNAL_DIR)).unwrap();
                    found.pop();
                    // A background checkpoint may delete a file between the listing and
                    // the copy; such a snapshot is no state a crash could leave (files
                    // go oldest first), so it is dropped whole: copies are staged and
                    // put in place only when every one succeeded.
                    let mut staged = Vec::new();
                    let mut whole = true;
                    for (_, path) in found {
                        let to = side.join(path.file_name().unwrap());
                        let part = to.with_extension("staged");
                        match std::fs::copy(&path, &part) {
                            // A file that is no longer current holds records; a copy
                            // with none was taken while the checkpoint recycled the
                            // file (new salt), after it had durably deleted the older
                            // files: restoring those with it is no crash's state.
                            Ok(_) if !holds_records(&part) => {
                                std::fs::remove_file(&part).unwrap();
                                whole = false;
                            }
                            Ok(_) => staged.push((part, to)),
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => whole = false,
                            Err(e) => panic!("snapshotting {}: {e}", path.display()),
                        }
                    }
                    for (part, to) in staged {
                        if whole {
                            std::fs::rename(&part, &to).unwrap();
                        } else {
                            std::fs::remove_file(&part).unwrap();
                        }
                    }
                }
            }
        }
        let synced = parts.iter().map(|p| p.synced_tail()).collect();
        m.stop_without_checkpoint();
        (model, synced)
    }

    fn holds_records(path: &Path) -> bool {
        matches!(RecordReader::open(path).unwrap().next_record().unwrap(), Next::Entry(_))
    }

    /// Puts back snapshot files just older than the oldest remaining one (a
    /// checkpoint deletes in ascending order, so what survives is contiguous).
    fn restore_older(jdir: &Path, side: &Path) {
        let Some(&(mut seq, _)) = journal_file::list_files(jdir).unwrap().first() else {
            return;
        };
        while seq > 1 {
            seq -= 1;
            let name = journal_file::file_path(jdir, seq);
            let copy = side.join(name.file_name().unwrap());
            if !copy.exists() {
                return;
            }
            std::fs::copy(&copy, &name).unwrap();
        }
    }

    /// The lowest offset each partition has in the journal: segment bytes from there
    /// on may not have been synced, so a crash may lose or garble them.
    fn journal_floors(jdir: &Path) -> HashMap<String, u64> {
        let mut floors = HashMap::new();
        for (_, path) in journal_file::list_files(jdir).unwrap() {
            let mut r = RecordReader::open(&path).unwrap();
            while let Next::Entry(e) = r.next_record().unwrap() {
                let (name, offset) = match e {
                    Entry::Batch { partition, base_offset, .. } => (partition, base_offset),
                    Entry::Truncate { partition, offset }
                    | Entry::TruncateEntries { partition, offset, .. } => (partition, offset),
                };
                let f = floors.entry(name).or_insert(u64::MAX);
                *f = (*f).min(offset);
            }
        }
        floors
    }

    /// Cuts and garbles the unsynced tail of each partition's newest segment.
    fn damage_segments(root: &Path, crash: &Crash, floors: &HashMap<String, u64>, synced: &Synced) {
        for (i, &(keep, flip, at)) in crash.segments.iter().enumerate() {
            let name = format!("p{i}");
            let Some(&floor) = floors.get(&name) else { continue };
            let dir = root.join(&name);
            let base = *crate::partition::list_segments(&dir).unwrap().last().unwrap();
            let path = files::segment_path(&dir, base, files::LOG_EXT);
            let bytes = std::fs::read(&path).unwrap();
            let mut lo = 0usize;
            while lo + BatchHeader::LEN <= bytes.len() {
                let h = BatchHeader::parse(&bytes[lo..], usize::MAX).unwrap();
                if h.base_offset >= floor {
                    break;
                }
                lo += h.total_len();
            }
            let (synced_base, synced_bytes) = synced[i];
            let lo = if synced_base == base { lo.max(synced_bytes as usize) } else { lo };
            let lo = lo.min(bytes.len());
            let cut = lo + ((bytes.len() - lo) as f64 * keep) as usize;
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(cut as u64).unwrap();
            if flip && cut > lo {
                let pos = lo + ((cut - lo) as f64 * at) as usize;
                f.write_all_at(&[bytes[pos] ^ 0x04], pos as u64).unwrap();
            }
        }
    }

    /// Writes the round the crash interrupted: torn or garbled, never acknowledged.
    /// Whether replay must report it as the torn tail: yes, unless the damage keeps
    /// its header's salt from being the file's, when it is no record of this file.
    fn tear_journal(jdir: &Path, tail: (f64, bool)) -> bool {
        let (_, path) = journal_file::list_files(jdir).unwrap().pop().expect("a current journal file");
        let mut r = RecordReader::open(&path).unwrap();
        while let Next::Entry(_) = r.next_record().unwrap() {}
        let end = r.position;
        let mut rec = Vec::new();
        let batch =
            es_core::batch::encode(&[Record::from_value("torn")], 0, es_core::ProducerInfo::NONE).unwrap();
        encode_batch_for_test(&mut rec, "p0", &batch);
        journal_file::stamp(&mut rec, r.salt().expect("a journal file of this format"));
        let salt_at = 8..journal_file::HEADER_LEN;
        let (frac, flip) = tail;
        let torn = if flip {
            let pos = (rec.len() as f64 * frac) as usize;
            rec[pos] ^= 0x80;
            !salt_at.contains(&pos)
        } else {
            // Cut before the record's last non-zero byte, so it is torn: a cut that
            // only dropped trailing zeros would leave a whole record, a write that
            // completed, which the model does not hold (the journal's unit tests
            // cover whole records over preallocated zeros).
            let last = rec.iter().rposition(|b| *b != 0).expect("a record has non-zero bytes");
            let cut = 1 + ((last - 1) as f64 * frac) as usize;
            rec.truncate(cut);
            cut >= salt_at.end
        };
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(&rec, end).unwrap();
        torn
    }

    fn encode_batch_for_test(out: &mut Vec<u8>, name: &str, batch: &[u8]) {
        journal_file::encode_batch(out, name, batch);
    }

    /// Reopens the log and checks every partition holds exactly the model.
    fn check(root: &Path, model: &Model) -> JournalReplay {
        let m = LogManager::new(root, options(true)).unwrap();
        let report = m.journal_replay().clone();
        for (i, want) in model.iter().enumerate() {
            let (p, _) = m.open_partition(&format!("p{i}"), config()).unwrap();
            let mut got = Vec::new();
            let mut at = p.info().log_start_offset;
            while at < p.high_watermark() {
                let read = p.read(at, 1).unwrap();
                let b = read.batches().next().unwrap();
                let len = b.header.total_len();
                got.push((b.header.base_offset, read.data[..len].to_vec()));
                at = b.header.next_offset();
            }
            assert_eq!(got.len(), want.len(), "p{i}: batch count after recovery");
            assert!(got == *want, "p{i}: recovered batches differ from the acknowledged ones");
            assert_eq!(p.info().log_end_offset, p.high_watermark(), "p{i}: nothing past the watermark");
        }
        m.shutdown().unwrap();
        report
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        /// Random crash points in the journal write, the checkpoint and the segment
        /// write-behind: every acknowledged batch is recovered byte for byte, in
        /// order, nothing else; and replaying the same journal again changes nothing.
        #[test]
        fn recovery_restores_every_acknowledged_batch(
            ops in proptest::collection::vec(op(), 1..80),
            crash in crash(),
            bypass in any::<bool>(),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let (root, side) = (tmp.path().join("data"), tmp.path().join("side"));
            std::fs::create_dir_all(&side).unwrap();
            let (model, synced) = run_ops(&root, &ops, &side, bypass);
            let jdir = root.join(crate::JOURNAL_DIR);
            restore_older(&jdir, &side);
            damage_segments(&root, &crash, &journal_floors(&jdir), &synced);
            let torn = crash.journal_tail.is_some_and(|tail| tear_journal(&jdir, tail));
            let again = tmp.path().join("again");
            std::fs::create_dir_all(&again).unwrap();
            for (_, path) in journal_file::list_files(&jdir).unwrap() {
                std::fs::copy(&path, again.join(path.file_name().unwrap())).unwrap();
            }
            let report = check(&root, &model);
            prop_assert_eq!(report.torn.is_some(), torn);
            // Idempotence: the same journal over the recovered segments.
            for entry in std::fs::read_dir(&again).unwrap() {
                let path = entry.unwrap().path();
                std::fs::copy(&path, jdir.join(path.file_name().unwrap())).unwrap();
            }
            // Truncation records are applied again (the creation one cuts to 0) and the
            // batches after them re-appended: the same state comes out.
            let second = check(&root, &model);
            prop_assert!(second.torn.is_none() || crash.journal_tail.is_some());
        }
    }
}

#[cfg(test)]
mod fault_tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use es_core::{LeaderEpoch, Record};

    use crate::config::LogConfig;
    use crate::error::LogError;
    use crate::manager::{LogManager, ManagerOptions};

    const EPOCH: LeaderEpoch = LeaderEpoch(1);

    fn manager(root: &std::path::Path) -> LogManager {
        LogManager::new(root, ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() })
            .unwrap()
    }

    use crate::manager::journal_only;

    /// A partition alone in its rounds syncs its own segment once no live journal
    /// file holds a truncation of it: not while its creation record is live, again
    /// after a checkpoint deleted that file, not after a truncation until the next
    /// one. A crash after all of it loses no acknowledged batch.
    #[test]
    fn a_lone_partition_bypasses_the_journal_only_without_a_live_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let options = ManagerOptions {
            housekeeping_interval: None,
            journal_file_bytes: 16 * 1024,
            ..ManagerOptions::default()
        };
        let m = LogManager::new(dir.path(), options.clone()).unwrap();
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        let stats = m.shared.flusher.stats.clone();
        let direct = || stats.direct_rounds.load(Ordering::Acquire);
        let mut acked: Vec<(u64, String)> = Vec::new();
        let put = |p: &crate::PartitionLog, acked: &mut Vec<(u64, String)>, n: usize| {
            let value = format!("{n:04}").repeat(256);
            let a = p.append_records(&[Record::from_value(value.clone())], EPOCH).unwrap().wait().unwrap();
            acked.push((a.base_offset, value));
        };
        put(&p, &mut acked, 0);
        assert_eq!(direct(), 0, "the creation record is live: the round went through the journal");
        // Fill journal files until one rotates and its checkpoint deletes the record.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut n = 1;
        while direct() == 0 {
            assert!(Instant::now() < deadline, "no round ever bypassed the journal");
            put(&p, &mut acked, n);
            n += 1;
        }
        let before = direct();
        put(&p, &mut acked, n);
        assert_eq!(direct(), before + 1, "alone and with no live truncation: the segment is synced");
        let cut = acked.pop().unwrap().0;
        p.truncate_from(cut).unwrap();
        put(&p, &mut acked, n + 1);
        assert_eq!(direct(), before + 1, "the truncation is live: through the journal");
        m.stop_without_checkpoint();
        drop((p, m));
        let m = LogManager::new(dir.path(), options).unwrap();
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        assert_eq!(p.high_watermark(), acked.last().unwrap().0 + 1);
        for (offset, value) in &acked {
            let read = p.read(*offset, 1 << 20).unwrap();
            let batch = read.batches().next().unwrap();
            assert_eq!(batch.header.base_offset, *offset);
            let recs = batch.plain_records(1 << 20).unwrap();
            assert_eq!(recs.iter().next().unwrap().unwrap().value, Some(value.as_bytes()), "offset {offset}");
        }
        m.shutdown().unwrap();
    }

    /// Several partitions in a round skip the journal only with large writes each;
    /// what such rounds acknowledged survives a crash like the rest.
    #[test]
    fn a_few_partitions_with_large_writes_sync_their_segments_and_small_ones_share_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let options = ManagerOptions {
            housekeeping_interval: None,
            journal_file_bytes: 64 * 1024,
            ..ManagerOptions::default()
        };
        let m = LogManager::new(dir.path(), options.clone()).unwrap();
        let parts: Vec<_> =
            (0..3).map(|i| m.open_partition(&format!("p{i}"), LogConfig::default()).unwrap().0).collect();
        let stats = m.shared.flusher.stats.clone();
        // Direct rounds that held more than one partition.
        let shared_direct =
            || stats.direct_partitions.load(Ordering::Acquire) - stats.direct_rounds.load(Ordering::Acquire);
        let mut acked: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 3];
        let mut burst = |size: usize, n: usize| {
            let value = vec![(n % 251) as u8; size];
            let pending: Vec<_> = parts
                .iter()
                .map(|p| p.append_records(&[Record::from_value(value.clone())], EPOCH).unwrap())
                .collect();
            for (i, a) in pending.into_iter().enumerate() {
                acked[i].push((a.wait().unwrap().base_offset, value.clone()));
            }
        };
        for n in 0..200 {
            burst(1024, n);
        }
        assert_eq!(
            shared_direct(),
            0,
            "small writes: rounds of several partitions share the journal's fsync"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut n = 200;
        while shared_direct() == 0 {
            assert!(
                Instant::now() < deadline,
                "no round of several partitions with large writes skipped the journal"
            );
            burst(200 * 1024, n);
            n += 1;
        }
        for _ in 0..20 {
            burst(200 * 1024, n);
            n += 1;
        }
        m.stop_without_checkpoint();
        drop((parts, m));
        let m = LogManager::new(dir.path(), options).unwrap();
        for (i, want) in acked.iter().enumerate() {
            let (p, _) = m.open_partition(&format!("p{i}"), LogConfig::default()).unwrap();
            assert_eq!(p.high_watermark(), want.last().unwrap().0 + 1, "p{i}");
            for (offset, value) in want {
                let read = p.read(*offset, 1 << 20).unwrap();
                let batch = read.batches().next().unwrap();
                assert_eq!(batch.header.base_offset, *offset);
                let recs = batch.plain_records(1 << 20).unwrap();
                assert_eq!(
                    recs.iter().next().unwrap().unwrap().value,
                    Some(&value[..]),
                    "p{i} offset {offset}"
                );
            }
        }
        m.shutdown().unwrap();
    }

    fn append(p: &crate::PartitionLog, v: &'static str) -> crate::Result<crate::Appended> {
        p.append_records(&[Record::from_value(v)], EPOCH)?.wait()
    }

    /// A failed journal fsync fails what it covered, serves none of it, and stops
    /// every partition of the journal from acknowledging more.
    #[test]
    fn a_failed_journal_sync_fails_its_appends_and_poisons_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let m = journal_only(dir.path());
        let (a, _) = m.open_partition("a", LogConfig::default()).unwrap();
        let (b, _) = m.open_partition("b", LogConfig::default()).unwrap();
        append(&a, "durable").unwrap();
        m.shared.flusher.journal().unwrap().faults.fail_sync.store(true, Ordering::Release);
        assert!(matches!(append(&a, "lost"), Err(LogError::Io { .. })));
        assert_eq!(a.high_watermark(), 1, "the batch the failed sync covered is never visible");
        assert_eq!(a.read(0, 1 << 20).unwrap().batches().count(), 1);
        assert!(
            matches!(append(&b, "after"), Err(LogError::Failed(_))),
            "the journal acknowledges nothing more"
        );
        assert_eq!(b.high_watermark(), 0);
        m.stop_without_checkpoint();
        drop((a, b, m));
        let m = manager(dir.path());
        let (a, _) = m.open_partition("a", LogConfig::default()).unwrap();
        let first = a.read(0, 1 << 20).unwrap();
        let rec = first.batches().next().unwrap().plain_records(1 << 20).unwrap();
        assert_eq!(rec.iter().next().unwrap().unwrap().value, Some(&b"durable"[..]));
        append(&a, "again").unwrap();
    }

    /// A full journal disk refuses new appends with a typed error while the ones
    /// already taken wait; when space returns they are acknowledged and appends resume.
    #[test]
    fn a_full_journal_refuses_appends_and_recovers_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let m = journal_only(dir.path());
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        append(&p, "before").unwrap();
        let journal = m.shared.flusher.journal().unwrap().clone();
        journal.faults.enospc.store(u32::MAX, Ordering::Release);
        let waiting = p.append_records(&[Record::from_value("waits")], EPOCH).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let refused = loop {
            match p.append_records(&[Record::from_value("refused")], EPOCH) {
                Err(e @ LogError::JournalFull { .. }) => break e,
                Ok(pending) => drop(pending),
                Err(e) => panic!("unexpected {e:?}"),
            }
            assert!(Instant::now() < deadline, "the journal never reported it was full");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(refused.to_string().contains("no disk space"), "{refused}");
        assert_eq!(p.high_watermark(), 1, "nothing is acknowledged while the journal is full");
        journal.faults.enospc.store(0, Ordering::Release);
        let got = waiting.wait().unwrap();
        assert_eq!(got.base_offset, 1);
        let after = append(&p, "after").unwrap();
        assert_eq!(p.high_watermark(), after.last_offset + 1);
        m.shutdown().unwrap();
    }

    /// A segment write refused for lack of space fails the append (nothing of it is
    /// journaled) and stops that partition only.
    #[test]
    fn enospc_on_a_segment_fails_that_partition_only() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let (a, _) = m.open_partition("a", LogConfig::default()).unwrap();
        let (b, _) = m.open_partition("b", LogConfig::default()).unwrap();
        append(&a, "ok").unwrap();
        {
            let inner = a.inner.lock().unwrap();
            let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
            *inner.active().writer.as_ref().unwrap().file.lock().unwrap() = Some(full);
        }
        let err = append(&a, "no space").unwrap_err();
        assert!(
            matches!(&err, LogError::Io { source, .. } if source.raw_os_error() == Some(28)),
            "ENOSPC, typed: {err:?}"
        );
        assert!(matches!(append(&a, "again"), Err(LogError::Failed(_))));
        assert_eq!(a.high_watermark(), 1);
        append(&b, "other partitions go on").unwrap();
        m.stop_without_checkpoint();
        drop((a, b, m));
        let m = manager(dir.path());
        let (a, _) = m.open_partition("a", LogConfig::default()).unwrap();
        assert_eq!(a.high_watermark(), 1, "the refused batch was never journaled");
        append(&a, "recovered").unwrap();
    }

    /// The leader epoch sits before the CRC, so a torn write that garbles it passes
    /// the segment's own recovery; replay finds the journal's copy with the same CRC
    /// and different bytes, and rewrites it and everything after it.
    #[test]
    fn a_segment_batch_garbled_outside_its_crc_is_rewritten_from_the_journal() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path());
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        append(&p, "one").unwrap();
        // A clean stop checkpoints: the journal then holds only what follows.
        m.shutdown().unwrap();
        drop((p, m));
        let m = journal_only(dir.path());
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        for v in ["two", "three"] {
            append(&p, v).unwrap();
        }
        let want = p.read(0, 1 << 20).unwrap().data;
        m.stop_without_checkpoint();
        drop((p, m));
        let segment = crate::files::segment_path(&dir.path().join("p"), 0, crate::files::LOG_EXT);
        let second = es_core::BatchHeader::parse(&want, usize::MAX).unwrap().total_len();
        // Byte 12 is the high byte of the second batch's partitionLeaderEpoch.
        let f = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
        f.write_all_at(&[want[second + 12] ^ 0x04], (second + 12) as u64).unwrap();
        drop(f);
        let m = manager(dir.path());
        let replay = m.journal_replay();
        assert_eq!((replay.repaired, replay.appended), (1, 2), "{replay:?}");
        let (p, _) = m.open_partition("p", LogConfig::default()).unwrap();
        assert_eq!(p.read(0, 1 << 20).unwrap().data, want, "the acknowledged bytes, restored");
        assert_eq!(p.epoch_starts(), vec![(EPOCH, 0)], "no epoch from the garbled header");
        m.shutdown().unwrap();
    }
}
