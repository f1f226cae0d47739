//! A fixed-bucket histogram of atomics, for counters on hot paths (the log's
//! group-commit rounds and fsyncs, request latencies, plugin calls). Observing is
//! one bucket scan and three relaxed atomic adds: no lock, no allocation. Values
//! are integers in the caller's unit (nanoseconds, appends); the exporter scales
//! them when it encodes (`es-server`'s metrics module, at scrape time).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Latency bounds in nanoseconds: 100 µs to 10 s, roughly 1-2.5-5 per decade.
pub const LATENCY_BOUNDS_NS: &[u64] = &[
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Count bounds (appends per round and the like): powers of two to 1024.
pub const COUNT_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// Buckets with inclusive upper bounds, plus one overflow bucket (`+Inf`).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    /// `bounds.len() + 1` counts, not cumulative.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
    count: AtomicU64,
}

/// A consistent-enough copy for an exporter: per-bucket (not cumulative) counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub bounds: &'static [u64],
    pub counts: Vec<u64>,
    pub sum: u64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram { bounds, counts, sum: AtomicU64::new(0), count: AtomicU64::new(0) }
    }

    /// A latency histogram over [`LATENCY_BOUNDS_NS`].
    pub fn latency() -> Histogram {
        Histogram::new(LATENCY_BOUNDS_NS)
    }

    /// A count histogram over [`COUNT_BOUNDS`].
    pub fn counts() -> Histogram {
        Histogram::new(COUNT_BOUNDS)
    }

    pub fn observe(&self, value: u64) {
        let bucket = self.bounds.iter().position(|&b| value <= b).unwrap_or(self.bounds.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observes a duration in nanoseconds (saturating at u64::MAX, some 584 years).
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The buckets' counts are read one by one while others observe, so `count`
    /// is taken as their sum: an exporter never shows a `+Inf` bucket that
    /// disagrees with `_count`.
    pub fn snapshot(&self) -> Snapshot {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let count = counts.iter().sum();
        Snapshot { bounds: self.bounds, counts, sum: self.sum.load(Ordering::Relaxed), count }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::new(&[1, 10]);
        for v in [0, 1, 2, 10, 11, 1_000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 2]);
        assert_eq!((s.count, s.sum), (6, 1_024));
    }

    #[test]
    fn durations_are_nanoseconds() {
        let h = Histogram::latency();
        h.observe_duration(Duration::from_micros(300));
        h.observe_duration(Duration::from_secs(20));
        let s = h.snapshot();
        assert_eq!(s.counts[2], 1, "300 µs is under the 500 µs bound");
        assert_eq!(s.counts[LATENCY_BOUNDS_NS.len()], 1, "20 s overflows");
        assert_eq!(s.sum, 20_000_300_000);
    }
}
