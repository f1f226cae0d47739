//! What the peer layer costs for 1,000 Raft groups' heartbeats on 3 nodes in one
//! process: every 300 ms each node sends a heartbeat RPC for each group it leads
//! (a third of them) to both other nodes. Ignored by default (it runs for seconds
//! and measures rather than checks much); run it with
//! `cargo test --release -p es-peer --test heartbeat_cpu -- --ignored --nocapture`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use es_peer::PeerNode;

const GROUPS: u64 = 1000;
const TICK: Duration = Duration::from_millis(300);
const TICKS: u32 = 20;

/// This process's user + system CPU time, from /proc/self/stat (in USER_HZ ticks,
/// which the kernel ABI fixes at 100 per second).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let (utime, stime): (u64, u64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
    Duration::from_millis((utime + stime) * 10)
}

/// One tick of node `n`: a heartbeat for each group it leads, to both followers.
async fn tick(n: &Arc<PeerNode>, nodes: u64) {
    let mut calls = tokio::task::JoinSet::new();
    for group in (0..GROUPS).filter(|g| g % nodes == n.node_id() - 1) {
        for to in (1..=nodes).filter(|&t| t != n.node_id()) {
            let n = n.clone();
            calls.spawn(async move { n.call(to, group, 1, Bytes::from_static(&[0; 24])).await });
        }
    }
    while let Some(r) = calls.join_next().await {
        r.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of several seconds"]
async fn heartbeats_of_a_thousand_groups() {
    let (nodes, _) = cluster(3).await;
    let nodes: Vec<Arc<PeerNode>> = nodes.into_iter().map(Arc::new).collect();
    for n in &nodes {
        tick(n, 3).await;
    }
    let before: Vec<_> = nodes.iter().map(|n| n.stats().snapshot()).collect();
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    let mut interval = tokio::time::interval(TICK);
    for _ in 0..TICKS {
        interval.tick().await;
        let ticks: Vec<_> = nodes.iter().map(|n| tick(n, 3)).collect();
        for t in ticks {
            t.await;
        }
    }
    let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
    let mut frames = 0;
    let mut writes = 0;
    for (n, b) in nodes.iter().zip(&before) {
        let a = n.stats().snapshot();
        frames += a.frames_sent - b.frames_sent;
        writes += a.writes - b.writes;
    }
    let share = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
    eprintln!(
        "{GROUPS} groups, {TICKS} ticks of {TICK:?} in {wall:?}: {frames} frames in {writes} writes; \
         process CPU {cpu:?} = {share:.1}% of one core for 3 nodes and the load generator"
    );
    assert!(frames >= u64::from(TICKS) * GROUPS * 2 * 2, "{frames}");
    for n in &nodes {
        n.shutdown().await;
    }
}
