//! Latency histograms in microseconds and the percentiles the reports print.

use std::time::Instant;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency tracked precisely: one minute. Longer ones saturate.
const MAX_US: u64 = 60_000_000;

/// An empty histogram, 1 us to 60 s, three significant digits.
pub fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_US, 3).context("creating a latency histogram")
}

/// Records the time since `start`.
pub fn record_since(hist: &mut Histogram<u64>, start: Instant) {
    let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    hist.saturating_record(us.max(1));
}

/// Percentiles of one row, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// Merges per-thread histograms into one.
pub fn merge(hists: &[Histogram<u64>]) -> Result<Histogram<u64>> {
    let mut all = histogram()?;
    for h in hists {
        all.add(h).context("merging latency histograms")?;
    }
    Ok(all)
}

/// The percentiles of `hist`.
pub fn summarize(hist: &Histogram<u64>) -> Latency {
    Latency {
        count: hist.len(),
        mean_us: hist.mean(),
        p50_us: hist.value_at_quantile(0.50),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
        max_us: hist.max(),
    }
}
