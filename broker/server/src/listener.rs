//! The accept loop the binary and Kafka listeners share: a cap on open connections
//! (more are refused at accept), one task per connection, and at shutdown a bounded
//! drain that lets open connections finish their in-flight requests.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// Accepts connections until `shutdown` turns true, serving each with `serve`, then
/// waits (bounded) for the open ones and returns.
pub async fn accept_until_shutdown<F, Fut>(
    listener: TcpListener,
    name: &'static str,
    connections_max: usize,
    shutdown: watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr, watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(connections_max));
    let mut tasks = tokio::task::JoinSet::new();
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "{name} listener: connection limit reached; refusing");
                    continue;
                };
                let connection = serve(stream, peer, shutdown.clone());
                tasks.spawn(async move {
                    connection.await;
                    drop(slot);
                });
            }
            _ = stop.wait_for(|s| *s) => break,
        }
        while tasks.try_join_next().is_some() {}
    }
    let drain = std::time::Duration::from_millis(crate::limits::SHUTDOWN_DRAIN_MS);
    let _ = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
}
