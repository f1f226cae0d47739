//! The log manager: one per data directory (one per disk). It owns the flusher
//! thread every partition shares, the open-file budget, the clock, and a background
//! thread that runs retention, tiering and compaction.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use es_core::{Clock, SystemClock};

use crate::cold::tier::ColdShared;
use crate::cold::{ColdOptions, ColdStatus, DirStore};
use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::flusher::{FlushStats, Flusher};
use crate::journal::{Journal, JournalOptions};
use crate::journal_replay::{self, JournalReplay};
use crate::open_files::OpenFiles;
use crate::partition::{PartitionLog, RecoveryReport};

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Where expired segments go when a topic has the cold tier on: a directory
    /// store here, with default cache and retention (`cold` takes precedence).
    pub cold_dir: Option<PathBuf>,
    /// The cold tier's store (directory or S3), cache bound and retention.
    pub cold: Option<ColdOptions>,
    pub open_segment_files_max: usize,
    /// How often retention and compaction run; `None` disables the background thread.
    pub housekeeping_interval: Option<Duration>,
    pub clock: Arc<dyn Clock>,
    /// One journal for all partitions (one fdatasync per round); off keeps one
    /// fdatasync per dirty segment per round.
    pub journal: bool,
    /// Where the journal lives (another disk, say); default `<root>/journal`.
    pub journal_dir: Option<PathBuf>,
    /// Journal file size: past it the journal rotates and checkpoints.
    pub journal_file_bytes: u64,
    /// Lets a round of a single partition sync that partition's segment instead of
    /// the journal, when safe (`Journal::bypass`). On by default; off makes every
    /// round go through the journal (tests and benchmarks that compare the two).
    pub journal_bypass: bool,
    /// A checkpointed journal file becomes the spare the next rotation writes over,
    /// rather than being deleted and a new one preallocated (`journal_file`). On by
    /// default; off for benchmarks that compare the two.
    pub journal_recycle: bool,
    /// A round of up to 8 partitions syncs their segments instead of the journal
    /// (when `journal_bypass` and the journal allow) once each has this many bytes
    /// pending on average: then writing every byte once beats sharing one
    /// `fdatasync`. Default [`DIRECT_BYTES_DEFAULT`]; tests lower it to exercise the
    /// path with small batches.
    pub journal_direct_bytes: u64,
}

/// See [`ManagerOptions::journal_direct_bytes`]: 64 KiB, between the per-partition
/// round sizes at which the two paths were measured to trade places
/// (docs/benchmarks.md, storage Run 9).
pub const DIRECT_BYTES_DEFAULT: u64 = 64 * 1024;

/// A manager whose every round goes through the journal, none synced in a segment
/// (housekeeping off): for tests that take from the segments what only the journal
/// may then hold, or that fault the journal itself.
#[cfg(test)]
pub(crate) fn journal_only(root: &Path) -> LogManager {
    let options =
        ManagerOptions { housekeeping_interval: None, journal_bypass: false, ..ManagerOptions::default() };
    LogManager::new(root, options).unwrap()
}

/// The journal's directory under the data directory when none is configured.
pub const JOURNAL_DIR: &str = "journal";

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            cold_dir: None,
            cold: None,
            open_segment_files_max: es_core::limits::OPEN_SEGMENT_FILES_MAX_DEFAULT,
            housekeeping_interval: Some(Duration::from_secs(30)),
            clock: Arc::new(SystemClock),
            journal: true,
            journal_dir: None,
            journal_file_bytes: es_core::limits::JOURNAL_FILE_BYTES,
            journal_bypass: true,
            journal_recycle: true,
            journal_direct_bytes: DIRECT_BYTES_DEFAULT,
        }
    }
}

pub(crate) struct Shared {
    pub flusher: Arc<Flusher>,
    pub open_files: Arc<OpenFiles>,
    pub clock: Arc<dyn Clock>,
    pub cold: Option<Arc<ColdShared>>,
}

struct Housekeeper {
    stop: Mutex<bool>,
    wake: Condvar,
    partitions: Mutex<Vec<Weak<PartitionLog>>>,
}

pub struct LogManager {
    root: PathBuf,
    pub(crate) shared: Arc<Shared>,
    housekeeper: Arc<Housekeeper>,
    thread: Mutex<Option<JoinHandle<()>>>,
    replayed: JournalReplay,
}

impl std::fmt::Debug for LogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogManager").field("root", &self.root).finish()
    }
}

/// The file in a manager's root that says which storage format its partitions use.
pub const FORMAT_FILE: &str = "FORMAT";
/// Its content: partitions hold Kafka v2 batches.
const FORMAT: &str = "es-log 2\n";

impl LogManager {
    /// Opens the data directory `root`, creating it if needed. A fresh directory gets
    /// a [`FORMAT_FILE`] marker; one that holds partitions without it was written by
    /// an earlier format and is refused (see [`LogError::OldFormat`]).
    ///
    /// Before anything is served, the journal tail left by a crash is replayed into
    /// the partitions' segments (even with the journal now off), which are synced
    /// before the journal files are removed.
    pub fn new(root: impl Into<PathBuf>, options: ManagerOptions) -> Result<LogManager> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|e| LogError::io(format!("creating {}", root.display()), e))?;
        check_format(&root)?;
        let journal_dir = options.journal_dir.clone().unwrap_or_else(|| root.join(JOURNAL_DIR));
        let replayed = journal_replay::replay(&root, &journal_dir, &options)?;
        let stats = Arc::new(FlushStats::default());
        let journal = match options.journal {
            true => Some(Journal::open(
                &journal_dir,
                replayed.next_seq,
                JournalOptions {
                    file_bytes: options.journal_file_bytes,
                    bypass: options.journal_bypass,
                    recycle: options.journal_recycle,
                    direct_bytes: options.journal_direct_bytes,
                },
                stats.clone(),
            )?),
            false => None,
        };
        let shared = Arc::new(Shared {
            flusher: Flusher::start(journal, stats),
            open_files: OpenFiles::new(options.open_segment_files_max),
            clock: options.clock.clone(),
            cold: cold_options(&options)?.map(ColdShared::new),
        });
        let housekeeper = Arc::new(Housekeeper {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            partitions: Mutex::new(Vec::new()),
        });
        let thread = options.housekeeping_interval.map(|every| {
            let hk = housekeeper.clone();
            std::thread::Builder::new()
                .name("es-housekeeping".into())
                .spawn(move || housekeeping_loop(&hk, every))
                .expect("spawning the housekeeping thread")
        });
        Ok(LogManager { root, shared, housekeeper, thread: Mutex::new(thread), replayed })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens (creating if needed) the partition stored in `<root>/<name>`, running
    /// recovery on its newest segment.
    pub fn open_partition(
        &self,
        name: &str,
        config: LogConfig,
    ) -> Result<(Arc<PartitionLog>, RecoveryReport)> {
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return Err(LogError::InvalidConfig(format!("{name:?} is not a valid partition directory name")));
        }
        let fresh = !self.root.join(name).exists();
        let (log, report) =
            PartitionLog::open(name.to_owned(), self.root.join(name), config, self.shared.clone())?;
        if fresh && let Some(journal) = self.shared.flusher.journal() {
            // Marks the birth of this partition in the journal, so that a replay never
            // applies records of a deleted partition that had the same name.
            journal.record_truncate(name, 0)?;
        }
        self.housekeeper.partitions.lock().expect("partitions lock").push(Arc::downgrade(&log));
        Ok((log, report))
    }

    /// What replaying the journal found when this manager started.
    pub fn journal_replay(&self) -> &JournalReplay {
        &self.replayed
    }

    /// Makes the journal's next fsync fail like a dying disk (tests of callers that
    /// must treat a failed flush as fatal for what they wrote). No-op without a journal.
    #[doc(hidden)]
    pub fn fail_next_journal_sync(&self) {
        if let Some(journal) = self.shared.flusher.journal() {
            journal.faults.fail_sync.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Stops like a crash would, as far as the journal goes: no final checkpoint,
    /// no index or producer snapshot written (tests of recovery).
    #[doc(hidden)]
    pub fn stop_without_checkpoint(&self) {
        *self.housekeeper.stop.lock().expect("stop lock") = true;
        self.housekeeper.wake.notify_all();
        if let Some(t) = self.thread.lock().expect("thread lock").take() {
            let _ = t.join();
        }
        self.shared.flusher.shutdown_without_checkpoint();
    }

    /// The cold tier's counters, or `None` without a cold tier.
    pub fn cold_status(&self) -> Option<ColdStatus> {
        self.shared.cold.as_ref().map(|c| c.status())
    }

    /// Flush counters shared by every partition of this manager.
    pub fn stats(&self) -> &FlushStats {
        &self.shared.flusher.stats
    }

    /// Flushes and closes every open partition, then stops the background threads.
    pub fn shutdown(&self) -> Result<()> {
        *self.housekeeper.stop.lock().expect("stop lock") = true;
        self.housekeeper.wake.notify_all();
        if let Some(t) = self.thread.lock().expect("thread lock").take() {
            let _ = t.join();
        }
        let parts: Vec<Arc<PartitionLog>> = self
            .housekeeper
            .partitions
            .lock()
            .expect("partitions lock")
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut first_err = None;
        for p in parts {
            if let Err(e) = p.close() {
                first_err.get_or_insert(e);
            }
        }
        self.shared.flusher.shutdown();
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for LogManager {
    fn drop(&mut self) {
        *self.housekeeper.stop.lock().expect("stop lock") = true;
        self.housekeeper.wake.notify_all();
        self.shared.flusher.shutdown();
    }
}

/// The cold tier asked for: `cold`, or a directory store at `cold_dir`.
fn cold_options(options: &ManagerOptions) -> Result<Option<ColdOptions>> {
    if let Some(c) = &options.cold {
        return Ok(Some(c.clone()));
    }
    let Some(dir) = &options.cold_dir else { return Ok(None) };
    Ok(Some(ColdOptions::new(Arc::new(DirStore::new(dir)?))))
}

/// Accepts a directory marked with today's format, marks a fresh one (durably), and
/// refuses one that holds segments without the marker.
fn check_format(root: &Path) -> Result<()> {
    let path = root.join(FORMAT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if text == FORMAT => return Ok(()),
        Ok(text) => {
            let found = format!("its {FORMAT_FILE} file says {:?}", text.trim());
            return Err(LogError::OldFormat { dir: root.to_owned(), found });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::io(format!("reading {}", path.display()), e)),
    }
    if let Some(found) = unmarked_data(root)? {
        return Err(LogError::OldFormat { dir: root.to_owned(), found });
    }
    files::write_atomic(&path, FORMAT.as_bytes()).ctx(|| format!("writing {}", path.display()))
}

/// Describes the first non-empty segment under `root`, if any: data with no marker.
fn unmarked_data(root: &Path) -> Result<Option<String>> {
    let list = |dir: &Path| std::fs::read_dir(dir).ctx(|| format!("listing {}", dir.display()));
    for partition in list(root)? {
        let partition = partition.ctx(|| format!("listing {}", root.display()))?.path();
        if !partition.is_dir() {
            continue;
        }
        for file in list(&partition)? {
            let file = file.ctx(|| format!("listing {}", partition.display()))?.path();
            let is_segment = file.extension().is_some_and(|e| e == files::LOG_EXT);
            let len = std::fs::metadata(&file).map_or(0, |m| m.len());
            if is_segment && len > 0 {
                return Ok(Some(describe_segment(&file)?));
            }
        }
    }
    Ok(None)
}

/// What the first batch of an unmarked segment says about its format.
fn describe_segment(file: &Path) -> Result<String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(25);
    std::fs::File::open(file)
        .and_then(|f| f.take(25).read_to_end(&mut head))
        .ctx(|| format!("reading {}", file.display()))?;
    // The old layout kept its magic byte (1) at offset 24; a v2 batch keeps 2 at 16.
    let what = match (head.get(24), head.get(16)) {
        (Some(1), _) => "magic 1 batches (the old es layout)".to_owned(),
        (_, Some(m)) => format!("a first batch whose magic byte reads {m}"),
        (_, None) => "a segment too short to hold a batch header".to_owned(),
    };
    Ok(format!("{} holds {what}, and the directory has no {FORMAT_FILE} file", file.display()))
}

fn housekeeping_loop(hk: &Housekeeper, every: Duration) {
    loop {
        {
            let stop = hk.stop.lock().expect("stop lock");
            let (stop, _) = hk.wake.wait_timeout_while(stop, every, |s| !*s).expect("stop lock");
            if *stop {
                return;
            }
        }
        let parts: Vec<Arc<PartitionLog>> = {
            let mut list = hk.partitions.lock().expect("partitions lock");
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for p in parts {
            if let Err(e) = p.housekeeping() {
                tracing::warn!(partition = p.name(), error = %e, "housekeeping failed; will retry next round");
            }
        }
    }
}
