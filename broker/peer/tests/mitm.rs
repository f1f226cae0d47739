//! A man-in-the-middle proxy between two peer nodes replays, reorders, drops and
//! tampers with frames of an authenticated link, and replays a recorded handshake:
//! each kills the link (or is refused) and is counted, nothing it changed reaches a
//! handler, and the nodes reconnect afterwards.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use es_peer::frame::HEADER_BYTES;
use es_peer::handshake::{CHALLENGE_BYTES, HELLO_BYTES, PROOF_BYTES};
use es_peer::{Handler, PeerError, PeerNode, handler};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);
/// The frame (counted from 0 after the handshake, in the faulty direction) the
/// proxy interferes with.
const AT: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Replay,
    Reorder,
    Drop,
    Tamper,
    ReplayHandshake,
    /// From frame `AT` on, nothing more is forwarded (a silent partition).
    BlackHole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Toward {
    Acceptor,
    Dialer,
}

/// Forwards connections to `target`; the first one gets `fault` in one direction,
/// later ones (the reconnects) pass through untouched.
async fn proxy(target: String, fault: Fault, toward: Toward) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&target).await.unwrap();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let fault = first.then_some(fault);
            first = false;
            let (to_acceptor, to_dialer) = match toward {
                Toward::Acceptor => (fault, None),
                Toward::Dialer => (None, fault),
            };
            tokio::spawn(pump(cr, sw, [HELLO_BYTES, PROOF_BYTES], to_acceptor, target.clone()));
            tokio::spawn(pump(sr, cw, [CHALLENGE_BYTES, PROOF_BYTES], to_dialer, target.clone()));
        }
    });
    addr
}

/// Copies this direction's two handshake messages (of `handshake` bytes each), then
/// frame by frame, applying `fault` at frame `AT`.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    handshake: [usize; 2],
    fault: Option<Fault>,
    target: String,
) {
    let mut hs = Vec::new();
    for n in handshake {
        let mut message = vec![0u8; n];
        if from.read_exact(&mut message).await.is_err() || to.write_all(&message).await.is_err() {
            return;
        }
        hs.extend_from_slice(&message);
    }
    if fault == Some(Fault::ReplayHandshake) {
        tokio::spawn(async move {
            let mut replay = TcpStream::connect(&target).await.unwrap();
            let _ = replay.write_all(&hs).await;
            let mut sink = Vec::new();
            let _ = replay.read_to_end(&mut sink).await;
        });
    }
    let mut held: Option<Vec<u8>> = None;
    for i in 0.. {
        let Ok(len) = from.read_u32().await else { return };
        let mut frame = len.to_be_bytes().to_vec();
        frame.resize(4 + len as usize, 0);
        if from.read_exact(&mut frame[4..]).await.is_err() {
            return;
        }
        let mut out = Vec::new();
        match fault {
            Some(Fault::Replay) if i == AT => out.extend_from_slice(&[&frame[..], &frame[..]].concat()),
            Some(Fault::Drop) if i == AT => {}
            Some(Fault::BlackHole) if i >= AT => {}
            Some(Fault::Reorder) if i == AT => held = Some(frame),
            Some(Fault::Tamper) if i == AT => {
                // The last byte of the correlation id: a response to another call.
                frame[4 + HEADER_BYTES - 1] ^= 1;
                out = frame;
            }
            _ => {
                out = frame;
                out.extend(held.take().unwrap_or_default());
            }
        }
        if to.write_all(&out).await.is_err() {
            return;
        }
    }
}

struct Pair {
    n1: Arc<PeerNode>,
    n2: Arc<PeerNode>,
    /// How many times node 2's handler ran for each group.
    served: Arc<Mutex<HashMap<u64, u32>>>,
}

/// Node 2's handler: echoes like `echo(2)` and counts each group.
fn counting(served: Arc<Mutex<HashMap<u64, u32>>>) -> Handler {
    handler(move |from, group, kind, _payload| {
        *served.lock().unwrap().entry(group).or_default() += 1;
        async move { Ok(expected(2, from, group, kind, "")) }
    })
}

/// Node 1 dials node 2 through the proxy.
async fn pair(fault: Fault, toward: Toward) -> Pair {
    let (ls, addrs) = listeners(2).await;
    let mut via_proxy = addrs.clone();
    via_proxy.insert(2, proxy(addrs[&2].clone(), fault, toward).await);
    let mut ls = ls.into_iter();
    let (mut c1, mut c2) = (config(1, &via_proxy, secrets()), config(2, &addrs, secrets()));
    for c in [&mut c1, &mut c2] {
        // Keepalives are frames too: the proxy's frame count must be the calls' alone,
        // except in the black-hole test, which needs them.
        if fault == Fault::BlackHole {
            c.timeouts.keepalive = Duration::from_millis(50);
            c.timeouts.idle = Duration::from_millis(400);
        } else {
            c.timeouts.keepalive = Duration::from_secs(60);
            c.timeouts.idle = Duration::from_secs(120);
        }
    }
    let n1 = PeerNode::start(c1, ls.next().unwrap(), echo(1)).unwrap();
    let served = Arc::new(Mutex::new(HashMap::new()));
    let n2 = PeerNode::start(c2, ls.next().unwrap(), counting(served.clone())).unwrap();
    Pair { n1: Arc::new(n1), n2: Arc::new(n2), served }
}

/// Two calls in turn (frames 0 and 1 each way), then two at once (frames 2 and 3),
/// until the side that receives the faulty direction kills the link.
async fn run_until_killed(p: &Pair, victim: &PeerNode) -> Vec<Result<Bytes, PeerError>> {
    for group in 0..2 {
        assert_eq!(p.n1.call(2, group, 1, Bytes::new()).await.unwrap(), expected(2, 1, group, 1, ""));
    }
    let calls: Vec<_> = (2..4)
        .map(|group| {
            let n1 = p.n1.clone();
            tokio::spawn(async move { n1.call_timeout(2, group, 1, Bytes::new(), LIMIT).await })
        })
        .collect();
    let stats = victim.stats();
    assert!(wait_until(LIMIT, || async { stats.snapshot().frame_auth_failures == 1 }).await);
    let mut results = Vec::new();
    for c in calls {
        results.push(c.await.unwrap());
    }
    results
}

/// After the kill, node 1 dials again (the proxy passes the new connection through).
async fn reconnects(p: &Pair) {
    assert_eq!(call_eventually(&p.n1, 2, 99, LIMIT).await, expected(2, 1, 99, 1, ""));
    assert_eq!(p.n1.stats().snapshot().handshakes_ok, 2);
    p.n1.shutdown().await;
    p.n2.shutdown().await;
}

/// The call whose frame was tampered with fails; the other may have found the link
/// closed before it was sent and succeeded on the next one.
fn tampered_call_failed(results: &[Result<Bytes, PeerError>]) {
    let mut failed = 0;
    for (r, group) in results.iter().zip(2..) {
        match r {
            Ok(b) => assert_eq!(b, &expected(2, 1, group, 1, "")),
            Err(PeerError::LinkClosed) => failed += 1,
            Err(e) => panic!("group {group}: {e}"),
        }
    }
    assert!(failed >= 1, "{results:?}");
}

/// A call whose request frame the proxy dropped, reordered or changed never ran,
/// and nothing ran twice.
fn nothing_failed_was_served(p: &Pair, results: &[Result<Bytes, PeerError>]) {
    let served = p.served.lock().unwrap().clone();
    assert!(served.values().all(|&n| n == 1), "{served:?}");
    for (r, group) in results.iter().zip(2..) {
        assert!(r.is_ok() || !served.contains_key(&group), "group {group} failed but ran: {served:?}");
    }
}

fn all_failed(results: &[Result<Bytes, PeerError>]) {
    for r in results {
        assert!(matches!(r, Err(PeerError::LinkClosed)), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_frame_kills_the_link() {
    let p = pair(Fault::Tamper, Toward::Acceptor).await;
    let results = run_until_killed(&p, &p.n2).await;
    tampered_call_failed(&results);
    nothing_failed_was_served(&p, &results);
    reconnects(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_frame_kills_the_link() {
    let p = pair(Fault::Drop, Toward::Acceptor).await;
    let results = run_until_killed(&p, &p.n2).await;
    all_failed(&results);
    nothing_failed_was_served(&p, &results);
    reconnects(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_frames_kill_the_link() {
    let p = pair(Fault::Reorder, Toward::Acceptor).await;
    let results = run_until_killed(&p, &p.n2).await;
    all_failed(&results);
    nothing_failed_was_served(&p, &results);
    reconnects(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_frame_kills_the_link_and_is_not_served_twice() {
    let p = pair(Fault::Replay, Toward::Acceptor).await;
    run_until_killed(&p, &p.n2).await;
    reconnects(&p).await;
    // The original of frame 2 was served; its copy was not (a call that found the
    // link closed before it was sent ran once, on the next link).
    let served = p.served.lock().unwrap().clone();
    assert!(served.values().all(|&n| n == 1), "{served:?}");
    assert!(served.contains_key(&2) || served.contains_key(&3), "{served:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_response_kills_the_link_at_the_dialer() {
    let p = pair(Fault::Tamper, Toward::Dialer).await;
    // The tampered response (frame 2) never completes its call.
    tampered_call_failed(&run_until_killed(&p, &p.n1).await);
    assert_eq!(p.n2.stats().snapshot().frame_auth_failures, 0);
    reconnects(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_handshake_is_refused() {
    let p = pair(Fault::ReplayHandshake, Toward::Acceptor).await;
    assert_eq!(p.n1.call(2, 1, 1, Bytes::new()).await.unwrap(), expected(2, 1, 1, 1, ""));
    let stats = p.n2.stats();
    assert!(wait_until(LIMIT, || async { stats.snapshot().handshake_auth_failures == 1 }).await);
    // The replay did not displace the real link.
    assert_eq!(p.n1.call(2, 2, 1, Bytes::new()).await.unwrap(), expected(2, 1, 2, 1, ""));
    assert_eq!(stats.snapshot().handshakes_ok, 1);
    p.n1.shutdown().await;
    p.n2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_noticed_and_the_link_redialed() {
    let p = pair(Fault::BlackHole, Toward::Acceptor).await;
    assert_eq!(p.n1.call(2, 1, 1, Bytes::new()).await.unwrap(), expected(2, 1, 1, 1, ""));
    // Node 2 hears nothing more (not even keepalives), closes the link after its
    // idle timeout, and node 1 dials again through the proxy (passing now).
    let (s1, s2) = (p.n1.stats(), p.n2.stats());
    let redialed = || async { s1.snapshot().handshakes_ok == 2 && s2.snapshot().handshakes_ok == 2 };
    assert!(wait_until(LIMIT, redialed).await);
    assert_eq!(call_eventually(&p.n1, 2, 2, LIMIT).await, expected(2, 1, 2, 1, ""));
    assert_eq!(s2.snapshot().frame_auth_failures, 0);
    p.n1.shutdown().await;
    p.n2.shutdown().await;
}
