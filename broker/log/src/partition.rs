//! One partition's log: the ordered segments, the append paths (leader and replica),
//! reads by offset and by timestamp, and truncation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use es_core::batch::{self, BatchView, TimestampType};
use es_core::{LeaderEpoch, ProducerInfo, Record};
use tokio::sync::oneshot;

mod read;

use crate::cold::ColdPartition;
use crate::config::LogConfig;
use crate::epochs::Epochs;
use crate::error::{IoContext, LogError, Result};
use crate::files::{self, LOG_EXT};
use crate::flusher::{Job, Progress};
use crate::manager::Shared;
use crate::producers::{Check, ProducerSummary, ProducerTable};
use crate::segment::{Segment, Trimmed};

/// The producer-state snapshot file of a partition.
pub(crate) const PRODUCER_STATE_FILE: &str = "producer-state";

/// The longest a Raft read or Raft file write waits for earlier appends to be durable.
const DURABLE_WAIT_MAX: Duration = Duration::from_secs(60);

/// Bytes one active segment may hold waiting for the flusher before appenders wait.
const PENDING_BYTES_MAX: usize = 256 * 1024 * 1024;

pub(crate) struct Inner {
    /// Local segments by base offset; the last one is the active segment.
    pub segments: BTreeMap<u64, Arc<Segment>>,
    /// Segments moved to the cold tier, by base offset; all below the local ones.
    pub cold: BTreeMap<u64, Arc<Segment>>,
    /// The offset the next appended batch gets (log end offset).
    pub next_offset: u64,
    pub epochs: Epochs,
    pub producers: ProducerTable,
    /// The log start set by DeleteRecords (`log_start.rs`); 0 when never set.
    pub start_floor: u64,
}

impl Inner {
    pub fn active(&self) -> &Arc<Segment> {
        self.segments.values().next_back().expect("a partition always has an active segment")
    }

    pub fn log_start(&self) -> u64 {
        let first =
            self.cold.keys().next().or(self.segments.keys().next()).copied().unwrap_or(self.next_offset);
        first.max(self.start_floor.min(self.next_offset))
    }

    /// The Raft index the next appended batch gets.
    pub fn next_index(&self) -> u64 {
        self.active().state.read().expect("segment state lock").raft.end()
    }

    /// The Raft index of the oldest batch held (cold tier included).
    pub fn first_index(&self) -> u64 {
        let oldest = self.cold.values().next().or(self.segments.values().next());
        oldest.map_or(0, |s| s.state.read().expect("segment state lock").raft.first())
    }
}

/// A partition log. Cheap to share: every method takes `&self`.
pub struct PartitionLog {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    /// This partition's cold tier, when the manager has one.
    pub(crate) cold: Option<ColdPartition>,
    pub(crate) config: RwLock<LogConfig>,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) shared: Arc<Shared>,
    /// Held by retention, tiering, compaction and DeleteRecords; true once the
    /// partition is being deleted, after which housekeeping never runs again.
    pub(crate) housekeeping: Mutex<bool>,
    /// A Raft group stores its entries here: compaction follows the group's
    /// replicated decisions (`compaction.rs`).
    pub(crate) raft_mode: std::sync::atomic::AtomicBool,
    /// Raft mode: the last compaction decision applied.
    pub(crate) compaction: crate::compaction::RaftCompaction,
    /// The directory held a Raft vote when the log was opened: a Raft group's log
    /// even before its group opens (`PartitionLog::is_raft_log`).
    pub(crate) opened_with_vote: bool,
    /// Raft mode: the index after the group's purge point (0: nothing purged).
    /// Retention deletes only segments whose entries are all below it.
    pub(crate) raft_purged_next: std::sync::atomic::AtomicU64,
    /// Raft mode: the first index retention would keep if Raft had purged up to
    /// it (0: retention waits for nothing). The group snapshots and purges there.
    pub(crate) retention_wants: std::sync::atomic::AtomicU64,
    /// Retention never removes a segment holding offsets at or past this
    /// (`set_retention_floor`; `u64::MAX` by default: no floor).
    pub(crate) retention_floor: std::sync::atomic::AtomicU64,
    /// Raft mode: the committed id's slot file, opened at its first write.
    pub(crate) raft_committed: Mutex<Option<crate::slots::SlotFile>>,
}

/// An append whose offsets are assigned; await it (or `wait`) for durability.
#[derive(Debug)]
pub struct PendingAppend {
    pub base_offset: u64,
    pub last_offset: u64,
    /// An idempotent producer's retry: nothing was written, the offsets are the original's.
    pub duplicate: bool,
    rx: oneshot::Receiver<Result<()>>,
}

/// The offsets of a durable append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: u64,
    pub last_offset: u64,
    pub duplicate: bool,
}

impl PendingAppend {
    /// Blocks until the batch is durable. Not for async contexts: await `durable`.
    pub fn wait(self) -> Result<Appended> {
        let (base_offset, last_offset, duplicate) = (self.base_offset, self.last_offset, self.duplicate);
        self.rx.blocking_recv().map_err(|_| LogError::ShutDown)??;
        Ok(Appended { base_offset, last_offset, duplicate })
    }

    /// Resolves once the batch is durable.
    pub async fn durable(self) -> Result<Appended> {
        let (base_offset, last_offset, duplicate) = (self.base_offset, self.last_offset, self.duplicate);
        self.rx.await.map_err(|_| LogError::ShutDown)??;
        Ok(Appended { base_offset, last_offset, duplicate })
    }
}

/// Whole batches read from the log.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Concatenated, CRC-checked batches; empty when there is nothing at the offset yet.
    pub data: Bytes,
    pub high_watermark: u64,
    pub log_start_offset: u64,
}

impl ReadResult {
    /// Iterates the batches of `data`.
    pub fn batches(&self) -> impl Iterator<Item = BatchView<'_>> {
        let mut rest: &[u8] = &self.data;
        std::iter::from_fn(move || {
            let view = BatchView::parse(rest, usize::MAX).ok()?;
            rest = &rest[view.header.total_len()..];
            Some(view)
        })
    }
}

/// A partition's offsets and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub log_start_offset: u64,
    /// Offsets below this are durable and readable.
    pub high_watermark: u64,
    /// The offset the next append gets (may run ahead of the high watermark).
    pub log_end_offset: u64,
    pub size_bytes: u64,
    pub segment_count: usize,
    pub cold_segment_count: usize,
    /// Bytes of `.log` data in the cold tier.
    pub cold_size_bytes: u64,
}

/// What opening a partition found and repaired.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub trimmed: Option<Trimmed>,
    pub corrupt_segments: Vec<(PathBuf, u64, String)>,
}

impl PartitionLog {
    pub(crate) fn open(
        name: String,
        dir: PathBuf,
        config: LogConfig,
        shared: Arc<Shared>,
    ) -> Result<(Arc<Self>, RecoveryReport)> {
        config.validate()?;
        check_cold(&config, &shared)?;
        std::fs::create_dir_all(&dir).ctx(|| format!("creating {}", dir.display()))?;
        let max = config.batch_bytes_max.max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let mut report = RecoveryReport::default();
        let cold_tier =
            shared.cold.as_ref().map(|c| ColdPartition::open(c.clone(), &name, &dir)).transpose()?;
        if let Some(tier) = &cold_tier {
            tier.finish_moves(&dir)?;
        }
        let bases = drop_empty_newest(&dir, list_segments(&dir)?)?;
        let mut segments = BTreeMap::new();
        let (last, sealed) = bases.split_last().map_or((None, &[][..]), |(l, s)| (Some(*l), s));
        for (i, &base) in sealed.iter().enumerate() {
            let upper = sealed.get(i + 1).copied().or(last).unwrap_or(u64::MAX);
            let seg = Segment::open_sealed(&dir, base, upper, shared.open_files.clone(), max)?;
            note_corrupt(&seg, &mut report);
            segments.insert(base, seg);
        }
        let active = match last {
            Some(base) => {
                let (seg, trimmed) = Segment::open_active(&dir, base, shared.open_files.clone(), max)?;
                if let Some(t) = &trimmed {
                    tracing::warn!(file = %t.file.display(), position = t.position, bytes = t.bytes, reason = %t.reason, "recovery trimmed a torn tail");
                }
                report.trimmed = trimmed;
                seg
            }
            None => Segment::create(&dir, 0, 0, shared.open_files.clone(), max)?,
        };
        let next_offset = active.next_offset();
        segments.insert(active.base_offset, active);
        let cold = match &cold_tier {
            Some(tier) => {
                let local_start = segments.keys().next().copied().unwrap_or(u64::MAX);
                tier.segments(local_start, &shared.open_files, max)?
            }
            None => BTreeMap::new(),
        };
        derive_first_indexes(cold.values().chain(segments.values()));
        let next_index = segments
            .values()
            .next_back()
            .map_or(0, |s| s.state.read().expect("segment state lock").raft.end());
        let mut epochs = Epochs::load(&dir)?;
        epochs.truncate_from(next_offset, next_index)?;
        let producers = load_producers(&dir, cold.values().chain(segments.values()), next_offset)?;
        let start_floor = crate::log_start::load(&dir)?;
        let compaction = crate::compaction::RaftCompaction::load(&dir);
        let opened_with_vote = dir.join(crate::raft::RaftFile::Vote.name()).exists();
        let log = Arc::new(PartitionLog {
            name,
            dir,
            cold: cold_tier,
            config: RwLock::new(config),
            inner: Mutex::new(Inner { segments, cold, next_offset, epochs, producers, start_floor }),
            progress: Progress::new(next_offset),
            shared,
            housekeeping: Mutex::new(false),
            raft_mode: std::sync::atomic::AtomicBool::new(false),
            compaction,
            opened_with_vote,
            raft_purged_next: std::sync::atomic::AtomicU64::new(0),
            retention_wants: std::sync::atomic::AtomicU64::new(0),
            retention_floor: std::sync::atomic::AtomicU64::new(u64::MAX),
            raft_committed: Mutex::new(None),
        });
        Ok((log, report))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> LogConfig {
        self.config.read().expect("config lock").clone()
    }

    /// Replaces the configuration; applies to the next append and housekeeping round.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        check_cold(&config, &self.shared)?;
        *self.config.write().expect("config lock") = config;
        Ok(())
    }

    /// Leader path: encodes `records`, assigns offsets and (where absent) timestamps.
    pub fn append_records(&self, records: &[Record], epoch: LeaderEpoch) -> Result<PendingAppend> {
        self.append_records_as(records, ProducerInfo::NONE, epoch)
    }

    /// Like [`PartitionLog::append_records`] for an idempotent producer: the batch
    /// carries `producer`, so a retry is recognised and answered with its offsets.
    pub fn append_records_as(
        &self,
        records: &[Record],
        producer: ProducerInfo,
        epoch: LeaderEpoch,
    ) -> Result<PendingAppend> {
        let bytes = batch::encode(records, self.shared.clock.now_ms(), producer)?;
        self.append(bytes, epoch)
    }

    /// Leader path: appends an encoded v2 batch (see [`es_core::batch::encode`]) as
    /// the producer sent it, stamping its base offset and `epoch` (outside the CRC).
    /// The batch is checked (size, CRC, records) before any lock is taken; on a
    /// LogAppendTime topic the append time is set there too, as the CRC changes.
    pub fn append(&self, mut bytes: Vec<u8>, epoch: LeaderEpoch) -> Result<PendingAppend> {
        let timestamp_type = self.check_batch(&bytes, false)?.1;
        if timestamp_type == TimestampType::LogAppendTime {
            batch::set_log_append_time(&mut bytes, self.shared.clock.now_ms());
        }
        self.append_inner(&mut bytes, true, None, |next| (next, epoch))
    }

    /// Follower path: appends a batch that already carries its base offset and leader
    /// epoch, byte for byte. Its base offset must equal the log end offset. The batch
    /// may be one compaction rewrote (a Raft follower's copy of its leader's entry,
    /// replayed from the journal).
    pub fn append_replica(&self, bytes: Vec<u8>) -> Result<PendingAppend> {
        let mut bytes = bytes;
        let header = self.check_batch(&bytes, true)?.0;
        self.append_inner(&mut bytes, false, None, |_| (header.base_offset, header.leader_epoch))
    }

    /// Checks a batch against this partition's limits; returns its header and the
    /// topic's timestamp type. `compacted`: the batch may have been rewritten by
    /// compaction (a Raft follower's copy of its leader's entry).
    pub(crate) fn check_batch(
        &self,
        bytes: &[u8],
        compacted: bool,
    ) -> Result<(es_core::BatchHeader, TimestampType)> {
        let cfg = self.config.read().expect("config lock");
        if bytes.len() > cfg.batch_bytes_max {
            return Err(LogError::BatchTooLarge { size: bytes.len(), max: cfg.batch_bytes_max });
        }
        let view = BatchView::parse(bytes, cfg.batch_bytes_max)?;
        if view.header.total_len() != bytes.len() {
            return Err(LogError::InvalidBatch(es_core::CodecError::BadRecord {
                position: view.header.total_len(),
                reason: "bytes after the batch",
            }));
        }
        // Compressed batches are checked in plain form but stored as sent.
        let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)?;
        let size = if compacted { plain.validate_sizes_compacted()? } else { plain.validate_sizes()? };
        if size > cfg.record_bytes_max {
            return Err(LogError::RecordTooLarge { size, max: cfg.record_bytes_max });
        }
        Ok((view.header, cfg.timestamp_type))
    }

    /// Stamps, orders and queues one batch. `assign(next_offset)` returns the
    /// (base offset, leader epoch) the batch gets. `raft_index`, for a Raft entry, is
    /// the index it must get (appends are contiguous, openraft#1795).
    pub(crate) fn append_inner(
        &self,
        bytes: &mut Vec<u8>,
        leader: bool,
        raft_index: Option<u64>,
        assign: impl FnOnce(u64) -> (u64, LeaderEpoch),
    ) -> Result<PendingAppend> {
        self.progress.check()?;
        self.shared.flusher.admit()?;
        self.wait_for_flusher_room();
        let now = self.shared.clock.now_ms();
        let (segment_bytes, segment_ms, interval) = {
            let c = self.config.read().expect("config lock");
            (c.segment_bytes, c.segment_ms, c.index_interval_bytes)
        };
        let mut inner = self.inner.lock().expect("partition lock");
        let (base, epoch) = assign(inner.next_offset);
        if !epoch.is_known() {
            return Err(LogError::UnknownEpoch { epoch });
        }
        let incoming = es_core::BatchHeader::parse(bytes, usize::MAX)?;
        let index = inner.next_index();
        check_raft_index(bytes, &incoming, index, raft_index)?;
        if leader
            && let Check::Duplicate(b) =
                inner.producers.check(&incoming.producer, incoming.last_offset_delta)?
        {
            // A retry of a recent batch: answer with the original offsets once they are durable.
            return self.duplicate(&inner, b.base_offset, b.last_offset);
        }
        if base != inner.next_offset {
            return Err(LogError::OffsetMismatch { expected: inner.next_offset, got: base });
        }
        if let Some(latest) = inner.epochs.latest()
            && epoch < latest
        {
            return Err(LogError::StaleEpoch { epoch, latest });
        }
        batch::stamp(bytes, base, epoch);
        let header = es_core::BatchHeader::parse(bytes, usize::MAX)?;
        self.maybe_roll(&mut inner, bytes.len() as u64, now, segment_bytes, segment_ms)?;
        if inner.epochs.latest() != Some(epoch) {
            inner.epochs.begin(epoch, base, index)?;
        }
        let active = inner.active().clone();
        let len = bytes.len();
        let position = {
            let mut st = active.state.write().expect("segment state lock");
            let position = st.size;
            let rel = (base - active.base_offset) as u32;
            st.index.on_batch(rel, position as u32, len as u32, header.max_timestamp, interval);
            st.raft.positions.push(position as u32);
            st.size += len as u64;
            st.next_offset = header.next_offset();
            st.first_append_ms.get_or_insert(now);
            position
        };
        inner.next_offset = header.next_offset();
        inner.producers.record(&header);
        let (tx, rx) = oneshot::channel();
        let enqueue = {
            let writer = active.writer.as_ref().expect("active segment has a writer");
            let mut p = writer.pending.lock().expect("pending lock");
            p.chunks.push(std::mem::take(bytes));
            p.bytes += len;
            p.waiters.push(tx);
            p.end_position = position + len as u64;
            p.end_offset = header.next_offset();
            !std::mem::replace(&mut p.queued, true)
        };
        if enqueue {
            self.shared.flusher.enqueue(self.job(&active))?;
        }
        drop(inner);
        Ok(PendingAppend { base_offset: base, last_offset: header.last_offset(), duplicate: false, rx })
    }

    /// A pending answer for a retried batch that resolves after the next flush of the
    /// active segment, which completes no earlier than the original batch's flush.
    fn duplicate(&self, inner: &Inner, base_offset: u64, last_offset: u64) -> Result<PendingAppend> {
        let (tx, rx) = oneshot::channel();
        if self.high_watermark() > last_offset {
            let _ = tx.send(Ok(()));
            return Ok(PendingAppend { base_offset, last_offset, duplicate: true, rx });
        }
        let active = inner.active().clone();
        let enqueue = {
            let writer = active.writer.as_ref().expect("active segment has a writer");
            let mut p = writer.pending.lock().expect("pending lock");
            p.waiters.push(tx);
            !std::mem::replace(&mut p.queued, true)
        };
        if enqueue {
            self.shared.flusher.enqueue(self.job(&active))?;
        }
        Ok(PendingAppend { base_offset, last_offset, duplicate: true, rx })
    }

    fn job(&self, segment: &Arc<Segment>) -> Job {
        Job {
            segment: segment.clone(),
            name: self.name.clone(),
            progress: self.progress.clone(),
            dir: self.dir.clone(),
        }
    }

    /// Rolls the active segment when the batch would push it past `segment.bytes` or
    /// when its first batch is older than `segment.ms`.
    fn maybe_roll(
        &self,
        inner: &mut Inner,
        len: u64,
        now: i64,
        segment_bytes: u64,
        segment_ms: i64,
    ) -> Result<()> {
        let active = inner.active().clone();
        let (size, first) = {
            let st = active.state.read().expect("segment state lock");
            (st.size, st.first_append_ms)
        };
        let full = size > 0 && size + len > segment_bytes;
        let old = first.is_some_and(|t| now.saturating_sub(t) >= segment_ms);
        // A segment holding only Raft control batches spans no offset: the next one
        // would get the same base offset (and file name), so it keeps growing.
        if !(full || old) || active.next_offset() == active.base_offset {
            return Ok(());
        }
        self.roll(inner, &active)
    }

    pub(crate) fn roll(&self, inner: &mut Inner, active: &Arc<Segment>) -> Result<()> {
        let enqueue = {
            let writer = active.writer.as_ref().expect("active segment has a writer");
            let mut p = writer.pending.lock().expect("pending lock");
            p.seal = true;
            !std::mem::replace(&mut p.queued, true)
        };
        if enqueue {
            self.shared.flusher.enqueue(self.job(active))?;
        }
        let max = self
            .config
            .read()
            .expect("config lock")
            .batch_bytes_max
            .max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let first_index = inner.next_index();
        let seg =
            Segment::create(&self.dir, inner.next_offset, first_index, self.shared.open_files.clone(), max)?;
        inner.segments.insert(seg.base_offset, seg);
        self.snapshot_producers(inner)
    }

    /// Rolls the active segment now, if it holds anything (tests and tools).
    pub fn force_roll(&self) -> Result<()> {
        let mut inner = self.inner.lock().expect("partition lock");
        let active = inner.active().clone();
        if active.size() == 0 {
            return Ok(());
        }
        self.roll(&mut inner, &active)
    }

    /// Bounds the bytes queued for the flusher: waits while the active segment holds
    /// more than `PENDING_BYTES_MAX` unflushed bytes.
    fn wait_for_flusher_room(&self) {
        let active = self.inner.lock().expect("partition lock").active().clone();
        let Some(writer) = active.writer.as_ref() else {
            return;
        };
        let mut p = writer.pending.lock().expect("pending lock");
        while p.bytes > PENDING_BYTES_MAX {
            p = writer.drained.wait_timeout(p, Duration::from_millis(100)).expect("pending lock").0;
        }
    }

    /// Waits until every byte appended before the call is durable; appends after it
    /// do not hold it up (unlike [`PartitionLog::flush`], which waits for the queue
    /// to drain). Fails if the partition failed or the flusher does not get there
    /// within `DURABLE_WAIT_MAX`.
    pub(crate) fn wait_appended_durable(&self) -> Result<()> {
        let (seg, end) = {
            let inner = self.inner.lock().expect("partition lock");
            let active = inner.active().clone();
            let end = active.size();
            (active, end)
        };
        let Some(writer) = seg.writer.as_ref() else {
            return Ok(());
        };
        let deadline = std::time::Instant::now() + DURABLE_WAIT_MAX;
        let mut p = writer.pending.lock().expect("pending lock");
        while seg.durable_size.load(Ordering::Acquire) < end {
            self.progress.check()?;
            if std::time::Instant::now() >= deadline {
                let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
                return Err(LogError::io("waiting for the flusher to make an append durable", e));
            }
            p = writer.drained.wait_timeout(p, Duration::from_millis(50)).expect("pending lock").0;
        }
        Ok(())
    }

    /// Waits until no segment of this partition has bytes queued or in flight.
    pub fn flush(&self) -> Result<()> {
        let segments: Vec<Arc<Segment>> =
            self.inner.lock().expect("partition lock").segments.values().cloned().collect();
        for seg in segments {
            wait_drained(&seg);
        }
        self.progress.check()
    }

    /// The offset readers see up to: after the last durable batch and, in Raft mode,
    /// no further than the committed offset ([`PartitionLog::set_committed_offset`]).
    pub fn high_watermark(&self) -> u64 {
        self.progress.visible()
    }

    /// A receiver that changes whenever the high watermark moves (for long polls).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.progress.notify.subscribe()
    }

    /// The active segment's base offset and how many of its bytes this process
    /// fsynced in the file itself: what a simulated crash may not damage.
    #[cfg(test)]
    pub(crate) fn synced_tail(&self) -> (u64, u64) {
        let inner = self.inner.lock().expect("partition lock");
        let active = inner.active();
        (active.base_offset, active.synced_size.load(Ordering::Acquire))
    }

    pub fn info(&self) -> PartitionInfo {
        let hw = self.high_watermark();
        let inner = self.inner.lock().expect("partition lock");
        PartitionInfo {
            log_start_offset: inner.log_start(),
            high_watermark: hw,
            log_end_offset: inner.next_offset,
            size_bytes: inner.segments.values().map(|s| s.size()).sum(),
            segment_count: inner.segments.len(),
            cold_segment_count: inner.cold.len(),
            cold_size_bytes: inner.cold.values().map(|s| s.size()).sum(),
        }
    }

    /// The (leader epoch, first offset) transitions of this log, oldest first.
    pub fn epoch_starts(&self) -> Vec<(LeaderEpoch, u64)> {
        let inner = self.inner.lock().expect("partition lock");
        inner.epochs.entries.iter().map(|e| (e.epoch, e.offset)).collect()
    }

    /// Discards every record after `offset` (Raft truncation of an uncommitted suffix).
    pub fn truncate_after(&self, offset: u64) -> Result<()> {
        self.truncate_from(offset + 1)
    }

    /// Discards every record at or after `offset`, which must be a batch boundary.
    pub fn truncate_from(&self, offset: u64) -> Result<()> {
        let mut inner = self.inner.lock().expect("partition lock");
        if offset >= inner.next_offset {
            return Ok(());
        }
        let local_start = *inner.segments.keys().next().expect("active segment");
        if offset < local_start {
            return Err(LogError::OffsetOutOfRange {
                requested: offset,
                log_start: local_start,
                high_watermark: inner.next_offset,
            });
        }
        for seg in inner.segments.values() {
            wait_drained(seg);
        }
        self.progress.check()?;
        // Journal first: a replay then applies the truncation even if the crash comes
        // before the segment files below are changed.
        if let Some(journal) = self.shared.flusher.journal() {
            journal.record_truncate(&self.name, offset)?;
        }
        let target = inner
            .segments
            .range(..=offset)
            .next_back()
            .map(|(_, s)| s.clone())
            .expect("segment at or below offset");
        let cut = find_boundary(&target, offset)?;
        let index = {
            let st = target.state.read().expect("segment state lock");
            st.raft.first() + st.raft.positions.partition_point(|p| u64::from(*p) < cut) as u64
        };
        self.cut_at(&mut inner, &target, cut, offset, index)
    }

    /// Cuts the log at byte `cut` of `target`, the batch with Raft index `index` and
    /// base offset `offset`: that batch and everything after it go.
    pub(crate) fn cut_at(
        &self,
        inner: &mut Inner,
        target: &Arc<Segment>,
        cut: u64,
        offset: u64,
        index: u64,
    ) -> Result<()> {
        let doomed: Vec<u64> = inner
            .segments
            .range((std::ops::Bound::Excluded(target.base_offset), std::ops::Bound::Unbounded))
            .map(|(b, _)| *b)
            .collect();
        for base in doomed {
            inner.segments.remove(&base);
            self.remove_files(base)?;
        }
        inner.segments.remove(&target.base_offset);
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target.log_path)
                .ctx(|| format!("opening {}", target.log_path.display()))?;
            f.set_len(cut).ctx(|| format!("truncating {}", target.log_path.display()))?;
            f.sync_all().ctx(|| format!("syncing {}", target.log_path.display()))?;
        }
        let max = self
            .config
            .read()
            .expect("config lock")
            .batch_bytes_max
            .max(es_core::limits::BATCH_BYTES_READ_FLOOR);
        let (seg, _) =
            Segment::open_active(&self.dir, target.base_offset, self.shared.open_files.clone(), max)?;
        seg.note_synced(cut);
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))?;
        inner.segments.insert(seg.base_offset, seg);
        inner.next_offset = offset;
        inner.epochs.truncate_from(offset, index)?;
        inner.producers =
            load_producers(&self.dir, inner.cold.values().chain(inner.segments.values()), offset)?;
        self.progress.durable_offset.store(offset, Ordering::Release);
        self.progress.notify.send_replace(self.progress.visible());
        Ok(())
    }

    pub(crate) fn remove_files(&self, base: u64) -> Result<()> {
        remove_segment_files(&self.dir, base)?;
        files::fsync_dir(&self.dir).ctx(|| format!("syncing {}", self.dir.display()))
    }

    /// Flushes everything and writes the active segment's indexes, so the next open
    /// only has to check the tail.
    pub fn close(&self) -> Result<()> {
        self.flush()?;
        let inner = self.inner.lock().expect("partition lock");
        inner.active().write_indexes(&self.dir)?;
        self.snapshot_producers(&inner)
    }

    /// Writes the producer state covering the log below `next_offset`, so a restart
    /// replays only the batches after it.
    pub(crate) fn snapshot_producers(&self, inner: &Inner) -> Result<()> {
        let path = self.dir.join(PRODUCER_STATE_FILE);
        let text = inner.producers.encode(inner.next_offset);
        files::write_atomic(&path, text.as_bytes()).ctx(|| format!("writing {}", path.display()))
    }

    /// The offset the next append gets.
    pub(crate) fn log_end(&self) -> u64 {
        self.inner.lock().expect("partition lock").next_offset
    }

    /// The epoch and last sequence this partition knows for a producer.
    pub fn producer_state(&self, producer_id: i64) -> Option<(i16, i32)> {
        self.inner.lock().expect("partition lock").producers.latest(producer_id)
    }

    /// Every idempotent producer this partition remembers (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerSummary> {
        self.inner.lock().expect("partition lock").producers.summaries()
    }
}

/// Loads the producer-state snapshot (if it covers no more than the log holds) and
/// replays the batch headers after it.
fn load_producers<'a>(
    dir: &Path,
    segments: impl Iterator<Item = &'a Arc<Segment>>,
    next_offset: u64,
) -> Result<ProducerTable> {
    let path = dir.join(PRODUCER_STATE_FILE);
    let snapshot = std::fs::read_to_string(&path).ok().and_then(|t| ProducerTable::decode(&t));
    let (from, mut table) = match snapshot {
        Some((offset, table)) if offset <= next_offset => (offset, table),
        _ => (0, ProducerTable::default()),
    };
    for seg in segments {
        if seg.next_offset() <= from {
            continue;
        }
        for h in seg.headers_from(from)? {
            if h.base_offset < next_offset {
                table.record(&h);
            }
        }
    }
    Ok(table)
}

/// Gives each segment without a sidecar (written before Raft indexes) the first
/// index after the segment below it.
fn derive_first_indexes<'a>(segments: impl Iterator<Item = &'a Arc<Segment>>) {
    let mut next = 0u64;
    for seg in segments {
        let mut st = seg.state.write().expect("segment state lock");
        if st.raft.first.is_none() {
            st.raft.first = Some(next);
        }
        next = st.raft.end();
    }
}

/// Checks a batch against the Raft index it will get: a Raft control batch names
/// its own index, and a Raft append names the index it expects.
fn check_raft_index(
    bytes: &[u8],
    header: &es_core::BatchHeader,
    index: u64,
    expected: Option<u64>,
) -> Result<()> {
    if let Some(want) = expected
        && want != index
    {
        return Err(LogError::NotContiguous { expected: index, got: want });
    }
    if header.is_raft_control() {
        let view = BatchView::parse(bytes, usize::MAX)?;
        let named = batch::raft_control(&view)?.map(|c| c.index());
        if named != Some(index) {
            return Err(LogError::NotContiguous { expected: index, got: named.unwrap_or(u64::MAX) });
        }
    }
    Ok(())
}

fn note_corrupt(seg: &Segment, report: &mut RecoveryReport) {
    if let Some((pos, reason)) = &seg.state.read().expect("segment state lock").corrupt_at {
        report.corrupt_segments.push((seg.log_path.clone(), *pos, reason.clone()));
    }
}

/// Blocks until a segment has nothing queued or in flight.
pub(crate) fn wait_drained(seg: &Segment) {
    let Some(writer) = seg.writer.as_ref() else {
        return;
    };
    let mut p = writer.pending.lock().expect("pending lock");
    while p.queued || p.flushing || !p.chunks.is_empty() {
        p = writer.drained.wait_timeout(p, Duration::from_millis(50)).expect("pending lock").0;
    }
    let sealing = p.seal;
    drop(p);
    // A rolled segment is sealed by a background index writer; wait for it (bounded:
    // if the writer fails the flag is still set).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while sealing
        && !seg.state.read().expect("segment state lock").sealed
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The byte position of the batch that starts at `offset` (or the segment end if
/// `offset` is its next offset).
fn find_boundary(seg: &Arc<Segment>, offset: u64) -> Result<u64> {
    let (size, next) = {
        let st = seg.state.read().expect("segment state lock");
        (st.size, st.next_offset)
    };
    if offset == next {
        return Ok(size);
    }
    let hint = {
        let st = seg.state.read().expect("segment state lock");
        st.index.lookup((offset - seg.base_offset) as u32).map_or(0, |e| u64::from(e.position))
    };
    let file = seg.reader()?;
    let mut pos = hint;
    while pos < size {
        let h = seg.header_at(&file, pos)?;
        if h.base_offset == offset {
            return Ok(pos);
        }
        if h.base_offset > offset {
            break;
        }
        pos += h.total_len() as u64;
    }
    Err(LogError::NotBatchBoundary { offset })
}

/// A roll creates the new segment before the old one's last bytes are durable, so
/// after a crash an empty newest segment may sit above a torn one. The flusher
/// never writes a new segment before the old one is synced, so only empty newest
/// segments can hide a tear: remove them and recover the one below as active.
fn drop_empty_newest(dir: &Path, mut bases: Vec<u64>) -> Result<Vec<u64>> {
    while bases.len() > 1 {
        let base = *bases.last().expect("non-empty");
        let path = files::segment_path(dir, base, LOG_EXT);
        let len = std::fs::metadata(&path).ctx(|| format!("reading size of {}", path.display()))?.len();
        if len > 0 {
            break;
        }
        remove_segment_files(dir, base)?;
        files::fsync_dir(dir).ctx(|| format!("syncing {}", dir.display()))?;
        bases.pop();
    }
    Ok(bases)
}

/// Base offsets of the `.log` files in `dir`, ascending; deletes leftovers of
/// interrupted atomic writes.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(|| format!("listing {}", dir.display()))? {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(files::TMP_SUFFIX) {
            files::remove_if_exists(&entry.path()).ctx(|| format!("removing {}", entry.path().display()))?;
        } else if let Some(base) = files::parse_segment_name(&name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Removes every file of the segment at `base` in `dir` (already gone is fine); the
/// caller fsyncs the directory once for all it removed.
/// Refuses a cold tier the broker does not have, and one whose retention is
/// shorter than the topic's local retention (segments would be deleted from the
/// cold tier as soon as they arrive).
fn check_cold(config: &LogConfig, shared: &Shared) -> Result<()> {
    if !config.cold_tier {
        return Ok(());
    }
    let Some(cold) = &shared.cold else {
        return Err(LogError::InvalidConfig(
            "the cold tier is on for this topic, but the broker has no cold tier configured".into(),
        ));
    };
    let cold_ms = cold.options.retention_ms;
    if cold_ms >= 0 && (config.retention_ms < 0 || config.retention_ms > cold_ms) {
        let local = match config.retention_ms {
            -1 => "unlimited".to_owned(),
            ms => format!("{ms} ms"),
        };
        return Err(LogError::InvalidConfig(format!(
            "retention.ms ({local}) is longer than the cold tier's retention ({cold_ms} ms): tiered segments would be deleted as soon as they arrive; raise cold.retention_ms or lower retention.ms"
        )));
    }
    Ok(())
}

pub(crate) fn remove_segment_files(dir: &Path, base: u64) -> Result<()> {
    for ext in files::SEGMENT_EXTS {
        let p = files::segment_path(dir, base, ext);
        files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::{LogManager, ManagerOptions};

    /// After a failed write, every waiter gets the error, nothing is acknowledged,
    /// and the partition refuses further appends instead of retrying an fsync that
    /// may have lost data.
    #[test]
    fn a_failed_flush_fails_waiters_and_poisons_the_partition() {
        let dir = tempfile::tempdir().unwrap();
        let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
        let m = LogManager::new(dir.path(), opts).unwrap();
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        p.append_records(&[Record::from_value("ok")], LeaderEpoch(1)).unwrap().wait().unwrap();
        {
            let inner = p.inner.lock().unwrap();
            let active = inner.active();
            // A read-only handle makes the next write fail like a dying disk would.
            let ro = std::fs::File::open(&active.log_path).unwrap();
            *active.writer.as_ref().unwrap().file.lock().unwrap() = Some(ro);
        }
        let err =
            p.append_records(&[Record::from_value("lost")], LeaderEpoch(1)).unwrap().wait().unwrap_err();
        assert!(matches!(err, LogError::Io { .. }), "{err:?}");
        assert_eq!(p.high_watermark(), 1, "the failed batch is never visible");
        assert!(matches!(
            p.append_records(&[Record::from_value("again")], LeaderEpoch(1)),
            Err(LogError::Failed(_))
        ));
    }
}
