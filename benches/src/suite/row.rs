//! What one suite row measured, in one shape for every kind of row, so the table,
//! the JSON and the chart treat them alike. MB is 10^6 bytes of log-format data:
//! encoded batches written or read (for HTTP rows, the same records' log size).

use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::latency::{self, Latency};
use crate::log_bench::figures::Figures;
use crate::timed::Timed;

/// One worker's counts.
#[derive(Debug)]
pub struct Tally {
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    /// One entry per request: send until answer.
    pub latency: Histogram<u64>,
    /// Free-form facts a row wants reported (for example how often a reader wrapped).
    pub notes: Vec<String>,
}

impl Tally {
    pub fn new() -> Result<Tally> {
        Ok(Tally { requests: 0, records: 0, bytes: 0, latency: latency::histogram()?, notes: Vec::new() })
    }
}

/// The shape of a row: how many connections, partitions, records per request and
/// requests in flight per connection.
#[derive(Debug, Clone, Serialize)]
pub struct Shape {
    pub kind: &'static str,
    pub connections: usize,
    pub partitions: usize,
    pub records_per_request: usize,
    pub in_flight: usize,
}

/// A threshold from the issue, checked against one figure of the row.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// `records/s`, or a ratio to a baseline row: `vs raw`, `vs none`.
    pub figure: &'static str,
    pub at_least: f64,
    pub value: f64,
    pub met: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SuiteRow {
    pub label: String,
    pub shape: Shape,
    pub elapsed_s: f64,
    pub requests: u64,
    pub records: u64,
    pub bytes: u64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    /// Per request (raw rows: per write + fdatasync), microseconds.
    pub latency: Latency,
    /// MB/s over the raw group-commit baseline's (binary produce rows).
    pub vs_raw: Option<f64>,
    pub target: Option<Target>,
    pub mb_per_s_by_second: Vec<f64>,
    pub notes: Vec<String>,
    /// The machine's load just before the row ran.
    pub load_before: String,
}

impl Target {
    /// A ratio of this row's records/s to a baseline's (`vs ...`), not an absolute rate.
    pub fn is_ratio(&self) -> bool {
        self.figure.starts_with("vs ")
    }
}

impl SuiteRow {
    /// Pools the workers of a timed row.
    pub fn from_timed(label: &str, shape: Shape, timed: Timed<Tally>) -> Result<SuiteRow> {
        let mut requests = 0;
        let mut records = 0;
        let mut bytes = 0;
        let mut notes = Vec::new();
        let mut hists = Vec::with_capacity(timed.results.len());
        for t in timed.results {
            requests += t.requests;
            records += t.records;
            bytes += t.bytes;
            notes.extend(t.notes);
            hists.push(t.latency);
        }
        let hist = latency::merge(&hists)?;
        let secs = secs(timed.elapsed);
        Ok(SuiteRow {
            label: label.to_owned(),
            shape,
            elapsed_s: secs,
            requests,
            records,
            bytes,
            records_per_s: records as f64 / secs,
            mb_per_s: bytes as f64 / 1e6 / secs,
            latency: latency::summarize(&hist),
            vs_raw: None,
            target: None,
            mb_per_s_by_second: timed.mb_per_s_by_second,
            notes,
            load_before: String::new(),
        })
    }

    /// A raw-disk baseline row from the log benchmark's figures.
    pub fn from_raw(label: &str, batches_per_fsync: usize, f: &Figures, by_second: Vec<f64>) -> SuiteRow {
        SuiteRow {
            label: label.to_owned(),
            shape: Shape {
                kind: "raw_disk",
                connections: 1,
                partitions: 1,
                records_per_request: f.records as usize / f.counters.fsyncs.max(1) as usize,
                in_flight: 1,
            },
            elapsed_s: f.elapsed_s,
            requests: f.counters.fsyncs,
            records: f.records,
            bytes: f.bytes,
            records_per_s: f.records_per_s,
            mb_per_s: f.mb_per_s,
            latency: f.latency,
            vs_raw: None,
            target: None,
            mb_per_s_by_second: by_second,
            notes: vec![format!("{batches_per_fsync} batch(es) per write + fdatasync")],
            load_before: String::new(),
        }
    }

    /// The run with the median records/s of several rounds of one row, noting every
    /// round's figure. `runs` is not empty.
    pub fn median_of(mut runs: Vec<SuiteRow>) -> SuiteRow {
        let listed: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.records_per_s)).collect();
        let n = runs.len();
        runs.sort_by(|a, b| a.records_per_s.total_cmp(&b.records_per_s));
        let mut row = runs.swap_remove(n / 2);
        if n > 1 {
            row.notes.push(format!(
                "median of {n} rounds in alternating order; records/s by round: {}",
                listed.join(", ")
            ));
        }
        row
    }

    pub fn set_target(&mut self, figure: &'static str, at_least: f64, value: f64) {
        self.target = Some(Target { figure, at_least, value, met: value >= at_least });
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(records_per_s: f64) -> SuiteRow {
        let shape = Shape {
            kind: "binary_produce",
            connections: 8,
            partitions: 1,
            records_per_request: 500,
            in_flight: 1,
        };
        SuiteRow {
            label: "binary produce 1p x 8c".into(),
            shape,
            elapsed_s: 1.0,
            requests: 0,
            records: 0,
            bytes: 0,
            records_per_s,
            mb_per_s: 0.0,
            latency: Latency::default(),
            vs_raw: None,
            target: None,
            mb_per_s_by_second: Vec::new(),
            notes: Vec::new(),
            load_before: String::new(),
        }
    }

    #[test]
    fn median_of_picks_the_middle_round_and_lists_every_round_in_run_order() {
        let median = SuiteRow::median_of(vec![row(300.0), row(100.0), row(200.0)]);
        assert_eq!(median.records_per_s, 200.0);
        assert_eq!(
            median.notes,
            ["median of 3 rounds in alternating order; records/s by round: 300, 100, 200"]
        );
        let lone = SuiteRow::median_of(vec![row(5.0)]);
        assert_eq!((lone.records_per_s, lone.notes.len()), (5.0, 0));
    }
}
