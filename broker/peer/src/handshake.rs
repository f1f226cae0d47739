//! The link handshake: a mutual HMAC-SHA256 challenge-response over the shared
//! secret, then HKDF-derived per-direction session keys (docs/cluster.md, "Peer links").
//!
//! ```text
//! dialer -> acceptor  hello      magic(8) dialer_id(8) acceptor_id(8) key_id(4) nonce_d(32)
//! acceptor -> dialer  challenge  nonce_a(32)
//! dialer -> acceptor  proof      HMAC(secret, "es-peer client" || transcript)   (32)
//! acceptor -> dialer  proof      HMAC(secret, "es-peer server" || transcript)   (32)
//! transcript = magic dialer_id acceptor_id key_id nonce_d nonce_a
//! ```
//!
//! The dialer proves first, so the acceptor never computes a MAC for a party that
//! has not shown it holds the secret. The role labels keep a proof of one side from
//! serving as the other's (reflection); fresh nonces from both sides keep a recorded
//! proof from verifying again (replay); node ids and the key id are in the transcript,
//! so neither can be swapped in flight.
//!
//! A probe (`es-broker doctor`) is the same exchange under another magic: both sides
//! prove the secret, then the acceptor closes the connection. It never becomes a
//! link, so probing a running node does not replace the link its peer holds, and,
//! the magic being in the transcript, a probe's proofs never verify as a link's.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::{Secret, Secrets};
use crate::error::PeerError;
use crate::frame::{Opener, Sealer};
use crate::limits::{NONCE_BYTES, NONCES_REMEMBERED_MAX};

/// "ESPEER" and the protocol version (1); a change of layout bumps the last byte.
pub const MAGIC: [u8; 8] = *b"ESPEER\x00\x01";
/// A probe's hello: the same layout, ending in a proof each way and no link.
pub const MAGIC_PROBE: [u8; 8] = *b"ESPROBE\x01";
/// Bytes of the dialer's hello.
pub const HELLO_BYTES: usize = 8 + 8 + 8 + 4 + NONCE_BYTES;
/// Bytes of the acceptor's challenge.
pub const CHALLENGE_BYTES: usize = NONCE_BYTES;
/// Bytes of each side's proof (a full HMAC-SHA256).
pub const PROOF_BYTES: usize = 32;

const LABEL_DIALER: &[u8; 14] = b"es-peer client";
const LABEL_ACCEPTOR: &[u8; 14] = b"es-peer server";

type Nonce = [u8; NONCE_BYTES];

/// An authenticated link's state: who the peer is and the two directions' keys.
#[derive(Debug)]
pub struct Session {
    pub peer: u64,
    pub key_id: u32,
    pub sealer: Sealer,
    pub opener: Opener,
}

/// What is bound into both proofs and the session keys.
struct Transcript {
    magic: [u8; 8],
    dialer: u64,
    acceptor: u64,
    key_id: u32,
    nonce_dialer: Nonce,
    nonce_acceptor: Nonce,
}

impl Transcript {
    fn mac(&self, secret: &Secret, label: &[u8; 14]) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.bytes()).expect("HMAC takes any key length");
        mac.update(label);
        mac.update(&self.magic);
        mac.update(&self.dialer.to_be_bytes());
        mac.update(&self.acceptor.to_be_bytes());
        mac.update(&self.key_id.to_be_bytes());
        mac.update(&self.nonce_dialer);
        mac.update(&self.nonce_acceptor);
        mac.finalize().into_bytes().into()
    }

    /// The dialer-to-acceptor and acceptor-to-dialer frame keys. The salt is both
    /// nonces, so every link has keys of its own even under one secret.
    fn session_keys(&self, secret: &Secret) -> ([u8; 32], [u8; 32]) {
        let mut salt = [0u8; 2 * NONCE_BYTES];
        salt[..NONCE_BYTES].copy_from_slice(&self.nonce_dialer);
        salt[NONCE_BYTES..].copy_from_slice(&self.nonce_acceptor);
        let hk = Hkdf::<Sha256>::new(Some(&salt), secret.bytes());
        let key = |direction: &[u8]| {
            let mut info = Vec::with_capacity(40);
            info.extend_from_slice(direction);
            info.extend_from_slice(&self.dialer.to_be_bytes());
            info.extend_from_slice(&self.acceptor.to_be_bytes());
            info.extend_from_slice(&self.key_id.to_be_bytes());
            let mut okm = [0u8; 32];
            hk.expand(&info, &mut okm).expect("32 bytes is a valid HKDF-SHA256 length");
            okm
        };
        (key(b"es-peer d2a v1"), key(b"es-peer a2d v1"))
    }
}

fn fresh_nonce() -> Nonce {
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rng().fill_bytes(&mut nonce);
    nonce
}

fn verify(expected: &[u8; 32], got: &[u8; 32]) -> Result<(), PeerError> {
    if bool::from(expected.ct_eq(got)) { Ok(()) } else { Err(PeerError::BadProof) }
}

/// The dialer's side: proves `secret` to node `acceptor` and checks its proof.
pub async fn dial<S>(stream: &mut S, own: u64, acceptor: u64, secret: &Secret) -> Result<Session, PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let t = prove(stream, MAGIC, own, acceptor, secret).await?;
    let (d2a, a2d) = t.session_keys(secret);
    Ok(Session { peer: acceptor, key_id: secret.key_id, sealer: Sealer::new(d2a), opener: Opener::new(a2d) })
}

/// A probe of node `acceptor`: both sides prove `secret`, and nothing follows.
pub async fn probe<S>(stream: &mut S, own: u64, acceptor: u64, secret: &Secret) -> Result<(), PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    prove(stream, MAGIC_PROBE, own, acceptor, secret).await.map(|_| ())
}

/// The dialer's exchange under `magic`: hello, challenge, both proofs.
async fn prove<S>(
    stream: &mut S,
    magic: [u8; 8],
    own: u64,
    acceptor: u64,
    secret: &Secret,
) -> Result<Transcript, PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let nonce_dialer = fresh_nonce();
    let mut hello = Vec::with_capacity(HELLO_BYTES);
    hello.extend_from_slice(&magic);
    hello.extend_from_slice(&own.to_be_bytes());
    hello.extend_from_slice(&acceptor.to_be_bytes());
    hello.extend_from_slice(&secret.key_id.to_be_bytes());
    hello.extend_from_slice(&nonce_dialer);
    stream.write_all(&hello).await?;
    let mut nonce_acceptor = [0u8; CHALLENGE_BYTES];
    stream.read_exact(&mut nonce_acceptor).await?;
    // A challenge equal to our own nonce is an echo, not a fresh challenge.
    if bool::from(nonce_acceptor.ct_eq(&nonce_dialer)) {
        return Err(PeerError::Reflected);
    }
    let t = Transcript { magic, dialer: own, acceptor, key_id: secret.key_id, nonce_dialer, nonce_acceptor };
    stream.write_all(&t.mac(secret, LABEL_DIALER)).await?;
    let mut proof = [0u8; PROOF_BYTES];
    stream.read_exact(&mut proof).await?;
    verify(&t.mac(secret, LABEL_ACCEPTOR), &proof)?;
    Ok(t)
}

/// What the acceptor checks a hello against.
pub struct AcceptorView<'a> {
    pub own: u64,
    pub secrets: &'a Secrets,
    /// Whether `node` is configured and is the one of the pair that dials.
    pub may_dial: &'a (dyn Fn(u64) -> bool + Sync),
    pub nonces: &'a NonceMemory,
}

/// What an accepted connection turned out to be.
#[derive(Debug)]
pub enum Accepted {
    /// A peer's link, authenticated.
    Link(Box<Session>),
    /// A probe by `dialer` (a configured node), answered: close the connection.
    Probe { dialer: u64 },
}

/// The acceptor's side: checks the hello, challenges, checks the dialer's proof,
/// then proves the secret back. Probes are refused (see [`accept_or_probe`]).
pub async fn accept<S>(stream: &mut S, view: &AcceptorView<'_>) -> Result<Session, PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match accept_inner(stream, view, None).await? {
        Accepted::Link(session) => Ok(*session),
        Accepted::Probe { .. } => Err(PeerError::BadMagic),
    }
}

/// [`accept`], and a probe from any node `may_probe` admits (whichever of the pair
/// dials its link) is answered too.
pub async fn accept_or_probe<S>(
    stream: &mut S,
    view: &AcceptorView<'_>,
    may_probe: &(dyn Fn(u64) -> bool + Sync),
) -> Result<Accepted, PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    accept_inner(stream, view, Some(may_probe)).await
}

async fn accept_inner<S>(
    stream: &mut S,
    view: &AcceptorView<'_>,
    may_probe: Option<&(dyn Fn(u64) -> bool + Sync)>,
) -> Result<Accepted, PeerError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut hello = [0u8; HELLO_BYTES];
    stream.read_exact(&mut hello).await?;
    let (magic, dialer, key_id, nonce_dialer) = parse_hello(&hello, view.own, may_probe.is_some())?;
    let admitted = match magic {
        MAGIC_PROBE => may_probe.is_some_and(|f| f(dialer)),
        _ => (view.may_dial)(dialer),
    };
    if !admitted {
        return Err(PeerError::UnknownNode(dialer));
    }
    let secret = view.secrets.by_key_id(key_id).ok_or(PeerError::UnknownKeyId(key_id))?;
    let nonce_acceptor = view.nonces.admit(nonce_dialer)?;
    stream.write_all(&nonce_acceptor).await?;
    let t = Transcript { magic, dialer, acceptor: view.own, key_id, nonce_dialer, nonce_acceptor };
    let mut proof = [0u8; PROOF_BYTES];
    stream.read_exact(&mut proof).await?;
    verify(&t.mac(secret, LABEL_DIALER), &proof)?;
    stream.write_all(&t.mac(secret, LABEL_ACCEPTOR)).await?;
    if magic == MAGIC_PROBE {
        return Ok(Accepted::Probe { dialer });
    }
    let (d2a, a2d) = t.session_keys(secret);
    Ok(Accepted::Link(Box::new(Session {
        peer: dialer,
        key_id,
        sealer: Sealer::new(a2d),
        opener: Opener::new(d2a),
    })))
}

/// The hello's magic, dialer, key id and nonce; `probes`: whether a probe's magic
/// is accepted.
fn parse_hello(
    hello: &[u8; HELLO_BYTES],
    own: u64,
    probes: bool,
) -> Result<([u8; 8], u64, u32, Nonce), PeerError> {
    let magic: [u8; 8] = hello[..8].try_into().expect("8 bytes");
    if magic != MAGIC && !(probes && magic == MAGIC_PROBE) {
        return Err(PeerError::BadMagic);
    }
    let u64_at = |at: usize| u64::from_be_bytes(hello[at..at + 8].try_into().expect("8 bytes"));
    let (dialer, acceptor) = (u64_at(8), u64_at(16));
    if acceptor != own {
        return Err(PeerError::WrongNode { expected: own, got: acceptor });
    }
    let key_id = u32::from_be_bytes(hello[24..28].try_into().expect("4 bytes"));
    let nonce: Nonce = hello[28..].try_into().expect("32 bytes");
    Ok((magic, dialer, key_id, nonce))
}

/// The acceptor's memory of recent nonces: dialers' (a hello seen before is a
/// replay) and its own challenges (a hello carrying one is a reflection). Bounded:
/// past it, a replayed hello still fails, on the proof, as the challenge is fresh.
#[derive(Debug, Default)]
pub struct NonceMemory {
    inner: Mutex<NonceSets>,
}

#[derive(Debug, Default)]
struct NonceSets {
    dialers: NonceRing,
    challenges: NonceRing,
}

/// A bounded set that forgets its oldest member first.
#[derive(Debug, Default)]
struct NonceRing {
    seen: HashSet<Nonce>,
    order: VecDeque<Nonce>,
}

impl NonceRing {
    fn remember(&mut self, nonce: Nonce) {
        if self.order.len() >= NONCES_REMEMBERED_MAX
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.seen.insert(nonce);
        self.order.push_back(nonce);
    }
}

impl NonceMemory {
    /// Admits a dialer's nonce and returns a fresh challenge, or refuses a nonce seen
    /// before: a dialer's again is a replay, one of our challenges is a reflection.
    fn admit(&self, dialer: Nonce) -> Result<Nonce, PeerError> {
        let mut sets = self.inner.lock().expect("nonce memory lock");
        if sets.challenges.seen.contains(&dialer) {
            return Err(PeerError::Reflected);
        }
        if sets.dialers.seen.contains(&dialer) {
            return Err(PeerError::Replayed);
        }
        let challenge = fresh_nonce();
        sets.dialers.remember(dialer);
        sets.challenges.remember(challenge);
        Ok(challenge)
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
