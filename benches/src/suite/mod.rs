//! `es-bench suite`: the broker benchmark of issue 6. In one run, with fsync on and
//! 256-byte records over loopback: the raw-disk baselines of `es-bench log`, binary
//! produce (1 and 4 partitions), HTTP/JSON produce and consume, binary consume, and small
//! pipelined produces; then a table, a JSON report and a PNG chart.

pub(crate) mod binary;
pub(crate) mod broker;
pub(crate) mod chart;
pub(crate) mod http;
pub(crate) mod row;
pub(crate) mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use serde::Serialize;

use crate::log_bench::figures::Figures;
use crate::log_bench::raw_row;
use crate::machine::{Load, Machine};
use crate::report;
use crate::workload::Workload;
use binary::ConsumeMode;
use broker::Broker;
use es_core::compression::Compression;
use row::SuiteRow;

/// Binary produce should reach this fraction of the raw group-commit baseline.
const TARGET_VS_RAW: f64 = 0.8;
/// Small pipelined writes, records/s.
const TARGET_PIPELINED: f64 = 50_000.0;
/// Binary consume, records/s.
const TARGET_CONSUME: f64 = 1_500_000.0;
/// Where the raw rows and the suite's own broker write: the build disk, not /tmp.
const DEFAULT_DIR: &str = "target/bench-tmp";

#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct SuiteArgs {
    /// Duration of each row, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Value size of each record, in bytes.
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Records per request of the produce rows (and per batch of the raw rows).
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Connections of the binary produce rows (and batches per fdatasync of the raw baseline).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Clients of the HTTP produce row.
    #[arg(long, default_value_t = 8)]
    pub http_clients: usize,
    /// Partitions of the HTTP produce row.
    #[arg(long, default_value_t = 4)]
    pub http_partitions: usize,
    /// Records per request of the pipelined row.
    #[arg(long, default_value_t = 10)]
    pub small_batch: usize,
    /// Requests in flight in the pipelined row.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
    /// Rounds of the two binary produce rows (1 and 4 partitions), their order
    /// alternated from round to round; each row reports its median round. A row run
    /// second was measured up to 1.5x slower than the same row run first on a
    /// virtual disk, so one fixed order measures the order, not the partitions.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Run the binary rows against this running broker (host:port) instead of starting one.
    #[arg(long)]
    pub binary_addr: Option<String>,
    /// Run the HTTP row against this running broker (http://host:port), for example
    /// another build for a side-by-side run.
    #[arg(long)]
    pub http_url: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    pub place: Place,
}

/// Where a benchmark that starts its own broker runs and writes: shared by
/// `es-bench suite` and `es-bench validators`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct Place {
    /// The es-broker to start [default: es-broker next to this executable].
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Directory for the started broker's data (and the suite's raw rows) [default: ./target/bench-tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the started broker's data directory instead of deleting it at the end.
    #[arg(long)]
    pub keep_data: bool,
    /// Folder for the JSON report and the PNG chart [default: ./results/<UTC date>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl Place {
    /// The data directory, created, as an absolute path.
    pub fn root(&self) -> Result<PathBuf> {
        prepare_dir(self.dir.as_deref().unwrap_or(Path::new(DEFAULT_DIR)))
    }

    /// The report folder, created.
    pub fn out_dir(&self, started_utc: &str) -> Result<PathBuf> {
        let out = self.out.clone().unwrap_or_else(|| PathBuf::from("results").join(&started_utc[..10]));
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        Ok(out)
    }
}

/// `--seconds` of a timed row: positive and at most ten minutes.
pub(crate) fn check_seconds(seconds: f64) -> Result<()> {
    ensure!(seconds.is_finite() && seconds > 0.0, "--seconds must be positive");
    ensure!(seconds <= 600.0, "--seconds is at most 600 per row");
    Ok(())
}

impl SuiteArgs {
    fn validate(&self) -> Result<()> {
        check_seconds(self.seconds)?;
        ensure!(self.record_bytes >= 1, "--record-bytes must be at least 1");
        ensure!(self.batch >= 1 && self.small_batch >= 1, "batches need at least one record");
        ensure!(self.connections >= 1 && self.http_clients >= 1, "at least one connection and client");
        ensure!(self.http_partitions >= 1, "--http-partitions must be at least 1");
        ensure!((1..=256).contains(&self.in_flight), "--in-flight is 1 to 256 (the broker's window)");
        ensure!((1..=15).contains(&self.rounds), "--rounds is 1 to 15");
        Ok(())
    }
}

/// Everything suite.json holds.
#[derive(Debug, Serialize)]
struct SuiteReport<'a> {
    benchmark: &'static str,
    command_line: String,
    started_utc: String,
    finished_utc: String,
    args: &'a SuiteArgs,
    machine: &'a Machine,
    broker: BrokerFacts,
    batch_bytes: usize,
    small_batch_bytes: usize,
    targets: Targets,
    rows: &'a [SuiteRow],
}

#[derive(Debug, Clone, Serialize)]
struct BrokerFacts {
    /// True when the suite started the broker itself.
    started_here: bool,
    bin: Option<PathBuf>,
    binary_addr: String,
    http_url: String,
    stopped_cleanly: Option<bool>,
}

#[derive(Debug, Serialize)]
struct Targets {
    binary_produce_vs_raw: f64,
    pipelined_records_per_s: f64,
    consume_records_per_s: f64,
}

pub fn run(args: &SuiteArgs) -> Result<()> {
    args.validate()?;
    let started_utc = report::utc_now();
    let root = args.place.root()?;
    let out = args.place.out_dir(&started_utc)?;
    let mut machine = Machine::probe(&root);
    let big = Workload::encode(args.batch, args.record_bytes)?;
    let small = Workload::encode(args.small_batch, args.record_bytes)?;
    print_header(args, &machine, &big, &small);

    let run_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut started = None;
    if args.binary_addr.is_none() || args.http_url.is_none() {
        started =
            Some(start_broker(args.place.broker_bin.as_deref(), &root, &format!("suite-broker-{run_id}"))?);
    }
    let binary_addr =
        args.binary_addr.clone().or_else(|| started.as_ref().map(|(b, _)| b.binary_addr.clone()));
    let http_url = args.http_url.clone().or_else(|| started.as_ref().map(|(b, _)| b.url.clone()));
    let (Some(binary_addr), Some(http_url)) = (binary_addr, http_url) else {
        anyhow::bail!("no broker address");
    };
    let http_url = http_url.trim_end_matches('/').to_owned();
    println!("binary rows: es://{binary_addr}; HTTP row: {http_url}");
    println!();

    let plan = Plan {
        args,
        root: &root,
        big: &big,
        small: &small,
        run_id,
        binary_addr: &binary_addr,
        http_url: &http_url,
    };
    let result = plan.run_rows();

    // Stop and clean up whether or not the rows worked.
    let mut facts = BrokerFacts {
        started_here: started.is_some(),
        bin: started.as_ref().map(|(_, bin)| bin.clone()),
        binary_addr: binary_addr.clone(),
        http_url: http_url.clone(),
        stopped_cleanly: None,
    };
    if let Some((b, _)) = started {
        facts.stopped_cleanly = Some(stop_broker(b, args.place.keep_data)?);
    }
    let rows = result?;
    machine.note_end();

    println!();
    print!("{}", table::render(&rows));
    print_verdict(&rows, &machine);

    let finished_utc = report::utc_now();
    let report = SuiteReport {
        benchmark: "suite",
        command_line: report::command_line(),
        started_utc: started_utc.clone(),
        finished_utc,
        args,
        machine: &machine,
        broker: facts,
        batch_bytes: big.batch_bytes(),
        small_batch_bytes: small.batch_bytes(),
        targets: Targets {
            binary_produce_vs_raw: TARGET_VS_RAW,
            pipelined_records_per_s: TARGET_PIPELINED,
            consume_records_per_s: TARGET_CONSUME,
        },
        rows: &rows,
    };
    let json = out.join("suite.json");
    report::write_json(&json, &report)?;
    println!("wrote {}", json.display());
    draw_chart(&out.join("suite.png"), "suite", &started_utc, &machine, &rows)
}

/// The chart of `rows`, titled with the benchmark, its start and the machine's load.
pub(crate) fn draw_chart(
    png: &Path,
    benchmark: &str,
    started_utc: &str,
    machine: &Machine,
    rows: &[SuiteRow],
) -> Result<()> {
    let title = format!(
        "es-bench {benchmark}, {started_utc}, {} CPUs, loadavg at start {}",
        machine.nproc,
        machine.load_start.loadavg.as_deref().and_then(|l| l.split(' ').next()).unwrap_or("?")
    );
    chart::draw(png, &title, rows)?;
    println!("wrote {}", png.display());
    Ok(())
}

/// What the rows need.
struct Plan<'a> {
    args: &'a SuiteArgs,
    root: &'a Path,
    big: &'a Workload,
    small: &'a Workload,
    run_id: u64,
    binary_addr: &'a str,
    http_url: &'a str,
}

impl Plan<'_> {
    fn run_rows(&self) -> Result<Vec<SuiteRow>> {
        // Every row writes at most a row's bound; the data of a row is kept until the end.
        let bound = crate::validators::row_bytes_bound(self.args.seconds) * 2;
        crate::machine::ensure_free_space(self.root, bound, "the suite")?;
        let a = self.args;
        let d = Duration::from_secs_f64(a.seconds);
        let rt = runtime()?;
        let topic = |name: &str| format!("suite-{}-{name}", self.run_id);
        let per_record = self.big.batch_bytes() as f64 / self.big.records_per_batch as f64;
        let addr = self.binary_addr;
        let mut rows = Vec::new();

        // (1) The raw-disk baselines, exactly as `es-bench log` runs them.
        for per_sync in [a.connections, 1] {
            let label = format!("raw {per_sync} batch/fdatasync");
            let load = Load::now().describe();
            let r = raw_row::run(&label, self.root, self.big, per_sync, d)?;
            let f = Figures::pool(&[&r], self.big)?;
            let mut row = SuiteRow::from_raw(&label, per_sync, &f, r.mb_per_s_by_second);
            row.load_before = load;
            rows.push(row);
            if a.connections == 1 {
                break;
            }
        }
        let raw_mb = rows[0].mb_per_s;

        // (2) Binary produce, one request in flight per connection: 1 and 4
        // partitions in alternating order, round after round (`--rounds`).
        let c = a.connections;
        let mut runs: [Vec<SuiteRow>; 2] = [Vec::new(), Vec::new()];
        for round in 0..a.rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let partitions = [1, 4][i];
                let label = format!("binary produce {partitions}p x {c}c");
                let load = Load::now().describe();
                let name = topic(&format!("bin-{partitions}p-r{round}"));
                let client = binary::connect(&rt, addr, c)?;
                binary::create_topic(&rt, &client, &name, partitions)?;
                let mut row = binary::produce_on(&rt, &client, &label, &name, partitions, c, self.big, d)?;
                let ratio = row.mb_per_s / raw_mb.max(1e-9);
                row.vs_raw = Some(ratio);
                row.set_target("vs raw", TARGET_VS_RAW, ratio);
                row.load_before = load;
                runs[i].push(row);
            }
        }
        let [one, four] = runs;
        let ratios: Vec<f64> =
            one.iter().zip(&four).map(|(o, f)| f.records_per_s / o.records_per_s.max(1e-9)).collect();
        let (one, mut four) = (SuiteRow::median_of(one), SuiteRow::median_of(four));
        let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        four.notes.push(format!(
            "over 1p, records/s by round: {} (median {:.2}; issue 16 asks >= 1.0)",
            listed.join(", "),
            crate::validators::median(ratios.iter().copied())
        ));
        rows.extend([one, four]);
        let t1 = topic("bin-1p-r0");

        // (2b) Compressed binary produce: JSON records (which compress as real
        // payloads do), stored as sent; the broker decompresses only to check them.
        let json = Workload::encode_json(a.batch, a.record_bytes)?;
        for codec in [Compression::Gzip, Compression::Zstd] {
            let label = format!("binary produce {codec} 4p x {c}c");
            let load = Load::now().describe();
            let packed = json.compressed(codec)?;
            let name = topic(&format!("bin-{codec}"));
            let client = binary::connect(&rt, addr, c)?;
            binary::create_topic(&rt, &client, &name, 4)?;
            let mut row = binary::produce_on(&rt, &client, &label, &name, 4, c, &packed, d)?;
            row.load_before = load;
            rows.push(row);
        }

        // (3) HTTP/JSON produce.
        let (hc, hp) = (a.http_clients, a.http_partitions);
        let label = format!("http produce {hp}p x {hc}c");
        let load = Load::now().describe();
        let mut row = http::produce_row(
            &label,
            self.http_url,
            &topic("http-4p"),
            hp,
            hc,
            a.batch,
            a.record_bytes,
            per_record,
            d,
        )?;
        row.vs_raw = Some(row.mb_per_s / raw_mb.max(1e-9));
        row.load_before = load;
        rows.push(row);
        let label = "http consume 10000 rec x 1c";
        let load = Load::now().describe();
        let mut row = http::consume_row(label, self.http_url, &topic("http-4p"), per_record, d)?;
        row.load_before = load;
        rows.push(row);

        // (4) Binary consume of what the 1-partition row wrote, then the same reads
        // without the client's decoding, to tell broker time from client time.
        for (mode, label) in [
            (ConsumeMode::Consumer, "binary consume 4 MiB x 1c"),
            (ConsumeMode::RawFetch, "binary fetch, no decode 4 MiB x 1c"),
        ] {
            let load = Load::now().describe();
            let mut row = binary::consume_row(&rt, label, addr, &t1, mode, per_record, d)?;
            if mode == ConsumeMode::Consumer {
                let v = row.records_per_s;
                row.set_target("records/s", TARGET_CONSUME, v);
            }
            row.load_before = load;
            rows.push(row);
        }

        // (5) Small pipelined writes.
        let label = format!("pipelined {} rec x {} in flight x 1c", a.small_batch, a.in_flight);
        let load = Load::now().describe();
        let mut row =
            binary::pipelined_row(&rt, &label, addr, &topic("pipelined"), a.in_flight, self.small, d)?;
        let v = row.records_per_s;
        row.set_target("records/s", TARGET_PIPELINED, v);
        row.load_before = load;
        rows.push(row);

        rt.shutdown_timeout(Duration::from_secs(5));
        Ok(rows)
    }
}

/// The runtime the binary rows' clients run on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("es-bench-io")
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// Starts `bin` (default: es-broker next to this executable) with a fresh data
/// directory `<root>/<name>`, and says so.
pub(crate) fn start_broker(bin: Option<&Path>, root: &Path, name: &str) -> Result<(Broker, PathBuf)> {
    let bin = match bin {
        Some(b) => b.to_path_buf(),
        None => broker::default_bin()?,
    };
    let data = root.join(name);
    let b = Broker::start(&bin, &data)?;
    println!(
        "broker: started {} (pid {}) on es://{} and {}, data in {}",
        bin.display(),
        b.pid().unwrap_or(0),
        b.binary_addr,
        b.url,
        data.display()
    );
    Ok((b, bin))
}

/// Stops a broker started by [`start_broker`] and deletes its data unless
/// `keep_data`. Returns whether it exited cleanly (and warns if not).
pub(crate) fn stop_broker(mut b: Broker, keep_data: bool) -> Result<bool> {
    let clean = b.stop()?;
    if !clean {
        println!("WARNING: the broker did not exit cleanly after SIGTERM");
    }
    if keep_data {
        println!("kept the broker's data in {}", b.data_dir.display());
    } else {
        std::fs::remove_dir_all(&b.data_dir).with_context(|| format!("removing {}", b.data_dir.display()))?;
    }
    Ok(clean)
}

/// Creates the directory and returns its absolute path.
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))
}

fn print_header(args: &SuiteArgs, machine: &Machine, big: &Workload, small: &Workload) {
    print_machine("suite", machine);
    println!(
        "workload: {} B values, fsync on; batches of {} records = {} B encoded, small batches of {} = {} B; {} s per row",
        args.record_bytes,
        big.records_per_batch,
        big.batch_bytes(),
        small.records_per_batch,
        small.batch_bytes(),
        args.seconds
    );
}

/// The command line, the machine, its load and the data directory's filesystem.
pub(crate) fn print_machine(benchmark: &str, machine: &Machine) {
    let fs = &machine.filesystem;
    println!("es-bench {benchmark}: {}", report::command_line());
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
}

fn print_verdict(rows: &[SuiteRow], machine: &Machine) {
    println!();
    for row in rows {
        if let Some(t) = &row.target {
            let (met, how) = if t.met { ("met", "above") } else { ("NOT met", "short") };
            let gap = (t.value / t.at_least - 1.0).abs() * 100.0;
            let value = if t.is_ratio() {
                format!("{:.2} of raw", t.value)
            } else {
                format!("{:.0} records/s", t.value)
            };
            println!("{}: {value}, target >= {}: {met} ({gap:.0}% {how})", row.label, t.at_least);
        }
    }
    for row in rows {
        for n in &row.notes {
            println!("  {}: {n}", row.label);
        }
    }
    if let Some(end) = &machine.load_end {
        println!("at end: {}", end.describe());
    }
}
