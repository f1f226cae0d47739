//! One run of a log row: `writers` threads append the same pre-encoded batch
//! round-robin over `partitions` partitions of a fresh [`LogManager`], timing each
//! append from the call until it is durable.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use es_core::LeaderEpoch;
use es_log::{FlushStats, LogConfig, LogManager, ManagerOptions, PartitionLog};
use hdrhistogram::Histogram;

use super::JournalMode;
use super::figures::{Counters, RunResult};
use crate::latency;
use crate::timed::{self, Control};
use crate::workload::Workload;

/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

/// The flusher counters, read before and after a run.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    rounds: u64,
    fsyncs: u64,
    appends: u64,
    checkpoint_fsyncs: u64,
}

impl Snapshot {
    fn take(s: &FlushStats) -> Snapshot {
        Snapshot {
            rounds: s.rounds.load(Ordering::Relaxed),
            fsyncs: s.fsyncs.load(Ordering::Relaxed),
            appends: s.appends.load(Ordering::Relaxed),
            checkpoint_fsyncs: s.checkpoint_fsyncs.load(Ordering::Relaxed),
        }
    }
}

/// A log row's partitions, writers and journal mode.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub partitions: usize,
    pub writers: usize,
    pub journal: JournalMode,
}

/// Runs the row once in a fresh directory under `root`, removed afterwards.
pub fn run(
    label: &str,
    root: &Path,
    workload: &Workload,
    shape: Shape,
    duration: Duration,
) -> Result<RunResult> {
    let Shape { partitions, writers, journal } = shape;
    let dir = tempfile::Builder::new()
        .prefix("es-bench-log-")
        .tempdir_in(root)
        .with_context(|| format!("creating a directory under {}", root.display()))?;
    let options = ManagerOptions {
        housekeeping_interval: None,
        journal: journal != JournalMode::Off,
        journal_bypass: matches!(journal, JournalMode::On | JournalMode::Fresh),
        journal_recycle: journal != JournalMode::Fresh,
        ..ManagerOptions::default()
    };
    let manager = LogManager::new(dir.path(), options).context("starting the log manager")?;
    let logs = open_partitions(&manager, partitions, workload.batch_bytes())?;
    let before = Snapshot::take(manager.stats());
    let timed = timed::run(label, duration, writers, |i, ctl| {
        append_loop(&logs[i % logs.len()], &workload.batch, ctl)
    })?;
    let after = Snapshot::take(manager.stats());
    // The directory is deleted next: skip the clean close (index, producer snapshot
    // and checkpoint fsyncs for every partition), which is not measured anyway.
    manager.stop_without_checkpoint();
    Ok(RunResult {
        elapsed: timed.elapsed,
        counters: Counters {
            // Every append was awaited, so this equals the writers' own count.
            batches: after.appends - before.appends,
            fsyncs: after.fsyncs - before.fsyncs,
            rounds: after.rounds - before.rounds,
            checkpoint_fsyncs: after.checkpoint_fsyncs - before.checkpoint_fsyncs,
        },
        latency: latency::merge(&timed.results)?,
        mb_per_s_by_second: timed.mb_per_s_by_second,
    })
}

/// Opens `p0..pN` with a batch limit that admits the workload's batch.
fn open_partitions(manager: &LogManager, count: usize, batch_bytes: usize) -> Result<Vec<Arc<PartitionLog>>> {
    let defaults = LogConfig::default();
    let config = LogConfig {
        batch_bytes_max: defaults.batch_bytes_max.max(batch_bytes),
        record_bytes_max: defaults.record_bytes_max.max(batch_bytes),
        ..defaults
    };
    (0..count)
        .map(|i| {
            let name = format!("p{i}");
            let (log, _) = manager
                .open_partition(&name, config.clone())
                .with_context(|| format!("opening partition {name}"))?;
            Ok(log)
        })
        .collect()
}

/// Appends copies of `batch` and waits for each to be durable, until told to stop.
fn append_loop(log: &PartitionLog, batch: &[u8], ctl: &Control) -> Result<Histogram<u64>> {
    let mut hist = latency::histogram()?;
    while ctl.running() {
        let bytes = batch.to_vec();
        let start = Instant::now();
        log.append(bytes, EPOCH)
            .with_context(|| format!("appending to {}", log.name()))?
            .wait()
            .with_context(|| format!("waiting for an append to {} to be durable", log.name()))?;
        latency::record_since(&mut hist, start);
        ctl.add_bytes(batch.len());
    }
    Ok(hist)
}
