//! es-broker: the single-node broker. Zero-config start (data in ./data, HTTP on
//! 127.0.0.1:9000, binary on 9001, Kafka on 9092), log recovery on startup, graceful shutdown on SIGINT/SIGTERM.
//! Settings come from flags, `ES_<SECTION>_<KEY>` and a TOML `--config` file (one
//! table, es_broker/settings.rs); `config ...` and `doctor` are subcommands.

// The modules live in es_broker/ (a bin root's `mod` would look beside it, among
// the other binaries).
#[path = "es_broker/cold.rs"]
mod cold;
#[path = "es_broker/config_cmd.rs"]
mod config_cmd;
#[path = "es_broker/doctor.rs"]
mod doctor;
#[path = "es_broker/flags.rs"]
mod flags;
#[path = "es_broker/resolve.rs"]
mod resolve;
#[path = "es_broker/settings.rs"]
mod settings;

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use anyhow::{Context, bail};
use es_server::tls::{ServerTls, TlsFlags};
use es_server::{BrokerOptions, Registry};
use tokio::signal::unix::{SignalKind, signal};

use crate::flags::Action;
use crate::resolve::{Effective, Source};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ES_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let line = flags::parse();
    match &line.action {
        Action::ConfigInit { output } => config_cmd::init(output.as_deref()),
        Action::ConfigReference => config_cmd::reference(),
        Action::ConfigPrint => config_cmd::print(&line),
        Action::ConfigValidate => config_cmd::validate(&line),
        Action::Doctor { json } => doctor::run(&line, *json),
        Action::Serve => serve_from(&line),
    }
}

/// Resolves the configuration and runs the broker; a bad setting exits 2 naming it.
fn serve_from(line: &flags::CommandLine) -> ExitCode {
    let cfg = match config_cmd::load(line) {
        Ok(cfg) => cfg,
        Err(errors) => return config_cmd::report_errors(&errors),
    };
    let result = plan(&cfg).map_err(|errors| anyhow::anyhow!(errors.join("\n  "))).and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("es-broker: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Everything a start needs, checked: the broker's options, the listeners and
/// their TLS. `config validate` and `doctor` build it too, so a file is checked by
/// the same rules as a start.
pub struct Plan {
    options: BrokerOptions,
    addr: SocketAddr,
    binary_addr: SocketAddr,
    kafka: Kafka,
    tls: ListenersTls,
    cluster: Option<ClusterPlan>,
}

/// A cluster member's settings, checked: its id, every node's peer address, the
/// shared secret and the Raft timers.
pub struct ClusterPlan {
    node_id: u64,
    peers: std::collections::BTreeMap<u64, String>,
    /// This node's own peer address, to listen on.
    bind: SocketAddr,
    secret: Vec<u8>,
    timers: es_raft::Timers,
    leader_balance: Option<std::time::Duration>,
    join: bool,
    metadata_log: es_server::cluster::MetadataLogConfig,
    /// `cluster.rack`.
    rack: Option<String>,
}

/// How a setting's value was given, for messages: `--bind`, `ES_HTTP_BIND`,
/// `es.toml: http.bind` or `http.bind (default)`.
pub fn place(cfg: &Effective, id: &str) -> String {
    match cfg.source(id) {
        Source::Flag(flag) => flag,
        Source::Env(name) => name,
        Source::File(path) => format!("{}: {id}", path.display()),
        Source::Default => format!("{id} (default)"),
    }
}

/// Keeps `result`'s value, or its error in `errors`, so every problem is named.
fn keep<T>(errors: &mut Vec<String>, result: anyhow::Result<T>) -> Option<T> {
    result.map_err(|e| errors.push(format!("{e:#}"))).ok()
}

pub fn plan(cfg: &Effective) -> Result<Plan, Vec<String>> {
    let mut errors = Vec::new();
    let auth = cfg.flag("auth.enabled");
    let tls = keep(&mut errors, listeners_tls(cfg));
    let has = |pick: fn(&ListenersTls) -> bool| tls.as_ref().is_some_and(pick);
    let addr = keep(&mut errors, listen_addr(cfg, "http.bind", auth, has(|t| t.http.is_some())));
    let binary_addr = keep(&mut errors, listen_addr(cfg, "binary.bind", auth, has(|t| t.binary.is_some())));
    let kafka_addr = keep(&mut errors, listen_addr(cfg, "kafka.bind", auth, has(|t| t.kafka.is_some())));
    let host = cfg.text("kafka.advertised_host");
    if let Some(host) = &host {
        keep(&mut errors, check_advertised_host(&place(cfg, "kafka.advertised_host"), host));
    }
    let auth_options = keep(&mut errors, auth_options(cfg));
    let cluster = keep(&mut errors, cluster_plan(cfg));
    let cold = keep(&mut errors, cold::options(cfg)).flatten();
    let (Some(tls), Some(addr), Some(binary_addr), Some(kafka_addr), Some(auth), Some(cluster)) =
        (tls, addr, binary_addr, kafka_addr, auth_options, cluster)
    else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let kafka = Kafka { addr: kafka_addr, host, port: cfg.int("kafka.advertised_port").map(port) };
    let options = BrokerOptions { cold, ..broker_options(cfg, auth) };
    Ok(Plan { options, addr, binary_addr, kafka, tls, cluster })
}

/// The cluster settings: all three of node_id, peers and secret_file, or none.
fn cluster_plan(cfg: &Effective) -> anyhow::Result<Option<ClusterPlan>> {
    let node = cfg.int("cluster.node_id");
    let listed = cfg.list("cluster.peers");
    let secret_file = cfg.path("cluster.secret_file");
    let (node_id, secret_file) = match (node, listed.is_empty(), secret_file) {
        (None, true, None) => return Ok(None),
        (Some(n), false, Some(f)) => (n, f),
        _ => bail!(
            "a cluster member needs all of {}, {} and {} (or none of them, for a single node)",
            place(cfg, "cluster.node_id"),
            place(cfg, "cluster.peers"),
            place(cfg, "cluster.secret_file")
        ),
    };
    let mut peers = std::collections::BTreeMap::new();
    for entry in listed.iter().flat_map(|l| l.split(',')).map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry.split_once('=').with_context(|| {
            format!("{} entry {entry:?} is not ID=HOST:PORT", place(cfg, "cluster.peers"))
        })?;
        let id: u64 = id.trim().parse().ok().filter(|n| (1..=1023).contains(n)).with_context(|| {
            format!("{} entry {entry:?}: the node id must be 1 to 1023", place(cfg, "cluster.peers"))
        })?;
        if peers.insert(id, addr.trim().to_owned()).is_some() {
            bail!("{} names node {id} twice", place(cfg, "cluster.peers"));
        }
    }
    let Some(own) = peers.get(&node_id) else {
        bail!(
            "{} has no entry for this node ({node_id}): list every node, this one included",
            place(cfg, "cluster.peers")
        );
    };
    let bind = own
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("node {node_id}'s peer address {own:?} is not a host:port address"))?;
    let raw = std::fs::read(&secret_file).with_context(|| {
        format!("reading {} {}", place(cfg, "cluster.secret_file"), secret_file.display())
    })?;
    let secret = String::from_utf8_lossy(&raw).trim().as_bytes().to_vec();
    if secret.len() < 16 {
        bail!(
            "{} {} holds {} bytes; the cluster secret needs at least 16 (`es key generate > FILE` makes one)",
            place(cfg, "cluster.secret_file"),
            secret_file.display(),
            secret.len()
        );
    }
    let heartbeat_ms = cfg.int("cluster.heartbeat_ms").unwrap_or(300);
    let election_min_ms = cfg.int("cluster.election_timeout_ms").unwrap_or(1500);
    if election_min_ms <= 3 * heartbeat_ms {
        bail!(
            "{} ({election_min_ms}) must be more than three heartbeats ({} = {heartbeat_ms})",
            place(cfg, "cluster.election_timeout_ms"),
            place(cfg, "cluster.heartbeat_ms")
        );
    }
    let quiesce_after_ms =
        cfg.int("cluster.quiesce_after_ms").unwrap_or(es_raft::limits::QUIESCE_AFTER_MS_DEFAULT);
    let timers = es_raft::Timers {
        heartbeat_ms,
        election_min_ms,
        election_max_ms: 2 * election_min_ms,
        quiesce_after_ms,
    };
    let balance_ms = cfg.int("cluster.leader_balance_ms").unwrap_or(30_000);
    let leader_balance = (balance_ms > 0).then(|| std::time::Duration::from_millis(balance_ms));
    let join = cfg.flag("cluster.join");
    let metadata_log = es_server::cluster::MetadataLogConfig {
        segment_bytes: cfg.int("cluster.metadata_segment_bytes").unwrap_or(8 * 1024 * 1024),
        retention_bytes: cfg.int("cluster.metadata_retention_bytes").unwrap_or(100 * 1024 * 1024),
    };
    let rack = cfg.text("cluster.rack").filter(|r| !r.is_empty());
    Ok(Some(ClusterPlan { node_id, peers, bind, secret, timers, leader_balance, join, metadata_log, rack }))
}

/// A port the settings table bounded to 1..=65535.
fn port(n: u64) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// A count the settings table bounded; saturates on a 32-bit target.
fn size(n: Option<u64>) -> usize {
    n.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn broker_options(cfg: &Effective, auth: es_server::auth::AuthOptions) -> BrokerOptions {
    let ms = |id: &str| cfg.int(id).unwrap_or(0);
    BrokerOptions {
        data_dir: data_dir(cfg),
        cold_dir: cfg.path("log.cold_dir"),
        cold: None,
        request_bytes_max: size(cfg.int("http.max_request_bytes")),
        in_flight_requests_max: size(cfg.int("http.max_in_flight_requests")),
        housekeeping_interval: std::time::Duration::from_millis(ms("log.housekeeping_interval_ms")),
        plugin_cache_dir: cfg.path("plugins.cache_dir"),
        kafka_groups: es_server::KafkaGroupConfig {
            initial_rebalance_delay_ms: ms("kafka.group_initial_rebalance_delay_ms"),
            ..Default::default()
        },
        auth,
        journal: cfg.flag("journal.enabled"),
        journal_dir: cfg.path("journal.dir"),
        metrics: es_server::metrics::MetricsOptions {
            enabled: cfg.flag("metrics.enabled"),
            kafka_compat: cfg.flag("metrics.kafka_compat"),
        },
        listeners: listener_limits(cfg),
    }
}

/// The `[http]`, `[binary]` and `[kafka]` caps and timeouts.
fn listener_limits(cfg: &Effective) -> es_server::listener::Listeners {
    let ms = |id: &str| cfg.int(id).unwrap_or(0);
    let one = |section: &str, connections_max: usize| es_server::listener::ListenerLimits {
        connections_max,
        connections_per_address_max: size(cfg.int(&format!("{section}.max_connections_per_address"))),
        idle_timeout_ms: ms(&format!("{section}.idle_timeout_ms")),
        // HTTP has none: its header-read timeout bounds a stranger instead.
        auth_timeout_ms: match section {
            "http" => es_server::limits::AUTH_TIMEOUT_MS_DEFAULT,
            _ => ms(&format!("{section}.auth_timeout_ms")),
        },
    };
    es_server::listener::Listeners {
        http: one("http", size(cfg.int("http.max_connections"))),
        binary: one("binary", es_server::limits::BINARY_CONNECTIONS_MAX),
        kafka: one("kafka", es_server::limits::KAFKA_CONNECTIONS_MAX),
        http_header_read_timeout_ms: ms("http.header_read_timeout_ms"),
    }
}

/// log.data_dir, which always has a value (its default is ./data).
pub fn data_dir(cfg: &Effective) -> std::path::PathBuf {
    cfg.path("log.data_dir").unwrap_or_else(|| "./data".into())
}

fn run(plan: Plan) -> anyhow::Result<()> {
    let Plan { options, addr, binary_addr, kafka, tls, cluster } = plan;
    let data_dir = options.data_dir.clone();
    let (registry, report) = Registry::open(options)
        .with_context(|| format!("opening the data directory {}", data_dir.display()))?;
    for repair in &report.repairs {
        eprintln!("es-broker: recovery: {repair}");
    }
    eprintln!(
        "es-broker: recovered {} topics, {} partitions from {}",
        report.topics,
        report.partitions,
        data_dir.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let state = es_server::BinaryState::new(registry.clone());
    runtime.block_on(serve(Listeners { addr, binary_addr, kafka, tls }, cluster, state))?;
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
fn check_advertised_host(place: &str, host: &str) -> anyhow::Result<()> {
    let wildcard = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if host.is_empty() || wildcard {
        bail!(
            "{place} {host:?} is not an address clients can connect to; give the host name or IP \
             they should use (for example 127.0.0.1)"
        );
    }
    Ok(())
}

/// The node Kafka clients are told about: the advertised host and port, else the
/// bound ones; in a cluster its id is the node's.
fn kafka_node(kafka: &Kafka, bound: SocketAddr, cluster: Option<&ClusterPlan>) -> es_server::KafkaNode {
    es_server::KafkaNode {
        node_id: cluster.map_or(0, |c| c.node_id as i32),
        host: kafka.host.clone().unwrap_or_else(|| bound.ip().to_string()),
        port: i32::from(kafka.port.unwrap_or(bound.port())),
        cluster_id: "es".into(),
    }
}

/// Each listener's TLS (`None`: plaintext).
pub struct ListenersTls {
    http: Option<ServerTls>,
    binary: Option<ServerTls>,
    kafka: Option<ServerTls>,
}

/// A listener's TLS files from `<section>.tls_*_file` (or `tls.*` for the shared
/// ones).
fn tls_flags(cfg: &Effective, section: &str) -> TlsFlags {
    let (cert, key, ca) = if section == "tls" {
        ("tls.cert_file".to_owned(), "tls.key_file".to_owned(), "tls.client_ca_file".to_owned())
    } else {
        (
            format!("{section}.tls_cert_file"),
            format!("{section}.tls_key_file"),
            format!("{section}.tls_client_ca_file"),
        )
    };
    TlsFlags { cert: cfg.path(&cert), key: cfg.path(&key), client_ca: cfg.path(&ca) }
}

/// Reads every listener's PEM files and the principal rules, so a broken TLS setup
/// stops the start before anything is opened.
pub fn listeners_tls(cfg: &Effective) -> anyhow::Result<ListenersTls> {
    let shared = tls_flags(cfg, "tls");
    let rules = cfg
        .list("tls.principal_rules")
        .iter()
        .map(|r| es_server::tls::PrincipalRule::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    if rules.len() > es_server::limits::TLS_PRINCIPAL_RULES_MAX {
        bail!("at most {} --tls-principal-rule flags", es_server::limits::TLS_PRINCIPAL_RULES_MAX);
    }
    let load = |listener: &str, alpn: &[&[u8]]| -> anyhow::Result<Option<ServerTls>> {
        match es_server::tls::resolve(listener, &tls_flags(cfg, listener), &shared)? {
            Some(files) => Ok(Some(ServerTls::load(&files, &rules, alpn)?)),
            None => Ok(None),
        }
    };
    let tls = ListenersTls {
        http: load("http", &[b"http/1.1"])?,
        binary: load("binary", &[])?,
        kafka: load("kafka", &[])?,
    };
    let mtls = [&tls.http, &tls.binary, &tls.kafka].iter().any(|t| t.as_ref().is_some_and(ServerTls::mtls));
    if !rules.is_empty() && !mtls {
        bail!("--tls-principal-rule needs a listener that asks for client certificates: set --tls-client-ca");
    }
    Ok(tls)
}

/// Reloads the listeners' certificates on SIGHUP and when their files change
/// (looked at every `TLS_WATCH_INTERVAL_MS`), without touching open connections.
fn reload_tls_on_change(tls: &ListenersTls) -> anyhow::Result<()> {
    let all: Vec<ServerTls> = [&tls.http, &tls.binary, &tls.kafka].into_iter().flatten().cloned().collect();
    if all.is_empty() {
        return Ok(());
    }
    let every = std::time::Duration::from_millis(es_server::limits::TLS_WATCH_INTERVAL_MS);
    tokio::spawn(es_server::tls::watch_files(all.clone(), every));
    let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            for t in &all {
                if let Err(e) = t.reload() {
                    eprintln!("es-broker: SIGHUP: {e}; the old certificates stay in force");
                }
            }
        }
    });
    Ok(())
}

/// What a `listening on` line adds for a TLS listener.
fn tls_note(tls: &Option<ServerTls>) -> &'static str {
    match tls {
        Some(t) if t.mtls() => " (tls, client certificates required)",
        Some(_) => " (tls)",
        None => "",
    }
}

/// The client listeners' addresses and TLS.
struct Listeners {
    addr: SocketAddr,
    binary_addr: SocketAddr,
    kafka: Kafka,
    tls: ListenersTls,
}

/// Joins the cluster: binds the peer listener, starts the Raft host and opens every
/// group, before any client listener serves.
async fn join_cluster(
    plan: ClusterPlan,
    registry: &std::sync::Arc<Registry>,
    addresses: es_server::cluster::NodeAddresses,
) -> anyhow::Result<std::sync::Arc<es_server::cluster::Cluster>> {
    let listener = tokio::net::TcpListener::bind(plan.bind)
        .await
        .with_context(|| format!("binding {} for the cluster's peer links (--cluster-peers)", plan.bind))?;
    let options = es_server::cluster::ClusterOptions {
        node_id: plan.node_id,
        peers: plan.peers,
        secrets: es_peer::Secrets::single(es_peer::Secret::new(1, plan.secret)),
        timers: plan.timers,
        addresses,
        leader_balance: plan.leader_balance,
        join: plan.join,
        metadata_log: plan.metadata_log,
    };
    let cluster = es_server::cluster::Cluster::start(registry.clone(), options, listener)
        .await
        .context("joining the cluster")?;
    eprintln!("es-broker: cluster node {} listening for peers on {}", plan.node_id, plan.bind);
    Ok(cluster)
}

async fn serve(
    listeners: Listeners,
    cluster: Option<ClusterPlan>,
    state: es_server::BinaryState,
) -> anyhow::Result<()> {
    let Listeners { addr, binary_addr, kafka, tls } = listeners;
    let registry = state.service.registry().clone();
    let binary = tokio::net::TcpListener::bind(binary_addr)
        .await
        .with_context(|| format!("binding {binary_addr} for the binary protocol (--bind-binary)"))?;
    let kafka_listener = tokio::net::TcpListener::bind(kafka.addr)
        .await
        .with_context(|| format!("binding {} for the Kafka protocol (--bind-kafka)", kafka.addr))?;
    let kafka_local = kafka_listener.local_addr().context("reading the bound address")?;
    let node = kafka_node(&kafka, kafka_local, cluster.as_ref());
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr().context("reading the bound address")?;
    let binary_local = binary.local_addr().context("reading the bound address")?;
    let scheme = if tls.http.is_some() { "https" } else { "http" };
    let member = match cluster {
        Some(plan) => {
            let addresses = es_server::cluster::NodeAddresses {
                kafka_host: node.host.clone(),
                kafka_port: u16::try_from(node.port).unwrap_or(0),
                http: format!("{scheme}://{local}"),
                binary: binary_local.to_string(),
                rack: plan.rack.clone(),
            };
            Some(join_cluster(plan, &registry, addresses).await?)
        }
        None => None,
    };
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
    writeln!(out, "listening on {scheme}://{local}{}", tls_note(&tls.http))?;
    out.flush()?;
    drop(out);
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    reload_tls_on_change(&tls)?;
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
    kafka_task.await.context("the Kafka listener failed")?;
    if let Some(cluster) = member {
        // The groups stop before the logs close under them.
        cluster.shutdown().await;
    }
    Ok(())
}

/// Auth settings. The bootstrap key comes from auth.bootstrap_key (the variable
/// ES_AUTH_BOOTSTRAP_KEY or the file; never a flag: flags show in the process list)
/// or from auth.bootstrap_key_file.
fn auth_options(cfg: &Effective) -> anyhow::Result<es_server::auth::AuthOptions> {
    let inline = cfg.text("auth.bootstrap_key").filter(|k| !k.trim().is_empty());
    let from_file = match cfg.path("auth.bootstrap_key_file") {
        Some(path) => Some(std::fs::read_to_string(&path).with_context(|| {
            format!("reading {} {}", place(cfg, "auth.bootstrap_key_file"), path.display())
        })?),
        None => None,
    };
    if inline.is_some() && from_file.is_some() {
        bail!(
            "set {} or {}, not both",
            place(cfg, "auth.bootstrap_key"),
            place(cfg, "auth.bootstrap_key_file")
        );
    }
    let quota = es_server::auth::KeyQuota {
        produce_bytes_per_s: cfg.int("auth.quota_produce_bytes_per_s"),
        fetch_bytes_per_s: cfg.int("auth.quota_fetch_bytes_per_s"),
    };
    Ok(es_server::auth::AuthOptions {
        enabled: cfg.flag("auth.enabled"),
        bootstrap_key: inline.or(from_file),
        pepper_file: cfg.path("auth.pepper_file"),
        quota,
        requests_per_s_per_key: cfg.int("auth.requests_per_s_per_key"),
        requests_per_s_per_address: cfg.int("auth.requests_per_s_per_address"),
        kafka: es_server::auth::KafkaSaslOptions {
            allow_plaintext_plain: cfg.flag("kafka.allow_plaintext_plain"),
            session_lifetime_ms: cfg.int("auth.kafka_session_lifetime_ms").unwrap_or(0),
        },
        // `--auth-mechanisms A,B` as one flag, as repeated flags, or as a list.
        mechanisms: cfg
            .list("auth.mechanisms")
            .iter()
            .flat_map(|m| m.split(','))
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .collect(),
        replicated: cfg.int("cluster.node_id").is_some(),
    })
}

/// Resolves the listen address of setting `id`. A non-loopback one is refused
/// unless auth is on: without it, listening elsewhere would open the data to the
/// network. With auth on, Kafka clients log in with SASL (SCRAM; PLAIN over TLS, or
/// when allowed).
pub fn listen_addr(cfg: &Effective, id: &str, auth: bool, tls: bool) -> anyhow::Result<SocketAddr> {
    let flag = place(cfg, id);
    let bind = cfg.text(id).unwrap_or_default();
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
             (auth.enabled; and a bootstrap key, see docs/security.md), or listen on a loopback address such as 127.0.0.1"
        ),
        Some(open) if !tls => eprintln!(
            "es-broker: warning: {flag} {open} is reachable from the network without TLS: \
             API keys travel in the clear; set --tls-cert and --tls-key (docs/security.md, \"TLS\")"
        ),
        Some(_) | None => {}
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{Inputs, resolve};

    fn cfg(file: &str) -> Effective {
        resolve(&Inputs { file: Some(("es.toml".into(), file.to_owned())), ..Inputs::default() }).unwrap()
    }

    #[test]
    fn the_defaults_plan_a_loopback_broker() {
        let plan = plan(&cfg("")).unwrap();
        assert_eq!(plan.addr.to_string(), "127.0.0.1:9000");
        assert_eq!(plan.binary_addr.to_string(), "127.0.0.1:9001");
        assert_eq!(plan.kafka.addr.to_string(), "127.0.0.1:9092");
        assert_eq!(plan.options.data_dir, std::path::PathBuf::from("./data"));
        assert!(plan.options.journal && plan.options.metrics.enabled && !plan.options.auth.enabled);
        assert_eq!(plan.options.request_bytes_max, es_server::limits::REQUEST_BYTES_MAX_DEFAULT);
    }

    #[test]
    fn a_file_reaches_the_options() {
        let plan = plan(&cfg(
            "[log]\ndata_dir = \"/d\"\nhousekeeping_interval_ms = 5\n[journal]\nenabled = false\n\
             [auth]\nquota_fetch_bytes_per_s = 7\n[kafka]\nadvertised_host = \"h\"\nadvertised_port = 1\n",
        ))
        .unwrap();
        assert_eq!(plan.options.data_dir, std::path::PathBuf::from("/d"));
        assert_eq!(plan.options.housekeeping_interval, std::time::Duration::from_millis(5));
        assert!(!plan.options.journal);
        assert_eq!(plan.options.auth.quota.fetch_bytes_per_s, Some(7));
        assert_eq!((plan.kafka.host.as_deref(), plan.kafka.port), (Some("h"), Some(1)));
    }

    #[test]
    fn every_unsafe_setting_is_named_at_once() {
        let errors = plan(&cfg(
            "[http]\nbind = \"0.0.0.0:1\"\n[kafka]\nadvertised_host = \"0.0.0.0\"\n[tls]\ncert_file = \"/x\"\n",
        ))
        .err()
        .unwrap();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("--tls-cert is set but no key"), "{errors:?}");
        assert!(
            errors[1].contains("(from es.toml: http.bind 0.0.0.0:1) without authentication"),
            "{errors:?}"
        );
        assert!(errors[2].contains("es.toml: kafka.advertised_host \"0.0.0.0\""), "{errors:?}");
    }
}
