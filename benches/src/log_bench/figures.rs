//! What one run of a row measured, and the figures reported for a row, computed
//! the same way for log and raw rows so the table and the ratio compare like with
//! like. A row's figures pool every round it ran in.

use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::latency::{self, Latency};
use crate::workload::Workload;

/// Counts over one run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counters {
    /// Batches acknowledged durable (log) or written and synced (raw).
    pub batches: u64,
    pub fsyncs: u64,
    /// Flusher rounds (log); equal to `fsyncs` for raw rows.
    pub rounds: u64,
    /// Segment syncs of journal checkpoints, outside the append path (log rows).
    pub checkpoint_fsyncs: u64,
}

impl Counters {
    fn add(self, o: Counters) -> Counters {
        Counters {
            batches: self.batches + o.batches,
            fsyncs: self.fsyncs + o.fsyncs,
            rounds: self.rounds + o.rounds,
            checkpoint_fsyncs: self.checkpoint_fsyncs + o.checkpoint_fsyncs,
        }
    }
}

/// One timed run of a row.
#[derive(Debug)]
pub struct RunResult {
    pub elapsed: Duration,
    pub counters: Counters,
    /// Log rows: append call to durable. Raw rows: one write + fdatasync.
    pub latency: Histogram<u64>,
    pub mb_per_s_by_second: Vec<f64>,
}

/// Throughput and latency. MB is 10^6 bytes of encoded batches.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub elapsed_s: f64,
    pub counters: Counters,
    pub records: u64,
    pub bytes: u64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub fsyncs_per_s: f64,
    pub batches_per_fsync: f64,
    pub batches_per_round: f64,
    pub latency: Latency,
}

impl Figures {
    /// Pools `runs`: total work over total time, latencies merged.
    pub fn pool(runs: &[&RunResult], workload: &Workload) -> Result<Figures> {
        let elapsed: Duration = runs.iter().map(|r| r.elapsed).sum();
        let c = runs.iter().fold(Counters::default(), |a, r| a.add(r.counters));
        let mut hist = latency::histogram()?;
        for r in runs {
            hist.add(&r.latency).context("merging latency histograms")?;
        }
        let secs = elapsed.as_secs_f64().max(1e-9);
        let records = c.batches * workload.records_per_batch as u64;
        let bytes = c.batches * workload.batch_bytes() as u64;
        Ok(Figures {
            elapsed_s: secs,
            counters: c,
            records,
            bytes,
            records_per_s: records as f64 / secs,
            mb_per_s: bytes as f64 / 1e6 / secs,
            fsyncs_per_s: c.fsyncs as f64 / secs,
            batches_per_fsync: c.batches as f64 / (c.fsyncs as f64).max(1.0),
            batches_per_round: c.batches as f64 / (c.rounds as f64).max(1.0),
            latency: latency::summarize(&hist),
        })
    }
}
