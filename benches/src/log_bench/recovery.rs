//! `es-bench log-recovery`: how long a start takes after a crash left a large
//! journal to replay. Writers append until the journal holds `--mib` MiB, then the
//! log stops without a checkpoint: the files are left exactly as a kill -9 leaves
//! them (journal synced, segments written behind but not synced). The time measured
//! is `LogManager::new` (the replay, segment syncs included) plus opening every
//! partition. `--lose-write-behind` also empties the segment files first, as if no
//! written-behind byte had reached the disk, so every batch comes from the journal.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use es_core::LeaderEpoch;
use es_log::{LogConfig, LogManager, ManagerOptions, PartitionLog};
use serde::Serialize;

use crate::workload::Workload;

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct RecoveryArgs {
    /// MiB of journal to leave for the replay (the journal file is sized to hold it).
    #[arg(long, default_value_t = 1024)]
    pub mib: u64,
    #[arg(long, default_value_t = 64)]
    pub partitions: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Empty every segment file before the restart (worst case: all from the journal).
    #[arg(long)]
    pub lose_write_behind: bool,
    /// Directory for the run's temporary directory [default: ./target/bench-tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn run(args: &RecoveryArgs) -> Result<()> {
    ensure!(
        args.mib >= 1 && args.partitions >= 1 && args.batch >= 1,
        "--mib, --partitions and --batch must be >= 1"
    );
    let root = args.dir.clone().unwrap_or_else(|| PathBuf::from(super::DEFAULT_DIR));
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let dir = tempfile::Builder::new().prefix("es-bench-recovery-").tempdir_in(&root)?;
    let workload = Workload::encode(args.batch, args.record_bytes)?;
    let options = ManagerOptions {
        housekeeping_interval: None,
        journal_file_bytes: args.mib * MIB + 64 * MIB,
        ..ManagerOptions::default()
    };
    let started = Instant::now();
    fill(dir.path(), &options, args, &workload)?;
    println!(
        "wrote {} MiB through the journal in {:.1?}; stopped without a checkpoint",
        args.mib,
        started.elapsed()
    );
    if args.lose_write_behind {
        empty_segments(dir.path())?;
        println!("emptied every segment file: the replay must append every batch");
    }
    let cache = drop_page_cache();
    println!("page cache before the restart: {cache}");
    let t0 = Instant::now();
    let manager = LogManager::new(dir.path(), options).context("restarting the log")?;
    let replay_time = t0.elapsed();
    let config = config(&workload);
    for i in 0..args.partitions {
        manager.open_partition(&format!("p{i}"), config.clone())?;
    }
    let total = t0.elapsed();
    let r = manager.journal_replay();
    println!(
        "replayed {:.0} MiB of journal ({} records, {} batches appended, {} partitions) in {:.2} s ({:.0} MB/s); \
         with every partition opened: {:.2} s",
        r.bytes as f64 / MIB as f64,
        r.records,
        r.appended,
        r.partitions,
        replay_time.as_secs_f64(),
        r.bytes as f64 / 1e6 / replay_time.as_secs_f64().max(1e-9),
        total.as_secs_f64()
    );
    manager.shutdown()?;
    Ok(())
}

fn config(w: &Workload) -> LogConfig {
    let d = LogConfig::default();
    LogConfig {
        batch_bytes_max: d.batch_bytes_max.max(w.batch_bytes()),
        record_bytes_max: d.record_bytes_max.max(w.batch_bytes()),
        ..d
    }
}

/// One writer per partition appends (waiting for each) until the journal holds the target.
fn fill(dir: &Path, options: &ManagerOptions, args: &RecoveryArgs, w: &Workload) -> Result<()> {
    let manager = LogManager::new(dir, options.clone())?;
    let logs: Vec<Arc<PartitionLog>> = (0..args.partitions)
        .map(|i| Ok(manager.open_partition(&format!("p{i}"), config(w))?.0))
        .collect::<Result<_>>()?;
    let written = AtomicU64::new(0);
    let target = args.mib * MIB;
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = logs
            .iter()
            .map(|log| {
                let written = &written;
                s.spawn(move || -> Result<()> {
                    while written.load(Ordering::Relaxed) < target {
                        log.append(w.batch.clone(), LeaderEpoch::INITIAL)?.wait()?;
                        written.fetch_add(w.batch.len() as u64, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().expect("writer thread"))
    })?;
    manager.stop_without_checkpoint();
    Ok(())
}

fn empty_segments(dir: &Path) -> Result<()> {
    for part in std::fs::read_dir(dir)? {
        let part = part?.path();
        if !part.is_dir() || part.ends_with(es_log::JOURNAL_DIR) {
            continue;
        }
        for f in std::fs::read_dir(&part)? {
            let f = f?.path();
            if f.extension().is_some_and(|e| e == "log") {
                std::fs::OpenOptions::new().write(true).open(&f)?.set_len(0)?;
            }
        }
    }
    Ok(())
}

/// Writes dirty pages and drops the page cache when allowed (root, not in a
/// read-only /proc), so the replay reads the journal from the disk.
fn drop_page_cache() -> String {
    rustix::fs::sync();
    match std::fs::write("/proc/sys/vm/drop_caches", "3\n") {
        Ok(()) => "dropped (the journal is read from the disk)".into(),
        Err(e) => format!("not dropped ({e}); the journal may be read from memory"),
    }
}
