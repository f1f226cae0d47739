//! The rows of `es-bench log` and the order they run in. With several rounds the
//! order alternates forward and backward (A B C D, D C B A, ...) so slow drift of
//! the disk or of the machine's load hits every row alike.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::JournalMode;
use super::figures::{Figures, RunResult};
use super::{log_row, raw_row};
use crate::workload::Workload;

/// What one row measures.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RowSpec {
    /// One thread, `batches_per_fsync` batches per write + fdatasync.
    Raw { batches_per_fsync: usize },
    /// `writers` threads appending to `partitions` partitions of the log, with the
    /// per-disk journal on (one fdatasync per round), always or off (one per segment).
    Log { partitions: usize, writers: usize, journal: JournalMode },
}

impl RowSpec {
    pub fn label(&self) -> String {
        match self {
            RowSpec::Raw { batches_per_fsync } => format!("raw {batches_per_fsync} batch/fdatasync"),
            RowSpec::Log { partitions, writers, journal } => {
                format!("log {partitions}p x {writers}w {}", journal.label())
            }
        }
    }

    fn run(&self, label: &str, root: &Path, w: &Workload, duration: Duration) -> Result<RunResult> {
        match *self {
            RowSpec::Raw { batches_per_fsync } => raw_row::run(label, root, w, batches_per_fsync, duration),
            RowSpec::Log { partitions, writers, journal } => {
                log_row::run(label, root, w, log_row::Shape { partitions, writers, journal }, duration)
            }
        }
    }
}

/// A row's figures pooled over every round, and each round's own.
#[derive(Debug, Serialize)]
pub struct Row {
    pub label: String,
    pub spec: RowSpec,
    pub figures: Figures,
    /// The median over rounds of each round's records/s.
    pub median_records_per_s: f64,
    /// MB/s over the first row's (the group-commit-sized raw baseline); log rows only.
    pub vs_raw: Option<f64>,
    pub rounds: Vec<RoundFigures>,
}

#[derive(Debug, Serialize)]
pub struct RoundFigures {
    pub round: usize,
    /// Where in its round this row ran (0 = first).
    pub position: usize,
    pub figures: Figures,
    pub vs_raw: Option<f64>,
    pub mb_per_s_by_second: Vec<f64>,
}

/// The baselines first (the ratios divide by the first one), then one log row per
/// partition count and journal mode, the modes of one count next to each other (so
/// the alternating order runs them back to back). With `writers_follow`, a row has
/// max(writers, partitions) writers, so every partition has one.
pub fn rows(
    partitions: &[usize],
    writers: usize,
    journals: &[JournalMode],
    writers_follow: bool,
) -> Vec<RowSpec> {
    let mut specs = vec![RowSpec::Raw { batches_per_fsync: writers }];
    if writers > 1 {
        specs.push(RowSpec::Raw { batches_per_fsync: 1 });
    }
    for &p in partitions {
        let writers = if writers_follow { writers.max(p) } else { writers };
        specs.extend(journals.iter().map(|&journal| RowSpec::Log { partitions: p, writers, journal }));
    }
    specs
}

/// Runs every row `rounds` times and pools the results per row.
pub fn run_all(
    specs: &[RowSpec],
    rounds: usize,
    root: &Path,
    w: &Workload,
    duration: Duration,
) -> Result<Vec<Row>> {
    let mut runs: Vec<Vec<(usize, RunResult)>> = specs.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (position, i) in order(specs.len(), round).enumerate() {
            let mut label = specs[i].label();
            if rounds > 1 {
                label = format!("{label} [{}/{rounds}]", round + 1);
            }
            runs[i].push((position, specs[i].run(&label, root, w, duration)?));
        }
    }
    let mut rows =
        specs.iter().zip(&runs).map(|(spec, runs)| pool(*spec, runs, w)).collect::<Result<Vec<Row>>>()?;
    add_ratios(&mut rows);
    Ok(rows)
}

/// Forward on even rounds, backward on odd ones.
fn order(len: usize, round: usize) -> Box<dyn Iterator<Item = usize>> {
    if round.is_multiple_of(2) { Box::new(0..len) } else { Box::new((0..len).rev()) }
}

fn pool(spec: RowSpec, runs: &[(usize, RunResult)], w: &Workload) -> Result<Row> {
    let all: Vec<&RunResult> = runs.iter().map(|(_, r)| r).collect();
    let rounds = runs
        .iter()
        .enumerate()
        .map(|(round, (position, r))| {
            Ok(RoundFigures {
                round,
                position: *position,
                figures: Figures::pool(&[r], w)?,
                vs_raw: None,
                mb_per_s_by_second: r.mb_per_s_by_second.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut each: Vec<f64> = rounds.iter().map(|r| r.figures.records_per_s).collect();
    each.sort_by(f64::total_cmp);
    let median_records_per_s = each.get(each.len() / 2).copied().unwrap_or(0.0);
    Ok(Row {
        label: spec.label(),
        spec,
        figures: Figures::pool(&all, w)?,
        median_records_per_s,
        vs_raw: None,
        rounds,
    })
}

/// Log rows' MB/s over the first row's, pooled and round by round.
fn add_ratios(rows: &mut [Row]) {
    let Some((base, rest)) = rows.split_first_mut() else {
        return;
    };
    let ratio = |a: &Figures, b: &Figures| a.mb_per_s / b.mb_per_s.max(1e-9);
    for row in rest.iter_mut().filter(|r| matches!(r.spec, RowSpec::Log { .. })) {
        row.vs_raw = Some(ratio(&row.figures, &base.figures));
        for (r, b) in row.rounds.iter_mut().zip(&base.rounds) {
            r.vs_raw = Some(ratio(&r.figures, &b.figures));
        }
    }
}
