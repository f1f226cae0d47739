//! The accept loop the binary and Kafka listeners share: caps on open connections,
//! in all and per client address (more are refused at accept), their count in the
//! metrics, one task per connection (its TLS handshake included, so a slow
//! handshake never holds up the accept loop), and at shutdown a bounded drain that
//! lets open connections finish their in-flight requests. [`ListenerLimits`] are
//! each listener's caps and timeouts (`[http]`, `[binary]`, `[kafka]` settings).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::metrics::{Metrics, Protocol};
use crate::tls::{Peer, ServerTls, Stream};

/// One listener's caps and timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Connections open at once; more are refused at accept.
    pub connections_max: usize,
    /// Connections open at once from one client address.
    pub connections_per_address_max: usize,
    /// A connection the client sends nothing on for this long is closed (0: never).
    pub idle_timeout_ms: u64,
    /// With auth on, a connection not logged in this long after it opened is closed
    /// (Kafka: SASL; binary: Authenticate; HTTP: its header-read timeout).
    pub auth_timeout_ms: u64,
}

impl ListenerLimits {
    /// The defaults of a listener that allows `connections_max` connections.
    pub const fn with_connections(connections_max: usize) -> ListenerLimits {
        ListenerLimits {
            connections_max,
            connections_per_address_max: crate::limits::CONNECTIONS_PER_ADDRESS_MAX_DEFAULT,
            idle_timeout_ms: crate::limits::IDLE_TIMEOUT_MS_DEFAULT,
            auth_timeout_ms: crate::limits::AUTH_TIMEOUT_MS_DEFAULT,
        }
    }

    /// The idle timeout, when there is one.
    pub fn idle(&self) -> Option<Duration> {
        (self.idle_timeout_ms > 0).then(|| Duration::from_millis(self.idle_timeout_ms))
    }
}

/// The limits of all three listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listeners {
    pub http: ListenerLimits,
    pub binary: ListenerLimits,
    pub kafka: ListenerLimits,
    /// HTTP: how long a client that has begun a request may take to finish its headers.
    pub http_header_read_timeout_ms: u64,
}

impl Default for Listeners {
    fn default() -> Self {
        Listeners {
            http: ListenerLimits::with_connections(crate::limits::HTTP_CONNECTIONS_MAX_DEFAULT),
            binary: ListenerLimits::with_connections(crate::limits::BINARY_CONNECTIONS_MAX),
            kafka: ListenerLimits::with_connections(crate::limits::KAFKA_CONNECTIONS_MAX),
            http_header_read_timeout_ms: crate::limits::HTTP_HEADER_READ_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// Sleeps for `d`, or forever without one: a `select!` arm for an optional timeout.
pub async fn sleep_or_never(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Open connections per client address, each held by an [`AddressSlot`].
#[derive(Debug)]
pub struct AddressSlots {
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in its address's count, given back on drop.
#[derive(Debug)]
pub struct AddressSlot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl AddressSlots {
    pub fn new(max: usize) -> AddressSlots {
        AddressSlots { max, open: Arc::default() }
    }

    /// A slot for one more connection from `ip`, unless it has `max` open already.
    pub fn take(&self, ip: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().expect("address slots lock");
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot { ip, open: self.open.clone() })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("address slots lock");
        // The entry goes with its last connection, so the map holds only open addresses.
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Accepts connections until `shutdown` turns true, serving each with `serve`
/// (after the TLS handshake when `tls` is set), then waits (bounded) for the open
/// ones and returns.
pub async fn accept_until_shutdown<F, Fut>(
    listener: TcpListener,
    name: &'static str,
    limits: ListenerLimits,
    gauge: (Arc<Metrics>, Protocol),
    tls: Option<ServerTls>,
    shutdown: watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(Stream, Peer, watch::Receiver<bool>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.connections_max));
    let per_address = AddressSlots::new(limits.connections_per_address_max);
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
                let Some(address_slot) = per_address.take(addr.ip()) else {
                    tracing::warn!(peer = %addr, "{name} listener: connection limit per address reached; refusing");
                    continue;
                };
                // Counted open for as long as it holds its slot.
                let open = gauge.0.connection(gauge.1);
                let (serve, tls, shutdown) = (serve.clone(), tls.clone(), shutdown.clone());
                tasks.spawn(async move {
                    if let Some((stream, peer)) = crate::tls::accept(tls.as_deref(), tcp, addr).await {
                        serve(stream, peer, shutdown).await;
                    }
                    drop((slot, address_slot, open));
                });
            }
            _ = stop.wait_for(|s| *s) => break,
        }
        while tasks.try_join_next().is_some() {}
    }
    let drain = std::time::Duration::from_millis(crate::limits::SHUTDOWN_DRAIN_MS);
    let _ = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_cap_and_its_slots_back() {
        let slots = AddressSlots::new(2);
        let (a, b): (IpAddr, IpAddr) = ([127, 0, 0, 1].into(), [127, 0, 0, 2].into());
        let first = slots.take(a).expect("first");
        let second = slots.take(a).expect("second");
        assert!(slots.take(a).is_none(), "a third connection from one address is refused");
        assert!(slots.take(b).is_some(), "another address has its own count");
        drop(first);
        let third = slots.take(a).expect("a closed connection gives its slot back");
        drop((second, third));
        assert!(slots.open.lock().unwrap().get(&a).is_none(), "no entry outlives its connections");
    }
}
