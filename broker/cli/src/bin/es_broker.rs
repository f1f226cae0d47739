//! es-broker: the single-node broker. Zero-config start (data in ./data, HTTP on
//! 127.0.0.1:9000, binary on 9001, Kafka on 9092), log recovery on startup, graceful shutdown on SIGINT/SIGTERM.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;
use es_server::tls::{ServerTls, TlsFlags};
use es_server::{BrokerOptions, Registry};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(name = "es-broker", version, about = "The es event-streaming broker")]
struct Args {
    /// Where topics and their logs live.
    #[arg(long, env = "ES_DATA_DIR", default_value = "./data")]
    data_dir: PathBuf,
    /// Address for the HTTP API; port 0 picks a free port. A non-loopback address
    /// needs --auth.
    #[arg(long, env = "ES_BIND", default_value = "127.0.0.1:9000")]
    bind: String,
    /// Address for the binary protocol; port 0 picks a free port. A non-loopback
    /// address needs --auth.
    #[arg(long, env = "ES_BIND_BINARY", default_value = "127.0.0.1:9001")]
    bind_binary: String,
    /// Address for the Kafka wire protocol; port 0 picks a free port. Loopback only.
    #[arg(long, env = "ES_BIND_KAFKA", default_value = "127.0.0.1:9092")]
    bind_kafka: String,
    /// The host Kafka clients are told to connect to (Metadata, FindCoordinator)
    /// [default: the bound address]. Never 0.0.0.0.
    #[arg(long)]
    kafka_advertised_host: Option<String>,
    /// The port Kafka clients are told to connect to [default: the bound port].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    kafka_advertised_port: Option<u16>,
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
    /// Kafka groups: how long a new group's join barrier waits for more members
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    #[arg(long, default_value_t = es_server::KafkaGroupConfig::default().initial_rebalance_delay_ms)]
    group_initial_rebalance_delay_ms: u64,
    /// Require an API key on every request and authorize it by its grants
    /// (auth.enabled). The first start needs a bootstrap key: ES_AUTH_BOOTSTRAP_KEY
    /// or --auth-bootstrap-key-file.
    #[arg(long = "auth", env = "ES_AUTH_ENABLED")]
    auth_enabled: bool,
    /// A file holding the first admin key (auth.bootstrap_key_file); read only while
    /// no key exists. `es key generate` makes one.
    #[arg(long, env = "ES_AUTH_BOOTSTRAP_KEY_FILE", value_name = "FILE")]
    auth_bootstrap_key_file: Option<PathBuf>,
    /// Where the pepper (the secret mixed into every stored key hash) lives
    /// [default: DATA_DIR/auth-pepper, created on first start]. Keep it out of backups
    /// of the data directory.
    #[arg(long, env = "ES_AUTH_PEPPER_FILE", value_name = "FILE")]
    auth_pepper_file: Option<PathBuf>,
    /// Offer SASL PLAIN on the Kafka listener although it has no TLS
    /// (auth.kafka_allow_plaintext_plain). PLAIN sends the key's secret itself, so
    /// without this flag only SCRAM-SHA-256 and SCRAM-SHA-512 are offered.
    #[arg(long, env = "ES_KAFKA_ALLOW_PLAINTEXT_PLAIN")]
    kafka_allow_plaintext_plain: bool,
    /// How long a Kafka SASL login lasts before the client must re-authenticate
    /// (KIP-368, auth.kafka_session_lifetime_ms); 0: no limit.
    #[arg(long, env = "ES_AUTH_KAFKA_SESSION_LIFETIME_MS",
          default_value_t = es_server::limits::KAFKA_SESSION_LIFETIME_MS_DEFAULT)]
    kafka_session_lifetime_ms: u64,
    /// SASL mechanisms offered, in order (auth.mechanisms): PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512, or NAME:plugin for a mechanism of an uploaded authenticator
    /// plugin, e.g. `SCRAM-SHA-512,PLAIN,OAUTHBEARER:jwt` [default: the built-ins,
    /// SCRAM-SHA-512 first]. PLAIN still needs TLS or --kafka-allow-plaintext-plain.
    #[arg(long, env = "ES_AUTH_MECHANISMS", value_delimiter = ',', value_name = "LIST")]
    auth_mechanisms: Vec<String>,
    /// TLS certificate chain (PEM) for every listener (tls.cert_file); with
    /// --tls-key, HTTP, binary and Kafka speak TLS 1.2/1.3 only. Read at start.
    #[arg(long = "tls-cert", env = "ES_TLS_CERT_FILE", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for every listener (tls.key_file).
    #[arg(long = "tls-key", env = "ES_TLS_KEY_FILE", value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// CA certificates (PEM) whose client certificates every TLS listener requires
    /// (mTLS; tls.client_ca_file).
    #[arg(long = "tls-client-ca", env = "ES_TLS_CLIENT_CA_FILE", value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// Maps a verified client certificate to an API key, which it then is on every
    /// protocol with no login: `cn:NAME=KEYID`, `san:dns:NAME=KEYID` or
    /// `san:uri:URI=KEYID`; repeatable, first match wins.
    #[arg(long = "tls-principal-rule", value_name = "RULE")]
    tls_principal_rules: Vec<String>,
    /// Certificate chain for the HTTP listener only [default: --tls-cert].
    #[arg(long = "http-tls-cert", value_name = "FILE")]
    http_tls_cert: Option<PathBuf>,
    /// Private key for the HTTP listener only [default: --tls-key].
    #[arg(long = "http-tls-key", value_name = "FILE")]
    http_tls_key: Option<PathBuf>,
    /// Client ca (mtls) for the HTTP listener only [default: --tls-client-ca].
    #[arg(long = "http-tls-client-ca", value_name = "FILE")]
    http_tls_client_ca: Option<PathBuf>,
    /// Certificate chain for the binary listener only [default: --tls-cert].
    #[arg(long = "binary-tls-cert", value_name = "FILE")]
    binary_tls_cert: Option<PathBuf>,
    /// Private key for the binary listener only [default: --tls-key].
    #[arg(long = "binary-tls-key", value_name = "FILE")]
    binary_tls_key: Option<PathBuf>,
    /// Client ca (mtls) for the binary listener only [default: --tls-client-ca].
    #[arg(long = "binary-tls-client-ca", value_name = "FILE")]
    binary_tls_client_ca: Option<PathBuf>,
    /// Certificate chain for the Kafka listener only [default: --tls-cert].
    #[arg(long = "kafka-tls-cert", value_name = "FILE")]
    kafka_tls_cert: Option<PathBuf>,
    /// Private key for the Kafka listener only [default: --tls-key].
    #[arg(long = "kafka-tls-key", value_name = "FILE")]
    kafka_tls_key: Option<PathBuf>,
    /// Client ca (mtls) for the Kafka listener only [default: --tls-client-ca].
    #[arg(long = "kafka-tls-client-ca", value_name = "FILE")]
    kafka_tls_client_ca: Option<PathBuf>,
    /// Default produce quota of every key, in bytes per second [default: unlimited].
    #[arg(long, env = "ES_QUOTA_PRODUCE_BYTES_PER_S")]
    quota_produce_bytes_per_s: Option<u64>,
    /// Default fetch quota of every key, in bytes per second [default: unlimited].
    #[arg(long, env = "ES_QUOTA_FETCH_BYTES_PER_S")]
    quota_fetch_bytes_per_s: Option<u64>,
    /// Keep Prometheus metrics and serve GET /metrics; false skips every counter
    /// on the hot paths (to measure their cost) and /metrics answers 404.
    #[arg(long, env = "ES_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    metrics: bool,
    /// Also expose Kafka's JMX-exporter names on /metrics
    /// (kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout}_total).
    #[arg(long, env = "ES_METRICS_KAFKA_COMPAT")]
    metrics_kafka_compat: bool,
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
    let tls = listeners_tls(&args)?;
    let addr = listen_addr("--bind", &args.bind, args.auth_enabled, tls.http.is_some())?;
    let binary_addr =
        listen_addr("--bind-binary", &args.bind_binary, args.auth_enabled, tls.binary.is_some())?;
    let kafka_addr = kafka_listen_addr(&args.bind_kafka, args.auth_enabled, tls.kafka.is_some())?;
    if let Some(host) = &args.kafka_advertised_host {
        check_advertised_host(host)?;
    }
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
        kafka_groups: es_server::KafkaGroupConfig {
            initial_rebalance_delay_ms: args.group_initial_rebalance_delay_ms,
            ..Default::default()
        },
        auth: auth_options(&args)?,
        journal: args.journal_enabled,
        journal_dir: args.journal_dir.clone(),
        metrics: es_server::metrics::MetricsOptions {
            enabled: args.metrics,
            kafka_compat: args.metrics_kafka_compat,
        },
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
    let kafka = Kafka {
        addr: kafka_addr,
        host: args.kafka_advertised_host.clone(),
        port: args.kafka_advertised_port,
    };
    runtime.block_on(serve(addr, binary_addr, kafka, tls, state))?;
    // Every acknowledged record is already durable; this closes segments cleanly
    // so the next start has nothing to recover.
    registry.shutdown().context("flushing and closing the logs")?;
    // The runtime stays up during the flush so a second signal still exits at once;
    // a request the drain gave up on must not hold the exit either.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    eprintln!("es-broker: shut down cleanly");
    Ok(())
}

/// The Kafka listener's address and what it advertises.
struct Kafka {
    addr: SocketAddr,
    host: Option<String>,
    port: Option<u16>,
}

/// Clients connect to the advertised host, so a wildcard would send them nowhere.
fn check_advertised_host(host: &str) -> anyhow::Result<()> {
    let wildcard = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if host.is_empty() || wildcard {
        bail!(
            "--kafka-advertised-host {host:?} is not an address clients can connect to; give the host name or IP \
             they should use (for example 127.0.0.1)"
        );
    }
    Ok(())
}

/// The node Kafka clients are told about: the advertised host and port, else the
/// bound ones.
fn kafka_node(kafka: &Kafka, bound: SocketAddr) -> es_server::KafkaNode {
    es_server::KafkaNode {
        node_id: 0,
        host: kafka.host.clone().unwrap_or_else(|| bound.ip().to_string()),
        port: i32::from(kafka.port.unwrap_or(bound.port())),
        cluster_id: "es".into(),
    }
}

/// Each listener's TLS (`None`: plaintext).
struct ListenersTls {
    http: Option<ServerTls>,
    binary: Option<ServerTls>,
    kafka: Option<ServerTls>,
}

/// Reads every listener's PEM files and the principal rules, so a broken TLS setup
/// stops the start before anything is opened.
fn listeners_tls(args: &Args) -> anyhow::Result<ListenersTls> {
    let shared = TlsFlags {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        client_ca: args.tls_client_ca.clone(),
    };
    let rules = args
        .tls_principal_rules
        .iter()
        .map(|r| es_server::tls::PrincipalRule::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    if rules.len() > es_server::limits::TLS_PRINCIPAL_RULES_MAX {
        bail!("at most {} --tls-principal-rule flags", es_server::limits::TLS_PRINCIPAL_RULES_MAX);
    }
    let load = |listener: &str, own: TlsFlags, alpn: &[&[u8]]| -> anyhow::Result<Option<ServerTls>> {
        match es_server::tls::resolve(listener, &own, &shared)? {
            Some(files) => Ok(Some(ServerTls::load(&files, &rules, alpn)?)),
            None => Ok(None),
        }
    };
    let tls = ListenersTls {
        http: load(
            "http",
            TlsFlags {
                cert: args.http_tls_cert.clone(),
                key: args.http_tls_key.clone(),
                client_ca: args.http_tls_client_ca.clone(),
            },
            &[b"http/1.1"],
        )?,
        binary: load(
            "binary",
            TlsFlags {
                cert: args.binary_tls_cert.clone(),
                key: args.binary_tls_key.clone(),
                client_ca: args.binary_tls_client_ca.clone(),
            },
            &[],
        )?,
        kafka: load(
            "kafka",
            TlsFlags {
                cert: args.kafka_tls_cert.clone(),
                key: args.kafka_tls_key.clone(),
                client_ca: args.kafka_tls_client_ca.clone(),
            },
            &[],
        )?,
    };
    let mtls = [&tls.http, &tls.binary, &tls.kafka].iter().any(|t| t.as_ref().is_some_and(ServerTls::mtls));
    if !rules.is_empty() && !mtls {
        bail!("--tls-principal-rule needs a listener that asks for client certificates: set --tls-client-ca");
    }
    Ok(tls)
}

/// What a `listening on` line adds for a TLS listener.
fn tls_note(tls: &Option<ServerTls>) -> &'static str {
    match tls {
        Some(t) if t.mtls() => " (tls, client certificates required)",
        Some(_) => " (tls)",
        None => "",
    }
}

async fn serve(
    addr: SocketAddr,
    binary_addr: SocketAddr,
    kafka: Kafka,
    tls: ListenersTls,
    state: es_server::BinaryState,
) -> anyhow::Result<()> {
    let registry = state.service.registry().clone();
    let binary = tokio::net::TcpListener::bind(binary_addr)
        .await
        .with_context(|| format!("binding {binary_addr} for the binary protocol (--bind-binary)"))?;
    let kafka_listener = tokio::net::TcpListener::bind(kafka.addr)
        .await
        .with_context(|| format!("binding {} for the Kafka protocol (--bind-kafka)", kafka.addr))?;
    let kafka_local = kafka_listener.local_addr().context("reading the bound address")?;
    let node = kafka_node(&kafka, kafka_local);
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let binary_local = binary.local_addr().context("reading the bound address")?;
    // Tests and scripts read these lines to find the ports (the HTTP one comes last).
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on es://{binary_local}{}", tls_note(&tls.binary))?;
    // Kafka clients pick the listener's security protocol themselves: say which.
    let protocol = if tls.kafka.is_some() { "SSL" } else { "PLAINTEXT" };
    writeln!(
        out,
        "listening on kafka://{kafka_local} (advertised as {}:{}, {protocol})",
        node.host, node.port
    )?;
    let scheme = if tls.http.is_some() { "https" } else { "http" };
    writeln!(out, "listening on {scheme}://{local}{}", tls_note(&tls.http))?;
    out.flush()?;
    drop(out);
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let kafka_service = state.service.clone();
    let kafka_task =
        tokio::spawn(es_server::serve_kafka(kafka_listener, kafka_service, node, tls.kafka, stop_rx.clone()));
    let binary = tokio::spawn(es_server::serve_binary(binary, state, tls.binary, stop_rx));
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
    es_server::serve(listener, tls.http, registry, shutdown).await.context("serving HTTP")?;
    binary.await.context("the binary listener failed")?;
    kafka_task.await.context("the Kafka listener failed")
}

/// Auth settings from flags and the environment. The bootstrap key comes from
/// ES_AUTH_BOOTSTRAP_KEY (never a flag: flags show in the process list) or a file.
fn auth_options(args: &Args) -> anyhow::Result<es_server::auth::AuthOptions> {
    let from_env = std::env::var("ES_AUTH_BOOTSTRAP_KEY").ok().filter(|k| !k.trim().is_empty());
    let from_file = match &args.auth_bootstrap_key_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading --auth-bootstrap-key-file {}", path.display()))?,
        ),
        None => None,
    };
    if from_env.is_some() && from_file.is_some() {
        bail!("set ES_AUTH_BOOTSTRAP_KEY or --auth-bootstrap-key-file, not both");
    }
    let quota = es_server::auth::KeyQuota {
        produce_bytes_per_s: args.quota_produce_bytes_per_s,
        fetch_bytes_per_s: args.quota_fetch_bytes_per_s,
    };
    Ok(es_server::auth::AuthOptions {
        enabled: args.auth_enabled,
        bootstrap_key: from_env.or(from_file),
        pepper_file: args.auth_pepper_file.clone(),
        quota,
        kafka: es_server::auth::KafkaSaslOptions {
            allow_plaintext_plain: args.kafka_allow_plaintext_plain,
            session_lifetime_ms: args.kafka_session_lifetime_ms,
        },
        mechanisms: args.auth_mechanisms.clone(),
    })
}

/// Resolves a listen address. A non-loopback one is refused unless auth is on:
/// without it, listening elsewhere would open the data to the network. With auth on,
/// Kafka clients log in with SASL (SCRAM; PLAIN over TLS, or when allowed).
fn kafka_listen_addr(bind: &str, auth: bool, tls: bool) -> anyhow::Result<SocketAddr> {
    listen_addr("--bind-kafka", bind, auth, tls)
}

fn listen_addr(flag: &str, bind: &str, auth: bool, tls: bool) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = bind
        .to_socket_addrs()
        .with_context(|| format!("{flag} {bind:?} is not a host:port address"))?
        .collect();
    let Some(first) = addrs.first().copied() else {
        bail!("{flag} {bind:?} resolved to no address");
    };
    match addrs.iter().find(|a| !a.ip().is_loopback()) {
        Some(bad) if !auth => bail!(
            "refusing to listen on {bad} (from {flag} {bind}) without authentication: start with --auth \
             (and a bootstrap key, see docs/security.md), or listen on a loopback address such as 127.0.0.1"
        ),
        Some(open) if !tls => eprintln!(
            "es-broker: warning: {flag} {open} is reachable from the network without TLS: \
             API keys travel in the clear; set --tls-cert and --tls-key (docs/security.md, \"TLS\")"
        ),
        Some(_) | None => {}
    }
    Ok(first)
}
