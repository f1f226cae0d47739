//! Idle cost of many Raft groups: three hosts in one process with the default timers
//! (300 ms heartbeats), `ES_IDLE_GROUPS` groups (1,000 by default) replicated on all
//! three, measured for 10 s once every group has a leader and is quiet
//! (`ES_IDLE_QUIESCE_AFTER_MS=0`: never quiet, every group heartbeating). Ignored by default (it
//! measures rather than checks much); run it with
//! `cargo test --release -p es-raft --test idle_cpu -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use es_log::{LogConfig, LogManager, ManagerOptions};
use es_peer::{PeerConfig, Secret, Secrets, Timeouts};
use es_raft::{RaftHost, Timers};
use tokio::net::TcpListener;

const VOTERS: [u64; 3] = [1, 2, 3];
const MEASURE: Duration = Duration::from_secs(10);

/// This process's user + system CPU time, from /proc/self/stat (USER_HZ = 100).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let (utime, stime): (u64, u64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
    Duration::from_millis((utime + stime) * 10)
}

fn peer_config(id: u64, addrs: &BTreeMap<u64, String>) -> PeerConfig {
    let peers = addrs.iter().filter(|(p, _)| **p != id).map(|(p, a)| (*p, a.clone())).collect();
    let secrets = Secrets::single(Secret::new(1, b"a shared cluster secret for raft tests".to_vec()));
    PeerConfig { node_id: id, peers, secrets, timeouts: Timeouts::default(), tls: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn many_idle_groups_cost_little_cpu() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let groups = env("ES_IDLE_GROUPS").unwrap_or(1000);
    // ES_IDLE_HEARTBEAT_MS: heartbeat interval, elections at 5-10 heartbeats.
    let timers = env("ES_IDLE_HEARTBEAT_MS").map_or(Timers::default(), |h| Timers {
        heartbeat_ms: h,
        election_min_ms: 5 * h,
        election_max_ms: 10 * h,
        ..Timers::default()
    });
    let timers = Timers {
        quiesce_after_ms: env("ES_IDLE_QUIESCE_AFTER_MS").unwrap_or(timers.quiesce_after_ms),
        ..timers
    };
    let mut listeners = Vec::new();
    let mut addrs = BTreeMap::new();
    for id in VOTERS {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.insert(id, l.local_addr().unwrap().to_string());
        listeners.push(l);
    }
    let dirs: Vec<_> = VOTERS.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let opts = || ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let managers: Vec<LogManager> = dirs.iter().map(|d| LogManager::new(d.path(), opts()).unwrap()).collect();
    let mut hosts = Vec::new();
    for (id, l) in VOTERS.into_iter().zip(listeners) {
        hosts.push(RaftHost::start(peer_config(id, &addrs), l, timers, None).unwrap());
    }
    let started = Instant::now();
    let mut handles = Vec::new();
    for g in 0..groups {
        for (host, m) in hosts.iter().zip(&managers) {
            let (log, _) = m.open_partition(&format!("g-{g}"), LogConfig::default()).unwrap();
            handles.push(host.open_group(g, log, &VOTERS).await.unwrap());
        }
    }
    let opened = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(120);
    while handles.iter().any(|h| h.leader().is_none()) {
        assert!(Instant::now() < deadline, "not every group elected a leader in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elected = started.elapsed();
    // Let the elections' blank entries and first heartbeats settle, and the
    // groups quiesce (unless ES_IDLE_QUIESCE_AFTER_MS=0 keeps them heartbeating).
    tokio::time::sleep(Duration::from_secs(2)).await;
    if timers.quiesce_after_ms > 0 {
        let deadline = Instant::now() + Duration::from_secs(60);
        while handles.iter().any(|h| !h.status().quiesced) {
            assert!(Instant::now() < deadline, "not every group quiesced in time");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let quiet = started.elapsed();
    let (cpu0, t0) = (cpu_time(), Instant::now());
    tokio::time::sleep(MEASURE).await;
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    let share = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
    let mut leaders = BTreeMap::new();
    for h in handles.iter().step_by(3) {
        *leaders.entry(h.leader().unwrap()).or_insert(0u64) += 1;
    }
    eprintln!(
        "{groups} groups x 3 nodes, {timers:?}: opened in {opened:?}, all led after {elected:?}, \
         quiet after {quiet:?}; idle: {share:.1}% of one core for the whole process over {wall:?}; \
         leaders {leaders:?}"
    );
    for h in &hosts {
        h.shutdown().await;
    }
    drop(handles);
    for m in &managers {
        m.shutdown().unwrap();
    }
}
