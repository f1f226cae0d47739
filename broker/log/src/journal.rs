//! The per-disk journal. Every flush round appends one record per batch, for every
//! partition with pending appends, and makes them durable with one `fdatasync`;
//! segment files are written behind it and synced lazily, at checkpoints. A record
//! is `[body length u32][crc32c of body u32][body]`, the body being
//! `[kind u8][name length u16][partition name][offset u64][leader epoch i32][batch]`.
//! Truncations go through the same file, in order with the appends, so a replay
//! reproduces what the partitions went through (the Raft log storage needs both).
//!
//! A round that touches a single partition skips the journal when it may (see
//! [`Journal::bypass`]): that partition's segment is written and fdatasynced
//! directly, as with the journal off, which spares one partition the double write.
//! That is safe only while no live journal file holds a truncation of the partition:
//! replaying an older truncation would cut batches synced after it.
//!
//! Files are `<seq, 20 digits>.journal`, preallocated so that a write inside them
//! cannot fail for lack of space. Once the current file passes
//! [`limits::JOURNAL_FILE_BYTES`] a new one becomes current and a checkpoint thread
//! syncs every segment written while the old ones were current; only then are the
//! old files deleted.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use es_core::{LeaderEpoch, limits};

use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::flusher::FlushStats;

pub(crate) const JOURNAL_EXT: &str = "journal";
/// Length and CRC in front of every record body.
const HEADER_LEN: usize = 8;
/// Kind, name length, offset and epoch: the body bytes besides name and batch.
const BODY_FIXED_LEN: usize = 1 + 2 + 8 + 4;
const KIND_BATCH: u8 = 1;
const KIND_TRUNCATE: u8 = 2;
/// Most threads a checkpoint uses to sync segments in parallel.
const CHECKPOINT_WORKERS_MAX: usize = 8;

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A batch appended to `partition`, as stored (base offset and epoch stamped).
    Batch { partition: String, base_offset: u64, epoch: LeaderEpoch, bytes: Vec<u8> },
    /// Every record of `partition` at or after `offset` was discarded. Also written
    /// (at offset 0) when a partition directory is created, so that a replay never
    /// applies records of an earlier partition of the same name.
    Truncate { partition: String, offset: u64 },
    /// Every Raft entry of `partition` from Raft index `index` on (the batch at
    /// `offset`) was discarded; entries before it at the same offset (control
    /// batches take none) stay. A truncate record with the index as its payload.
    TruncateEntries { partition: String, offset: u64, index: u64 },
}

/// Appends a batch record; the base offset and epoch are read from the stamped
/// batch (Kafka v2: base offset at byte 0, partition leader epoch at byte 12).
pub(crate) fn encode_batch(out: &mut Vec<u8>, partition: &str, batch: &[u8]) {
    let base = u64::from_be_bytes(batch[0..8].try_into().expect("8 bytes"));
    let epoch = i32::from_be_bytes(batch[12..16].try_into().expect("4 bytes"));
    encode(out, KIND_BATCH, partition, base, epoch, batch);
}

pub(crate) fn encode_truncate(out: &mut Vec<u8>, partition: &str, offset: u64) {
    encode(out, KIND_TRUNCATE, partition, offset, 0, &[]);
}

pub(crate) fn encode_truncate_entries(out: &mut Vec<u8>, partition: &str, offset: u64, index: u64) {
    encode(out, KIND_TRUNCATE, partition, offset, 0, &index.to_le_bytes());
}

fn encode(out: &mut Vec<u8>, kind: u8, partition: &str, offset: u64, epoch: i32, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.push(kind);
    out.extend_from_slice(&(partition.len() as u16).to_le_bytes());
    out.extend_from_slice(partition.as_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(payload);
    let body = &out[start + HEADER_LEN..];
    let (len, crc) = (body.len() as u32, crc32c::crc32c(body));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Parses a CRC-checked body.
fn decode_body(body: &[u8]) -> std::result::Result<Entry, &'static str> {
    if body.len() < BODY_FIXED_LEN {
        return Err("record body too short");
    }
    let kind = body[0];
    let name_len = usize::from(u16::from_le_bytes([body[1], body[2]]));
    if name_len > limits::JOURNAL_NAME_BYTES_MAX || body.len() < BODY_FIXED_LEN + name_len {
        return Err("partition name runs past the record");
    }
    let name = std::str::from_utf8(&body[3..3 + name_len]).map_err(|_| "partition name is not UTF-8")?;
    let at = 3 + name_len;
    let offset = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let epoch = i32::from_le_bytes(body[at + 8..at + 12].try_into().expect("4 bytes"));
    let payload = &body[at + 12..];
    let partition = name.to_owned();
    match kind {
        KIND_BATCH if payload.len() >= 16 => Ok(Entry::Batch {
            partition,
            base_offset: offset,
            epoch: LeaderEpoch(epoch),
            bytes: payload.to_vec(),
        }),
        KIND_TRUNCATE if payload.is_empty() => Ok(Entry::Truncate { partition, offset }),
        KIND_TRUNCATE if payload.len() == 8 => Ok(Entry::TruncateEntries {
            partition,
            offset,
            index: u64::from_le_bytes(payload.try_into().expect("8 bytes")),
        }),
        _ => Err("unknown record kind or malformed payload"),
    }
}

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

/// What reading the next record found.
#[derive(Debug)]
pub(crate) enum Next {
    Entry(Entry),
    /// The written part of the file ends here (end of file, or preallocated zeros).
    End,
    /// A record that is cut off or fails its CRC: the torn tail of a crashed round.
    Torn(String),
}

/// Reads the records of one journal file in order.
pub(crate) struct RecordReader {
    file: BufReader<File>,
    pub position: u64,
    len: u64,
}

impl RecordReader {
    pub fn open(path: &Path) -> Result<RecordReader> {
        let file = File::open(path).ctx(|| format!("opening {}", path.display()))?;
        let len = file.metadata().ctx(|| format!("reading size of {}", path.display()))?.len();
        Ok(RecordReader { file: BufReader::with_capacity(1 << 20, file), position: 0, len })
    }

    pub fn next_record(&mut self) -> io::Result<Next> {
        if self.position == self.len {
            return Ok(Next::End);
        }
        if self.position + HEADER_LEN as u64 > self.len {
            // A file filled to within a header of its end keeps its preallocated
            // zeros there: that is the end of a whole file, not a torn record (and
            // replay must go on to the next file).
            let mut rest = Vec::new();
            self.file.read_to_end(&mut rest)?;
            if rest.iter().all(|b| *b == 0) {
                return Ok(Next::End);
            }
            return Ok(Next::Torn("record header cut off".into()));
        }
        let mut header = [0u8; HEADER_LEN];
        self.file.read_exact(&mut header)?;
        let body_len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        if body_len == 0 && crc == 0 {
            return Ok(Next::End);
        }
        let max = (limits::BATCH_BYTES_MAX_HARD + limits::JOURNAL_NAME_BYTES_MAX + BODY_FIXED_LEN) as u64;
        if body_len > max || self.position + HEADER_LEN as u64 + body_len > self.len {
            return Ok(Next::Torn(format!("record of {body_len} bytes runs past the end of the file")));
        }
        let mut body = vec![0u8; body_len as usize];
        self.file.read_exact(&mut body)?;
        if crc32c::crc32c(&body) != crc {
            return Ok(Next::Torn("record fails its CRC".into()));
        }
        let entry = match decode_body(&body) {
            Ok(e) => e,
            Err(reason) => return Ok(Next::Torn(reason.into())),
        };
        self.position += HEADER_LEN as u64 + body_len;
        Ok(Next::Entry(entry))
    }
}

/// `<dir>/<seq, 20 digits>.journal`.
pub(crate) fn file_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.{JOURNAL_EXT}"))
}

/// The journal files in `dir`, oldest first.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(LogError::io(format!("listing {}", dir.display()), e)),
    };
    for entry in entries {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".journal")) else {
            continue;
        };
        if stem.len() == 20
            && let Ok(seq) = stem.parse::<u64>()
        {
            out.push((seq, entry.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The journal files in `dir`, oldest first: a journal left by a crash, which the
/// next [`crate::LogManager::new`] replays. A clean shutdown leaves none, so tools
/// that read a stopped broker's data directory (es-tools dump) check this first.
pub fn pending_files(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(list_files(dir)?.into_iter().map(|(_, path)| path).collect())
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
    position: u64,
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
    /// Single-partition rounds may skip the journal ([`Journal::bypass`]).
    bypass: bool,
    pub faults: Faults,
}

impl Journal {
    /// Starts a fresh journal in `dir`; any older files must have been replayed and
    /// removed first (see `journal_replay`).
    pub fn open(
        dir: &Path,
        first_seq: u64,
        file_bytes: u64,
        bypass: bool,
        stats: Arc<FlushStats>,
    ) -> Result<Arc<Journal>> {
        std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
        let faults = Faults::default();
        let file = create_file(dir, first_seq, file_bytes, &faults)?;
        Ok(Arc::new(Journal {
            dir: dir.to_owned(),
            current: Mutex::new(Current { file, seq: first_seq, position: 0 }),
            full: AtomicBool::new(false),
            failed: Mutex::new(None),
            dirty: Mutex::new(HashSet::new()),
            truncated: Mutex::new(HashMap::new()),
            checkpoint: Mutex::new(None),
            stopping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            stats,
            file_bytes,
            bypass,
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

    /// Whether a round whose only partition is `partition` may sync that partition's
    /// segment instead of the journal. Not while a live journal file holds a
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
        if cur.position > 0 && self.check_failed().is_ok() {
            self.rotate(&mut cur);
        }
    }

    /// Writes `records` and syncs them: the one fdatasync of a round. A write refused
    /// for lack of space is retried until space returns (the records' offsets are
    /// taken, so they cannot be given back); a failed sync poisons the journal.
    pub fn commit(self: &Arc<Self>, records: &[u8]) -> Result<()> {
        self.commit_noting(records, None)
    }

    /// [`Journal::commit`], noting first that `truncated` (the partition of the
    /// truncation record among `records`) has one in the current file. Under the
    /// journal's lock, so no rotation comes between the note and the write.
    fn commit_noting(self: &Arc<Self>, records: &[u8], truncated: Option<&str>) -> Result<()> {
        let mut cur = self.current.lock().expect("journal lock");
        self.check_failed()?;
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
        self.commit_noting(&buf, Some(partition))
    }

    /// Records a Raft truncation (entries from `index`, at `offset`) durably.
    pub fn record_truncate_entries(self: &Arc<Self>, partition: &str, offset: u64, index: u64) -> Result<()> {
        let mut buf = Vec::new();
        encode_truncate_entries(&mut buf, partition, offset, index);
        self.commit_noting(&buf, Some(partition))
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
        let file = match create_file(&self.dir, cur.seq + 1, self.file_bytes, &self.faults) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a new journal file; appends are refused until it can");
                self.full.store(true, Ordering::Release);
                return;
            }
        };
        self.full.store(false, Ordering::Release);
        let old_seq = cur.seq;
        *cur = Current { file, seq: old_seq + 1, position: 0 };
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

    /// Syncs `segments`, then deletes the journal files up to `upto_seq`: the order
    /// that makes deleting them safe.
    fn checkpoint(&self, segments: &[PathBuf], upto_seq: u64) {
        let done = sync_files(segments, &self.stats).and_then(|()| self.remove_files(upto_seq));
        if let Err(e) = done {
            self.poison(&e);
        }
    }

    fn remove_files(&self, upto_seq: u64) -> Result<()> {
        for (seq, path) in list_files(&self.dir)? {
            if seq <= upto_seq {
                files::remove_if_exists(&path).ctx(|| format!("removing {}", path.display()))?;
            }
        }
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        // Only now can no replay see those truncations again.
        self.truncated.lock().expect("truncated lock").retain(|_, seq| *seq > upto_seq);
        Ok(())
    }

    /// Tells a write waiting for space to give up (the flusher is stopping).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Clean shutdown, after the last round: syncs every segment written behind and
    /// removes every journal file, so the next start has nothing to replay. With
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
        if let Err(e) = sync_files(&dirty, &self.stats).and_then(|()| self.remove_files(seq)) {
            tracing::error!(error = %e, "the final checkpoint failed; the journal will be replayed on the next start");
        }
    }
}

/// Creates and preallocates journal file `seq` and makes its name durable.
fn create_file(dir: &Path, seq: u64, bytes: u64, faults: &Faults) -> Result<File> {
    let path = file_path(dir, seq);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .ctx(|| format!("creating {}", path.display()))?;
    let allocated = if faults.enospc() {
        Err(rustix::io::Errno::NOSPC)
    } else {
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes)
    };
    match allocated {
        Ok(()) => {}
        // Filesystems without fallocate still work; writes may then hit ENOSPC.
        Err(rustix::io::Errno::OPNOTSUPP) => {}
        Err(e) => {
            drop(file);
            let _ = files::remove_if_exists(&path);
            return Err(LogError::io(format!("preallocating {}", path.display()), e.into()));
        }
    }
    file.sync_all().ctx(|| format!("syncing {}", path.display()))?;
    files::fsync_dir(dir).ctx(|| format!("syncing {}", dir.display()))?;
    Ok(file)
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
    use super::*;

    fn batch(base: u64, epoch: i32, len: usize) -> Vec<u8> {
        let mut b = vec![7u8; len];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&epoch.to_be_bytes());
        b
    }

    fn read_all(path: &Path) -> (Vec<Entry>, Next) {
        let mut r = RecordReader::open(path).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next_record().unwrap() {
                Next::Entry(e) => out.push(e),
                other => return (out, other),
            }
        }
    }

    #[test]
    fn pending_files_lists_only_journal_files_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        assert!(pending_files(&dir.path().join("absent")).unwrap().is_empty());
        for name in ["00000000000000000002.journal", "00000000000000000001.journal", "notes.journal", "x.tmp"]
        {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let found = pending_files(dir.path()).unwrap();
        let names: Vec<_> = found.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["00000000000000000001.journal", "00000000000000000002.journal"]);
    }

    #[test]
    fn records_round_trip_and_a_flipped_bit_ends_the_journal_there() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        encode_batch(&mut buf, "t-0", &batch(5, 3, 80));
        let first_len = buf.len();
        encode_truncate(&mut buf, "t-1", 9);
        encode_batch(&mut buf, "t-0", &batch(6, 3, 40));
        let path = dir.path().join("a.journal");
        std::fs::write(&path, &buf).unwrap();
        let (entries, end) = read_all(&path);
        assert!(matches!(end, Next::End));
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            Entry::Batch {
                partition: "t-0".into(),
                base_offset: 5,
                epoch: LeaderEpoch(3),
                bytes: batch(5, 3, 80)
            }
        );
        assert_eq!(entries[1], Entry::Truncate { partition: "t-1".into(), offset: 9 });
        // Flips in the second record (26 bytes): length, CRC, kind, name, offset, epoch.
        for at in [0, 5, 9, 12, 20, 25].map(|d| first_len + d) {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let (entries, end) = read_all(&path);
            assert_eq!(entries.len(), 1, "flip at {at}: only the record before the flip survives");
            assert!(matches!(end, Next::Torn(_)), "flip at {at}: {end:?}");
        }
    }

    #[test]
    fn every_cut_of_the_last_record_reads_as_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        encode_batch(&mut buf, "p", &batch(0, 1, 30));
        let whole = buf.len();
        encode_batch(&mut buf, "p", &batch(1, 1, 30));
        let path = dir.path().join("a.journal");
        for cut in whole + 1..buf.len() {
            std::fs::write(&path, &buf[..cut]).unwrap();
            let (entries, end) = read_all(&path);
            assert_eq!(entries.len(), 1, "cut at {cut}");
            assert!(matches!(end, Next::Torn(_)), "cut at {cut}: {end:?}");
        }
        // Preallocated zeros after the last record read as the end, not as damage.
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0u8; 64]);
        std::fs::write(&path, &padded).unwrap();
        let (entries, end) = read_all(&path);
        assert_eq!(entries.len(), 2);
        assert!(matches!(end, Next::End));
        // So do fewer zeros than a record header, where a full file stops short of its
        // size; a non-zero byte there is still a torn header.
        for tail in 1..HEADER_LEN {
            let mut short = buf.clone();
            short.extend(std::iter::repeat_n(0u8, tail));
            std::fs::write(&path, &short).unwrap();
            let (entries, end) = read_all(&path);
            assert_eq!(entries.len(), 2, "{tail} zero bytes");
            assert!(matches!(end, Next::End), "{tail} zero bytes: {end:?}");
            *short.last_mut().unwrap() = 1;
            std::fs::write(&path, &short).unwrap();
            assert!(matches!(read_all(&path).1, Next::Torn(_)), "{tail} bytes, one not zero");
        }
    }

    #[test]
    fn a_failed_sync_poisons_and_enospc_is_retried_until_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let j =
            Journal::open(dir.path(), 1, limits::JOURNAL_FILE_BYTES, true, Arc::new(FlushStats::default()))
                .unwrap();
        let mut rec = Vec::new();
        encode_batch(&mut rec, "p", &batch(0, 1, 30));
        // Two refused writes, then space returns: the commit succeeds.
        j.faults.enospc.store(2, Ordering::Release);
        j.commit(&rec).unwrap();
        j.admit().unwrap();
        j.faults.fail_sync.store(true, Ordering::Release);
        assert!(matches!(j.commit(&rec), Err(LogError::Io { .. })));
        assert!(matches!(j.admit(), Err(LogError::Failed(_))));
        assert!(matches!(j.commit(&rec), Err(LogError::Failed(_))));
    }

    #[test]
    fn no_space_for_a_new_file_refuses_appends_until_a_retry_works() {
        let dir = tempfile::tempdir().unwrap();
        let j =
            Journal::open(dir.path(), 1, limits::JOURNAL_FILE_BYTES, true, Arc::new(FlushStats::default()))
                .unwrap();
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
}
