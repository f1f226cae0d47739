//! A node's side of the cluster's peer links: the acceptor for lower-id peers, a
//! dialer (with bounded backoff) for each higher-id peer, one link per pair, and
//! `call` to send an RPC to any peer over its link.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout, timeout_at};

use crate::config::{PeerConfig, Secret};
use crate::error::PeerError;
use crate::handshake::{self, Accepted, AcceptorView, NonceMemory, Session};
use crate::limits::{ACCEPT_ERROR_PAUSE_MS, HANDSHAKES_MAX, LINK_LOSSES_QUEUED, SHUTDOWN_DRAIN_MS};
use crate::link::{Handler, Link, Outcome};
use crate::stats::{PeerStats, add};

type Slot = Arc<watch::Sender<Option<Arc<Link>>>>;

/// A link's byte stream: plain TCP or TLS over it.
trait PeerStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> PeerStream for T {}
type Stream = Box<dyn PeerStream>;

/// What the node's tasks share.
struct Inner {
    config: PeerConfig,
    handler: Handler,
    stats: Arc<PeerStats>,
    /// Each known peer: its address and its current link, if one is up. Starts as
    /// the configured peers; [`PeerNode::add_peer`] adds one (a node joining the
    /// cluster), [`PeerNode::remove_peer`] forgets one.
    peers: RwLock<BTreeMap<u64, Peer>>,
    nonces: NonceMemory,
    shutdown: watch::Receiver<bool>,
    /// The peer of each link that went down while it was the peer's link.
    losses: broadcast::Sender<u64>,
}

/// A known peer.
struct Peer {
    addr: String,
    slot: Slot,
}

/// A running peer node. Dropping it stops it at once; [`PeerNode::shutdown`] also
/// waits (bounded) for its tasks.
pub struct PeerNode {
    inner: Arc<Inner>,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<JoinSet<()>>,
    local_addr: SocketAddr,
}

impl std::fmt::Debug for PeerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerNode").field("node_id", &self.inner.config.node_id).finish_non_exhaustive()
    }
}

impl PeerNode {
    /// Starts accepting on `listener` (the caller binds it, so tests can use port 0)
    /// and dialing every higher-id peer; incoming RPCs go to `handler`. Must be called
    /// inside a tokio runtime.
    pub fn start(config: PeerConfig, listener: TcpListener, handler: Handler) -> Result<Self, PeerError> {
        config.validate()?;
        let local_addr = listener.local_addr()?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let peers = config
            .peers
            .iter()
            .map(|(&id, addr)| (id, Peer { addr: addr.clone(), slot: Arc::new(watch::Sender::new(None)) }))
            .collect();
        let inner = Arc::new(Inner {
            config,
            handler,
            stats: Arc::new(PeerStats::default()),
            peers: RwLock::new(peers),
            nonces: NonceMemory::default(),
            shutdown: shutdown_rx,
            losses: broadcast::Sender::new(LINK_LOSSES_QUEUED),
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(accept_loop(inner.clone(), listener));
        for &peer in inner.config.peers.keys().filter(|&&p| inner.config.dials(p)) {
            tasks.spawn(dial_loop(inner.clone(), peer));
        }
        Ok(Self { inner, shutdown, tasks: Mutex::new(tasks), local_addr })
    }

    pub fn node_id(&self) -> u64 {
        self.inner.config.node_id
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stats(&self) -> Arc<PeerStats> {
        self.inner.stats.clone()
    }

    /// Whether a link to `peer` is up now.
    pub fn is_connected(&self, peer: u64) -> bool {
        self.inner.slot(peer).is_some_and(|s| s.borrow().as_ref().is_some_and(|l| !l.is_closed()))
    }

    /// Every peer this node knows, with its address.
    pub fn peers(&self) -> BTreeMap<u64, String> {
        self.inner.peers.read().expect("peers lock").iter().map(|(&id, p)| (id, p.addr.clone())).collect()
    }

    /// Makes `peer` known at `addr` (a node added to the cluster): this node dials
    /// it when its id is higher and accepts its dial when lower. A known peer at a
    /// new address is dialed there from its next dial on. Whether it was new.
    pub fn add_peer(&self, peer: u64, addr: &str) -> Result<bool, PeerError> {
        if peer == self.inner.config.node_id {
            return Err(PeerError::SelfInPeers(peer));
        }
        if *self.inner.shutdown.borrow() {
            return Err(PeerError::Shutdown);
        }
        {
            let mut peers = self.inner.peers.write().expect("peers lock");
            if let Some(known) = peers.get_mut(&peer) {
                known.addr = addr.to_string();
                return Ok(false);
            }
            peers.insert(peer, Peer { addr: addr.to_string(), slot: Arc::new(watch::Sender::new(None)) });
        }
        if self.inner.config.dials(peer) {
            self.tasks.lock().expect("tasks lock").spawn(dial_loop(self.inner.clone(), peer));
        }
        tracing::info!(node = self.inner.config.node_id, peer, addr, "peer added");
        Ok(true)
    }

    /// Forgets `peer` (a node removed from the cluster): its link is closed, it is
    /// no longer dialed and its dials are refused. A link that was up counts as
    /// lost (`link_losses`), so the groups it led are handed over at once rather
    /// than after election timeouts. Whether it was known.
    pub fn remove_peer(&self, peer: u64) -> bool {
        let removed = self.inner.peers.write().expect("peers lock").remove(&peer);
        match removed {
            Some(p) => {
                if let Some(link) = p.slot.send_replace(None) {
                    link.close();
                    if !*self.inner.shutdown.borrow() {
                        // No receiver (nothing subscribed) is not an error.
                        let _ = self.inner.losses.send(peer);
                    }
                }
                tracing::info!(node = self.inner.config.node_id, peer, "peer removed");
                true
            }
            None => false,
        }
    }

    /// The id of each peer whose link goes down from now on (it closed, failed or
    /// timed out; not this node's shutdown, nor a link replaced by a newer one).
    /// A peer process that dies takes its link down at once, since the kernel
    /// closes its sockets: the Raft layer uses this to replace a dead leader
    /// without waiting out election timeouts. A receiver that falls behind skips
    /// the oldest losses (`RecvError::Lagged`).
    pub fn link_losses(&self) -> broadcast::Receiver<u64> {
        self.inner.losses.subscribe()
    }

    /// Sends an RPC to `to` within the configured request timeout.
    pub async fn call(&self, to: u64, group: u64, kind: u8, payload: Bytes) -> Result<Bytes, PeerError> {
        self.call_timeout(to, group, kind, payload, self.inner.config.timeouts.request).await
    }

    /// Sends an RPC to `to` and waits for its response, all within `limit`: the wait
    /// for a link (`Unavailable` when none comes up) and the call (`Timeout`).
    pub async fn call_timeout(
        &self,
        to: u64,
        group: u64,
        kind: u8,
        payload: Bytes,
        limit: Duration,
    ) -> Result<Bytes, PeerError> {
        if to == self.inner.config.node_id {
            return Err(PeerError::SelfCall);
        }
        let slot = self.inner.slot(to).ok_or(PeerError::UnknownNode(to))?;
        if *self.inner.shutdown.borrow() {
            return Err(PeerError::Shutdown);
        }
        let deadline = Instant::now() + limit;
        let mut rx = slot.subscribe();
        let up = |l: &Option<Arc<Link>>| l.as_ref().is_some_and(|l| !l.is_closed());
        // A link that closes between the wait and the send did not carry the request;
        // wait for the next one (bounded by the deadline).
        loop {
            let link = match timeout_at(deadline, rx.wait_for(up)).await {
                Ok(Ok(link)) => link.clone().expect("the predicate saw a link"),
                Ok(Err(_)) => return Err(PeerError::Shutdown),
                Err(_) => return Err(PeerError::Unavailable(to)),
            };
            match timeout_at(deadline, link.call(group, kind, payload.clone())).await {
                Ok(Outcome::Done(result)) => return result,
                Ok(Outcome::NotSent) => {}
                Err(_) => {
                    add(&self.inner.stats.calls_timed_out, 1);
                    return Err(PeerError::Timeout);
                }
            }
        }
    }

    /// Stops accepting and dialing, closes every link (their waiting calls fail with
    /// `LinkClosed`) and waits, bounded, for the node's tasks.
    pub async fn shutdown(&self) {
        self.stop();
        let mut tasks = std::mem::take(&mut *self.tasks.lock().expect("tasks lock"));
        let drain = Duration::from_millis(SHUTDOWN_DRAIN_MS);
        let _ = timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
    }

    fn stop(&self) {
        self.shutdown.send_replace(true);
        for p in self.inner.peers.read().expect("peers lock").values() {
            if let Some(link) = p.slot.send_replace(None) {
                link.close();
            }
        }
    }
}

impl Drop for PeerNode {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    fn slot(&self, peer: u64) -> Option<Slot> {
        self.peers.read().expect("peers lock").get(&peer).map(|p| p.slot.clone())
    }

    fn knows(&self, peer: u64) -> bool {
        self.peers.read().expect("peers lock").contains_key(&peer)
    }

    fn addr(&self, peer: u64) -> Option<String> {
        self.peers.read().expect("peers lock").get(&peer).map(|p| p.addr.clone())
    }

    /// Makes `link` the peer's link; a previous one (a peer that restarted before we
    /// saw its old connection die) is closed. A peer removed meanwhile: `link` is
    /// closed instead; whether it was installed.
    fn install(&self, link: &Arc<Link>) -> bool {
        let Some(slot) = self.slot(link.peer) else {
            link.close();
            return false;
        };
        if let Some(old) = slot.send_replace(Some(link.clone())) {
            old.close();
        }
        true
    }

    /// Clears the peer's slot if it still holds `link`; whether it did.
    fn uninstall(&self, link: &Arc<Link>) -> bool {
        let Some(slot) = self.slot(link.peer) else { return false };
        slot.send_if_modified(|current| {
            let ours = current.as_ref().is_some_and(|c| Arc::ptr_eq(c, link));
            if ours {
                *current = None;
            }
            ours
        })
    }

    async fn stopped(&self) {
        let _ = self.shutdown.clone().wait_for(|s| *s).await;
    }

    /// Serves an authenticated connection until it closes or the node stops.
    async fn run_link(self: &Arc<Self>, stream: Stream, session: Session) {
        add(&self.stats.handshakes_ok, 1);
        tracing::info!(
            node = self.config.node_id,
            peer = session.peer,
            key_id = session.key_id,
            "peer link up"
        );
        let link =
            Link::start(stream, session, self.handler.clone(), self.stats.clone(), self.config.timeouts);
        if !self.install(&link) {
            return;
        }
        tokio::select! {
            _ = link.closed() => {}
            _ = self.stopped() => {}
        }
        link.close();
        if self.uninstall(&link) && !*self.shutdown.borrow() {
            // No receiver (nothing subscribed) is not an error.
            let _ = self.losses.send(link.peer);
        }
        tracing::info!(node = self.config.node_id, peer = link.peer, "peer link down");
    }

    fn handshake_failed(&self, peer: &str, e: &PeerError) {
        if e.is_auth_failure() {
            add(&self.stats.handshake_auth_failures, 1);
            tracing::warn!(node = self.config.node_id, peer, error = %e, "peer handshake refused");
        } else {
            tracing::info!(node = self.config.node_id, peer, error = %e, "peer handshake failed");
        }
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_MAX));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, addr) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, typically: pause rather than spin.
                        tracing::warn!(error = %e, "peer listener: accept failed");
                        tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
                        continue;
                    }
                };
                let Ok(slot) = handshakes.clone().try_acquire_owned() else {
                    tracing::warn!(peer = %addr, "peer listener: too many handshakes at once; refusing");
                    continue;
                };
                conns.spawn(accept_one(inner.clone(), tcp, addr, slot));
            }
            _ = inner.stopped() => break,
        }
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let drain = Duration::from_millis(SHUTDOWN_DRAIN_MS);
    let _ = timeout(drain, async { while conns.join_next().await.is_some() {} }).await;
}

async fn accept_one(
    inner: Arc<Inner>,
    tcp: TcpStream,
    addr: SocketAddr,
    slot: tokio::sync::OwnedSemaphorePermit,
) {
    let result = match timeout(inner.config.timeouts.handshake, accept_handshake(&inner, tcp)).await {
        Ok(result) => result,
        Err(_) => Err(PeerError::HandshakeTimeout),
    };
    // The handshake slot bounds unauthenticated connections only.
    drop(slot);
    match result {
        Ok((stream, Accepted::Link(session))) => inner.run_link(stream, *session).await,
        Ok((_, Accepted::Probe { dialer })) => {
            tracing::info!(node = inner.config.node_id, prober = dialer, from = %addr, "answered a peer probe (doctor)");
        }
        Err(e) => inner.handshake_failed(&addr.to_string(), &e),
    }
}

/// TLS (when configured), then the HMAC handshake, on an accepted connection: a
/// lower-id peer's link, or a probe from any configured peer.
async fn accept_handshake(inner: &Inner, tcp: TcpStream) -> Result<(Stream, Accepted), PeerError> {
    let _ = tcp.set_nodelay(true);
    let mut stream: Stream = match &inner.config.tls {
        Some(tls) => Box::new(tokio_rustls::TlsAcceptor::from(tls.acceptor.clone()).accept(tcp).await?),
        None => Box::new(tcp),
    };
    let own = inner.config.node_id;
    let may_dial = |n: u64| n < own && inner.knows(n);
    let view =
        AcceptorView { own, secrets: &inner.config.secrets, may_dial: &may_dial, nonces: &inner.nonces };
    let may_probe = |n: u64| inner.knows(n);
    let accepted = handshake::accept_or_probe(&mut stream, &view, &may_probe).await?;
    Ok((stream, accepted))
}

async fn dial_loop(inner: Arc<Inner>, peer: u64) {
    let timeouts = inner.config.timeouts;
    let mut backoff = timeouts.backoff_min;
    while !*inner.shutdown.borrow() {
        // A removed peer is no longer dialed.
        let Some(addr) = inner.addr(peer) else { return };
        let wait = match dial_once(&inner, peer, &addr).await {
            Ok((stream, session)) => {
                inner.run_link(stream, session).await;
                backoff = timeouts.backoff_min;
                backoff
            }
            Err(e) => {
                tracing::debug!(node = inner.config.node_id, peer, error = %e, "peer dial failed");
                let wait = backoff;
                backoff = (backoff * 2).min(timeouts.backoff_max);
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = inner.stopped() => return,
        }
    }
}

/// One dial: with the current secret, then the previous one if the peer refused it
/// (a peer not yet moved to a rotated secret).
async fn dial_once(inner: &Inner, peer: u64, addr: &str) -> Result<(Stream, Session), PeerError> {
    exchange(&inner.config, peer, addr, link_handshake, &|addr, e| inner.handshake_failed(addr, e)).await
}

fn link_handshake<'a>(
    stream: &'a mut Stream,
    own: u64,
    peer: u64,
    secret: &'a Secret,
) -> Exchange<'a, Session> {
    Box::pin(handshake::dial(stream, own, peer, secret))
}

fn probe_handshake<'a>(stream: &'a mut Stream, own: u64, peer: u64, secret: &'a Secret) -> Exchange<'a, ()> {
    Box::pin(handshake::probe(stream, own, peer, secret))
}

/// Probes node `peer` as `config.node_id` would dial it: TCP, TLS when configured,
/// and the probe handshake (both sides prove the shared secret; no link is made, so
/// a running node's links stay as they are). How long it took, or why it failed.
/// For `es-broker doctor`; needs no running node.
pub async fn probe(config: &PeerConfig, peer: u64) -> Result<Duration, PeerError> {
    if !config.peers.contains_key(&peer) {
        return Err(PeerError::UnknownNode(peer));
    }
    let started = Instant::now();
    exchange(config, peer, &config.peers[&peer], probe_handshake, &|_, _| {}).await?;
    Ok(started.elapsed())
}

type Exchange<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, PeerError>> + Send + 'a>>;

/// Connects to `peer` and runs `handshake` with each secret in dial order until one
/// is accepted; `failed` hears of each refused or timed-out handshake.
async fn exchange<T>(
    config: &PeerConfig,
    peer: u64,
    addr: &str,
    handshake: for<'a> fn(&'a mut Stream, u64, u64, &'a Secret) -> Exchange<'a, T>,
    failed: &(dyn Fn(&str, &PeerError) + Sync),
) -> Result<(Stream, T), PeerError> {
    let (own, timeouts) = (config.node_id, config.timeouts);
    let mut last = PeerError::HandshakeTimeout;
    for secret in config.secrets.dial_order() {
        let tcp = match timeout(timeouts.connect, TcpStream::connect(addr)).await {
            Ok(tcp) => tcp?,
            Err(_) => return Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
        };
        let _ = tcp.set_nodelay(true);
        let attempt = async {
            let mut stream: Stream = match &config.tls {
                Some(tls) => {
                    let connector = tokio_rustls::TlsConnector::from(tls.connector.clone());
                    Box::new(connector.connect(tls.server_name.clone(), tcp).await?)
                }
                None => Box::new(tcp),
            };
            let done = handshake(&mut stream, own, peer, secret).await?;
            Ok::<_, PeerError>((stream, done))
        };
        match timeout(timeouts.handshake, attempt).await {
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(e)) => last = e,
            Err(_) => last = PeerError::HandshakeTimeout,
        }
        failed(addr, &last);
    }
    Err(last)
}
