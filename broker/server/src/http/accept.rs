//! The HTTP listener as axum sees it: a task accepts TCP connections and runs each
//! TLS handshake in a task of its own (bounded in time and number), so one slow
//! client never holds up the others; axum takes the finished streams with the
//! [`Peer`] (address, TLS, the key a client certificate maps to) as connect info.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

use crate::limits::{HTTP_TLS_ACCEPT_QUEUE, HTTP_TLS_HANDSHAKES_MAX};
use crate::tls::{Peer, ServerTls, Stream};

/// Accepted (and, with TLS, handshaken) connections for axum.
pub struct HttpListener {
    ready: mpsc::Receiver<(Stream, Peer)>,
    local: SocketAddr,
    acceptor: tokio::task::AbortHandle,
}

impl HttpListener {
    pub fn new(tcp: TcpListener, tls: Option<ServerTls>) -> std::io::Result<HttpListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(HTTP_TLS_ACCEPT_QUEUE);
        let acceptor = tokio::spawn(accept_loop(tcp, tls, tx)).abort_handle();
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
    type Io = Stream;
    type Addr = Peer;

    async fn accept(&mut self) -> (Stream, Peer) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept task ended (aborted at shutdown): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Peer> {
        Ok(Peer { addr: self.local, tls: false, tls_key: None })
    }
}

impl Connected<IncomingStream<'_, HttpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, HttpListener>) -> Peer {
        stream.remote_addr().clone()
    }
}

async fn accept_loop(tcp: TcpListener, tls: Option<ServerTls>, ready: mpsc::Sender<(Stream, Peer)>) {
    let handshakes = Arc::new(Semaphore::new(HTTP_TLS_HANDSHAKES_MAX));
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
        let Ok(slot) = handshakes.clone().try_acquire_owned() else {
            tracing::warn!(peer = %addr, "http listener: too many TLS handshakes at once; refusing");
            continue;
        };
        let (tls, ready) = (tls.clone(), ready.clone());
        tokio::spawn(async move {
            let accepted = crate::tls::accept(tls.as_deref(), conn, addr).await;
            drop(slot);
            if let Some(conn) = accepted {
                let _ = ready.send(conn).await;
            }
        });
    }
}
