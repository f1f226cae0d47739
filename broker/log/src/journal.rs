//! The per-disk journal. Every flush round appends one record per batch, for every
//! partition with pending appends, and makes them durable with one `fdatasync`;
//! segment files are written behind it and synced lazily, at checkpoints. The files
//! and their records are `journal_file`'s. Truncations go through the same file, in
//! order with the appends, so a replay reproduces what the partitions went through
//! (the Raft log storage needs both).
//!
//! A round of one partition, or of a few with large writes, skips the journal when
//! it may (see [`Journal::bypass`]): the partitions' segments are written and
//! fdatasynced directly, as with the journal off, which spares them the double
//! write. That is safe only while no live journal file holds a truncation of any of
//! them: replaying an older truncation would cut batches synced after it.
//!
//! Files are `<seq, 20 digits>.journal`, preallocated so that a write inside them
//! cannot fail for lack of space. Once the current file passes
//! [`limits::JOURNAL_FILE_BYTES`] a new one becomes current and a checkpoint thread
//! syncs every segment written while the old ones were current; only then are the
//! old files recycled (the newest becomes the spare that the next rotation takes)
//! or deleted.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use es_core::limits;

use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::flusher::FlushStats;
use crate::journal_file::{
    FILE_HEADER_LEN, Opened, SPARE_FILE, create_file, encode_truncate, encode_truncate_entries, file_path,
    list_files, recycle, stamp, take_spare,
};

/// How a journal is run (see [`crate::ManagerOptions`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JournalOptions {
    /// Rotate past this size (normally [`limits::JOURNAL_FILE_BYTES`]).
    pub file_bytes: u64,
    /// Direct-shaped rounds may skip the journal ([`Journal::bypass`]).
    pub bypass: bool,
    /// Checkpointed files become the spare instead of being deleted.
    pub recycle: bool,
    /// A round of a few partitions skips the journal (when `bypass` allows) only with
    /// at least this many bytes pending per partition on average (the flusher's
    /// `direct_shaped`); a round of one partition with any.
    pub direct_bytes: u64,
}

/// Most threads a checkpoint uses to sync segments in parallel.
const CHECKPOINT_WORKERS_MAX: usize = 8;

/// Whether a round of a single partition may skip the journal ([`Journal::bypass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bypass {
    /// Sync the partition's segment instead.
    Yes,
    /// Not until a checkpoint deletes the live file with its truncation record.
    AfterCheckpoint,
    /// Bypass is off, or the journal failed.
    No,
}

/// Test hooks that make the next journal writes or syncs fail like a disk would.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The next sync fails with EIO.
    pub fail_sync: AtomicBool,
    /// This many writes (and preallocations) fail with ENOSPC.
    pub enospc: AtomicU32,
}

impl Faults {
    fn enospc(&self) -> bool {
        self.enospc.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error())
}

fn is_enospc(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
}

/// The file records are appended to.
struct Current {
    file: File,
    seq: u64,
    /// The salt every record written to this file carries.
    salt: u64,
    position: u64,
}

impl Current {
    fn new(opened: Opened, seq: u64) -> Current {
        Current { file: opened.file, seq, salt: opened.salt, position: FILE_HEADER_LEN }
    }
}

pub(crate) struct Journal {
    dir: PathBuf,
    current: Mutex<Current>,
    /// Set while the disk refuses the journal space; appends are refused meanwhile.
    full: AtomicBool,
    /// Set after a failed journal sync or checkpoint: nothing more is acknowledged.
    failed: Mutex<Option<String>>,
    /// Segment files written behind since the current file became current.
    dirty: Mutex<HashSet<PathBuf>>,
    /// Partitions with a truncation record in a live file, and the newest such
    /// file's sequence number: their rounds go through the journal (see
    /// [`Journal::bypass`]) until a checkpoint has durably deleted that file.
    truncated: Mutex<HashMap<String, u64>>,
    checkpoint: Mutex<Option<JoinHandle<()>>>,
    stopping: AtomicBool,
    closed: AtomicBool,
    stats: Arc<FlushStats>,
    /// Rotate past this size (normally [`limits::JOURNAL_FILE_BYTES`]).
    file_bytes: u64,
    /// Direct-shaped rounds may skip the journal ([`Journal::bypass`]).
    bypass: bool,
    /// Checkpointed files become the spare.
    recycle: bool,
    direct_bytes: u64,
    pub faults: Faults,
}

impl Journal {
    /// Starts a fresh journal in `dir` (in the spare, if an earlier run left one);
    /// any older files must have been replayed and removed first (see
    /// `journal_replay`).
    pub fn open(
        dir: &Path,
        first_seq: u64,
        options: JournalOptions,
        stats: Arc<FlushStats>,
    ) -> Result<Arc<Journal>> {
        std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
        let faults = Faults::default();
        let opened = match options.recycle {
            true => take_spare(dir, first_seq)?,
            false => {
                files::remove_if_exists(&dir.join(SPARE_FILE))
                    .ctx(|| format!("removing the spare in {}", dir.display()))?;
                None
            }
        };
        let opened = match opened {
            Some(o) => o,
            None => create_file(dir, first_seq, options.file_bytes, faults.enospc())?,
        };
        Ok(Arc::new(Journal {
            dir: dir.to_owned(),
            current: Mutex::new(Current::new(opened, first_seq)),
            full: AtomicBool::new(false),
            failed: Mutex::new(None),
            dirty: Mutex::new(HashSet::new()),
            truncated: Mutex::new(HashMap::new()),
            checkpoint: Mutex::new(None),
            stopping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            stats,
            file_bytes: options.file_bytes,
            bypass: options.bypass,
            recycle: options.recycle,
            direct_bytes: options.direct_bytes,
            faults,
        }))
    }

    pub fn check_failed(&self) -> Result<()> {
        match &*self.failed.lock().expect("journal failed lock") {
            Some(reason) => Err(LogError::Failed(reason.clone())),
            None => Ok(()),
        }
    }

    fn poison(&self, e: &LogError) {
        tracing::error!(dir = %self.dir.display(), error = %e, "the journal failed; no further append is acknowledged until restart");
        self.failed.lock().expect("journal failed lock").get_or_insert_with(|| e.to_string());
    }

    /// Called before an append takes offsets: refuses it while the journal has
    /// failed or has no space, so a refused append leaves nothing behind. When space
    /// was short, tries again to get it (without waiting on a round in progress).
    pub fn admit(self: &Arc<Self>) -> Result<()> {
        self.check_failed()?;
        if !self.full.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Ok(mut cur) = self.current.try_lock() {
            if cur.position >= self.file_bytes {
                self.rotate(&mut cur);
            } else {
                self.full.store(false, Ordering::Release);
            }
        }
        if self.full.load(Ordering::Acquire) {
            return Err(LogError::JournalFull { dir: self.dir.clone() });
        }
        Ok(())
    }

    /// Remembers a segment file written behind, for the next checkpoint.
    pub fn note_dirty(&self, path: &Path) {
        let mut dirty = self.dirty.lock().expect("dirty lock");
        if !dirty.contains(path) {
            dirty.insert(path.to_owned());
        }
    }

    /// See [`JournalOptions::direct_bytes`].
    pub fn direct_bytes(&self) -> u64 {
        self.direct_bytes
    }

    /// Whether a round holding `partition` may sync that partition's segment instead
    /// of the journal (every partition of the round must be allowed to). Not while a live journal file holds a
    /// truncation of it (its creation record included): a replay applies that
    /// truncation again and would cut the batches synced after it. Batch records of
    /// the partition in live files are harmless: replay skips what the segment holds,
    /// and the segment sync makes everything written behind before it durable too.
    pub fn bypass(&self, partition: &str) -> Bypass {
        if !self.bypass || self.check_failed().is_err() {
            return Bypass::No;
        }
        match self.truncated.lock().expect("truncated lock").contains_key(partition) {
            true => Bypass::AfterCheckpoint,
            false => Bypass::Yes,
        }
    }

    /// Rotates now, so that a checkpoint deletes the truncation records that keep a
    /// lone partition's rounds in the journal ([`Bypass::AfterCheckpoint`]), rather
    /// than after a whole file of rounds. Not while a checkpoint runs: the records
    /// are then in the file it is about to delete, or in the current one, whose turn
    /// comes when it ends; so rotations never outpace checkpoints.
    pub fn expedite_checkpoint(self: &Arc<Self>) {
        if self.checkpoint.lock().expect("checkpoint lock").as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let mut cur = self.current.lock().expect("journal lock");
        if cur.position > FILE_HEADER_LEN && self.check_failed().is_ok() {
            self.rotate(&mut cur);
        }
    }

    /// Writes `records` (stamped with the current file's salt) and syncs them: the
    /// one fdatasync of a round. A write refused for lack of space is retried until
    /// space returns (the records' offsets are taken, so they cannot be given back);
    /// a failed sync poisons the journal.
    pub fn commit(self: &Arc<Self>, records: &mut [u8]) -> Result<()> {
        self.commit_noting(records, None)
    }

    /// [`Journal::commit`], noting first that `truncated` (the partition of the
    /// truncation record among `records`) has one in the current file. Under the
    /// journal's lock, so no rotation comes between the note and the write.
    fn commit_noting(self: &Arc<Self>, records: &mut [u8], truncated: Option<&str>) -> Result<()> {
        let mut cur = self.current.lock().expect("journal lock");
        self.check_failed()?;
        stamp(records, cur.salt);
        if let Some(partition) = truncated {
            self.truncated.lock().expect("truncated lock").insert(partition.to_owned(), cur.seq);
        }
        self.write_retrying(&cur, records)?;
        let synced = if self.faults.fail_sync.swap(false, Ordering::AcqRel) {
            Err(io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error()))
        } else {
            crate::flusher::timed_sync(&self.stats, &cur.file)
        };
        if let Err(e) = synced {
            let e = LogError::io(format!("syncing journal {}", file_path(&self.dir, cur.seq).display()), e);
            self.poison(&e);
            return Err(e);
        }
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.stats.bytes.fetch_add(records.len() as u64, Ordering::Relaxed);
        cur.position += records.len() as u64;
        if cur.position >= self.file_bytes {
            self.rotate(&mut cur);
        } else {
            self.full.store(false, Ordering::Release);
        }
        Ok(())
    }

    fn write_retrying(&self, cur: &Current, records: &[u8]) -> Result<()> {
        loop {
            let written = if self.faults.enospc() {
                Err(enospc())
            } else {
                cur.file.write_all_at(records, cur.position)
            };
            match written {
                Ok(()) => return Ok(()),
                Err(e) if is_enospc(&e) && !self.stopping.load(Ordering::Acquire) => {
                    if !self.full.swap(true, Ordering::AcqRel) {
                        tracing::warn!(dir = %self.dir.display(), "the journal's disk is full; appends are refused until space returns");
                    }
                    std::thread::sleep(Duration::from_millis(limits::JOURNAL_FULL_RETRY_MS));
                }
                Err(e) if is_enospc(&e) => return Err(LogError::JournalFull { dir: self.dir.clone() }),
                Err(e) => {
                    let e = LogError::io(
                        format!("writing journal {}", file_path(&self.dir, cur.seq).display()),
                        e,
                    );
                    self.poison(&e);
                    return Err(e);
                }
            }
        }
    }

    /// Writes one truncation record durably (in order with the rounds).
    pub fn record_truncate(self: &Arc<Self>, partition: &str, offset: u64) -> Result<()> {
        let mut buf = Vec::new();
        encode_truncate(&mut buf, partition, offset);
        self.commit_noting(&mut buf, Some(partition))
    }

    /// Records a Raft truncation (entries from `index`, at `offset`) durably.
    pub fn record_truncate_entries(self: &Arc<Self>, partition: &str, offset: u64, index: u64) -> Result<()> {
        let mut buf = Vec::new();
        encode_truncate_entries(&mut buf, partition, offset, index);
        self.commit_noting(&mut buf, Some(partition))
    }

    /// Makes a new file current and checkpoints the old ones in the background.
    /// Waits for the previous checkpoint first, so at most two files are live. Out
    /// of space, keeps the current file (appends are refused until a retry works).
    fn rotate(self: &Arc<Self>, cur: &mut Current) {
        if let Some(h) = self.checkpoint.lock().expect("checkpoint lock").take() {
            let _ = h.join();
        }
        if self.check_failed().is_err() {
            return;
        }
        let next = cur.seq + 1;
        let spare = match self.recycle {
            true => take_spare(&self.dir, next).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot use the spare journal file; creating a new one");
                None
            }),
            false => None,
        };
        let opened = match spare {
            Some(opened) => Ok(opened),
            None => create_file(&self.dir, next, self.file_bytes, self.faults.enospc()),
        };
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a new journal file; appends are refused until it can");
                self.full.store(true, Ordering::Release);
                return;
            }
        };
        self.full.store(false, Ordering::Release);
        let old_seq = cur.seq;
        *cur = Current::new(opened, next);
        let dirty: Vec<PathBuf> = self.dirty.lock().expect("dirty lock").drain().collect();
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("es-checkpoint".into())
            .spawn(move || me.checkpoint(&dirty, old_seq));
        match spawned {
            Ok(h) => *self.checkpoint.lock().expect("checkpoint lock") = Some(h),
            Err(e) => {
                tracing::warn!(error = %e, "could not start a checkpoint; the old journal files stay until the next one")
            }
        }
    }

    /// Syncs `segments`, then retires the journal files up to `upto_seq`: the order
    /// that makes retiring them safe.
    fn checkpoint(&self, segments: &[PathBuf], upto_seq: u64) {
        let done = sync_files(segments, &self.stats).and_then(|()| self.retire_files(upto_seq));
        if let Err(e) = done {
            self.poison(&e);
        }
    }

    /// Removes the journal files up to `upto_seq`, except the newest, which becomes
    /// the spare when recycling is on and no spare waits. The others go first and
    /// durably: the spare's new salt is a data write, durable as soon as it is synced,
    /// so a crash must not find it recycled with an older file still there (replaying
    /// that file's truncations without the newer file's batches would cut them).
    fn retire_files(&self, upto_seq: u64) -> Result<()> {
        let old: Vec<_> = list_files(&self.dir)?.into_iter().filter(|(seq, _)| *seq <= upto_seq).collect();
        let spare_free = self.recycle && !self.dir.join(SPARE_FILE).exists();
        let keep = old.last().filter(|_| spare_free).map(|(seq, _)| *seq);
        for (seq, path) in &old {
            if Some(*seq) != keep {
                files::remove_if_exists(path).ctx(|| format!("removing {}", path.display()))?;
            }
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        if let Some(seq) = keep {
            recycle(&file_path(&self.dir, seq), &self.dir)?;
            files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        }
        // Only now can no replay see those truncations again.
        self.truncated.lock().expect("truncated lock").retain(|_, seq| *seq > upto_seq);
        Ok(())
    }

    /// Tells a write waiting for space to give up (the flusher is stopping).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Clean shutdown, after the last round: syncs every segment written behind and
    /// retires every journal file (the current one may stay as the spare, which holds
    /// nothing to replay), so the next start has nothing to replay. With
    /// `checkpoint` false (a simulated crash) the files are left as they are.
    pub fn close(&self, checkpoint: bool) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(h) = self.checkpoint.lock().expect("checkpoint lock").take() {
            let _ = h.join();
        }
        if !checkpoint || self.check_failed().is_err() {
            return;
        }
        let seq = self.current.lock().expect("journal lock").seq;
        let dirty: Vec<PathBuf> = self.dirty.lock().expect("dirty lock").drain().collect();
        if let Err(e) = sync_files(&dirty, &self.stats).and_then(|()| self.retire_files(seq)) {
            tracing::error!(error = %e, "the final checkpoint failed; the journal will be replayed on the next start");
        }
    }
}

/// Syncs files in parallel; a file that is gone (truncated away, expired) is skipped.
pub(crate) fn sync_files(paths: &[PathBuf], stats: &FlushStats) -> Result<()> {
    let sync = |lane: &[PathBuf]| -> Result<()> {
        for p in lane {
            match File::open(p) {
                Ok(f) => f.sync_data().ctx(|| format!("syncing {}", p.display()))?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(LogError::io(format!("opening {}", p.display()), e)),
            }
            stats.checkpoint_fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    };
    let per_lane = paths.len().div_ceil(CHECKPOINT_WORKERS_MAX).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = paths.chunks(per_lane).map(|lane| s.spawn(move || sync(lane))).collect();
        handles.into_iter().try_for_each(|h| h.join().expect("checkpoint worker"))
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::journal_file::{Entry, Next, RecordReader, encode_batch};

    fn options(file_bytes: u64, recycle: bool) -> JournalOptions {
        JournalOptions { file_bytes, bypass: true, recycle, direct_bytes: 0 }
    }

    fn open(dir: &Path, first_seq: u64, o: JournalOptions) -> Arc<Journal> {
        Journal::open(dir, first_seq, o, Arc::new(FlushStats::default())).unwrap()
    }

    /// The base offsets of the batch records `path` holds, in order.
    fn offsets_in(path: &Path) -> Vec<u64> {
        let mut r = RecordReader::open(path).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next_record().unwrap() {
                Next::Entry(Entry::Batch { base_offset, .. }) => out.push(base_offset),
                Next::Entry(other) => panic!("{other:?}"),
                Next::End => return out,
                Next::Torn(reason) => panic!("torn: {reason}"),
            }
        }
    }

    fn batch(base: u64, epoch: i32, len: usize) -> Vec<u8> {
        let mut b = vec![7u8; len];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&epoch.to_be_bytes());
        b
    }

    #[test]
    fn a_failed_sync_poisons_and_enospc_is_retried_until_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let j = open(dir.path(), 1, options(limits::JOURNAL_FILE_BYTES, true));
        let mut rec = Vec::new();
        encode_batch(&mut rec, "p", &batch(0, 1, 30));
        // Two refused writes, then space returns: the commit succeeds.
        j.faults.enospc.store(2, Ordering::Release);
        j.commit(&mut rec).unwrap();
        j.admit().unwrap();
        j.faults.fail_sync.store(true, Ordering::Release);
        assert!(matches!(j.commit(&mut rec), Err(LogError::Io { .. })));
        assert!(matches!(j.admit(), Err(LogError::Failed(_))));
        assert!(matches!(j.commit(&mut rec), Err(LogError::Failed(_))));
    }

    #[test]
    fn no_space_for_a_new_file_refuses_appends_until_a_retry_works() {
        let dir = tempfile::tempdir().unwrap();
        let j = open(dir.path(), 1, options(limits::JOURNAL_FILE_BYTES, true));
        {
            let mut cur = j.current.lock().unwrap();
            cur.position = j.file_bytes;
            j.faults.enospc.store(1, Ordering::Release);
            j.rotate(&mut cur);
            assert_eq!(cur.seq, 1, "no new file without space");
        }
        j.faults.enospc.store(1, Ordering::Release);
        assert!(
            matches!(j.admit(), Err(LogError::JournalFull { .. })),
            "the retry in admit also finds no space"
        );
        // Space is back: the next append's retry gets the new file.
        j.admit().unwrap();
        assert_eq!(j.current.lock().unwrap().seq, 2);
        j.close(true);
        assert!(list_files(dir.path()).unwrap().is_empty(), "a clean close leaves nothing to replay");
    }

    /// Rotations take the spare the previous checkpoint left, so past the first
    /// rotation no file is preallocated anew and at most two files exist (the current
    /// one and the spare, or the one being checkpointed); every file reads back
    /// exactly the records of its own use. Without recycling no spare is kept.
    #[test]
    fn checkpointed_files_are_recycled_and_read_back_only_their_new_records() {
        for recycle in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let j = open(dir.path(), 1, options(4096, recycle));
            let mut offset = 0;
            for _ in 0..6 {
                // The spare waiting now is the file the rotation below makes current.
                let spare = std::fs::metadata(dir.path().join(SPARE_FILE)).ok().map(|m| m.ino());
                // Enough records to pass the file size: one rotation per pass.
                let seq = j.current.lock().unwrap().seq;
                let mut written = Vec::new();
                while j.current.lock().unwrap().seq == seq {
                    let mut rec = Vec::new();
                    encode_batch(&mut rec, "p", &batch(offset, 1, 300));
                    j.commit(&mut rec).unwrap();
                    written.push(offset);
                    offset += 1;
                }
                let current = j.current.lock().unwrap().file.metadata().unwrap().ino();
                if let Some(spare) = spare {
                    assert_eq!(spare, current, "the rotation took the spare");
                }
                // The rotated file holds what was written to it, and nothing older.
                let path = file_path(dir.path(), seq);
                if path.exists() {
                    assert_eq!(offsets_in(&path), written, "file {seq}, recycle {recycle}");
                }
                if let Some(h) = j.checkpoint.lock().unwrap().take() {
                    h.join().unwrap();
                }
                let files = std::fs::read_dir(dir.path()).unwrap().count();
                assert!(files <= 2, "{files} files, recycle {recycle}");
                assert_eq!(dir.path().join(SPARE_FILE).exists(), recycle);
                assert!(!file_path(dir.path(), seq).exists(), "file {seq} was retired");
                // What the spare holds now reads as nothing in its next use.
                if recycle {
                    assert!(offsets_in(&dir.path().join(SPARE_FILE)).is_empty());
                }
            }
            j.close(true);
            assert!(list_files(dir.path()).unwrap().is_empty());
            assert_eq!(dir.path().join(SPARE_FILE).exists(), recycle, "a clean close keeps the spare");
            // The next start takes the spare: nothing of its old use is read.
            let j = open(dir.path(), 9, options(4096, recycle));
            assert!(offsets_in(&file_path(dir.path(), 9)).is_empty());
            assert!(!dir.path().join(SPARE_FILE).exists());
            j.close(false);
        }
    }
}
