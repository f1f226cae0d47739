//! The log manager: one per data directory (one per disk). It owns the flusher
//! thread every partition shares, the open-file budget, the clock, and a background
//! thread that runs retention, tiering and compaction.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use es_core::{Clock, SystemClock};

use crate::config::LogConfig;
use crate::error::{LogError, Result};
use crate::flusher::{FlushStats, Flusher};
use crate::open_files::OpenFiles;
use crate::partition::{PartitionLog, RecoveryReport};

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Where expired segments go when a topic has the cold tier on.
    pub cold_dir: Option<PathBuf>,
    pub open_segment_files_max: usize,
    /// How often retention and compaction run; `None` disables the background thread.
    pub housekeeping_interval: Option<Duration>,
    pub clock: Arc<dyn Clock>,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            cold_dir: None,
            open_segment_files_max: es_core::limits::OPEN_SEGMENT_FILES_MAX_DEFAULT,
            housekeeping_interval: Some(Duration::from_secs(30)),
            clock: Arc::new(SystemClock),
        }
    }
}

pub(crate) struct Shared {
    pub flusher: Arc<Flusher>,
    pub open_files: Arc<OpenFiles>,
    pub clock: Arc<dyn Clock>,
}

struct Housekeeper {
    stop: Mutex<bool>,
    wake: Condvar,
    partitions: Mutex<Vec<Weak<PartitionLog>>>,
}

pub struct LogManager {
    root: PathBuf,
    cold_dir: Option<PathBuf>,
    shared: Arc<Shared>,
    housekeeper: Arc<Housekeeper>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogManager").field("root", &self.root).finish()
    }
}

impl LogManager {
    pub fn new(root: impl Into<PathBuf>, options: ManagerOptions) -> Result<LogManager> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|e| LogError::io(format!("creating {}", root.display()), e))?;
        let shared = Arc::new(Shared {
            flusher: Flusher::start(),
            open_files: OpenFiles::new(options.open_segment_files_max),
            clock: options.clock.clone(),
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
        Ok(LogManager { root, cold_dir: options.cold_dir, shared, housekeeper, thread: Mutex::new(thread) })
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
        let cold = self.cold_dir.as_ref().map(|c| c.join(name));
        let (log, report) =
            PartitionLog::open(name.to_owned(), self.root.join(name), cold, config, self.shared.clone())?;
        self.housekeeper.partitions.lock().expect("partitions lock").push(Arc::downgrade(&log));
        Ok((log, report))
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
