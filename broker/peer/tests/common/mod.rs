//! Shared helpers of the peer-link tests: nodes on 127.0.0.1:0, an echo handler,
//! and a bounded wait on a condition.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use es_peer::{Handler, PeerConfig, PeerNode, RpcError, Secret, Secrets, Timeouts, handler};
use tokio::net::TcpListener;

pub const SECRET: &[u8] = b"a shared cluster secret for tests";
/// The RPC kind the echo handler answers slowly, and the one it fails.
pub const KIND_SLOW: u8 = 200;
pub const KIND_FAIL: u8 = 201;
pub const KIND_PANIC: u8 = 202;

pub fn secrets() -> Secrets {
    Secrets::single(Secret::new(1, SECRET))
}

pub fn timeouts() -> Timeouts {
    let ms = Duration::from_millis;
    Timeouts {
        connect: ms(1000),
        handshake: ms(1000),
        request: ms(5000),
        backoff_min: ms(10),
        backoff_max: ms(200),
        keepalive: ms(100),
        idle: ms(2000),
    }
}

/// Logs to the test's output when RUST_LOG is set.
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub async fn bind() -> TcpListener {
    logs();
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// Binds `n` listeners (node ids 1..=n) and returns them with the address map.
pub async fn listeners(n: u64) -> (Vec<TcpListener>, BTreeMap<u64, String>) {
    let mut ls = Vec::new();
    let mut addrs = BTreeMap::new();
    for id in 1..=n {
        let l = bind().await;
        addrs.insert(id, l.local_addr().unwrap().to_string());
        ls.push(l);
    }
    (ls, addrs)
}

pub fn config(id: u64, addrs: &BTreeMap<u64, String>, secrets: Secrets) -> PeerConfig {
    let peers = addrs.iter().filter(|(p, _)| **p != id).map(|(p, a)| (*p, a.clone())).collect();
    PeerConfig { node_id: id, peers, secrets, timeouts: timeouts(), tls: None }
}

/// Answers `"<own><-<from>:<group>:<kind>:" + payload`; sleeps on KIND_SLOW and
/// fails on KIND_FAIL.
pub fn echo(own: u64) -> Handler {
    handler(move |from, group, kind, payload: Bytes| async move {
        if kind == KIND_SLOW {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        assert!(kind != KIND_PANIC, "the test handler panics on KIND_PANIC");
        if kind == KIND_FAIL {
            return Err(RpcError::new(4242, format!("group {group} refused")));
        }
        let mut out = format!("{own}<-{from}:{group}:{kind}:").into_bytes();
        out.extend_from_slice(&payload);
        Ok(Bytes::from(out))
    })
}

pub fn expected(own: u64, from: u64, group: u64, kind: u8, payload: &str) -> Bytes {
    Bytes::from(format!("{own}<-{from}:{group}:{kind}:{payload}"))
}

/// Starts nodes 1..=n, all with `secrets`.
pub async fn cluster(n: u64) -> (Vec<PeerNode>, BTreeMap<u64, String>) {
    cluster_with(n, |_| {}).await
}

/// Starts nodes 1..=n, each configuration changed by `change` first.
pub async fn cluster_with(
    n: u64,
    change: impl Fn(&mut PeerConfig),
) -> (Vec<PeerNode>, BTreeMap<u64, String>) {
    let (ls, addrs) = listeners(n).await;
    let nodes = ls
        .into_iter()
        .zip(1..)
        .map(|(l, id)| {
            let mut c = config(id, &addrs, secrets());
            change(&mut c);
            PeerNode::start(c, l, echo(id)).unwrap()
        })
        .collect();
    (nodes, addrs)
}

/// Polls `cond` until it holds or `limit` passes; returns whether it held.
pub async fn wait_until<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Calls until the call succeeds or `limit` passes, as a Raft layer retries: a
/// request sent on a link that was dying when it went out fails with `LinkClosed`.
pub async fn call_eventually(node: &PeerNode, to: u64, group: u64, limit: Duration) -> Bytes {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match node.call_timeout(to, group, 1, Bytes::new(), Duration::from_millis(500)).await {
            Ok(b) => return b,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "{} -> {to}: {e}", node.node_id()),
        }
    }
}
