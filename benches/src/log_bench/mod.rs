//! `es-bench log`: partition log throughput and append latency with fsync on, next
//! to raw write + fdatasync baselines on the same filesystem, in one run.

pub(crate) mod figures;
mod log_row;
mod plan;
pub(crate) mod raw_row;
pub(crate) mod recovery;
mod table;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use crate::machine::Machine;
use crate::report;
use crate::workload::Workload;
use plan::{Row, RowSpec};

/// The log should reach this fraction of the group-commit-sized raw baseline.
const TARGET_RATIO: f64 = 0.8;
/// Where rows write when `--dir` is not given: on the build disk, not /tmp (often tmpfs).
pub(crate) const DEFAULT_DIR: &str = "target/bench-tmp";

#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct LogArgs {
    /// Partition counts to run, one row each (writers spread round-robin).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub partitions: Vec<usize>,
    /// Writer threads; each appends one batch and waits for it to be durable.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Give a row max(--writers, partitions) writers, so every partition has one.
    #[arg(long)]
    pub writers_follow_partitions: bool,
    /// Journal modes to run, one row each per partition count, e.g. on,always,off:
    /// `on` is the broker's default (a round of one partition syncs its segment when
    /// safe), `always` sends every round through the journal, `fresh` is `on`
    /// without recycling (each rotation preallocates a new file), `off` has none.
    #[arg(long, value_delimiter = ',', default_value = "on", value_parser = parse_journal)]
    pub journal: Vec<JournalMode>,
    /// Records per batch.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Value size of each record, in bytes.
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Duration of each row, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Run every row this many times, alternating the row order, and pool the results.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Directory for the rows' fresh temporary directories [default: ./target/bench-tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write every figure, the machine and the command line to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl LogArgs {
    fn validate(&self) -> Result<()> {
        ensure!(!self.partitions.is_empty(), "--partitions needs at least one count");
        ensure!(!self.journal.is_empty(), "--journal needs on, always, fresh or off");
        ensure!(self.partitions.iter().all(|&p| p >= 1), "--partitions counts must be at least 1");
        ensure!(self.writers >= 1, "--writers must be at least 1");
        ensure!(self.batch >= 1, "--batch must be at least 1");
        ensure!(self.rounds >= 1, "--rounds must be at least 1");
        ensure!(self.seconds.is_finite() && self.seconds > 0.0, "--seconds must be positive");
        Ok(())
    }
}

/// How a log row uses the per-disk journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalMode {
    /// The default: the journal, with a lone partition's round syncing its segment.
    On,
    /// Every round through the journal.
    Always,
    /// `On`, but a checkpointed journal file is deleted and each rotation
    /// preallocates a new one (the broker recycles them).
    Fresh,
    /// No journal: one fdatasync per dirty segment per round.
    Off,
}

impl JournalMode {
    pub fn label(self) -> &'static str {
        match self {
            JournalMode::On => "journal",
            JournalMode::Always => "journal always",
            JournalMode::Fresh => "journal fresh files",
            JournalMode::Off => "no journal",
        }
    }
}

fn parse_journal(s: &str) -> Result<JournalMode, String> {
    match s {
        "on" => Ok(JournalMode::On),
        "always" => Ok(JournalMode::Always),
        "fresh" => Ok(JournalMode::Fresh),
        "off" => Ok(JournalMode::Off),
        other => Err(format!("expected on, always, fresh or off, got {other:?}")),
    }
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
struct LogReport<'a> {
    benchmark: &'static str,
    command_line: String,
    started_utc: String,
    finished_utc: String,
    args: &'a LogArgs,
    machine: &'a Machine,
    records_per_batch: usize,
    record_bytes: usize,
    batch_bytes: usize,
    target_ratio: f64,
    rows: &'a [Row],
}

pub fn run(args: &LogArgs) -> Result<()> {
    args.validate()?;
    let started_utc = report::utc_now();
    let root = prepare_root(args.dir.as_deref())?;
    let mut machine = Machine::probe(&root);
    let workload = Workload::encode(args.batch, args.record_bytes)?;
    print_header(args, &machine, &workload);
    let specs = plan::rows(&args.partitions, args.writers, &args.journal, args.writers_follow_partitions);
    let duration = Duration::from_secs_f64(args.seconds);
    let rows = plan::run_all(&specs, args.rounds, &root, &workload, duration)?;
    machine.note_end();
    println!();
    print!("{}", table::render(&rows));
    print_verdict(&rows, &machine);
    let Some(path) = &args.json else {
        return Ok(());
    };
    let report = LogReport {
        benchmark: "log",
        command_line: report::command_line(),
        started_utc,
        finished_utc: report::utc_now(),
        args,
        machine: &machine,
        records_per_batch: workload.records_per_batch,
        record_bytes: workload.record_bytes,
        batch_bytes: workload.batch_bytes(),
        target_ratio: TARGET_RATIO,
        rows: &rows,
    };
    report::write_json(path, &report)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Creates the benchmark directory and returns its absolute path.
fn prepare_root(dir: Option<&Path>) -> Result<PathBuf> {
    let dir = dir.unwrap_or(Path::new(DEFAULT_DIR));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))
}

fn print_header(args: &LogArgs, machine: &Machine, w: &Workload) {
    let fs = &machine.filesystem;
    println!("es-bench log: {}", report::command_line());
    println!(
        "machine: {} CPUs, {} MiB, {}",
        machine.nproc,
        machine.mem_total_mib.unwrap_or(0),
        machine.kernel.as_deref().unwrap_or("unknown kernel")
    );
    println!("at start: {}", machine.load_start.describe());
    println!("data directory: {} ({})", fs.path.display(), fs.describe());
    if fs.is_memory_backed() {
        println!(
            "WARNING: this filesystem is memory-backed; fsync reaches no disk and the figures mean nothing"
        );
    }
    println!(
        "workload: batches of {} records x {} B values = {} B encoded, {} writers, {} s per row, {} round(s)",
        w.records_per_batch,
        w.record_bytes,
        w.batch_bytes(),
        args.writers,
        args.seconds,
        args.rounds
    );
}

/// The target check per log row, with each round's ratio when there were several.
fn print_verdict(rows: &[Row], machine: &Machine) {
    println!();
    for row in rows.iter().filter(|r| matches!(r.spec, RowSpec::Log { .. })) {
        let ratio = row.vs_raw.unwrap_or(0.0);
        let met = if ratio >= TARGET_RATIO { "met" } else { "NOT met" };
        let f = &row.figures;
        println!(
            "{}: {ratio:.2} of raw (target >= {TARGET_RATIO}: {met}); {} appends in {} fsyncs ({:.2} per fsync, {:.2} per flusher round); {} checkpoint segment syncs",
            row.label,
            f.counters.batches,
            f.counters.fsyncs,
            f.batches_per_fsync,
            f.batches_per_round,
            f.counters.checkpoint_fsyncs,
        );
        if row.rounds.len() > 1 {
            let each: Vec<String> =
                row.rounds.iter().map(|r| format!("{:.2}", r.vs_raw.unwrap_or(0.0))).collect();
            println!("    ratio by round: {}", each.join(", "));
        }
    }
    if let Some(end) = &machine.load_end {
        println!("at end: {}", end.describe());
    }
}
