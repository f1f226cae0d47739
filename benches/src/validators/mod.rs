//! `es-bench validators`: the throughput cost of record validators (issue 4). One
//! broker, one topic per row, the same load on every row (keyed 256-byte JSON
//! records that every validator accepts, fsync on), rows interleaved in rounds so
//! the disk's swings hit every row alike; medians per row, the ratio to the row
//! without a validator, and PASS/MISS against the targets.

mod cases;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use crate::machine::{Load, Machine};
use crate::report;
use crate::suite::row::SuiteRow;
use crate::suite::{self, table};
use crate::workload::Workload;
use cases::{Case, Setup};

#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct ValidatorsArgs {
    /// Duration of each row in each round, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Rounds; every row runs once per round, in alternating order, and reports the
    /// median over rounds.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Untimed produce before the first round, per row, in seconds (warms instances).
    #[arg(long, default_value_t = 1.0)]
    pub warmup_seconds: f64,
    /// Value size of each record, in bytes (a JSON object padded to this size).
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Records per produce request.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Clients: binary connections, or HTTP clients, one request in flight each.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Partitions of every topic.
    #[arg(long, default_value_t = 4)]
    pub partitions: usize,
    /// The Python example (`plugins/examples/build.sh OUTDIR` builds
    /// OUTDIR/example_python.wasm); its row is left out without it.
    #[arg(long)]
    pub python_wasm: Option<PathBuf>,
    /// The JavaScript example (OUTDIR/example_js.wasm); its row is left out without it.
    #[arg(long)]
    pub js_wasm: Option<PathBuf>,
    /// Per-call deadline of the uploaded examples (a batch of 500 takes them
    /// milliseconds; the default 20 ms is too tight on a loaded machine).
    #[arg(long, default_value_t = 5000)]
    pub plugin_deadline_ms: u64,
    /// Leave out the HTTP pair (no validator, rules).
    #[arg(long)]
    pub no_http: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub place: suite::Place,
}

impl ValidatorsArgs {
    fn validate(&self) -> Result<()> {
        suite::check_seconds(self.seconds)?;
        ensure!(
            self.warmup_seconds.is_finite() && self.warmup_seconds >= 0.0,
            "--warmup-seconds must be >= 0"
        );
        ensure!((1..=20).contains(&self.rounds), "--rounds is 1 to 20");
        ensure!(
            self.batch >= 1 && self.clients >= 1 && self.partitions >= 1,
            "batch, clients, partitions >= 1"
        );
        ensure!(self.plugin_deadline_ms >= 1, "--plugin-deadline-ms must be at least 1");
        Ok(())
    }
}

/// One row's figures over every round.
#[derive(Debug, Serialize)]
pub struct ValidatorRow {
    pub label: String,
    pub protocol: &'static str,
    /// The `PUT /topics/{t}/validators` body's `validators`, or none.
    pub validators: serde_json::Value,
    pub topic: String,
    /// Medians over the rounds (records/s, MB/s, p50, p99); totals for counts.
    pub median: SuiteRow,
    pub rounds: Vec<SuiteRow>,
    /// records/s over the same round's row without a validator (same protocol).
    pub vs_none_by_round: Vec<f64>,
    pub vs_none: Option<f64>,
    /// The bound on the throughput lost: 1 - vs_none <= max_cost.
    pub max_cost: Option<f64>,
    pub verdict: Option<&'static str>,
    /// What the broker counted for the topic's validators (`GET .../validators`).
    pub broker_counters: serde_json::Value,
    pub cpu_by_round: Vec<CpuPerRecord>,
    /// Medians over the rounds, nanoseconds of CPU per record written.
    pub broker_cpu_ns_per_record: Option<f64>,
    pub clients_cpu_ns_per_record: Option<f64>,
    /// The broker's CPU per record over the baseline row's: what validating costs.
    pub broker_cpu_over_none: Option<f64>,
    /// The baseline row's CPU per record, broker and clients together.
    pub baseline_cpu_ns_per_record: Option<f64>,
}

#[derive(Debug, Serialize)]
struct ValidatorsReport<'a> {
    benchmark: &'static str,
    command_line: String,
    started_utc: String,
    finished_utc: String,
    args: &'a ValidatorsArgs,
    machine: &'a Machine,
    broker_bin: PathBuf,
    broker_stopped_cleanly: bool,
    batch_bytes: usize,
    /// Seconds the broker took to accept each uploaded example (compile included).
    uploads: &'a [cases::Upload],
    rows: &'a [ValidatorRow],
}

pub fn run(args: &ValidatorsArgs) -> Result<()> {
    args.validate()?;
    let started_utc = report::utc_now();
    let root = args.place.root()?;
    let out = args.place.out_dir(&started_utc)?;
    let mut machine = Machine::probe(&root);
    let w = Workload::encode_json(args.batch, args.record_bytes)?;
    suite::print_machine("validators", &machine);
    println!(
        "workload: keyed {} B JSON values, fsync on; {} clients x batches of {} records ({} B encoded) over {} partitions; {} round(s) x {} s per row",
        args.record_bytes,
        args.clients,
        w.records_per_batch,
        w.batch_bytes(),
        args.partitions,
        args.rounds,
        args.seconds
    );

    let run_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (broker, bin) =
        suite::start_broker(args.place.broker_bin.as_deref(), &root, &format!("validators-broker-{run_id}"))?;
    let url = broker.url.trim_end_matches('/').to_owned();
    let rt = suite::runtime()?;
    let result = (|| {
        let setup = Setup::prepare(&rt, args, &broker.binary_addr, &url, run_id, &w)?;
        let rows = measure(args, &setup, broker.pid(), &root)?;
        Ok::<_, anyhow::Error>((rows, setup.uploads))
    })();
    rt.shutdown_timeout(Duration::from_secs(5));
    // Stop and clean up whether or not the rows worked.
    let clean = suite::stop_broker(broker, args.place.keep_data)?;
    let (rows, uploads) = result?;
    machine.note_end();

    println!();
    print!("{}", render(&rows));
    print_verdicts(&rows, &machine);
    let report = ValidatorsReport {
        benchmark: "validators",
        command_line: report::command_line(),
        started_utc: started_utc.clone(),
        finished_utc: report::utc_now(),
        args,
        machine: &machine,
        broker_bin: bin,
        broker_stopped_cleanly: clean,
        batch_bytes: w.batch_bytes(),
        uploads: &uploads,
        rows: &rows,
    };
    let json = out.join("validators.json");
    report::write_json(&json, &report)?;
    println!("wrote {}", json.display());
    let medians: Vec<SuiteRow> = rows.iter().map(|r| r.median.clone()).collect();
    suite::draw_chart(&out.join("validators.png"), "validators", &started_utc, &machine, &medians)
}

/// Warm-up, then the rounds: forward order in odd rounds, backward in even ones.
/// Each row's CPU time (the broker's, and this process's: the clients) is read
/// from /proc around it.
fn measure(
    args: &ValidatorsArgs,
    setup: &Setup<'_>,
    broker_pid: Option<u32>,
    root: &std::path::Path,
) -> Result<Vec<ValidatorRow>> {
    let cases = &setup.cases;
    if args.warmup_seconds > 0.0 {
        let d = Duration::from_secs_f64(args.warmup_seconds);
        for case in cases {
            setup.run_case(case, &format!("warm-up {}", case.label), d)?;
        }
    }
    let d = Duration::from_secs_f64(args.seconds);
    let mut by_case: Vec<Vec<SuiteRow>> = cases.iter().map(|_| Vec::new()).collect();
    let mut cpu_by_case: Vec<Vec<CpuPerRecord>> = cases.iter().map(|_| Vec::new()).collect();
    let broker_proc = broker_pid.map(|p| p.to_string());
    for round in 0..args.rounds {
        let order: Vec<usize> =
            if round % 2 == 0 { (0..cases.len()).collect() } else { (0..cases.len()).rev().collect() };
        for i in order {
            let case = &cases[i];
            crate::machine::ensure_free_space(
                root,
                row_bytes_bound(args.seconds),
                &format!("row {}", case.label),
            )?;
            let load = Load::now().describe();
            let before = (broker_proc.as_deref().and_then(cpu_ns), cpu_ns("self"));
            let mut row =
                setup.run_case(case, &format!("{}/{} {}", round + 1, args.rounds, case.label), d)?;
            let after = (broker_proc.as_deref().and_then(cpu_ns), cpu_ns("self"));
            let per_record = |b: Option<u64>, a: Option<u64>| {
                Some(a?.saturating_sub(b?) as f64 / (row.records.max(1) as f64))
            };
            cpu_by_case[i].push(CpuPerRecord {
                broker_ns: per_record(before.0, after.0),
                clients_ns: per_record(before.1, after.1),
            });
            row.load_before = load;
            by_case[i].push(row);
        }
    }
    cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let baseline = case.baseline.map(|b| (&by_case[b][..], &cpu_by_case[b][..]));
            summarize(case, (&by_case[i], &cpu_by_case[i]), baseline, setup)
        })
        .collect()
}

/// What one row of `seconds` may write at most: this machine's disk takes well
/// under 1 GiB/s, so that bound leaves room.
pub fn row_bytes_bound(seconds: f64) -> u64 {
    (seconds.max(1.0) * (1u64 << 30) as f64) as u64
}

/// CPU time per record written in one round of a row, nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CpuPerRecord {
    /// The broker process (user + system).
    pub broker_ns: Option<f64>,
    /// This process: the load's clients.
    pub clients_ns: Option<f64>,
}

/// User + system CPU time of process `pid` ("self" for this one) so far, from
/// /proc/PID/stat (fields 14 and 15, in USER_HZ = 100 ticks a second on Linux);
/// none where /proc is missing.
pub(crate) fn cpu_ns(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// One row's medians, its ratio to its baseline round by round, and its verdict.
fn summarize(
    case: &Case,
    (rounds, cpu): (&[SuiteRow], &[CpuPerRecord]),
    baseline: Option<(&[SuiteRow], &[CpuPerRecord])>,
    setup: &Setup<'_>,
) -> Result<ValidatorRow> {
    let median_of = |cpu: &[CpuPerRecord], f: fn(&CpuPerRecord) -> Option<f64>| {
        let v: Vec<f64> = cpu.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| median(v.into_iter()))
    };
    let broker_cpu_ns_per_record = median_of(cpu, |c| c.broker_ns);
    let clients_cpu_ns_per_record = median_of(cpu, |c| c.clients_ns);
    let broker_cpu_over_none =
        baseline.and_then(|(_, b)| Some(broker_cpu_ns_per_record? - median_of(b, |c| c.broker_ns)?));
    let baseline_cpu_ns_per_record =
        baseline.and_then(|(_, b)| Some(median_of(b, |c| c.broker_ns)? + median_of(b, |c| c.clients_ns)?));
    let baseline = baseline.map(|(b, _)| b);
    let first = rounds.first().context("a row without rounds")?;
    let mut m = first.clone();
    m.label = case.label.clone();
    m.records_per_s = median(rounds.iter().map(|r| r.records_per_s));
    m.mb_per_s = median(rounds.iter().map(|r| r.mb_per_s));
    m.latency.p50_us = median(rounds.iter().map(|r| r.latency.p50_us as f64)) as u64;
    m.latency.p99_us = median(rounds.iter().map(|r| r.latency.p99_us as f64)) as u64;
    m.latency.p999_us = median(rounds.iter().map(|r| r.latency.p999_us as f64)) as u64;
    m.latency.max_us = rounds.iter().map(|r| r.latency.max_us).max().unwrap_or(0);
    m.latency.mean_us = median(rounds.iter().map(|r| r.latency.mean_us));
    m.elapsed_s = rounds.iter().map(|r| r.elapsed_s).sum();
    m.requests = rounds.iter().map(|r| r.requests).sum();
    m.records = rounds.iter().map(|r| r.records).sum();
    m.bytes = rounds.iter().map(|r| r.bytes).sum();
    m.mb_per_s_by_second = rounds.iter().flat_map(|r| r.mb_per_s_by_second.iter().copied()).collect();
    m.notes = vec![format!(
        "records/s by round: {}",
        rounds.iter().map(|r| format!("{:.0}", r.records_per_s)).collect::<Vec<_>>().join(", ")
    )];
    m.load_before = first.load_before.clone();
    let vs_none_by_round: Vec<f64> = baseline
        .map(|b| rounds.iter().zip(b).map(|(r, b)| r.records_per_s / b.records_per_s.max(1e-9)).collect())
        .unwrap_or_default();
    let vs_none = (!vs_none_by_round.is_empty()).then(|| median(vs_none_by_round.iter().copied()));
    let mut verdict = None;
    if let (Some(ratio), Some(cost)) = (vs_none, case.max_cost) {
        m.set_target("vs none", 1.0 - cost, ratio);
        verdict = Some(if ratio >= 1.0 - cost { "PASS" } else { "MISS" });
    }
    Ok(ValidatorRow {
        label: case.label.clone(),
        protocol: case.protocol.name(),
        validators: case.validators.clone(),
        topic: case.topic.clone(),
        median: m,
        rounds: rounds.to_vec(),
        vs_none_by_round,
        vs_none,
        max_cost: case.max_cost,
        verdict,
        broker_counters: setup.counters(case)?,
        cpu_by_round: cpu.to_vec(),
        broker_cpu_ns_per_record,
        clients_cpu_ns_per_record,
        broker_cpu_over_none,
        baseline_cpu_ns_per_record,
    })
}

/// The median (the mean of the middle two for an even count); 0 for none.
pub(crate) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 }
}

const HEADINGS: [&str; 9] = [
    "row",
    "records/s",
    "vs none",
    "p50 us",
    "p99 us",
    "broker CPU ns/rec",
    "clients CPU ns/rec",
    "records/s by round",
    "target",
];

fn render(rows: &[ValidatorRow]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADINGS.iter().map(|h| (*h).to_owned()).collect()];
    for r in rows {
        let m = &r.median;
        let by_round: Vec<String> = r.rounds.iter().map(|x| format!("{:.0}", x.records_per_s)).collect();
        let target = match (r.max_cost, r.verdict) {
            (Some(c), Some(v)) => format!("cost <= {:.0}%: {v}", c * 100.0),
            _ => "-".to_owned(),
        };
        lines.push(vec![
            r.label.clone(),
            format!("{:.0}", m.records_per_s),
            r.vs_none.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}")),
            m.latency.p50_us.to_string(),
            m.latency.p99_us.to_string(),
            cpu_cell(r.broker_cpu_ns_per_record, r.broker_cpu_over_none),
            cpu_cell(r.clients_cpu_ns_per_record, None),
            by_round.join(" "),
            target,
        ]);
    }
    table::align(&lines)
}

/// "812" or, with a baseline, "973 (+161)"; "-" when /proc was not readable.
fn cpu_cell(ns: Option<f64>, over: Option<f64>) -> String {
    match (ns, over) {
        (Some(ns), Some(over)) => format!("{ns:.0} ({over:+.0})"),
        (Some(ns), None) => format!("{ns:.0}"),
        _ => "-".to_owned(),
    }
}

fn print_verdicts(rows: &[ValidatorRow], machine: &Machine) {
    println!();
    for r in rows {
        let (Some(ratio), Some(cost), Some(verdict)) = (r.vs_none, r.max_cost, r.verdict) else {
            continue;
        };
        let rounds: Vec<String> = r.vs_none_by_round.iter().map(|v| format!("{v:.2}")).collect();
        println!(
            "{verdict}: {} costs {:.1}% of throughput (median ratio {ratio:.3}; by round {}), target <= {:.0}%",
            r.label,
            (1.0 - ratio) * 100.0,
            rounds.join(", "),
            cost * 100.0
        );
        if let (Some(over), Some(base)) = (r.broker_cpu_over_none, r.baseline_cpu_ns_per_record) {
            println!(
                "      validating costs the broker {over:+.0} ns of CPU per record; the baseline spends {base:.0} ns per \
                 record (broker and clients): where the CPUs are the bottleneck that predicts a cost of about {:.0}%",
                100.0 * over.max(0.0) / (base + over.max(0.0))
            );
        }
    }
    for r in rows {
        for n in &r.median.notes {
            println!("  {}: {n}", r.label);
        }
        if !r.broker_counters.is_null() {
            println!("  {}: broker counters {}", r.label, r.broker_counters);
        }
    }
    if let Some(end) = &machine.load_end {
        println!("at end: {}", end.describe());
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
        assert_eq!(median(std::iter::empty()), 0.0);
    }
}
