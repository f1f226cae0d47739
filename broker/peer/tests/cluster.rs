//! Three peer nodes on 127.0.0.1 in one process: all-pairs RPCs, 1,000 groups'
//! RPCs coalesced into few writes, wrong secrets refused, key rotation, restart and
//! reconnect, timeouts, remote failures and shutdown.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use es_peer::{PeerError, PeerNode, Secret, Secrets};

const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_answers_in_both_directions() {
    let (nodes, _) = cluster(3).await;
    for from in &nodes {
        for to in nodes.iter().filter(|n| n.node_id() != from.node_id()) {
            for group in [0, 7, u64::MAX] {
                let got = from.call(to.node_id(), group, 3, Bytes::from_static(b"ping")).await.unwrap();
                assert_eq!(got, expected(to.node_id(), from.node_id(), group, 3, "ping"));
            }
        }
    }
    // One link per pair: each node made or accepted exactly two handshakes.
    for n in &nodes {
        assert_eq!(n.stats().snapshot().handshakes_ok, 2, "node {}", n.node_id());
    }
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_groups_share_few_writes() {
    // No keepalives: the counts below are the RPCs' frames alone.
    let (nodes, _) = cluster_with(3, |c| c.timeouts.keepalive = Duration::from_secs(60)).await;
    let nodes: Vec<Arc<PeerNode>> = nodes.into_iter().map(Arc::new).collect();
    // Bring the link up first so the burst measures only the RPCs.
    nodes[0].call(2, 0, 1, Bytes::new()).await.unwrap();
    let (before_1, before_2) = (nodes[0].stats().snapshot(), nodes[1].stats().snapshot());
    let mut calls = tokio::task::JoinSet::new();
    for group in 0..1000u64 {
        let n = nodes[0].clone();
        calls.spawn(async move { (group, n.call(2, group, 1, Bytes::from_static(b"hb")).await) });
    }
    while let Some(done) = calls.join_next().await {
        let (group, got) = done.unwrap();
        assert_eq!(got.unwrap(), expected(2, 1, group, 1, "hb"));
    }
    // A writer counts a write after it returns, which may be after the peer read it.
    let (s1, s2) = (nodes[0].stats(), nodes[1].stats());
    let counted = || async {
        s1.snapshot().frames_sent - before_1.frames_sent >= 1000
            && s2.snapshot().frames_sent - before_2.frames_sent >= 1000
    };
    assert!(wait_until(LIMIT, counted).await);
    let (after_1, after_2) = (nodes[0].stats().snapshot(), nodes[1].stats().snapshot());
    let (frames, writes) = (after_1.frames_sent - before_1.frames_sent, after_1.writes - before_1.writes);
    let (replies, reply_writes) =
        (after_2.frames_sent - before_2.frames_sent, after_2.writes - before_2.writes);
    eprintln!(
        "requests: {frames} frames in {writes} writes; responses: {replies} frames in {reply_writes} writes"
    );
    assert_eq!((frames, replies), (1000, 1000));
    assert!(writes * 4 < frames, "requests were not coalesced: {writes} writes");
    assert!(reply_writes * 4 < replies, "responses were not coalesced: {reply_writes} writes");
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_both_ways() {
    let (ls, addrs) = listeners(3).await;
    let mut ls = ls.into_iter();
    let wrong = Secrets::single(Secret::new(1, b"this is not the cluster secret"));
    let n1 = PeerNode::start(config(1, &addrs, wrong.clone()), ls.next().unwrap(), echo(1)).unwrap();
    let n2 = PeerNode::start(config(2, &addrs, secrets()), ls.next().unwrap(), echo(2)).unwrap();
    let n3 = PeerNode::start(config(3, &addrs, wrong), ls.next().unwrap(), echo(3)).unwrap();
    // Node 1 dials 2 (2 refuses) and node 2 dials 3 (3 refuses).
    let (s2, s3) = (n2.stats(), n3.stats());
    let refused =
        || async { s2.snapshot().handshake_auth_failures >= 1 && s3.snapshot().handshake_auth_failures >= 1 };
    assert!(wait_until(LIMIT, refused).await);
    let short = Duration::from_millis(300);
    for (from, to) in [(&n1, 2), (&n2, 1), (&n2, 3), (&n3, 2)] {
        let r = from.call_timeout(to, 1, 1, Bytes::new(), short).await;
        assert!(matches!(r, Err(PeerError::Unavailable(t)) if t == to), "{} -> {to}: {r:?}", from.node_id());
    }
    // The two nodes that share the wrong secret are still a pair.
    assert_eq!(n1.call(3, 1, 1, Bytes::new()).await.unwrap(), expected(3, 1, 1, 1, ""));
    assert_eq!(n2.stats().snapshot().handshakes_ok, 0);
    for n in [n1, n2, n3] {
        n.shutdown().await;
    }
}

/// Node 1 holds `one`, node 2 holds `two`; both directions must work.
async fn pair_with(one: Secrets, two: Secrets) -> (PeerNode, PeerNode) {
    let (ls, addrs) = listeners(2).await;
    let addrs2: std::collections::BTreeMap<u64, String> = addrs.into_iter().collect();
    let mut ls = ls.into_iter();
    let n1 = PeerNode::start(config(1, &addrs2, one), ls.next().unwrap(), echo(1)).unwrap();
    let n2 = PeerNode::start(config(2, &addrs2, two), ls.next().unwrap(), echo(2)).unwrap();
    assert_eq!(n1.call(2, 5, 1, Bytes::new()).await.unwrap(), expected(2, 1, 5, 1, ""));
    assert_eq!(n2.call(1, 5, 1, Bytes::new()).await.unwrap(), expected(1, 2, 5, 1, ""));
    (n1, n2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_works_one_node_at_a_time() {
    let old = Secret::new(1, b"the old cluster secret, 2025");
    let new = Secret::new(2, b"the new cluster secret, 2026");
    let rotated = Secrets { current: new.clone(), previous: Some(old.clone()) };
    // The dialer moved first: the acceptor refuses key 2, the dialer falls back to 1.
    let (n1, n2) = pair_with(rotated.clone(), Secrets::single(old.clone())).await;
    assert_eq!(n2.stats().snapshot().handshake_auth_failures, 1, "key id 2 unknown to node 2");
    n1.shutdown().await;
    n2.shutdown().await;
    // The acceptor moved first: it accepts the dialer's old key as its previous one.
    let (n1, n2) = pair_with(Secrets::single(old), rotated.clone()).await;
    assert_eq!(n2.stats().snapshot().handshake_auth_failures, 0);
    n1.shutdown().await;
    n2.shutdown().await;
    // Both moved: the old secret can go.
    let (n1, n2) = pair_with(rotated, Secrets::single(new)).await;
    n1.shutdown().await;
    n2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_come_back_after_a_peer_restarts() {
    let (nodes, addrs) = cluster(3).await;
    let mut nodes: Vec<Option<PeerNode>> = nodes.into_iter().map(Some).collect();
    let n1 = nodes[0].take().unwrap();
    assert!(n1.call(3, 1, 1, Bytes::new()).await.is_ok());
    // Node 3 (which node 1 dials) and node 1 (which node 2 dials) both restart on
    // the same addresses.
    let n3 = nodes[2].take().unwrap();
    n3.shutdown().await;
    drop(n3);
    let down = n1.call_timeout(3, 1, 1, Bytes::new(), Duration::from_millis(200)).await;
    // Either the link was already seen down, or the call went out as it died.
    assert!(matches!(down, Err(PeerError::Unavailable(3) | PeerError::LinkClosed)), "{down:?}");
    let l3 = tokio::net::TcpListener::bind(&addrs[&3]).await.unwrap();
    let n3 = PeerNode::start(config(3, &addrs, secrets()), l3, echo(3)).unwrap();
    assert_eq!(call_eventually(&n1, 3, 2, LIMIT).await, expected(3, 1, 2, 1, ""));
    assert_eq!(call_eventually(&n3, 1, 2, LIMIT).await, expected(1, 3, 2, 1, ""));
    n1.shutdown().await;
    drop(n1);
    let l1 = tokio::net::TcpListener::bind(&addrs[&1]).await.unwrap();
    let n1 = PeerNode::start(config(1, &addrs, secrets()), l1, echo(1)).unwrap();
    let n2 = nodes[1].take().unwrap();
    assert_eq!(call_eventually(&n2, 1, 3, LIMIT).await, expected(1, 2, 3, 1, ""));
    assert_eq!(call_eventually(&n3, 1, 3, LIMIT).await, expected(1, 3, 3, 1, ""));
    // The new node 1 dialed both; the new node 3 accepted node 2 once, node 1 twice.
    assert_eq!(n1.stats().snapshot().handshakes_ok, 2);
    assert_eq!(n3.stats().snapshot().handshakes_ok, 3);
    for n in [n1, n2, n3] {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_rpc_times_out_without_holding_up_the_link() {
    let (nodes, _) = cluster(2).await;
    let slow = nodes[0].call_timeout(2, 1, KIND_SLOW, Bytes::new(), Duration::from_millis(300));
    let fast = async {
        // Sent while the slow one is outstanding on the same link.
        tokio::time::sleep(Duration::from_millis(50)).await;
        nodes[0].call(2, 2, 1, Bytes::from_static(b"x")).await
    };
    let (slow, fast) = tokio::join!(slow, fast);
    assert!(matches!(slow, Err(PeerError::Timeout)), "{slow:?}");
    assert_eq!(fast.unwrap(), expected(2, 1, 2, 1, "x"));
    assert_eq!(nodes[0].stats().snapshot().calls_timed_out, 1);
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_failures_and_bad_targets_are_typed() {
    let (nodes, _) = cluster(2).await;
    match nodes[1].call(1, 9, KIND_FAIL, Bytes::new()).await {
        Err(PeerError::Remote(e)) => assert_eq!((e.code, e.message.as_str()), (4242, "group 9 refused")),
        other => panic!("expected a remote failure, got {other:?}"),
    }
    match nodes[0].call(2, 9, KIND_PANIC, Bytes::new()).await {
        Err(PeerError::Remote(e)) => assert_eq!(e.code, es_peer::HANDLER_PANICKED),
        other => panic!("expected a remote failure, got {other:?}"),
    }
    // The link survives a panicking handler.
    assert_eq!(nodes[0].call(2, 9, 1, Bytes::new()).await.unwrap(), expected(2, 1, 9, 1, ""));
    assert!(matches!(nodes[0].call(1, 1, 1, Bytes::new()).await, Err(PeerError::SelfCall)));
    assert!(matches!(nodes[0].call(9, 1, 1, Bytes::new()).await, Err(PeerError::UnknownNode(9))));
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_outstanding_calls_at_once() {
    let (nodes, _) = cluster(2).await;
    let nodes: Vec<Arc<PeerNode>> = nodes.into_iter().map(Arc::new).collect();
    nodes[0].call(2, 0, 1, Bytes::new()).await.unwrap();
    let caller = nodes[0].clone();
    let pending = tokio::spawn(async move { caller.call(2, 1, KIND_SLOW, Bytes::new()).await });
    let served = nodes[1].stats();
    // Wait until the slow request has reached node 2's handler.
    assert!(wait_until(LIMIT, || async { served.snapshot().frames_received >= 2 }).await);
    let started = tokio::time::Instant::now();
    nodes[1].shutdown().await;
    let r = tokio::time::timeout(LIMIT, pending).await.unwrap().unwrap();
    assert!(matches!(r, Err(PeerError::LinkClosed)), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    nodes[0].shutdown().await;
    assert!(matches!(nodes[0].call(2, 1, 1, Bytes::new()).await, Err(PeerError::Shutdown)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_hold_a_handshake_slot_only_until_the_timeout() {
    use tokio::io::AsyncReadExt;
    let (ls, addrs) = listeners(2).await;
    let mut ls = ls.into_iter();
    let l1 = ls.next().unwrap();
    let mut c2 = config(2, &addrs, secrets());
    c2.timeouts.handshake = Duration::from_millis(300);
    let n2 = PeerNode::start(c2, ls.next().unwrap(), echo(2)).unwrap();
    // More silent connections than there are handshake slots.
    let mut silent = Vec::new();
    for _ in 0..es_peer::limits::HANDSHAKES_MAX + 8 {
        silent.push(tokio::net::TcpStream::connect(&addrs[&2]).await.unwrap());
    }
    let started = tokio::time::Instant::now();
    let n1 = PeerNode::start(config(1, &addrs, secrets()), l1, echo(1)).unwrap();
    assert_eq!(n1.call(2, 1, 1, Bytes::new()).await.unwrap(), expected(2, 1, 1, 1, ""));
    // Node 1 got in only once the silent ones timed out: the slots are a real bound.
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    // Each silent connection was closed: at its timeout, or at once when no slot was free.
    for mut s in silent {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(LIMIT, s.read(&mut byte)).await.unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    assert_eq!(n2.stats().snapshot().handshake_auth_failures, 0);
    n1.shutdown().await;
    n2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_added_later_is_linked_and_a_removed_one_refused() {
    // Nodes 1 and 2 start knowing each other only; node 3 knows all three (a node
    // joining a running cluster).
    let (ls, addrs) = listeners(3).await;
    let mut ls = ls.into_iter();
    let two: std::collections::BTreeMap<u64, String> =
        addrs.iter().filter(|(id, _)| **id != 3).map(|(id, a)| (*id, a.clone())).collect();
    let n1 = PeerNode::start(config(1, &two, secrets()), ls.next().unwrap(), echo(1)).unwrap();
    let n2 = PeerNode::start(config(2, &two, secrets()), ls.next().unwrap(), echo(2)).unwrap();
    let n3 = PeerNode::start(config(3, &addrs, secrets()), ls.next().unwrap(), echo(3)).unwrap();
    assert!(matches!(n1.call(3, 1, 1, Bytes::new()).await, Err(PeerError::UnknownNode(3))));
    // Lower ids dial higher ones, so nothing links node 3 until the others know it.
    let down = n3.call_timeout(1, 1, 1, Bytes::new(), Duration::from_millis(200)).await;
    assert!(matches!(down, Err(PeerError::Unavailable(1))), "{down:?}");
    assert!(n1.add_peer(3, &addrs[&3]).unwrap());
    assert!(n2.add_peer(3, &addrs[&3]).unwrap());
    assert!(!n2.add_peer(3, &addrs[&3]).unwrap(), "known already");
    assert!(matches!(n1.add_peer(1, &addrs[&1]), Err(PeerError::SelfInPeers(1))));
    assert_eq!(call_eventually(&n1, 3, 4, LIMIT).await, expected(3, 1, 4, 1, ""));
    assert_eq!(call_eventually(&n3, 2, 4, LIMIT).await, expected(2, 3, 4, 1, ""));
    assert_eq!(n1.peers().keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    // Removed: the link closes (and counts as lost), calls are refused, and its
    // redials too.
    let mut losses = n1.link_losses();
    assert!(n1.remove_peer(3));
    assert_eq!(tokio::time::timeout(LIMIT, losses.recv()).await.unwrap().unwrap(), 3);
    assert!(!n1.remove_peer(3));
    assert!(matches!(n1.call(3, 1, 1, Bytes::new()).await, Err(PeerError::UnknownNode(3))));
    assert!(
        wait_until(LIMIT, || async { !n3.is_connected(1) }).await,
        "node 3 still linked to node 1 after its removal"
    );
    for n in [n1, n2, n3] {
        n.shutdown().await;
    }
}
