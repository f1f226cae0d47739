//! Group commit. One flusher thread per [`crate::LogManager`] (one per disk). Each
//! round takes every segment with pending bytes. With the journal on (the default),
//! it writes each segment's bytes behind (no sync), appends one journal record per
//! batch and makes the whole round durable with one `fdatasync` of the journal,
//! whatever the number of partitions; segments are synced later, at checkpoints
//! (`journal.rs`). With the journal off, each segment's bytes get one `writev` and one
//! `fdatasync`. A journal round that touches one partition, or a few partitions with
//! large writes each, after a few rounds that did too, takes that second path when
//! the journal allows it for each of them ([`Journal::bypass`]): one partition gains
//! nothing from sharing the fsync, a few with large writes gain less from it than
//! they pay for writing their bytes twice.
//! Either way every append waiting on the round is then acknowledged;
//! appends that arrive during a round join the next one. The flusher waits on
//! nothing but the disk: no plugin, no network, no log lock.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use es_core::histogram::Histogram;

use crate::error::{LogError, Result};
use crate::files;
use crate::journal::{Bypass, Journal};
use crate::journal_file;
use crate::segment::{Segment, Waiter};

/// Most threads one flush round uses to sync partitions in parallel.
const FLUSH_WORKERS_MAX: usize = 8;

/// Rounds in a row that must each be direct-shaped ([`direct_shaped`])
/// before such a round may skip the journal. Rounds that alternate between segment
/// `fdatasync`s and the journal's were measured slower than either alone (several
/// files, each sync committing the filesystem's journal); a load that keeps the
/// shape leaves the journal after this many rounds.
const ROUNDS_BEFORE_BYPASS: u64 = 8;

/// Most partitions a round may hold and still skip the journal, given large writes
/// (`JournalOptions::direct_bytes`): past this, one shared `fdatasync` wins.
const DIRECT_PARTITIONS_MAX: usize = 8;

/// Durability progress of one partition, shared by its appenders, readers and the flusher.
#[derive(Debug)]
pub(crate) struct Progress {
    /// The offset after the last durable batch.
    pub durable_offset: AtomicU64,
    /// Wakes long-polling readers when the readers' high watermark
    /// ([`Progress::visible`]) moves; holds that value.
    pub notify: tokio::sync::watch::Sender<u64>,
    /// A Raft group's committed offset (the end of the last applied data entry):
    /// readers see no further. `u64::MAX` outside Raft mode, where durable is enough.
    pub committed: AtomicU64,
    /// Set after a failed write or fsync: the partition refuses writes until reopened,
    /// because after a failed fsync the kernel may have dropped the dirty pages.
    pub failed: Mutex<Option<String>>,
}

impl Progress {
    pub fn new(durable_offset: u64) -> Arc<Self> {
        Arc::new(Progress {
            durable_offset: AtomicU64::new(durable_offset),
            notify: tokio::sync::watch::Sender::new(durable_offset),
            committed: AtomicU64::new(u64::MAX),
            failed: Mutex::new(None),
        })
    }

    pub fn check(&self) -> Result<()> {
        match &*self.failed.lock().expect("failed lock") {
            Some(reason) => Err(LogError::Failed(reason.clone())),
            None => Ok(()),
        }
    }

    pub fn advance(&self, offset: u64) {
        let prev = self.durable_offset.fetch_max(offset, Ordering::AcqRel);
        if offset > prev {
            self.publish();
        }
    }

    /// The readers' high watermark: durable, and in Raft mode also committed.
    pub fn visible(&self) -> u64 {
        let durable = self.durable_offset.load(Ordering::Acquire);
        durable.min(self.committed.load(Ordering::Acquire))
    }

    /// Wakes readers if the visible watermark grew. Read and compared under the
    /// watch's lock: two racing publishers (the flusher moving the durable end,
    /// es-raft's publisher moving the committed offset) never leave the lower value
    /// behind, and the second sees what the first stored, so neither misses the
    /// other's move.
    pub fn publish(&self) {
        self.notify.send_if_modified(|seen| {
            let now = self.visible();
            let grew = now > *seen;
            if grew {
                *seen = now;
            }
            grew
        });
    }
}

/// A segment with pending bytes, queued for the next round.
pub(crate) struct Job {
    pub segment: Arc<Segment>,
    /// The partition's name: its identity in journal records.
    pub name: String,
    pub progress: Arc<Progress>,
    pub dir: PathBuf,
}

/// Counters for benchmarks and metrics (read at scrape time; atomics only).
#[derive(Debug)]
pub struct FlushStats {
    pub rounds: AtomicU64,
    pub fsyncs: AtomicU64,
    pub appends: AtomicU64,
    pub bytes: AtomicU64,
    /// Segment syncs done by checkpoints (journal on), not counted in `fsyncs`.
    pub checkpoint_fsyncs: AtomicU64,
    /// Journal-on rounds that synced their segments, not the journal (one partition,
    /// or a few with large writes).
    pub direct_rounds: AtomicU64,
    /// The partitions those rounds synced, summed.
    pub direct_partitions: AtomicU64,
    /// Appends acknowledged per group-commit round.
    pub round_appends: Histogram,
    /// How long each round-path fdatasync took (segment or journal).
    pub fsync_latency: Histogram,
}

impl Default for FlushStats {
    fn default() -> Self {
        Self {
            rounds: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            checkpoint_fsyncs: AtomicU64::new(0),
            direct_rounds: AtomicU64::new(0),
            direct_partitions: AtomicU64::new(0),
            round_appends: Histogram::counts(),
            fsync_latency: Histogram::latency(),
        }
    }
}

/// Runs one fdatasync and records how long it took.
pub(crate) fn timed_sync(stats: &FlushStats, file: &std::fs::File) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let synced = file.sync_data();
    stats.fsync_latency.observe_duration(started.elapsed());
    synced
}

/// One segment's share of a round: what was taken from its pending queue.
struct Take {
    job: Job,
    chunks: Vec<Vec<u8>>,
    waiters: Vec<Waiter>,
    end_position: u64,
    end_offset: u64,
    /// The segment was rolled: sync it before anything reaches its successor.
    seal: bool,
    result: Result<()>,
}

#[derive(Default)]
struct QueueState {
    jobs: Vec<Job>,
    shutdown: bool,
}

pub(crate) struct Flusher {
    state: Mutex<QueueState>,
    wake: Condvar,
    pub stats: Arc<FlushStats>,
    journal: Option<Arc<Journal>>,
    /// The number (`stats.rounds`) of the last round that was not direct-shaped.
    last_journal_round: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Index writers of recently sealed segments; joined at shutdown so no writer
    /// outlives the log that started it.
    sealers: Mutex<Vec<JoinHandle<()>>>,
}

impl Flusher {
    pub fn start(journal: Option<Arc<Journal>>, stats: Arc<FlushStats>) -> Arc<Flusher> {
        let flusher = Arc::new(Flusher {
            state: Mutex::new(QueueState::default()),
            wake: Condvar::new(),
            stats,
            journal,
            last_journal_round: AtomicU64::new(0),
            thread: Mutex::new(None),
            sealers: Mutex::new(Vec::new()),
        });
        let me = flusher.clone();
        let handle = std::thread::Builder::new()
            .name("es-flusher".into())
            .spawn(move || me.run())
            .expect("spawning the flusher thread");
        *flusher.thread.lock().expect("thread lock") = Some(handle);
        flusher
    }

    pub fn enqueue(&self, job: Job) -> Result<()> {
        let mut st = self.state.lock().expect("flusher lock");
        if st.shutdown {
            return Err(LogError::ShutDown);
        }
        st.jobs.push(job);
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    /// Refuses an append before it takes offsets when the journal cannot take it.
    pub fn admit(&self) -> Result<()> {
        self.journal.as_ref().map_or(Ok(()), |j| j.admit())
    }

    /// Finishes every queued round, then stops the thread; with the journal on, a
    /// final checkpoint leaves nothing to replay.
    pub fn shutdown(&self) {
        self.stop(true);
    }

    /// Like a crash for the journal: stops the thread but leaves the journal files
    /// and the unsynced segment bytes as they are (tests of recovery).
    pub fn shutdown_without_checkpoint(&self) {
        self.stop(false);
    }

    fn stop(&self, checkpoint: bool) {
        if let Some(j) = &self.journal {
            j.stop();
        }
        self.state.lock().expect("flusher lock").shutdown = true;
        self.wake.notify_all();
        if let Some(h) = self.thread.lock().expect("thread lock").take() {
            let _ = h.join();
        }
        for h in std::mem::take(&mut *self.sealers.lock().expect("sealers lock")) {
            let _ = h.join();
        }
        if let Some(j) = &self.journal {
            j.close(checkpoint);
        }
    }

    fn run(&self) {
        loop {
            let jobs = {
                let mut st = self.state.lock().expect("flusher lock");
                while st.jobs.is_empty() && !st.shutdown {
                    st = self.wake.wait(st).expect("flusher lock");
                }
                if st.jobs.is_empty() {
                    return;
                }
                std::mem::take(&mut st.jobs)
            };
            self.stats.rounds.fetch_add(1, Ordering::Relaxed);
            let before = self.stats.appends.load(Ordering::Relaxed);
            self.flush_round(jobs);
            // Only this thread completes rounds, so the difference is this round's.
            self.stats.round_appends.observe(self.stats.appends.load(Ordering::Relaxed) - before);
        }
    }

    /// Flushes one round. Partitions are synced in parallel (an fsync costs
    /// milliseconds and the disk can serve several); within a partition, in queue
    /// order: a rolled segment comes before its successor, so the new segment's bytes
    /// never reach its file before the old ones are durable.
    fn flush_round(&self, jobs: Vec<Job>) {
        let groups = group_by_partition(jobs);
        if let Some(journal) = &self.journal {
            let round = self.stats.rounds.load(Ordering::Relaxed);
            if !direct_shaped(&groups, journal.direct_bytes()) {
                self.last_journal_round.store(round, Ordering::Relaxed);
            }
            let shaped_for = round - self.last_journal_round.load(Ordering::Relaxed);
            let bypass = match shaped_for >= ROUNDS_BEFORE_BYPASS {
                true => bypass_all(journal, &groups),
                false => Bypass::No,
            };
            if bypass == Bypass::Yes {
                self.stats.direct_rounds.fetch_add(1, Ordering::Relaxed);
                self.stats.direct_partitions.fetch_add(groups.len() as u64, Ordering::Relaxed);
                return self.flush_direct(groups);
            }
            self.journal_round(journal, groups);
            if bypass == Bypass::AfterCheckpoint {
                journal.expedite_checkpoint();
            }
            return;
        }
        self.flush_direct(groups);
    }

    /// Writes and `fdatasync`s each partition's segment, partitions in parallel.
    fn flush_direct(&self, mut groups: Vec<Vec<Job>>) {
        let per_worker = groups.len().div_ceil(FLUSH_WORKERS_MAX);
        let mut lanes: Vec<Vec<Job>> = Vec::new();
        for chunk in groups.chunks_mut(per_worker.max(1)) {
            lanes.push(chunk.iter_mut().flat_map(std::mem::take).collect());
        }
        let flush_lane = |lane: Vec<Job>| lane.into_iter().for_each(|job| self.flush_one(job));
        let mut lanes = lanes.into_iter();
        let Some(first) = lanes.next() else {
            return;
        };
        std::thread::scope(|s| {
            for lane in lanes {
                s.spawn(move || flush_lane(lane));
            }
            flush_lane(first);
        });
    }

    fn flush_one(&self, job: Job) {
        let mut take = take(job);
        take.result = self.write_and_sync(&take.job, &take.chunks);
        if take.result.is_ok() {
            take.job.segment.note_synced(take.end_position);
        }
        self.complete(take);
    }

    /// A journal round: every segment's bytes written behind, in queue order per
    /// partition (a failed write fails the rest of its partition's share), then one
    /// journal record per batch and one journal fdatasync for all of them.
    fn journal_round(&self, journal: &Arc<Journal>, groups: Vec<Vec<Job>>) {
        let mut takes: Vec<Take> = Vec::new();
        for group in groups {
            let mut failed: Option<LogError> = None;
            for job in group {
                let mut t = take(job);
                t.result = match &failed {
                    Some(e) => Err(e.clone()),
                    None => self.write_behind(&t),
                };
                if let Err(e) = &t.result {
                    failed = Some(e.clone());
                }
                takes.push(t);
            }
        }
        let mut records = Vec::new();
        for t in takes.iter().filter(|t| t.result.is_ok()) {
            for chunk in &t.chunks {
                journal_file::encode_batch(&mut records, &t.job.name, chunk);
            }
            if !t.chunks.is_empty() {
                journal.note_dirty(&t.job.segment.log_path);
            }
        }
        // A round with no bytes (a retried batch's waiter) still needs a healthy journal.
        let committed =
            if records.is_empty() { journal.check_failed() } else { journal.commit(&mut records) };
        for mut t in takes {
            t.result = t.result.and_then(|()| committed.clone());
            self.complete(t);
        }
    }

    /// Writes a take's bytes to its segment without syncing them; a rolled segment is
    /// synced too, so its successor's bytes never reach disk before its own.
    fn write_behind(&self, t: &Take) -> Result<()> {
        let writer = t.job.segment.writer.as_ref().expect("queued segment has a writer");
        let mut file = writer.file.lock().expect("writer file lock");
        let file = file.as_mut().ok_or(LogError::ShutDown)?;
        let path = &t.job.segment.log_path;
        if !t.chunks.is_empty() {
            files::write_all_vectored(file, &t.chunks)
                .map_err(|e| LogError::io(format!("writing {}", path.display()), e))?;
        }
        if t.seal {
            timed_sync(&self.stats, file)
                .map_err(|e| LogError::io(format!("syncing {}", path.display()), e))?;
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            t.job.segment.note_synced(t.end_position);
        }
        Ok(())
    }

    /// Acknowledges (or fails) a take's waiters and seals a rolled segment.
    fn complete(&self, t: Take) {
        let Take { job, waiters, end_position, end_offset, result, .. } = t;
        let writer = job.segment.writer.as_ref().expect("queued segment has a writer");
        self.stats.appends.fetch_add(waiters.len() as u64, Ordering::Relaxed);
        match &result {
            Ok(()) => {
                job.segment.durable_size.store(end_position, Ordering::Release);
                job.progress.advance(end_offset);
            }
            Err(e) => {
                tracing::error!(file = %job.segment.log_path.display(), error = %e, "flush failed; the partition stops accepting writes");
                *job.progress.failed.lock().expect("failed lock") = Some(e.to_string());
            }
        }
        for w in waiters {
            let _ = w.send(result.clone());
        }
        let seal = {
            let mut p = writer.pending.lock().expect("pending lock");
            p.flushing = false;
            p.seal && p.chunks.is_empty() && !p.queued && result.is_ok()
        };
        if seal {
            self.seal(&job);
        }
        writer.drained.notify_all();
    }

    fn write_and_sync(&self, job: &Job, chunks: &[Vec<u8>]) -> Result<()> {
        let writer = job.segment.writer.as_ref().expect("queued segment has a writer");
        let mut file = writer.file.lock().expect("writer file lock");
        let file = file.as_mut().ok_or(LogError::ShutDown)?;
        let path = &job.segment.log_path;
        if !chunks.is_empty() {
            files::write_all_vectored(file, chunks)
                .map_err(|e| LogError::io(format!("writing {}", path.display()), e))?;
            let bytes: usize = chunks.iter().map(Vec::len).sum();
            self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        timed_sync(&self.stats, file).map_err(|e| LogError::io(format!("syncing {}", path.display()), e))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A rolled segment is durable: close its write handle, mark it sealed, and write
    /// its index files on a thread of their own so that their fsyncs never delay a
    /// group commit. The index is a hint: if a crash comes first, open rebuilds it.
    fn seal(&self, job: &Job) {
        if let Some(w) = job.segment.writer.as_ref() {
            w.file.lock().expect("writer file lock").take();
        }
        // Retention and compaction act only on sealed segments, so the flag is set
        // after the index files are written: nothing replaces them under the writer.
        let (segment, dir) = (job.segment.clone(), job.dir.clone());
        let spawned = std::thread::Builder::new().name("es-seal".into()).spawn(move || {
            if let Err(e) = segment.write_indexes(&dir) {
                tracing::warn!(file = %segment.log_path.display(), error = %e, "could not write the index of a sealed segment");
            }
            segment.state.write().expect("segment state lock").sealed = true;
        });
        match spawned {
            Ok(handle) => {
                let mut sealers = self.sealers.lock().expect("sealers lock");
                sealers.retain(|h| !h.is_finished());
                sealers.push(handle);
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start the index writer; the index will be rebuilt on open");
                job.segment.state.write().expect("segment state lock").sealed = true;
            }
        }
    }
}

/// Groups a round's jobs by partition, keeping queue order inside each group.
/// (A round may hold a thousand partitions: indexed, not searched.)
fn group_by_partition(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut groups: Vec<Vec<Job>> = Vec::new();
    let mut index: std::collections::HashMap<*const Progress, usize> = std::collections::HashMap::new();
    for job in jobs {
        let key = Arc::as_ptr(&job.progress);
        match index.get(&key) {
            Some(&g) => groups[g].push(job),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![job]);
            }
        }
    }
    groups
}

/// Takes a segment's pending bytes and waiters for this round.
/// Whether a journal round's shape lets it skip the journal: a single partition,
/// or a few ([`DIRECT_PARTITIONS_MAX`]) with at least `direct_bytes` pending each on
/// average. Syncing each segment then writes every byte once, where the journal
/// writes it twice (journal, then segment); with small writes the one shared
/// `fdatasync` wins instead (docs/benchmarks.md, storage Run 9).
fn direct_shaped(groups: &[Vec<Job>], direct_bytes: u64) -> bool {
    match groups.len() {
        1 => true,
        n if n <= DIRECT_PARTITIONS_MAX => {
            let pending: u64 = groups.iter().flatten().map(pending_bytes).sum();
            pending >= n as u64 * direct_bytes
        }
        _ => false,
    }
}

fn pending_bytes(job: &Job) -> u64 {
    let writer = job.segment.writer.as_ref().expect("queued segment has a writer");
    writer.pending.lock().expect("pending lock").bytes as u64
}

/// The journal's answer for a round: every partition may skip it, or (if one has a
/// live truncation record) not before a checkpoint, or not at all.
fn bypass_all(journal: &Journal, groups: &[Vec<Job>]) -> Bypass {
    let mut answer = Bypass::Yes;
    for group in groups {
        match journal.bypass(&group[0].name) {
            Bypass::No => return Bypass::No,
            Bypass::AfterCheckpoint => answer = Bypass::AfterCheckpoint,
            Bypass::Yes => {}
        }
    }
    answer
}

fn take(job: Job) -> Take {
    let writer = job.segment.writer.as_ref().expect("queued segment has a writer");
    let (chunks, waiters, end_position, end_offset, seal) = {
        let mut p = writer.pending.lock().expect("pending lock");
        p.queued = false;
        p.flushing = true;
        p.bytes = 0;
        (std::mem::take(&mut p.chunks), std::mem::take(&mut p.waiters), p.end_position, p.end_offset, p.seal)
    };
    Take { job, chunks, waiters, end_position, end_offset, seal, result: Ok(()) }
}
