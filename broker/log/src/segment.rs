//! One segment: a `.log` file of whole batches plus its sparse indexes. The active
//! segment of a partition also owns a [`Writer`], the queue of bytes waiting for the
//! flusher. Sealed segments are immutable; only compaction replaces one, whole.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use es_core::batch::{BatchHeader, BatchView};
use tokio::sync::oneshot;

use crate::error::{IoContext, LogError, Result};
use crate::files::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::index::SegmentIndex;
use crate::open_files::OpenFiles;
use crate::raft_index::RaftPositions;

pub(crate) type Waiter = oneshot::Sender<Result<()>>;

/// Bytes appended to the active segment but not yet written and synced.
#[derive(Default)]
pub(crate) struct Pending {
    pub chunks: Vec<Vec<u8>>,
    pub bytes: usize,
    pub waiters: Vec<Waiter>,
    /// Segment size and next offset once everything pending is written.
    pub end_position: u64,
    pub end_offset: u64,
    /// In the flusher's queue already.
    pub queued: bool,
    /// The flusher is writing a previous take of this segment.
    pub flushing: bool,
    /// Seal the segment (write its index files) once this flush is durable.
    pub seal: bool,
}

/// The write side of the active segment.
pub(crate) struct Writer {
    pub file: Mutex<Option<File>>,
    pub pending: Mutex<Pending>,
    /// Signalled when the flusher finishes a round for this segment.
    pub drained: Condvar,
}

/// Mutable facts about a segment, behind one lock.
#[derive(Debug, Clone)]
pub(crate) struct SegState {
    pub index: SegmentIndex,
    /// Bytes appended, pending ones included.
    pub size: u64,
    /// The offset after the last batch appended.
    pub next_offset: u64,
    /// Wall-clock time of the first append (for `segment.ms`).
    pub first_append_ms: Option<i64>,
    pub sealed: bool,
    /// Rewritten by compaction: batches may skip offsets.
    pub compacted: bool,
    /// First byte of a batch that failed its CRC in a sealed segment; never served.
    pub corrupt_at: Option<(u64, String)>,
    /// The Raft index and position of each batch (`raft_index.rs`).
    pub raft: RaftPositions,
}

pub(crate) struct Segment {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub state: RwLock<SegState>,
    /// Bytes known to be on disk; reads never go past this.
    pub durable_size: AtomicU64,
    /// Bytes this process knows to be fsynced in this very file (not just covered
    /// by the journal): what a crash cannot take. Only tests of crash damage read
    /// it, so only they keep it ([`Segment::note_synced`]).
    #[cfg(test)]
    pub synced_size: AtomicU64,
    pub writer: Option<Writer>,
    /// Batches starting at or after this position were CRC-checked by this process
    /// before they reached the file: appended (every append path checks its batch
    /// first) or scanned by recovery. `u64::MAX` for a segment opened sealed or cold.
    trusted_from: u64,
    /// Every batch wholly below this position passed a CRC check on a read since the
    /// segment was opened: a read verifies each batch once, not on every fetch.
    verified_to: AtomicU64,
    reader: Mutex<Option<Arc<File>>>,
    /// Compaction renamed a rewritten file over this segment's: the path names
    /// other bytes now, so a closed handle is never reopened (`retire`).
    retired: std::sync::atomic::AtomicBool,
    pub(crate) last_used: AtomicU64,
    open_files: Arc<OpenFiles>,
    batch_bytes_max: usize,
}

/// What recovery found when opening the newest segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trimmed {
    pub file: PathBuf,
    pub position: u64,
    pub bytes: u64,
    pub reason: String,
}

/// Outcome of walking batches from a position.
struct Scan {
    end_position: u64,
    next_offset: Option<u64>,
    error: Option<(u64, String)>,
}

impl Segment {
    fn new(
        base_offset: u64,
        log_path: PathBuf,
        state: SegState,
        (writer, trusted_from): (Option<Writer>, u64),
        open_files: Arc<OpenFiles>,
        batch_bytes_max: usize,
    ) -> Self {
        let durable = state.size;
        Segment {
            base_offset,
            log_path,
            state: RwLock::new(state),
            durable_size: AtomicU64::new(durable),
            #[cfg(test)]
            synced_size: AtomicU64::new(0),
            writer,
            trusted_from,
            verified_to: AtomicU64::new(0),
            reader: Mutex::new(None),
            retired: std::sync::atomic::AtomicBool::new(false),
            last_used: AtomicU64::new(0),
            open_files,
            batch_bytes_max,
        }
    }

    /// This file is fsynced up to `size`: kept for the crash tests' damage model
    /// (`journal_replay`), a no-op outside tests.
    pub fn note_synced(&self, size: u64) {
        #[cfg(test)]
        self.synced_size.fetch_max(size, Ordering::AcqRel);
        #[cfg(not(test))]
        let _ = size;
    }

    /// Creates an empty active segment at `base_offset`, whose first batch gets Raft
    /// index `first_index`, and makes its name and first index durable.
    pub fn create(
        dir: &Path,
        base_offset: u64,
        first_index: u64,
        open_files: Arc<OpenFiles>,
        batch_bytes_max: usize,
    ) -> Result<Arc<Segment>> {
        let log_path = files::segment_path(dir, base_offset, LOG_EXT);
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .read(true)
            .open(&log_path)
            .ctx(|| format!("creating segment {}", log_path.display()))?;
        let raft = RaftPositions::new(first_index);
        raft.write(dir, base_offset, false)?;
        files::fsync_dir(dir).ctx(|| format!("syncing directory {}", dir.display()))?;
        let state = SegState {
            index: SegmentIndex::default(),
            size: 0,
            next_offset: base_offset,
            first_append_ms: None,
            sealed: false,
            corrupt_at: None,
            compacted: false,
            raft,
        };
        let writer = Writer::new(file, 0, base_offset);
        let writer = (Some(writer), 0);
        Ok(Arc::new(Segment::new(base_offset, log_path, state, writer, open_files, batch_bytes_max)))
    }

    /// Opens a sealed segment: loads its indexes, or rebuilds them when missing or
    /// invalid. Never modifies the `.log` file. Every batch must lie in
    /// `[base_offset, upper)` (`upper` is the next segment's base): base offsets are
    /// outside the CRC, so this bound is what catches a damaged one.
    pub fn open_sealed(
        dir: &Path,
        base_offset: u64,
        upper: u64,
        open_files: Arc<OpenFiles>,
        batch_bytes_max: usize,
    ) -> Result<Arc<Segment>> {
        let log_path = files::segment_path(dir, base_offset, LOG_EXT);
        let file = File::open(&log_path).ctx(|| format!("opening segment {}", log_path.display()))?;
        let len = file.metadata().ctx(|| format!("reading size of {}", log_path.display()))?.len();
        let compacted = files::segment_path(dir, base_offset, files::COMPACTED_EXT).exists();
        let bounds = Bounds { base: base_offset, upper, compacted };
        let (state, rebuilt) = match load_index(dir, base_offset, &file, len, batch_bytes_max) {
            Some(index) => match walk_headers(&file, bounds, &index, len, batch_bytes_max) {
                Some(state) => (state, false),
                None => (rebuild(&file, &log_path, bounds, len, batch_bytes_max)?, true),
            },
            None => (rebuild(&file, &log_path, bounds, len, batch_bytes_max)?, true),
        };
        let mut state = state;
        state.sealed = true;
        let valid = state.corrupt_at.as_ref().map_or(state.size, |c| c.0);
        state.raft = RaftPositions::load(dir, base_offset, &file, valid, batch_bytes_max, !rebuilt);
        if let Some((pos, reason)) = &state.corrupt_at {
            tracing::error!(file = %log_path.display(), position = pos, reason, "sealed segment is corrupt past this byte; it will not be served");
        }
        let seg = Segment::new(base_offset, log_path, state, (None, u64::MAX), open_files, batch_bytes_max);
        if rebuilt {
            seg.write_indexes(dir)?;
        }
        Ok(Arc::new(seg))
    }

    /// Opens a cold segment from its index files alone (its `.log` may not be in
    /// the cache yet). The files were checked against the manifest's sha256 when
    /// uploaded or fetched, so they are trusted; the manifest gives the size, end
    /// offset and newest timestamp the header walk would otherwise find.
    pub(crate) fn open_cold(
        dir: &Path,
        entry: &crate::cold::manifest::Entry,
        open_files: Arc<OpenFiles>,
        batch_bytes_max: usize,
    ) -> Result<Arc<Segment>> {
        let base = entry.base;
        let read = |ext: &str| {
            let p = files::segment_path(dir, base, ext);
            std::fs::read(&p).ctx(|| format!("reading {}", p.display()))
        };
        let size = entry.log_size();
        let bad = |what: &str| LogError::ColdManifest(format!("segment {base} in {}: {what}", dir.display()));
        let mut index = SegmentIndex::decode(&read(INDEX_EXT)?, &read(TIME_INDEX_EXT)?, size)
            .ok_or_else(|| bad("index files do not decode"))?;
        if let Some(t) = entry.max_timestamp {
            index.note_timestamp(t);
        }
        let raft =
            RaftPositions::load_trusted(dir, base).ok_or_else(|| bad("Raft sidecar does not decode"))?;
        let state = SegState {
            index,
            size,
            next_offset: entry.next_offset,
            first_append_ms: None,
            sealed: true,
            compacted: entry.compacted,
            corrupt_at: None,
            raft,
        };
        let log_path = files::segment_path(dir, base, LOG_EXT);
        Ok(Arc::new(Segment::new(base, log_path, state, (None, u64::MAX), open_files, batch_bytes_max)))
    }

    pub(crate) fn open_files(&self) -> &Arc<OpenFiles> {
        &self.open_files
    }

    /// Opens the newest segment for appending: validates CRCs from its last valid
    /// index entry to the end and truncates a torn or corrupt tail.
    pub fn open_active(
        dir: &Path,
        base_offset: u64,
        open_files: Arc<OpenFiles>,
        batch_bytes_max: usize,
    ) -> Result<(Arc<Segment>, Option<Trimmed>)> {
        let log_path = files::segment_path(dir, base_offset, LOG_EXT);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&log_path)
            .ctx(|| format!("opening segment {}", log_path.display()))?;
        let len = file.metadata().ctx(|| format!("reading size of {}", log_path.display()))?.len();
        let mut index = load_index(dir, base_offset, &file, len, batch_bytes_max).unwrap_or_default();
        // The newest segment's index files describe an older clean shutdown at best;
        // remove them now so a later crash cannot pair them with a different tail.
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            let p = files::segment_path(dir, base_offset, ext);
            files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
        }
        let start = index.offsets.last().copied();
        let (start_pos, start_offset) = match start {
            Some(e) => (u64::from(e.position), base_offset + u64::from(e.relative_offset)),
            None => (0, base_offset),
        };
        if let Some(e) = start {
            index.offsets.pop();
            index.times.retain(|t| t.relative_offset < e.relative_offset);
            index.truncate_to_position(
                u64::from(e.position),
                base_offset,
                base_offset + u64::from(e.relative_offset),
            );
        }
        let compacted = files::segment_path(dir, base_offset, files::COMPACTED_EXT).exists();
        let bounds = Bounds { base: start_offset, upper: u64::MAX, compacted };
        let scan = scan(&file, start_pos, len, bounds, batch_bytes_max, |h, pos| {
            index.on_batch(
                (h.base_offset - base_offset) as u32,
                pos as u32,
                h.total_len() as u32,
                h.max_timestamp,
                u32::MAX,
            );
        })
        .ctx(|| format!("scanning {}", log_path.display()))?;
        let trimmed = if scan.end_position < len {
            let reason = scan.error.map(|(_, r)| r).unwrap_or_else(|| "incomplete batch".into());
            file.set_len(scan.end_position).ctx(|| format!("truncating {}", log_path.display()))?;
            file.sync_all().ctx(|| format!("syncing {}", log_path.display()))?;
            Some(Trimmed {
                file: log_path.clone(),
                position: scan.end_position,
                bytes: len - scan.end_position,
                reason,
            })
        } else {
            None
        };
        let next_offset = scan.next_offset.unwrap_or(start_offset);
        // The active segment's sidecar positions may predate a truncation: walk them.
        let raft = RaftPositions::load(dir, base_offset, &file, scan.end_position, batch_bytes_max, false);
        let state = SegState {
            index,
            size: scan.end_position,
            next_offset,
            first_append_ms: None,
            sealed: false,
            corrupt_at: None,
            compacted,
            raft,
        };
        let writer = Writer::new(file, scan.end_position, next_offset);
        // The scan above CRC-checked every batch from `start_pos`; appends follow it.
        let writer = (Some(writer), start_pos);
        let seg = Segment::new(base_offset, log_path, state, writer, open_files, batch_bytes_max);
        Ok((Arc::new(seg), trimmed))
    }

    /// Writes `.index`, `.timeindex` and the Raft sidecar durably.
    pub fn write_indexes(&self, dir: &Path) -> Result<()> {
        let (offsets, times, raft) = {
            let st = self.state.read().expect("segment state lock");
            (st.index.encode_offsets(), st.index.encode_times(), st.raft.clone())
        };
        raft.write(dir, self.base_offset, true)?;
        for (ext, bytes) in [(INDEX_EXT, offsets), (TIME_INDEX_EXT, times)] {
            let p = files::segment_path(dir, self.base_offset, ext);
            files::write_atomic(&p, &bytes).ctx(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }

    pub fn next_offset(&self) -> u64 {
        self.state.read().expect("segment state lock").next_offset
    }

    pub fn size(&self) -> u64 {
        self.state.read().expect("segment state lock").size
    }

    pub fn max_timestamp(&self) -> Option<i64> {
        self.state.read().expect("segment state lock").index.max_timestamp()
    }

    /// A read handle, opened lazily and closed by [`OpenFiles`] under pressure.
    pub fn reader(self: &Arc<Self>) -> Result<Arc<File>> {
        self.last_used.store(self.open_files.tick(), Ordering::Relaxed);
        let mut guard = self.reader.lock().expect("reader lock");
        if let Some(f) = guard.as_ref() {
            return Ok(f.clone());
        }
        if self.retired.load(Ordering::Acquire) {
            let gone =
                std::io::Error::new(std::io::ErrorKind::NotFound, "the segment was replaced by compaction");
            return Err(gone).ctx(|| format!("opening {}", self.log_path.display()));
        }
        let f = Arc::new(File::open(&self.log_path).ctx(|| format!("opening {}", self.log_path.display()))?);
        *guard = Some(f.clone());
        drop(guard);
        self.open_files.opened(self);
        Ok(f)
    }

    /// Marks the segment replaced: the handle it holds stays usable, but once closed
    /// it is not reopened (its readers get `NotFound` and read again from the
    /// partition's current segments).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    /// Closes the read handle (readers holding a clone keep it until they finish).
    pub(crate) fn close_reader(&self) -> bool {
        self.reader.lock().expect("reader lock").take().is_some()
    }

    /// Whole batches starting with the one that contains `offset` (or the first one
    /// after it), up to `max_bytes` (at least one batch), below `limit_offset`.
    /// Every batch returned passed a CRC check in this process: before it was
    /// appended, when recovery scanned it, or on its first read here (kept as
    /// `verified_to`); a batch neither appended nor read yet is checked now. Empty
    /// when this segment holds nothing at or after `offset` below the limit.
    pub fn read(self: &Arc<Self>, offset: u64, max_bytes: usize, limit_offset: u64) -> Result<Vec<u8>> {
        let (start_hint, corrupt_at, end, seg_next, compacted) = {
            let st = self.state.read().expect("segment state lock");
            let rel = offset.saturating_sub(self.base_offset).min(u64::from(u32::MAX)) as u32;
            let hint = st
                .index
                .lookup(rel)
                .map(|e| (u64::from(e.position), self.base_offset + u64::from(e.relative_offset)));
            let end = if st.sealed { st.size } else { self.durable_size.load(Ordering::Acquire) };
            (hint, st.corrupt_at.clone(), end, st.next_offset, st.compacted)
        };
        let end = corrupt_at.as_ref().map_or(end, |(p, _)| end.min(*p));
        let file = self.reader()?;
        let (mut pos, mut floor) = start_hint.unwrap_or((0, self.base_offset));
        // Find the batch holding `offset` (headers only). Base offsets are outside the
        // CRC, so each one must follow the previous and stay inside this segment.
        let first = loop {
            if pos == end {
                return self.empty_or_corrupt(pos, end, &corrupt_at);
            }
            if pos + BatchHeader::LEN as u64 > end {
                return Err(self.corrupt(pos, "batch header runs past the end of the segment"));
            }
            let header = self.header_at(&file, pos)?;
            // Index entries point at batch starts, and without compaction every batch
            // starts where the previous one ended.
            let exact = start_hint.is_some_and(|(p, _)| p == pos) || !compacted;
            let misplaced = if exact { header.base_offset != floor } else { header.base_offset < floor };
            if misplaced || header.next_offset() > seg_next {
                return Err(
                    self.corrupt(pos, &format!("batch offset {} is out of place", header.base_offset))
                );
            }
            if header.base_offset >= limit_offset {
                return Ok(Vec::new());
            }
            // A Raft control batch holds no offset: a read never starts at one.
            if header.last_offset() >= offset && !header.is_raft_control() {
                break header;
            }
            floor = header.next_offset();
            pos += header.total_len() as u64;
        };
        let want = (first.total_len().max(max_bytes) as u64).min(end - pos) as usize;
        let verified = self.verified_to.load(Ordering::Acquire);
        let mut data =
            files::read_at(&file, pos, want).ctx(|| format!("reading {}", self.log_path.display()))?;
        // Keep whole, valid batches below the limit; a batch cut off by max_bytes is
        // left for the next read.
        let mut keep = 0usize;
        floor = first.base_offset;
        while keep < data.len() {
            if keep > 0 && data.len() - keep < BatchHeader::LEN {
                break;
            }
            let header = BatchHeader::parse(&data[keep..], self.batch_bytes_max)
                .map_err(|e| self.corrupt(pos + keep as u64, &e.to_string()))?;
            if keep + header.total_len() > data.len() {
                if keep == 0 {
                    return Err(self.corrupt(pos, "batch runs past the end of the segment"));
                }
                break;
            }
            if header.base_offset >= limit_offset {
                break;
            }
            if keep > 0 && (header.base_offset < floor || (!compacted && header.base_offset != floor)) {
                // Out of place: stop here; a read that starts at it reports the damage.
                break;
            }
            floor = header.next_offset();
            let at = pos + keep as u64;
            if self.needs_check(at, header.total_len(), verified) {
                BatchView::parse(&data[keep..], self.batch_bytes_max)
                    .map_err(|e| self.corrupt(at, &e.to_string()))?;
            } else {
                header.compression().map_err(|e| self.corrupt(at, &e.to_string()))?;
            }
            keep += header.total_len();
        }
        data.truncate(keep);
        // What this read checked extends the verified prefix when it starts inside it.
        if keep > 0 && pos <= verified {
            self.verified_to.fetch_max(pos + keep as u64, Ordering::AcqRel);
        }
        Ok(data)
    }

    /// Whether the batch of `len` bytes at `position` still needs its CRC checked:
    /// not appended or recovered by this process, and not below `verified`.
    pub(crate) fn needs_check(&self, position: u64, len: usize, verified: u64) -> bool {
        position < self.trusted_from && position + len as u64 > verified
    }

    /// The end of the verified prefix (tests).
    #[cfg(test)]
    pub(crate) fn verified_to(&self) -> u64 {
        self.verified_to.load(Ordering::Acquire)
    }

    /// The whole, CRC-checked batch with Raft index `index`; `None` if this segment
    /// does not hold it or it is not durable yet.
    pub fn read_entry(self: &Arc<Self>, index: u64) -> Result<Option<Vec<u8>>> {
        let (pos, end) = {
            let st = self.state.read().expect("segment state lock");
            let Some(pos) = st.raft.position(index) else {
                return Ok(None);
            };
            let end = if st.sealed { st.size } else { self.durable_size.load(Ordering::Acquire) };
            (pos, st.corrupt_at.as_ref().map_or(end, |c| end.min(c.0)))
        };
        if pos + BatchHeader::LEN as u64 > end {
            return Ok(None);
        }
        let file = self.reader()?;
        let header = self.header_at(&file, pos)?;
        if pos + header.total_len() as u64 > end {
            return Ok(None);
        }
        let bytes = files::read_at(&file, pos, header.total_len())
            .ctx(|| format!("reading {}", self.log_path.display()))?;
        BatchView::parse(&bytes, self.batch_bytes_max).map_err(|e| self.corrupt(pos, &e.to_string()))?;
        Ok(Some(bytes))
    }

    /// Headers of every batch whose base offset is >= `from` (producer-state replay).
    pub fn headers_from(self: &Arc<Self>, from: u64) -> Result<Vec<BatchHeader>> {
        let (mut pos, size) = {
            let st = self.state.read().expect("segment state lock");
            let rel = from.saturating_sub(self.base_offset).min(u64::from(u32::MAX)) as u32;
            (
                st.index.lookup(rel).map_or(0, |e| u64::from(e.position)),
                st.corrupt_at.as_ref().map_or(st.size, |c| c.0),
            )
        };
        let file = self.reader()?;
        let mut out = Vec::new();
        while pos + BatchHeader::LEN as u64 <= size {
            let h = self.header_at(&file, pos)?;
            if h.base_offset >= from {
                out.push(h);
            }
            pos += h.total_len() as u64;
        }
        Ok(out)
    }

    fn empty_or_corrupt(&self, pos: u64, end: u64, corrupt_at: &Option<(u64, String)>) -> Result<Vec<u8>> {
        match corrupt_at {
            Some((p, reason)) if pos >= *p || end >= *p => Err(self.corrupt(*p, reason)),
            _ => Ok(Vec::new()),
        }
    }

    pub(crate) fn header_at(&self, file: &File, pos: u64) -> Result<BatchHeader> {
        let buf = files::read_at(file, pos, BatchHeader::LEN)
            .ctx(|| format!("reading {}", self.log_path.display()))?;
        BatchHeader::parse(&buf, self.batch_bytes_max).map_err(|e| self.corrupt(pos, &e.to_string()))
    }

    fn corrupt(&self, position: u64, reason: &str) -> LogError {
        LogError::Corrupt { file: self.log_path.clone(), position, reason: reason.to_owned() }
    }

    /// First offset in this segment whose record timestamp is >= `timestamp`.
    pub fn offset_for_timestamp(self: &Arc<Self>, timestamp: i64, limit_offset: u64) -> Result<Option<u64>> {
        let start_offset = {
            let st = self.state.read().expect("segment state lock");
            if st.index.max_timestamp().is_none_or(|m| m < timestamp) {
                return Ok(None);
            }
            st.index
                .lookup_time(timestamp)
                .map_or(self.base_offset, |e| self.base_offset + u64::from(e.relative_offset))
        };
        let mut offset = start_offset;
        loop {
            let data = self.read(offset, 1 << 20, limit_offset)?;
            if data.is_empty() {
                return Ok(None);
            }
            let mut at = 0;
            while at < data.len() {
                let view = BatchView::parse(&data[at..], self.batch_bytes_max)
                    .map_err(|e| self.corrupt(0, &e.to_string()))?;
                if view.header.max_timestamp >= timestamp && !view.header.is_raft_control() {
                    let plain = view
                        .plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)
                        .map_err(|e| self.corrupt(0, &e.to_string()))?;
                    for r in plain.iter() {
                        let r = r.map_err(|e| self.corrupt(0, &e.to_string()))?;
                        if r.timestamp >= timestamp && r.offset >= offset {
                            return Ok(Some(r.offset));
                        }
                    }
                }
                offset = view.header.next_offset();
                at += view.header.total_len();
            }
        }
    }
}

impl Writer {
    fn new(file: File, size: u64, next_offset: u64) -> Writer {
        Writer {
            file: Mutex::new(Some(file)),
            pending: Mutex::new(Pending {
                end_position: size,
                end_offset: next_offset,
                ..Pending::default()
            }),
            drained: Condvar::new(),
        }
    }
}

/// Reads both index files and checks them against the segment; `None` if unusable.
fn load_index(dir: &Path, base: u64, file: &File, len: u64, max: usize) -> Option<SegmentIndex> {
    let offsets = std::fs::read(files::segment_path(dir, base, INDEX_EXT)).ok()?;
    let times = std::fs::read(files::segment_path(dir, base, TIME_INDEX_EXT)).ok()?;
    let index = SegmentIndex::decode(&offsets, &times, len)?;
    // The last entry must point at a whole, valid batch with the offset it claims.
    if let Some(last) = index.offsets.last() {
        let header =
            BatchHeader::parse(&files::read_at(file, u64::from(last.position), BatchHeader::LEN).ok()?, max)
                .ok()?;
        let bytes = files::read_at(file, u64::from(last.position), header.total_len()).ok()?;
        let view = BatchView::parse(&bytes, max).ok()?;
        if view.header.base_offset != base + u64::from(last.relative_offset) {
            return None;
        }
    }
    Some(index)
}

/// Walks batch headers from the last index entry of a sealed segment to find its end
/// offset and max timestamp. `None` if the walk does not land exactly on the file end.
fn walk_headers(file: &File, bounds: Bounds, index: &SegmentIndex, len: u64, max: usize) -> Option<SegState> {
    let Bounds { base, upper, compacted } = bounds;
    let mut index = index.clone();
    let (mut pos, mut first) = match index.offsets.last() {
        Some(e) => (u64::from(e.position), true),
        None => (0, false),
    };
    let mut next_offset = index.offsets.last().map_or(base, |e| base + u64::from(e.relative_offset));
    while pos < len {
        let header = BatchHeader::parse(&files::read_at(file, pos, BatchHeader::LEN).ok()?, max).ok()?;
        let misplaced = if first || !compacted {
            header.base_offset != next_offset
        } else {
            header.base_offset < next_offset
        };
        if misplaced || header.next_offset() > upper {
            return None;
        }
        if first {
            index.note_timestamp(header.max_timestamp);
            first = false;
        } else {
            index.on_batch(
                (header.base_offset - base) as u32,
                pos as u32,
                header.total_len() as u32,
                header.max_timestamp,
                u32::MAX,
            );
        }
        next_offset = header.next_offset();
        pos += header.total_len() as u64;
    }
    (pos == len).then_some(SegState {
        index,
        size: len,
        next_offset,
        first_append_ms: None,
        sealed: true,
        corrupt_at: None,
        compacted,
        raft: RaftPositions::default(),
    })
}

/// Rebuilds a sealed segment's index with a full CRC scan.
fn rebuild(file: &File, path: &Path, bounds: Bounds, len: u64, max: usize) -> Result<SegState> {
    let base = bounds.base;
    tracing::info!(file = %path.display(), "rebuilding segment index");
    let mut index = SegmentIndex::default();
    let interval = es_core::limits::INDEX_INTERVAL_BYTES_DEFAULT;
    let scan = scan(file, 0, len, bounds, max, |h, pos| {
        index.on_batch(
            (h.base_offset - base) as u32,
            pos as u32,
            h.total_len() as u32,
            h.max_timestamp,
            interval,
        );
    })
    .ctx(|| format!("scanning {}", path.display()))?;
    let corrupt_at = if scan.end_position < len {
        Some(scan.error.unwrap_or((scan.end_position, "incomplete batch".into())))
    } else {
        None
    };
    Ok(SegState {
        index,
        size: len,
        next_offset: scan.next_offset.unwrap_or(base),
        first_append_ms: None,
        sealed: true,
        corrupt_at,
        compacted: bounds.compacted,
        raft: RaftPositions::default(),
    })
}

/// The recovery scan of one segment file, read-only: the first bad byte and why,
/// or `None` when every batch is whole and in bounds (`es-broker doctor`).
pub(crate) fn check_file(
    path: &Path,
    base: u64,
    upper: u64,
    compacted: bool,
    max: usize,
) -> std::io::Result<Option<(u64, String)>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let scan = scan(&file, 0, len, Bounds { base, upper, compacted }, max, |_, _| {})?;
    Ok((scan.end_position < len)
        .then(|| scan.error.unwrap_or((scan.end_position, "incomplete batch".into()))))
}

/// Where a segment's batches may lie: from `base` (the first batch of an
/// uncompacted segment starts exactly there) to below `upper`.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    base: u64,
    upper: u64,
    compacted: bool,
}

/// Walks whole batches from `start`, checking length, CRC and offset continuity
/// within the bounds. Stops at the first invalid or incomplete batch. In a compacted
/// segment gaps are legal, so a batch whose offset goes backwards may mean the
/// previous batch's base offset was damaged (it is outside the CRC): the scan then
/// stops before that previous batch too.
fn scan(
    file: &File,
    start: u64,
    len: u64,
    bounds: Bounds,
    max: usize,
    mut on_batch: impl FnMut(&BatchHeader, u64),
) -> std::io::Result<Scan> {
    let mut pos = start;
    let mut expected = bounds.base;
    let mut next_offset = None;
    let mut previous: Option<(u64, Option<u64>)> = None;
    let fail = |pos: u64, next_offset, reason: String| {
        Ok(Scan { end_position: pos, next_offset, error: Some((pos, reason)) })
    };
    while pos < len {
        let head = files::read_at(file, pos, BatchHeader::LEN)?;
        let header = match BatchHeader::parse(&head, max) {
            Ok(h) => h,
            Err(e) => return fail(pos, next_offset, e.to_string()),
        };
        let bytes = files::read_at(file, pos, header.total_len())?;
        if let Err(e) = BatchView::parse(&bytes, max) {
            return fail(pos, next_offset, e.to_string());
        }
        let reason = |exp: u64| format!("batch offset {} does not follow offset {exp}", header.base_offset);
        if bounds.compacted && header.base_offset < expected {
            let (at, next) = previous.unwrap_or((pos, next_offset));
            return fail(at, next, reason(expected));
        }
        let exact = !bounds.compacted;
        if (exact && header.base_offset != expected) || header.next_offset() > bounds.upper {
            return fail(pos, next_offset, reason(expected));
        }
        on_batch(&header, pos);
        previous = Some((pos, next_offset));
        expected = header.next_offset();
        next_offset = Some(expected);
        pos += header.total_len() as u64;
    }
    Ok(Scan { end_position: pos, next_offset, error: None })
}
