//! The accept loop the binary and Kafka listeners share: a cap on open connections
//! (more are refused at accept) and their count in the metrics, one task per connection (its TLS handshake
//! included, so a slow handshake never holds up the accept loop), and at shutdown a
//! bounded drain that lets open connections finish their in-flight requests.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::metrics::{Metrics, Protocol};
use crate::tls::{Peer, ServerTls, Stream};

/// Accepts connections until `shutdown` turns true, serving each with `serve`
/// (after the TLS handshake when `tls` is set), then waits (bounded) for the open
/// ones and returns.
pub async fn accept_until_shutdown<F, Fut>(
    listener: TcpListener,
    name: &'static str,
    connections_max: usize,
    gauge: (Arc<Metrics>, Protocol),
    tls: Option<ServerTls>,
    shutdown: watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(Stream, Peer, watch::Receiver<bool>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(connections_max));
    let serve = Arc::new(serve);
    let tls = tls.map(Arc::new);
    let mut tasks = tokio::task::JoinSet::new();
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, addr)) = accepted else { continue };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(peer = %addr, "{name} listener: connection limit reached; refusing");
                    continue;
                };
                // Counted open for as long as it holds its slot.
                let open = gauge.0.connection(gauge.1);
                let (serve, tls, shutdown) = (serve.clone(), tls.clone(), shutdown.clone());
                tasks.spawn(async move {
                    if let Some((stream, peer)) = crate::tls::accept(tls.as_deref(), tcp, addr).await {
                        serve(stream, peer, shutdown).await;
                    }
                    drop((slot, open));
                });
            }
            _ = stop.wait_for(|s| *s) => break,
        }
        while tasks.try_join_next().is_some() {}
    }
    let drain = std::time::Duration::from_millis(crate::limits::SHUTDOWN_DRAIN_MS);
    let _ = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
}
