//! es-broker: the single-node broker. Zero-config start (data in ./data, HTTP on
//! 127.0.0.1:9000), log recovery on startup, graceful shutdown on SIGINT/SIGTERM.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;
use es_server::{BrokerOptions, Registry};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(name = "es-broker", version, about = "The es event-streaming broker")]
struct Args {
    /// Where topics and their logs live.
    #[arg(long, env = "ES_DATA_DIR", default_value = "./data")]
    data_dir: PathBuf,
    /// Address for the HTTP API; port 0 picks a free port. Loopback only until
    /// authentication exists.
    #[arg(long, env = "ES_BIND", default_value = "127.0.0.1:9000")]
    bind: String,
    /// Address for the binary protocol; port 0 picks a free port. Loopback only.
    #[arg(long, env = "ES_BIND_BINARY", default_value = "127.0.0.1:9001")]
    bind_binary: String,
    /// Directory for the cold tier (topics with cold.tier.enable=true).
    #[arg(long)]
    cold_dir: Option<PathBuf>,
    /// Largest HTTP request body in bytes.
    #[arg(long, default_value_t = es_server::limits::REQUEST_BYTES_MAX_DEFAULT)]
    max_request_bytes: usize,
    /// How often retention, tiering and compaction run, in milliseconds.
    #[arg(long, default_value_t = es_server::limits::HOUSEKEEPING_INTERVAL_MS_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..))]
    housekeeping_interval_ms: u64,
    /// Where compiled plugins are cached [default: DATA_DIR/plugins/cache]. Brokers
    /// of one build may share it (entries are content-addressed and written
    /// atomically); keep it writable only by the user running the brokers.
    #[arg(long, env = "ES_PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
    /// journal.enabled: one journal fdatasync per flush round for all partitions;
    /// false syncs every dirty segment instead (slower with many partitions).
    #[arg(long, env = "ES_JOURNAL_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    journal_enabled: bool,
    /// Where the journal lives, e.g. another disk [default: DATA_DIR/journal].
    #[arg(long, env = "ES_JOURNAL_DIR")]
    journal_dir: Option<PathBuf>,
    /// Requests served at once (long polls included); more get 503 overloaded.
    #[arg(long, default_value_t = es_server::limits::IN_FLIGHT_REQUESTS_MAX_DEFAULT)]
    max_in_flight_requests: usize,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ES_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("es-broker: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let addr = loopback_addr(&args.bind)?;
    let binary_addr = loopback_addr(&args.bind_binary)?;
    if !(1..=1_000_000).contains(&args.max_in_flight_requests) {
        bail!("--max-in-flight-requests must be between 1 and 1000000");
    }
    let options = BrokerOptions {
        data_dir: args.data_dir.clone(),
        cold_dir: args.cold_dir.clone(),
        request_bytes_max: args.max_request_bytes,
        in_flight_requests_max: args.max_in_flight_requests,
        housekeeping_interval: std::time::Duration::from_millis(args.housekeeping_interval_ms),
        plugin_cache_dir: args.plugin_cache_dir.clone(),
        journal: args.journal_enabled,
        journal_dir: args.journal_dir.clone(),
    };
    let (registry, report) = Registry::open(options)
        .with_context(|| format!("opening the data directory {}", args.data_dir.display()))?;
    for repair in &report.repairs {
        eprintln!("es-broker: recovery: {repair}");
    }
    eprintln!(
        "es-broker: recovered {} topics, {} partitions from {}",
        report.topics,
        report.partitions,
        args.data_dir.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let state = es_server::BinaryState::new(registry.clone());
    runtime.block_on(serve(addr, binary_addr, state))?;
    // Every acknowledged record is already durable; this closes segments cleanly
    // so the next start has nothing to recover.
    registry.shutdown().context("flushing and closing the logs")?;
    // The runtime stays up during the flush so a second signal still exits at once;
    // a request the drain gave up on must not hold the exit either.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    eprintln!("es-broker: shut down cleanly");
    Ok(())
}

async fn serve(
    addr: SocketAddr,
    binary_addr: SocketAddr,
    state: es_server::BinaryState,
) -> anyhow::Result<()> {
    let registry = state.service.registry().clone();
    let binary = tokio::net::TcpListener::bind(binary_addr)
        .await
        .with_context(|| format!("binding {binary_addr} for the binary protocol (--bind-binary)"))?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let binary_local = binary.local_addr().context("reading the bound address")?;
    // Tests and scripts read these lines to find the ports (the HTTP one comes last).
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on es://{binary_local}")?;
    writeln!(out, "listening on http://{local}")?;
    out.flush()?;
    drop(out);
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let binary = tokio::spawn(es_server::serve_binary(binary, state, stop_rx));
    let draining = registry.clone();
    let shutdown = async move {
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        // Every listener refuses produces from here on, before anyone is told.
        draining.begin_shutdown();
        let _ = stop_tx.send(true);
        eprintln!("es-broker: shutting down (send the signal again to exit at once)");
        tokio::spawn(async move {
            tokio::select! {
                _ = sigint.recv() => {}
                _ = sigterm.recv() => {}
            }
            eprintln!("es-broker: second signal: exiting now");
            std::process::exit(130);
        });
    };
    es_server::serve(listener, registry, shutdown).await.context("serving HTTP")?;
    binary.await.context("the binary listener failed")
}

/// Resolves `--bind` and refuses anything but loopback: the API has no
/// authentication yet, so listening elsewhere would open the data to the network.
fn loopback_addr(bind: &str) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = bind
        .to_socket_addrs()
        .with_context(|| format!("--bind {bind:?} is not a host:port address"))?
        .collect();
    let Some(first) = addrs.first().copied() else {
        bail!("--bind {bind:?} resolved to no address");
    };
    if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        bail!(
            "refusing to listen on {bad} (from --bind {bind}): es has no authentication yet (it comes in a later release), \
             so the broker only listens on loopback addresses such as 127.0.0.1 or [::1]"
        );
    }
    Ok(first)
}
