//! The HTTP listener as axum sees it: a task accepts TCP connections and runs each
//! TLS handshake in a task of its own (bounded in time and number), so one slow
//! client never holds up the others; axum takes the finished streams with the
//! [`Peer`] (address, TLS, the key a client certificate maps to) as connect info.
//! Connections are capped in all and per address (more are refused at accept), and
//! each stream keeps the header-read and idle timeouts (`conn_watch.rs`) and counts
//! in the `es_listener_connections` gauge while open.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

use super::conn_watch::{ConnWatch, Timeouts, Watched};
use crate::limits::{HTTP_TLS_ACCEPT_QUEUE, HTTP_TLS_HANDSHAKES_MAX};
use crate::listener::{AddressSlots, ListenerLimits};
use crate::metrics::{Metrics, Protocol};
use crate::tls::{Peer, ServerTls};

/// A connection's peer as HTTP handlers see it, with its [`ConnWatch`].
#[derive(Debug, Clone)]
pub struct HttpPeer {
    pub peer: Peer,
    pub watch: Arc<ConnWatch>,
}

/// Accepted (and, with TLS, handshaken) connections for axum.
pub struct HttpListener {
    ready: mpsc::Receiver<(Watched, HttpPeer)>,
    local: SocketAddr,
    acceptor: tokio::task::AbortHandle,
}

impl HttpListener {
    pub fn new(
        tcp: TcpListener,
        tls: Option<ServerTls>,
        limits: ListenerLimits,
        header_read_timeout_ms: u64,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<HttpListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(HTTP_TLS_ACCEPT_QUEUE);
        let timeouts = Timeouts {
            header_read: (header_read_timeout_ms > 0).then(|| Duration::from_millis(header_read_timeout_ms)),
            idle: limits.idle(),
        };
        let acceptor = tokio::spawn(accept_loop(tcp, tls, tx, limits, timeouts, metrics)).abort_handle();
        Ok(HttpListener { ready, local, acceptor })
    }
}

impl Drop for HttpListener {
    // axum drops the listener when shutdown begins: stop accepting at once.
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for HttpListener {
    type Io = Watched;
    type Addr = HttpPeer;

    async fn accept(&mut self) -> (Watched, HttpPeer) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept task ended (aborted at shutdown): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<HttpPeer> {
        let peer = Peer { addr: self.local, tls: false, tls_key: None };
        Ok(HttpPeer { peer, watch: Arc::default() })
    }
}

impl Connected<IncomingStream<'_, HttpListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, HttpListener>) -> HttpPeer {
        stream.remote_addr().clone()
    }
}

async fn accept_loop(
    tcp: TcpListener,
    tls: Option<ServerTls>,
    ready: mpsc::Sender<(Watched, HttpPeer)>,
    limits: ListenerLimits,
    timeouts: Timeouts,
    metrics: Arc<Metrics>,
) {
    let handshakes = Arc::new(Semaphore::new(HTTP_TLS_HANDSHAKES_MAX));
    let connections = Arc::new(Semaphore::new(limits.connections_max));
    let per_address = AddressSlots::new(limits.connections_per_address_max);
    let tls = tls.map(Arc::new);
    loop {
        let (conn, addr) = tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most likely: back off rather than spin.
                    tracing::warn!(error = %e, "http listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = ready.closed() => return,
        };
        let Ok(open) = connections.clone().try_acquire_owned() else {
            tracing::warn!(peer = %addr, "http listener: connection limit reached; refusing");
            continue;
        };
        let Some(address_slot) = per_address.take(addr.ip()) else {
            tracing::warn!(peer = %addr, "http listener: connection limit per address reached; refusing");
            continue;
        };
        let Ok(slot) = handshakes.clone().try_acquire_owned() else {
            tracing::warn!(peer = %addr, "http listener: too many TLS handshakes at once; refusing");
            continue;
        };
        let (tls, ready, metrics) = (tls.clone(), ready.clone(), metrics.clone());
        tokio::spawn(async move {
            let accepted = crate::tls::accept(tls.as_deref(), conn, addr).await;
            drop(slot);
            if let Some((stream, peer)) = accepted {
                let watch = Arc::new(ConnWatch::default());
                // Held by the stream: the slots and the gauge are released when it closes.
                let held = Box::new((open, address_slot, metrics.connection(Protocol::Http)));
                let stream = Watched::new(stream, watch.clone(), timeouts, held);
                let _ = ready.send((stream, HttpPeer { peer, watch })).await;
            }
        });
    }
}
