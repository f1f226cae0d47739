//! One run of a raw-disk baseline: one thread writes the workload's batches
//! sequentially to one new file, `batches_per_fsync` of them per write + fdatasync.
//! With one batch per writer per sync this is what perfect group commit would cost;
//! with one batch per sync it is what the log would cost without group commit.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use super::figures::{Counters, RunResult};
use crate::latency;
use crate::timed::{self, Control};
use crate::workload::Workload;

/// Runs the baseline once in a fresh directory under `root`, removed afterwards.
pub fn run(
    label: &str,
    root: &Path,
    workload: &Workload,
    batches_per_fsync: usize,
    duration: Duration,
) -> Result<RunResult> {
    let dir = tempfile::Builder::new()
        .prefix("es-bench-raw-")
        .tempdir_in(root)
        .with_context(|| format!("creating a directory under {}", root.display()))?;
    let path = dir.path().join("raw.log");
    let chunk = workload.batch.repeat(batches_per_fsync);
    let timed = timed::run(label, duration, 1, |_, ctl| sync_loop(&path, &chunk, ctl))?;
    let latency = latency::merge(&timed.results)?;
    let syncs = latency.len();
    Ok(RunResult {
        elapsed: timed.elapsed,
        counters: Counters {
            batches: syncs * batches_per_fsync as u64,
            fsyncs: syncs,
            rounds: syncs,
            checkpoint_fsyncs: 0,
        },
        latency,
        mb_per_s_by_second: timed.mb_per_s_by_second,
    })
}

/// Appends `chunk` to a new file and fdatasyncs it, until told to stop.
fn sync_loop(path: &Path, chunk: &[u8], ctl: &Control) -> Result<Histogram<u64>> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let mut hist = latency::histogram()?;
    while ctl.running() {
        let start = Instant::now();
        file.write_all(chunk).with_context(|| format!("writing {}", path.display()))?;
        file.sync_data().with_context(|| format!("fdatasync of {}", path.display()))?;
        latency::record_since(&mut hist, start);
        ctl.add_bytes(chunk.len());
    }
    Ok(hist)
}
