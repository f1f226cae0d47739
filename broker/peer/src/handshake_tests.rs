//! Handshake tests over in-memory pipes: success and key agreement, rotation, and
//! each refusal (wrong secret, key id, node id, direction, magic; reflection; replay).

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

use super::*;
use crate::frame::{Envelope, Message};

const OLD: &[u8] = b"the previous shared secret!";
const NEW: &[u8] = b"the current shared secret!!";

fn acceptor_secrets() -> Secrets {
    Secrets { current: Secret::new(2, NEW), previous: Some(Secret::new(1, OLD)) }
}

fn may_dial(n: u64) -> bool {
    n == 1
}

/// Runs the dialer (node `from`, dialing `to`) against acceptor node 2.
async fn run(from: u64, to: u64, secret: Secret) -> (Result<Session, PeerError>, Result<Session, PeerError>) {
    let (mut d, mut a) = duplex(4096);
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let dialer = async {
        let r = dial(&mut d, from, to, &secret).await;
        drop(d);
        r
    };
    let acceptor = async {
        let r = accept(&mut a, &view).await;
        drop(a);
        r
    };
    tokio::join!(dialer, acceptor)
}

#[tokio::test]
async fn both_sides_agree_on_peers_and_keys() {
    let (d, a) = run(1, 2, Secret::new(2, NEW)).await;
    let (mut d, mut a) = (d.unwrap(), a.unwrap());
    assert_eq!((d.peer, a.peer, d.key_id, a.key_id), (2, 1, 2, 2));
    let m = Message::Request(Envelope { group: 1, kind: 1, correlation: 1 }, Bytes::from_static(b"x"));
    for (sealer, opener) in [(&mut d.sealer, &mut a.opener), (&mut a.sealer, &mut d.opener)] {
        let mut buf = BytesMut::new();
        sealer.seal(&m, &mut buf);
        let body = opener.read(&mut &buf[..]).await.unwrap().0;
        assert_eq!(Message::decode(body).unwrap(), m);
    }
}

#[tokio::test]
async fn the_two_directions_have_different_keys() {
    let (d, _) = run(1, 2, Secret::new(2, NEW)).await;
    let mut d = d.unwrap();
    let m = Message::Request(Envelope { group: 1, kind: 1, correlation: 1 }, Bytes::new());
    let mut buf = BytesMut::new();
    d.sealer.seal(&m, &mut buf);
    // A frame the dialer sent, reflected back at it, does not verify.
    assert!(matches!(d.opener.read(&mut &buf[..]).await, Err(PeerError::FrameAuth { seq: 0 })));
}

#[tokio::test]
async fn the_previous_secret_is_accepted() {
    let (d, a) = run(1, 2, Secret::new(1, OLD)).await;
    assert_eq!((d.unwrap().key_id, a.unwrap().key_id), (1, 1));
}

#[tokio::test]
async fn a_wrong_secret_is_refused_by_the_acceptor() {
    let (d, a) = run(1, 2, Secret::new(2, b"not the secret at all")).await;
    assert!(matches!(a, Err(PeerError::BadProof)), "{a:?}");
    assert!(matches!(d, Err(PeerError::Io(_))), "{d:?}");
}

#[tokio::test]
async fn an_unknown_key_id_is_refused() {
    let (_, a) = run(1, 2, Secret::new(7, NEW)).await;
    assert!(matches!(a, Err(PeerError::UnknownKeyId(7))), "{a:?}");
}

#[tokio::test]
async fn a_hello_for_another_node_is_refused() {
    let (_, a) = run(1, 3, Secret::new(2, NEW)).await;
    assert!(matches!(a, Err(PeerError::WrongNode { expected: 2, got: 3 })), "{a:?}");
}

#[tokio::test]
async fn a_node_that_may_not_dial_is_refused() {
    let (_, a) = run(5, 2, Secret::new(2, NEW)).await;
    assert!(matches!(a, Err(PeerError::UnknownNode(5))), "{a:?}");
}

/// A hand-made dialer: sends `hello`, returns the challenge and the stream.
async fn raw_hello(
    view: &AcceptorView<'_>,
    hello: [u8; HELLO_BYTES],
) -> (Nonce, DuplexStream, Result<Session, PeerError>) {
    let (mut d, mut a) = duplex(4096);
    d.write_all(&hello).await.unwrap();
    let acceptor = async {
        let r = accept(&mut a, view).await;
        drop(a);
        r
    };
    let (r, challenge) = tokio::join!(acceptor, async {
        let mut c = [0u8; CHALLENGE_BYTES];
        let _ = d.read_exact(&mut c).await;
        // Answer with a proof computed for this challenge by whoever holds the secret.
        let mut proof = [0u8; PROOF_BYTES];
        let t = Transcript {
            magic: MAGIC,
            dialer: 1,
            acceptor: 2,
            key_id: 2,
            nonce_dialer: hello[28..].try_into().unwrap(),
            nonce_acceptor: c,
        };
        proof.copy_from_slice(&t.mac(&Secret::new(2, NEW), LABEL_DIALER));
        let _ = d.write_all(&proof).await;
        c
    });
    (challenge, d, r)
}

fn hello_with(nonce: Nonce) -> [u8; HELLO_BYTES] {
    let mut h = [0u8; HELLO_BYTES];
    h[..8].copy_from_slice(&MAGIC);
    h[8..16].copy_from_slice(&1u64.to_be_bytes());
    h[16..24].copy_from_slice(&2u64.to_be_bytes());
    h[24..28].copy_from_slice(&2u32.to_be_bytes());
    h[28..].copy_from_slice(&nonce);
    h
}

#[tokio::test]
async fn a_replayed_hello_is_refused() {
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let (_, _, first) = raw_hello(&view, hello_with([3; 32])).await;
    assert!(first.is_ok(), "{first:?}");
    let (_, _, again) = raw_hello(&view, hello_with([3; 32])).await;
    assert!(matches!(again, Err(PeerError::Replayed)), "{again:?}");
}

#[tokio::test]
async fn a_recorded_proof_fails_against_a_fresh_challenge() {
    // An acceptor that has forgotten the nonce (its memory is bounded) still refuses
    // the recorded handshake: its new challenge makes the old proof wrong.
    let secrets = acceptor_secrets();
    let (first_memory, fresh_memory) = (NonceMemory::default(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &first_memory };
    let (c1, _, first) = raw_hello(&view, hello_with([4; 32])).await;
    assert!(first.is_ok());
    let t = Transcript {
        magic: MAGIC,
        dialer: 1,
        acceptor: 2,
        key_id: 2,
        nonce_dialer: [4; 32],
        nonce_acceptor: c1,
    };
    let recorded_proof = t.mac(&Secret::new(2, NEW), LABEL_DIALER);
    let view = AcceptorView { nonces: &fresh_memory, ..view };
    let (mut d, mut a) = duplex(4096);
    d.write_all(&hello_with([4; 32])).await.unwrap();
    d.write_all(&recorded_proof).await.unwrap();
    let r = accept(&mut a, &view).await;
    assert!(matches!(r, Err(PeerError::BadProof)), "{r:?}");
}

#[tokio::test]
async fn a_challenge_sent_back_as_a_hello_is_refused() {
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let (challenge, _, _) = raw_hello(&view, hello_with([5; 32])).await;
    let (_, _, reflected) = raw_hello(&view, hello_with(challenge)).await;
    assert!(matches!(reflected, Err(PeerError::Reflected)), "{reflected:?}");
}

#[tokio::test]
async fn a_dialer_refuses_its_own_nonce_as_the_challenge() {
    let (mut d, mut a) = duplex(4096);
    let fake_acceptor = async {
        let mut hello = [0u8; HELLO_BYTES];
        a.read_exact(&mut hello).await.unwrap();
        a.write_all(&hello[28..]).await.unwrap();
        a
    };
    let secret = Secret::new(2, NEW);
    let (r, _a) = tokio::join!(dial(&mut d, 1, 2, &secret), fake_acceptor);
    assert!(matches!(r, Err(PeerError::Reflected)), "{r:?}");
}

#[tokio::test]
async fn a_bad_magic_is_refused() {
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let mut hello = hello_with([6; 32]);
    hello[7] = 2;
    let (_, _, r) = raw_hello(&view, hello).await;
    assert!(matches!(r, Err(PeerError::BadMagic)), "{r:?}");
}

#[tokio::test]
async fn a_forged_acceptor_proof_is_refused_by_the_dialer() {
    let (mut d, mut a) = duplex(4096);
    let fake_acceptor = async {
        let mut buf = [0u8; HELLO_BYTES];
        a.read_exact(&mut buf).await.unwrap();
        a.write_all(&[9; CHALLENGE_BYTES]).await.unwrap();
        let mut proof = [0u8; PROOF_BYTES];
        a.read_exact(&mut proof).await.unwrap();
        // Sends the dialer's own proof back: the role label makes it the wrong one.
        a.write_all(&proof).await.unwrap();
        a
    };
    let secret = Secret::new(2, NEW);
    let (r, _a) = tokio::join!(dial(&mut d, 1, 2, &secret), fake_acceptor);
    assert!(matches!(r, Err(PeerError::BadProof)), "{r:?}");
}

/// Runs a probe by node `from` against acceptor node 2, which admits probes from
/// nodes 1 and 3 when `probes` (else it accepts links only).
async fn run_probe(
    from: u64,
    secret: Secret,
    probes: bool,
) -> (Result<(), PeerError>, Result<Accepted, PeerError>) {
    let (mut d, mut a) = duplex(4096);
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let may_probe = |n: u64| n == 1 || n == 3;
    let dialer = async {
        let r = probe(&mut d, from, 2, &secret).await;
        drop(d);
        r
    };
    let acceptor = async {
        let r = match probes {
            true => accept_or_probe(&mut a, &view, &may_probe).await,
            false => accept(&mut a, &view).await.map(|s| Accepted::Link(Box::new(s))),
        };
        drop(a);
        r
    };
    tokio::join!(dialer, acceptor)
}

#[tokio::test]
async fn a_probe_proves_the_secret_both_ways_and_makes_no_link() {
    // Node 3 may not dial node 2's link (a higher id), but may probe it.
    let (d, a) = run_probe(3, Secret::new(2, NEW), true).await;
    d.unwrap();
    assert!(matches!(a, Ok(Accepted::Probe { dialer: 3 })), "{a:?}");
    // A link dial is still answered as a link where probes are admitted.
    let (mut d, mut a) = duplex(4096);
    let (secrets, nonces) = (acceptor_secrets(), NonceMemory::default());
    let view = AcceptorView { own: 2, secrets: &secrets, may_dial: &may_dial, nonces: &nonces };
    let secret = Secret::new(2, NEW);
    let (link, accepted) =
        tokio::join!(dial(&mut d, 1, 2, &secret), accept_or_probe(&mut a, &view, &|_| true));
    assert_eq!(link.unwrap().peer, 2);
    assert!(matches!(accepted, Ok(Accepted::Link(ref s)) if s.peer == 1), "{accepted:?}");
}

#[tokio::test]
async fn probes_are_refused_where_not_admitted_and_with_a_wrong_secret() {
    // A node that expects links only does not take a probe's hello.
    let (d, a) = run_probe(1, Secret::new(2, NEW), false).await;
    assert!(matches!(a, Err(PeerError::BadMagic)), "{a:?}");
    assert!(d.is_err());
    // Node 4 is not configured.
    let (d, a) = run_probe(4, Secret::new(2, NEW), true).await;
    assert!(matches!(a, Err(PeerError::UnknownNode(4))), "{a:?}");
    assert!(d.is_err());
    // Another secret under a key id the acceptor holds: its proof fails.
    let (d, a) = run_probe(1, Secret::new(2, b"not the shared secret at all"), true).await;
    assert!(matches!(a, Err(PeerError::BadProof)), "{a:?}");
    assert!(d.is_err());
}
