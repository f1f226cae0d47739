//! `es-bench kafka`: es's Kafka listener against its binary protocol and against
//! Apache Kafka (issue 14), in one run. Four systems: es binary (the suite's
//! client), es Kafka, Apache Kafka with `flush.messages=1` on its topics (an fsync
//! per write, es's guarantee) and Apache Kafka with defaults (no fsync). Every
//! produce shape (producers x partitions) and a consume row run on each, in rounds
//! of alternating order; medians per row, ratios per round and their medians, and
//! PASS/MISS against the issue's targets.

mod load;
mod reference;
pub(crate) mod wire;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use serde::Serialize;
use tokio::runtime::Runtime;

use crate::machine::{Load, Machine};
use crate::report;
use crate::suite::binary::{self, ConsumeMode};
use crate::suite::row::SuiteRow;
use crate::suite::{self, Place, table};
use crate::validators::{cpu_ns, median};
use crate::workload::Workload;
use reference::Reference;

/// The issue's targets, as ratios of es Kafka's records/s over a baseline's.
const TARGETS: [(Baseline, f64); 3] =
    [(Baseline::EsBinary, 0.8), (Baseline::KafkaFlush, 1.5), (Baseline::KafkaDefaults, 0.7)];
/// Consume: es Kafka over Apache Kafka (defaults).
const TARGET_CONSUME: f64 = 1.0;

#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct KafkaArgs {
    /// Duration of each row in each round, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Rounds; every row runs once per round, in alternating order.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Untimed produce of every produce row before the first round, in seconds
    /// (the JVM compiles its hot paths; es's page cache warms alike).
    #[arg(long, default_value_t = 2.0)]
    pub warmup_seconds: f64,
    /// Value size of each record, in bytes.
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Records per batch, one batch per Produce (240 x 256 B is about a 64 KiB batch.size).
    #[arg(long, default_value_t = 240)]
    pub batch: usize,
    /// Producer connections of the produce rows, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8])]
    pub producers: Vec<usize>,
    /// Partitions of the produce rows, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 4])]
    pub partitions: Vec<usize>,
    /// At most this many MiB per produce row: a row stops early once it wrote
    /// them. Each produce row writes to a topic of its own, deleted after it.
    #[arg(long, default_value_t = 1024)]
    pub row_mib: u64,
    /// MiB written, before the rounds, to the topic each consume row reads.
    #[arg(long, default_value_t = 256)]
    pub consume_mib: u64,
    /// Produce requests in flight per Kafka connection (Kafka's default
    /// max.in.flight.requests.per.connection). The binary rows keep one.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// es's Kafka listener (host:port) to measure instead of starting a broker.
    #[arg(long)]
    pub es_kafka: Option<String>,
    /// es's binary listener (host:port), with --es-kafka.
    #[arg(long)]
    pub es_binary: Option<String>,
    /// A running Apache Kafka (host:port) instead of starting one; its CPU is not measured.
    #[arg(long)]
    pub reference: Option<String>,
    /// Leave Apache Kafka out (es rows only).
    #[arg(long)]
    pub no_reference: bool,
    /// Only the consume rows, on es binary, es Kafka and Apache Kafka with defaults
    /// (the consume target's baseline): no produce row, no `flush.messages=1` system.
    #[arg(long)]
    pub consume_only: bool,
    /// The script that starts Apache Kafka.
    #[arg(long, default_value = "tests/golden-capture/kafka.sh")]
    pub kafka_script: PathBuf,
    /// Port of the started Apache Kafka (its controller takes the next one).
    #[arg(long, default_value_t = 19192)]
    pub kafka_port: u16,
    #[command(flatten)]
    #[serde(flatten)]
    pub place: Place,
}

impl KafkaArgs {
    fn validate(&self) -> Result<()> {
        suite::check_seconds(self.seconds)?;
        ensure!(
            self.warmup_seconds.is_finite() && self.warmup_seconds >= 0.0,
            "--warmup-seconds must be >= 0"
        );
        ensure!((1..=20).contains(&self.rounds), "--rounds is 1 to 20");
        ensure!(
            self.record_bytes >= 1 && self.batch >= 1,
            "records and batches need at least one byte and record"
        );
        ensure!(
            !self.producers.is_empty() && self.producers.iter().all(|&p| (1..=64).contains(&p)),
            "--producers: 1 to 64 each"
        );
        ensure!(
            !self.partitions.is_empty() && self.partitions.iter().all(|&p| (1..=64).contains(&p)),
            "--partitions: 1 to 64 each"
        );
        ensure!((1..=64).contains(&self.in_flight), "--in-flight is 1 to 64");
        ensure!((1..=4096).contains(&self.row_mib), "--row-mib is 1 to 4096");
        ensure!((1..=4096).contains(&self.consume_mib), "--consume-mib is 1 to 4096");
        ensure!(
            self.es_kafka.is_some() == self.es_binary.is_some(),
            "--es-kafka and --es-binary go together"
        );
        Ok(())
    }
}

/// A broker (and how it is configured) that the rows run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum System {
    EsBinary,
    EsKafka,
    KafkaFlush,
    KafkaDefaults,
}

/// What a ratio of es Kafka is taken over.
type Baseline = System;

impl System {
    fn name(self) -> &'static str {
        match self {
            System::EsBinary => "es binary",
            System::EsKafka => "es kafka",
            System::KafkaFlush => "apache kafka flush.messages=1",
            System::KafkaDefaults => "apache kafka defaults",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            System::EsBinary => "esbin",
            System::EsKafka => "eskafka",
            System::KafkaFlush => "kflush",
            System::KafkaDefaults => "kdefault",
        }
    }

    /// The topic config that makes the difference between the two Apache Kafka systems.
    fn topic_configs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            System::KafkaFlush => &[("flush.messages", "1")],
            System::EsBinary | System::EsKafka | System::KafkaDefaults => &[],
        }
    }
}

/// One row: a system and what it runs.
#[derive(Debug, Clone, Serialize)]
struct Case {
    label: String,
    system: System,
    /// (producers, partitions), or none for the consume row.
    produce: Option<(usize, usize)>,
    /// The consume row's topic, or the prefix of the produce row's topics (one per
    /// round, `<topic>-<round>`).
    topic: String,
}

impl Case {
    fn partitions(&self) -> usize {
        self.produce.map_or(1, |(_, p)| p)
    }
}

/// One round of a row: its figures, and the broker's and the clients' CPU
/// nanoseconds per record.
type RoundOf = (SuiteRow, Option<f64>, Option<f64>);

/// One row's figures over every round.
#[derive(Debug, Serialize)]
struct KafkaRow {
    case: Case,
    median: SuiteRow,
    rounds: Vec<SuiteRow>,
    /// Nanoseconds of CPU per record, by round: the broker's (none when its pid is
    /// unknown) and this process's (the clients').
    broker_cpu_ns_by_round: Vec<Option<f64>>,
    clients_cpu_ns_by_round: Vec<Option<f64>>,
    broker_cpu_ns_per_record: Option<f64>,
}

/// es Kafka over a baseline for one shape.
#[derive(Debug, Serialize)]
struct Ratio {
    what: String,
    baseline: System,
    by_round: Vec<f64>,
    median: f64,
    at_least: f64,
    verdict: &'static str,
}

#[derive(Debug, Serialize)]
struct KafkaReport<'a> {
    benchmark: &'static str,
    command_line: String,
    started_utc: String,
    finished_utc: String,
    args: &'a KafkaArgs,
    machine: &'a Machine,
    batch_bytes: usize,
    es_kafka: String,
    es_binary: String,
    apache_kafka: Option<String>,
    apache_kafka_version: &'static str,
    rows: &'a [KafkaRow],
    ratios: &'a [Ratio],
}

/// Where each system listens, and the pids whose CPU time is read.
struct Targets {
    es_binary: String,
    es_kafka: String,
    es_pid: Option<u32>,
    reference: Option<(String, Option<u32>)>,
}

pub fn run(args: &KafkaArgs) -> Result<()> {
    args.validate()?;
    let started_utc = report::utc_now();
    let root = args.place.root()?;
    let out = args.place.out_dir(&started_utc)?;
    let mut machine = Machine::probe(&root);
    let w = Workload::encode(args.batch, args.record_bytes)?;
    suite::print_machine("kafka", &machine);
    println!(
        "workload: {} B values, acks=all; batches of {} records = {} B encoded; Kafka rows {} in flight per connection, \
         binary rows 1; {} round(s) x {} s per row",
        args.record_bytes,
        w.records_per_batch,
        w.batch_bytes(),
        args.in_flight,
        args.rounds,
        args.seconds
    );
    let run_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());

    let es = match (&args.es_kafka, &args.es_binary) {
        (Some(_), Some(_)) => None,
        _ => Some(
            suite::start_broker(args.place.broker_bin.as_deref(), &root, &format!("kafka-es-{run_id}"))?.0,
        ),
    };
    let kafka_dir = root.join(format!("kafka-apache-{run_id}"));
    let reference = start_reference(args, &kafka_dir);
    let result = match &reference {
        Ok(r) => {
            let targets = Targets {
                es_binary: args
                    .es_binary
                    .clone()
                    .or_else(|| es.as_ref().map(|b| b.binary_addr.clone()))
                    .unwrap_or_default(),
                es_kafka: args
                    .es_kafka
                    .clone()
                    .or_else(|| es.as_ref().map(|b| b.kafka_addr.clone()))
                    .unwrap_or_default(),
                es_pid: es.as_ref().and_then(suite::broker::Broker::pid),
                reference: r.as_ref().map(|r| (r.addr.clone(), r.pid)),
            };
            measure(args, &targets, &w, run_id, &root).map(|rows| (rows, targets))
        }
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    // Stop both brokers whether or not the rows worked.
    if let Ok(Some(r)) = reference {
        r.stop(args.place.keep_data)?;
    }
    if let Some(b) = es {
        suite::stop_broker(b, args.place.keep_data)?;
    }
    let (rows, targets) = result?;
    machine.note_end();
    let ratios = ratios(&rows, args.rounds);

    println!();
    print!("{}", render(&rows));
    println!();
    print!("{}", render_ratios(&ratios));
    for r in &rows {
        for n in &r.median.notes {
            println!("  {}: {n}", r.case.label);
        }
    }
    if let Some(end) = &machine.load_end {
        println!("at end: {}", end.describe());
    }
    let report = KafkaReport {
        benchmark: "kafka",
        command_line: report::command_line(),
        started_utc: started_utc.clone(),
        finished_utc: report::utc_now(),
        args,
        machine: &machine,
        batch_bytes: w.batch_bytes(),
        es_kafka: targets.es_kafka,
        es_binary: targets.es_binary,
        apache_kafka: targets.reference.map(|r| r.0),
        apache_kafka_version: reference::KAFKA_VERSION,
        rows: &rows,
        ratios: &ratios,
    };
    let json = out.join("kafka.json");
    report::write_json(&json, &report)?;
    println!("wrote {}", json.display());
    let medians: Vec<SuiteRow> = rows.iter().map(|r| r.median.clone()).collect();
    suite::draw_chart(&out.join("kafka.png"), "kafka", &started_utc, &machine, &medians)
}

fn start_reference(args: &KafkaArgs, dir: &Path) -> Result<Option<Reference>> {
    if args.no_reference {
        return Ok(None);
    }
    match &args.reference {
        Some(addr) => Ok(Some(Reference::given(addr))),
        None => Reference::start(&args.kafka_script, dir, args.kafka_port).map(Some),
    }
}

/// The rows: every produce shape on every system, then a consume row per system.
fn cases(args: &KafkaArgs, targets: &Targets, run_id: u64) -> Vec<Case> {
    let mut systems = vec![System::EsBinary, System::EsKafka];
    if targets.reference.is_some() {
        systems.extend([System::KafkaFlush, System::KafkaDefaults]);
    }
    if args.consume_only {
        systems.retain(|&s| s != System::KafkaFlush);
    }
    let mut cases = Vec::new();
    let shapes = if args.consume_only { &[][..] } else { &args.producers[..] };
    for &producers in shapes {
        for &partitions in &args.partitions {
            for &system in &systems {
                cases.push(Case {
                    label: format!("{} produce {producers}x{partitions}p", system.name()),
                    system,
                    produce: Some((producers, partitions)),
                    topic: format!("kb-{run_id}-{}-{producers}x{partitions}p", system.slug()),
                });
            }
        }
    }
    // The consume rows read a topic of one partition, written before the rounds.
    for &system in &systems {
        cases.push(Case {
            label: format!("{} consume 1c", system.name()),
            system,
            produce: None,
            topic: format!("kb-{run_id}-{}-read", system.slug()),
        });
    }
    cases
}

fn measure(
    args: &KafkaArgs,
    targets: &Targets,
    w: &Workload,
    run_id: u64,
    root: &Path,
) -> Result<Vec<KafkaRow>> {
    let rt = suite::runtime()?;
    let cases = cases(args, targets, run_id);
    let per_record = w.batch_bytes() as f64 / w.records_per_batch as f64;
    let run = Run { rt: &rt, args, targets, w, per_record };
    let cap = args.row_mib << 20;
    for c in cases.iter().filter(|c| c.produce.is_none()) {
        crate::machine::ensure_free_space(root, 4 * (args.consume_mib << 20), &c.label)?;
        run.fill(c)?;
    }
    if args.warmup_seconds > 0.0 {
        let d = Duration::from_secs_f64(args.warmup_seconds);
        for c in cases.iter().filter(|c| c.produce.is_some()) {
            crate::machine::ensure_free_space(root, 4 * cap, &c.label)?;
            run.case(c, "w", &format!("warm-up {}", c.label), d)?;
        }
    }
    let d = Duration::from_secs_f64(args.seconds);
    let mut by_case: Vec<Vec<RoundOf>> = cases.iter().map(|_| Vec::new()).collect();
    for round in 0..args.rounds {
        let order: Vec<usize> =
            if round % 2 == 0 { (0..cases.len()).collect() } else { (0..cases.len()).rev().collect() };
        for i in order {
            let c = &cases[i];
            // Apache Kafka deletes a topic's files a minute after the topic: room for a few rows.
            crate::machine::ensure_free_space(root, 4 * cap, &c.label)?;
            let pid = broker_pid(targets, c.system).map(|p| p.to_string());
            let load = Load::now().describe();
            let before = (pid.as_deref().and_then(cpu_ns), cpu_ns("self"));
            let label = format!("{}/{} {}", round + 1, args.rounds, c.label);
            let mut row = run.case(c, &round.to_string(), &label, d)?;
            let after = (pid.as_deref().and_then(cpu_ns), cpu_ns("self"));
            let per = |b: Option<u64>, a: Option<u64>| {
                Some(a?.saturating_sub(b?) as f64 / row.records.max(1) as f64)
            };
            row.load_before = load;
            let (broker, clients) = (per(before.0, after.0), per(before.1, after.1));
            by_case[i].push((row, broker, clients));
        }
    }
    rt.shutdown_timeout(Duration::from_secs(5));
    cases.into_iter().zip(by_case).map(|(case, rounds)| summarize(case, rounds)).collect()
}

fn broker_pid(targets: &Targets, s: System) -> Option<u32> {
    match s {
        System::EsBinary | System::EsKafka => targets.es_pid,
        System::KafkaFlush | System::KafkaDefaults => targets.reference.as_ref().and_then(|r| r.1),
    }
}

fn kafka_addr(targets: &Targets, s: System) -> Result<&str> {
    match s {
        System::EsKafka => Ok(&targets.es_kafka),
        System::KafkaFlush | System::KafkaDefaults => match &targets.reference {
            Some((addr, _)) => Ok(addr),
            None => bail!("no Apache Kafka"),
        },
        System::EsBinary => bail!("es binary is not a Kafka address"),
    }
}

/// What every row needs.
struct Run<'a> {
    rt: &'a Runtime,
    args: &'a KafkaArgs,
    targets: &'a Targets,
    w: &'a Workload,
    per_record: f64,
}

impl Run<'_> {
    /// Creates `topic` on `system`, with the system's configs.
    fn create(&self, system: System, topic: &str, partitions: usize) -> Result<()> {
        if system == System::EsBinary {
            let client = binary::connect(self.rt, &self.targets.es_binary, 1)?;
            return binary::create_topic(self.rt, &client, topic, partitions);
        }
        let addr = kafka_addr(self.targets, system)?;
        self.rt
            .block_on(async {
                let mut conn = wire::Conn::connect(addr).await?;
                conn.create_topic(topic, partitions, system.topic_configs()).await?;
                conn.wait_writable(topic, partitions, &bytes::Bytes::from(self.w.batch.clone())).await
            })
            .with_context(|| format!("creating {topic} on {}", system.name()))
    }

    fn delete(&self, system: System, topic: &str) -> Result<()> {
        if system == System::EsBinary {
            let client = binary::connect(self.rt, &self.targets.es_binary, 1)?;
            return self.rt.block_on(client.delete_topic(topic)).with_context(|| format!("deleting {topic}"));
        }
        let addr = kafka_addr(self.targets, system)?;
        self.rt
            .block_on(async { wire::Conn::connect(addr).await?.delete_topic(topic).await })
            .with_context(|| format!("deleting {topic} on {}", system.name()))
    }

    /// Writes `--consume-mib` to a consume row's topic, untimed.
    fn fill(&self, c: &Case) -> Result<()> {
        self.create(c.system, &c.topic, 1)?;
        let label = format!("fill {}", c.system.name());
        // Bounded in time too: a slow system fills less, and its consume row wraps sooner.
        let d = Duration::from_secs(60);
        let producers = self.args.producers.iter().copied().max().unwrap_or(1);
        self.produce(c.system, &c.topic, (producers, 1), &label, d, self.args.consume_mib << 20)
            .with_context(|| label.clone())?;
        Ok(())
    }

    /// Runs a row; a produce row on a fresh topic `<topic>-<tag>`, deleted after it.
    fn case(&self, c: &Case, tag: &str, label: &str, d: Duration) -> Result<SuiteRow> {
        let Some(shape) = c.produce else {
            return match c.system {
                System::EsBinary => binary::consume_row(
                    self.rt,
                    label,
                    &self.targets.es_binary,
                    &c.topic,
                    ConsumeMode::RawFetch,
                    self.per_record,
                    d,
                ),
                s => load::consume_row(
                    self.rt,
                    label,
                    kafka_addr(self.targets, s)?,
                    &c.topic,
                    self.per_record,
                    d,
                ),
            };
        };
        let topic = format!("{}-{tag}", c.topic);
        self.create(c.system, &topic, c.partitions())?;
        let row = self
            .produce(c.system, &topic, shape, label, d, self.args.row_mib << 20)
            .with_context(|| label.to_owned());
        self.delete(c.system, &topic)?;
        row
    }

    fn produce(
        &self,
        system: System,
        topic: &str,
        (producers, partitions): (usize, usize),
        label: &str,
        d: Duration,
        cap: u64,
    ) -> Result<SuiteRow> {
        if system == System::EsBinary {
            let client = binary::connect(self.rt, &self.targets.es_binary, producers)?;
            let shape = (partitions, producers);
            return binary::produce_capped(self.rt, &client, label, topic, shape, self.w, d, Some(cap));
        }
        let shape = load::ProduceShape {
            label,
            addr: kafka_addr(self.targets, system)?,
            topic,
            partitions,
            producers,
            in_flight: self.args.in_flight,
            cap: Some(cap),
        };
        load::produce_row(self.rt, &shape, self.w, d)
    }
}

fn summarize(case: Case, rounds: Vec<RoundOf>) -> Result<KafkaRow> {
    let broker: Vec<Option<f64>> = rounds.iter().map(|r| r.1).collect();
    let clients: Vec<Option<f64>> = rounds.iter().map(|r| r.2).collect();
    let rows: Vec<SuiteRow> = rounds.into_iter().map(|r| r.0).collect();
    let first = rows.first().context("a row without rounds")?;
    let mut m = first.clone();
    m.label = case.label.clone();
    m.records_per_s = median(rows.iter().map(|r| r.records_per_s));
    m.mb_per_s = median(rows.iter().map(|r| r.mb_per_s));
    m.latency.p50_us = median(rows.iter().map(|r| r.latency.p50_us as f64)) as u64;
    m.latency.p99_us = median(rows.iter().map(|r| r.latency.p99_us as f64)) as u64;
    m.latency.p999_us = median(rows.iter().map(|r| r.latency.p999_us as f64)) as u64;
    m.latency.max_us = rows.iter().map(|r| r.latency.max_us).max().unwrap_or(0);
    m.latency.mean_us = median(rows.iter().map(|r| r.latency.mean_us));
    m.elapsed_s = rows.iter().map(|r| r.elapsed_s).sum();
    m.requests = rows.iter().map(|r| r.requests).sum();
    m.records = rows.iter().map(|r| r.records).sum();
    m.bytes = rows.iter().map(|r| r.bytes).sum();
    m.mb_per_s_by_second = rows.iter().flat_map(|r| r.mb_per_s_by_second.iter().copied()).collect();
    m.notes = first.notes.clone();
    let known: Vec<f64> = broker.iter().flatten().copied().collect();
    let broker_cpu_ns_per_record = (!known.is_empty()).then(|| median(known.into_iter()));
    Ok(KafkaRow {
        case,
        median: m,
        rounds: rows,
        broker_cpu_ns_by_round: broker,
        clients_cpu_ns_by_round: clients,
        broker_cpu_ns_per_record,
    })
}

/// es Kafka over each baseline, shape by shape, round by round.
fn ratios(rows: &[KafkaRow], rounds: usize) -> Vec<Ratio> {
    let find = |s: System, produce: Option<(usize, usize)>| {
        rows.iter().find(|r| r.case.system == s && r.case.produce == produce)
    };
    let mut out = Vec::new();
    for es in rows.iter().filter(|r| r.case.system == System::EsKafka) {
        let checks: Vec<(Baseline, f64)> = match es.case.produce {
            Some(_) => TARGETS.to_vec(),
            None => vec![(System::KafkaDefaults, TARGET_CONSUME)],
        };
        for (baseline, at_least) in checks {
            let Some(base) = find(baseline, es.case.produce) else { continue };
            let by_round: Vec<f64> = (0..rounds)
                .filter_map(|i| {
                    Some(es.rounds.get(i)?.records_per_s / base.rounds.get(i)?.records_per_s.max(1e-9))
                })
                .collect();
            let m = median(by_round.iter().copied());
            let what = match es.case.produce {
                Some((n, p)) => format!("produce {n}x{p}p"),
                None => "consume 1c".to_owned(),
            };
            out.push(Ratio {
                what,
                baseline,
                by_round,
                median: m,
                at_least,
                verdict: if m >= at_least { "PASS" } else { "MISS" },
            });
        }
    }
    out
}

const HEADINGS: [&str; 8] = [
    "row",
    "records/s",
    "MB/s",
    "p50 us",
    "p99 us",
    "broker CPU ns/rec",
    "clients CPU ns/rec",
    "records/s by round",
];

fn render(rows: &[KafkaRow]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADINGS.iter().map(|h| (*h).to_owned()).collect()];
    for r in rows {
        let m = &r.median;
        let by_round: Vec<String> = r.rounds.iter().map(|x| format!("{:.0}", x.records_per_s)).collect();
        let clients: Vec<f64> = r.clients_cpu_ns_by_round.iter().flatten().copied().collect();
        let clients = (!clients.is_empty()).then(|| median(clients.into_iter()));
        lines.push(vec![
            r.case.label.clone(),
            format!("{:.0}", m.records_per_s),
            format!("{:.1}", m.mb_per_s),
            m.latency.p50_us.to_string(),
            m.latency.p99_us.to_string(),
            r.broker_cpu_ns_per_record.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}")),
            clients.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}")),
            by_round.join(" "),
        ]);
    }
    table::align(&lines)
}

fn render_ratios(ratios: &[Ratio]) -> String {
    let mut lines: Vec<Vec<String>> = vec![
        ["es kafka", "over", "median", "by round", "target", "verdict"]
            .iter()
            .map(|h| (*h).to_owned())
            .collect(),
    ];
    for r in ratios {
        let by_round: Vec<String> = r.by_round.iter().map(|v| format!("{v:.2}")).collect();
        lines.push(vec![
            r.what.clone(),
            r.baseline.name().to_owned(),
            format!("{:.2}", r.median),
            by_round.join(" "),
            format!(">= {}", r.at_least),
            r.verdict.to_owned(),
        ]);
    }
    table::align(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: KafkaArgs,
    }

    fn args(extra: &[&str]) -> KafkaArgs {
        Cli::parse_from(std::iter::once("kafka").chain(extra.iter().copied())).args
    }

    #[test]
    fn every_shape_runs_on_every_system_and_each_system_consumes() {
        let a = args(&[]);
        let t = Targets {
            es_binary: "b".into(),
            es_kafka: "k".into(),
            es_pid: None,
            reference: Some(("r".into(), None)),
        };
        let c = cases(&a, &t, 1);
        assert_eq!(c.len(), 4 * 4 + 4);
        assert!(c.iter().any(|c| c.system == System::KafkaFlush && c.produce == Some((8, 4))));
        let consume: Vec<&Case> = c.iter().filter(|c| c.produce.is_none()).collect();
        assert_eq!(consume.len(), 4);
        assert!(consume.iter().all(|c| c.topic.ends_with("-read") && c.partitions() == 1), "{consume:?}");
        let only = cases(&args(&["--consume-only"]), &t, 1);
        let systems: Vec<System> = only.iter().map(|c| c.system).collect();
        assert_eq!(systems, [System::EsBinary, System::EsKafka, System::KafkaDefaults]);
        assert!(only.iter().all(|c| c.produce.is_none()));
        let no_ref = Targets { reference: None, ..t };
        assert!(cases(&a, &no_ref, 1).iter().all(|c| matches!(c.system, System::EsBinary | System::EsKafka)));
    }

    #[test]
    fn arguments_out_of_range_are_refused() {
        assert!(args(&[]).validate().is_ok());
        assert!(args(&["--in-flight", "0"]).validate().is_err());
        assert!(args(&["--producers", "1,0"]).validate().is_err());
        assert!(args(&["--es-kafka", "127.0.0.1:1"]).validate().is_err());
    }

    /// A row of `records` records over one second.
    fn round(records: u64) -> RoundOf {
        let mut t = crate::suite::row::Tally::new().unwrap();
        t.records = records;
        let timed = crate::timed::Timed {
            elapsed: Duration::from_secs(1),
            results: vec![t],
            mb_per_s_by_second: vec![],
        };
        let shape = crate::suite::row::Shape {
            kind: "test",
            connections: 1,
            partitions: 1,
            records_per_request: 1,
            in_flight: 1,
        };
        (SuiteRow::from_timed("r", shape, timed).unwrap(), None, None)
    }

    fn row(system: System, produce: Option<(usize, usize)>, by_round: &[u64]) -> KafkaRow {
        let case = Case { label: system.name().into(), system, produce, topic: "t".into() };
        summarize(case, by_round.iter().map(|&r| round(r)).collect()).unwrap()
    }

    #[test]
    fn ratios_are_the_median_of_same_round_ratios_with_a_verdict_each() {
        let shape = Some((8, 4));
        let rows = vec![
            row(System::EsKafka, shape, &[200, 200, 200]),
            row(System::EsBinary, shape, &[100, 400, 200]),
            row(System::KafkaFlush, shape, &[100, 100, 200]),
            row(System::EsKafka, None, &[90, 90, 90]),
            row(System::KafkaDefaults, None, &[100, 100, 100]),
        ];
        assert_eq!(rows[1].median.records_per_s, 200.0);
        let r = ratios(&rows, 3);
        // No Apache Kafka defaults produce row: that target is left out.
        let got: Vec<(System, Vec<f64>, f64, &str)> =
            r.iter().map(|r| (r.baseline, r.by_round.clone(), r.median, r.verdict)).collect();
        assert_eq!(
            got,
            vec![
                (System::EsBinary, vec![2.0, 0.5, 1.0], 1.0, "PASS"),
                (System::KafkaFlush, vec![2.0, 2.0, 1.0], 2.0, "PASS"),
                (System::KafkaDefaults, vec![0.9, 0.9, 0.9], 0.9, "MISS"),
            ]
        );
    }
}
