//! `es-bench tls`: produce and consume throughput with TLS off and on, over the
//! Kafka listener and the binary protocol. Two brokers from one binary, one
//! plaintext and one with TLS on its Kafka and binary listeners (a self-signed
//! certificate made at start with rcgen; HTTP stays plaintext for setup only).
//! Every row runs against both in one run, the order flipping every round, so
//! drift on a noisy machine hits both alike; the table gives each row's median
//! over the rounds and the ratio TLS / plaintext.
//!
//! The Kafka client is a blocking one written here (rustls' `StreamOwned` or a
//! plain `TcpStream` behind one trait), with the request frames of `crate::kafka::wire`:
//! `producers` connections each sending one pre-encoded v2 batch per Produce
//! (acks=all) and waiting for its answer, and one consumer fetching partition 0
//! from offset 0 to its end and over again. The binary rows use es-client (its
//! own TLS) and the suite's produce and fetch loops.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use es_client::{Client, ClientOptions, ClientTls};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::runtime::Runtime;

use crate::kafka::wire::{self, FETCH_VERSION, IO_TIMEOUT, PRODUCE_VERSION};
use crate::latency;
use crate::suite::binary;
use crate::suite::broker::{Broker, default_bin};
use crate::suite::http;
use crate::suite::row::{Shape, SuiteRow, Tally};
use crate::timed::{self, Control};
use crate::workload::{Spread, Workload};

/// Largest response frame accepted.
const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, clap::Args)]
pub struct TlsArgs {
    /// Duration of each row, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Rounds; each runs every row against both brokers.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Value size of each record, in bytes.
    #[arg(long, default_value_t = 256)]
    pub record_bytes: usize,
    /// Records per produce request.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Producer connections (each one request in flight) and partitions.
    #[arg(long, default_value_t = 4)]
    pub producers: usize,
    /// Stop a produce row once it wrote this many MB (bounds the disk a run fills).
    #[arg(long, default_value_t = 2000)]
    pub cap_mb: u64,
    /// Bytes per fetch of the consume rows, in KiB. (es 0.1 does not flush a TLS
    /// write: a response larger than the socket takes at once can stall; keep it small.)
    #[arg(long, default_value_t = 256)]
    pub fetch_kib: i32,
    /// The es-broker binary [default: beside es-bench].
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Where the brokers keep their data [default: a temporary directory].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// One of the two brokers and how to reach it.
struct Side {
    name: &'static str,
    broker: Broker,
    /// The binary listener's host:port (without the " (tls)" note).
    binary_addr: String,
    kafka_addr: String,
    tls: Option<Tls>,
}

#[derive(Clone)]
struct Tls {
    /// For the blocking Kafka client.
    config: Arc<rustls::ClientConfig>,
    /// For es-client.
    binary: ClientTls,
}

pub fn run(args: &TlsArgs) -> Result<()> {
    ensure!(args.seconds > 0.0 && args.rounds > 0, "--seconds and --rounds must be positive");
    ensure!(
        args.producers > 0 && args.batch > 0 && args.record_bytes > 0,
        "--producers, --batch and --record-bytes must be at least 1"
    );
    let bin = match &args.broker_bin {
        Some(bin) => bin.clone(),
        None => default_bin()?,
    };
    let tmp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_owned()
        }
    };
    let (cert_path, key_path, tls) = make_certificate(&dir)?;
    let (cert, key) =
        (cert_path.to_str().context("a UTF-8 path")?, key_path.to_str().context("a UTF-8 path")?);
    let tls_flags = [
        "--kafka-tls-cert",
        cert,
        "--kafka-tls-key",
        key,
        "--binary-tls-cert",
        cert,
        "--binary-tls-key",
        key,
    ];
    let run_id =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let plain = Broker::start_with(&bin, &dir.join(format!("plain-{run_id}")), &[], &[])?;
    let secure = Broker::start_with(&bin, &dir.join(format!("tls-{run_id}")), &tls_flags, &[])?;
    let mut sides = [side("plaintext", plain, None), side("TLS", secure, Some(tls))];
    let w = Workload::encode(args.batch, args.record_bytes)?;
    println!(
        "es-bench tls: {} rounds of {} s rows; {} producers x {} records of {} B ({} B batches); brokers {}",
        args.rounds,
        args.seconds,
        args.producers,
        args.batch,
        args.record_bytes,
        w.batch_bytes(),
        bin.display()
    );
    for s in &sides {
        println!(
            "  {}: kafka://{} es://{} (data in {})",
            s.name,
            s.kafka_addr,
            s.binary_addr,
            s.broker.data_dir.display()
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = measure(args, &rt, &sides, &w);
    for s in &mut sides {
        s.broker.stop()?;
    }
    let table = result?;
    print_table(&table);
    Ok(())
}

fn side(name: &'static str, broker: Broker, tls: Option<Tls>) -> Side {
    let binary_addr = broker.binary_addr.split_whitespace().next().unwrap_or_default().to_owned();
    let kafka_addr = broker.kafka_addr.clone();
    Side { name, broker, binary_addr, kafka_addr, tls }
}

/// A self-signed certificate for 127.0.0.1, written as PEM files under `dir`, and
/// the client configurations that trust it.
fn make_certificate(dir: &Path) -> Result<(PathBuf, PathBuf, Tls)> {
    std::fs::create_dir_all(dir)?;
    let key = rcgen::KeyPair::generate().context("generating a key")?;
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).context("certificate parameters")?;
    let cert = params.self_signed(&key).context("signing the certificate")?;
    let (cert_path, key_path) = (dir.join("bench-cert.pem"), dir.join("bench-key.pem"));
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(cert.der().to_vec())).context("trusting the certificate")?;
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_root_certificates(roots)
            .with_no_client_auth();
    let binary = ClientTls::from_ca_file(&cert_path).context("es-client TLS")?;
    Ok((cert_path, key_path, Tls { config: Arc::new(config), binary }))
}

/// The rows, each measured once per round on each side: `[row][side] -> MB/s`.
struct Table {
    rows: Vec<&'static str>,
    mb_per_s: Vec<[Vec<f64>; 2]>,
}

const ROWS: [&str; 4] = ["kafka produce", "kafka consume", "binary produce", "binary consume"];

fn measure(args: &TlsArgs, rt: &Runtime, sides: &[Side; 2], w: &Workload) -> Result<Table> {
    let duration = Duration::from_secs_f64(args.seconds);
    let mut table =
        Table { rows: ROWS.to_vec(), mb_per_s: ROWS.iter().map(|_| [Vec::new(), Vec::new()]).collect() };
    // Topics: one per protocol, so each consume row reads only what its produce rows wrote.
    for s in sides {
        http::create_topic(&s.broker.url, "tls-kafka", args.producers)?;
        http::create_topic(&s.broker.url, "tls-binary", args.producers)?;
    }
    let clients = sides
        .iter()
        .map(|s| binary_client(rt, &s.binary_addr, args.producers, s.tls.as_ref().map(|t| t.binary.clone())))
        .collect::<Result<Vec<_>>>()?;
    for round in 0..args.rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for (r, row) in ROWS.iter().enumerate() {
            for &i in &order {
                let s = &sides[i];
                let label = format!("round {}/{}: {row}, {}", round + 1, args.rounds, s.name);
                let got = match r {
                    0 => kafka_produce(&label, s, args, w, duration)?,
                    1 => kafka_consume(&label, s, args.fetch_kib.saturating_mul(1024), duration)?,
                    2 => binary::produce_capped(
                        rt,
                        &clients[i],
                        &label,
                        "tls-binary",
                        (args.producers, args.producers),
                        w,
                        duration,
                        Some(args.cap_mb * 1_000_000),
                    )?,
                    _ => binary_consume(
                        rt,
                        &label,
                        &clients[i],
                        args.fetch_kib.unsigned_abs() * 1024,
                        duration,
                    )?,
                };
                println!("  {label}: {:.1} MB/s, {:.0} records/s", got.mb_per_s, got.records_per_s);
                table.mb_per_s[r][i].push(got.mb_per_s);
            }
        }
    }
    Ok(table)
}

/// Each row's medians, and the median of the rounds' TLS / plaintext ratios (the
/// two medians come from different rounds, so they are no pair).
fn print_table(t: &Table) {
    println!();
    println!(
        "| row | plaintext MB/s (median) | TLS MB/s (median) | TLS / plaintext (median of the rounds') | every round (plaintext; TLS) |"
    );
    println!("|---|---|---|---|---|");
    for (row, [plain, tls]) in t.rows.iter().zip(&t.mb_per_s) {
        let ratios: Vec<f64> = plain.iter().zip(tls).map(|(p, s)| s / p.max(1e-9)).collect();
        let all = |v: &[f64], digits: usize| {
            v.iter().map(|x| format!("{x:.digits$}")).collect::<Vec<_>>().join(", ")
        };
        println!(
            "| {row} | {:.1} | {:.1} | {:.2} ({}) | {}; {} |",
            median(plain),
            median(tls),
            median(&ratios),
            all(&ratios, 2),
            all(plain, 1),
            all(tls, 1)
        );
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn binary_client(
    rt: &Runtime,
    addr: &str,
    connections: usize,
    tls: Option<ClientTls>,
) -> Result<Arc<Client>> {
    let options = ClientOptions {
        connections,
        retries: 0,
        failover_timeout_ms: 0,
        backoff_ms: 50,
        request_timeout_ms: binary::REQUEST_TIMEOUT.as_millis() as u64,
        api_key: None,
        tls,
    };
    let client = rt
        .block_on(async {
            tokio::time::timeout(binary::REQUEST_TIMEOUT, Client::connect(addr, options)).await
        })
        .map_err(|_| anyhow!("connecting to {addr} timed out"))?
        .with_context(|| format!("connecting to es://{addr}"))?;
    Ok(Arc::new(client))
}

fn binary_consume(
    rt: &Runtime,
    label: &str,
    client: &Arc<Client>,
    fetch_bytes: u32,
    duration: Duration,
) -> Result<SuiteRow> {
    let end = rt
        .block_on(client.list_offsets("tls-binary", 0, es_protocol::OffsetSpec::Latest))
        .context("reading the end offset of tls-binary-0")?
        .unwrap_or(0);
    ensure!(end > 0, "tls-binary-0 is empty; the consume row reads what the produce rows wrote");
    let timed = timed::run(label, duration, 1, |_, ctl| {
        rt.block_on(binary::fetch_loop(client, "tls-binary", end, fetch_bytes, ctl))
    })?;
    let shape = Shape {
        kind: "binary_fetch_no_decode",
        connections: 1,
        partitions: 1,
        records_per_request: 0,
        in_flight: 1,
    };
    SuiteRow::from_timed(label, shape, timed)
}

/// A blocking byte stream: plaintext or TLS.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One blocking Kafka connection answering one request at a time.
struct KafkaConn {
    stream: Box<dyn Stream>,
    correlation: i32,
}

impl KafkaConn {
    fn connect(addr: &str, tls: Option<&Tls>) -> Result<KafkaConn> {
        let sock: std::net::SocketAddr = addr.parse().with_context(|| format!("kafka address {addr}"))?;
        let tcp =
            TcpStream::connect_timeout(&sock, IO_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Stream> = match tls {
            None => Box::new(tcp),
            Some(t) => {
                let name = ServerName::try_from(sock.ip().to_string()).context("a server name")?;
                let conn = rustls::ClientConnection::new(t.config.clone(), name).context("a TLS client")?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        Ok(KafkaConn { stream, correlation: 0 })
    }

    /// Sends `frame` (built with `correlation`) and reads the answer's body.
    fn round_trip(&mut self, frame: &[u8]) -> Result<Bytes> {
        self.stream.write_all(frame).context("writing a request")?;
        self.stream.flush()?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).context("reading a response size")?;
        let size = u32::from_be_bytes(size) as usize;
        ensure!(size <= MAX_FRAME, "a {size}-byte response frame (cap {MAX_FRAME})");
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).context("reading a response")?;
        Ok(Bytes::from(body))
    }

    fn next_id(&mut self) -> i32 {
        self.correlation = self.correlation.wrapping_add(1);
        self.correlation
    }
}

fn kafka_produce(
    label: &str,
    s: &Side,
    args: &TlsArgs,
    w: &Workload,
    duration: Duration,
) -> Result<SuiteRow> {
    let batch = Bytes::from(w.batch.clone());
    let conns = (0..args.producers)
        .map(|_| KafkaConn::connect(&s.kafka_addr, s.tls.as_ref()).map(|c| std::sync::Mutex::new(Some(c))))
        .collect::<Result<Vec<_>>>()?;
    let timed =
        timed::run_capped(label, duration, Some(args.cap_mb * 1_000_000), args.producers, |i, ctl| {
            let spread = Spread { worker: i, workers: args.producers, partitions: args.producers };
            let taken = conns[i].lock().map_err(|_| anyhow!("a poisoned connection"))?.take();
            let Some(conn) = taken else { bail!("producer {i} has no connection") };
            produce_loop(conn, spread, &batch, w.records_per_batch, ctl)
        })?;
    let shape = Shape {
        kind: "kafka_produce",
        connections: args.producers,
        partitions: args.producers,
        records_per_request: w.records_per_batch,
        in_flight: 1,
    };
    SuiteRow::from_timed(label, shape, timed)
}

fn produce_loop(
    mut conn: KafkaConn,
    spread: Spread,
    batch: &Bytes,
    records: usize,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    let mut sent = 0u64;
    while ctl.running() {
        let id = conn.next_id();
        let req = wire::produce_request("tls-kafka", spread.partition(sent) as i32, batch.clone());
        sent += 1;
        let frame = wire::frame(ApiKey::Produce, PRODUCE_VERSION, id, &req)?;
        let start = Instant::now();
        let body = conn.round_trip(&frame)?;
        let (got, resp) = wire::decode_response::<ProduceResponse>(body, PRODUCE_VERSION)?;
        ensure!(got == id, "produce answer {got} arrived for request {id}");
        if let Some(e) = wire::produce_error(&resp) {
            bail!("{e}");
        }
        latency::record_since(&mut t.latency, start);
        t.requests += 1;
        t.records += records as u64;
        t.bytes += batch.len() as u64;
        ctl.add_bytes(batch.len());
    }
    Ok(t)
}

fn kafka_consume(label: &str, s: &Side, fetch_bytes: i32, duration: Duration) -> Result<SuiteRow> {
    let mut conn = KafkaConn::connect(&s.kafka_addr, s.tls.as_ref())?;
    // The end: fetch from offset 0 until an answer's high watermark is known.
    let (_, _, end) = fetch(&mut conn, 0, fetch_bytes)?;
    ensure!(end > 0, "tls-kafka-0 is empty; the consume row reads what the produce rows wrote");
    let conn = std::sync::Mutex::new(Some(conn));
    let timed = timed::run(label, duration, 1, |_, ctl| {
        let taken = conn.lock().map_err(|_| anyhow!("a poisoned connection"))?.take();
        let Some(mut conn) = taken else { bail!("the consumer has no connection") };
        let mut t = Tally::new()?;
        let mut offset = 0i64;
        while ctl.running() {
            let start = Instant::now();
            let (records, bytes, _) = fetch(&mut conn, offset, fetch_bytes)?;
            latency::record_since(&mut t.latency, start);
            let (count, next) = wire::count_batches(&records, offset)?;
            ensure!(next > offset || bytes == 0, "a fetch at {offset} moved nowhere");
            offset = if next >= end { 0 } else { next };
            t.requests += 1;
            t.records += count;
            t.bytes += bytes as u64;
            ctl.add_bytes(bytes);
        }
        Ok(t)
    })?;
    let shape = Shape {
        kind: "kafka_fetch_no_decode",
        connections: 1,
        partitions: 1,
        records_per_request: 0,
        in_flight: 1,
    };
    SuiteRow::from_timed(label, shape, timed)
}

/// One Fetch of partition 0 of `tls-kafka` at `offset`: its records, their size
/// and the high watermark.
fn fetch(conn: &mut KafkaConn, offset: i64, fetch_bytes: i32) -> Result<(Bytes, usize, i64)> {
    let id = conn.next_id();
    let part = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(fetch_bytes)
        .with_log_start_offset(-1)
        .with_current_leader_epoch(-1)
        .with_last_fetched_epoch(-1);
    let topic = FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str("tls-kafka")))
        .with_partitions(vec![part]);
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(fetch_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![topic]);
    let frame = wire::frame(ApiKey::Fetch, FETCH_VERSION, id, &req)?;
    let (got, resp) = wire::decode_response::<FetchResponse>(conn.round_trip(&frame)?, FETCH_VERSION)?;
    ensure!(got == id, "fetch answer {got} arrived for request {id}");
    ensure!(resp.error_code == 0, "Fetch error {}", resp.error_code);
    let p = resp
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .context("a fetch answer without partitions")?;
    ensure!(p.error_code == 0, "Fetch of tls-kafka-0 error {}", p.error_code);
    let records = p.records.clone().unwrap_or_default();
    let size = records.len();
    Ok((records, size, p.high_watermark))
}
