//! Counters of one peer node as plain atomics, for the broker's metrics to read.

use std::sync::atomic::{AtomicU64, Ordering};

/// Totals since the node started, over all its links. Relaxed atomics: each counter
/// is exact on its own; a snapshot is not one instant across counters.
#[derive(Debug, Default)]
pub struct PeerStats {
    pub frames_sent: AtomicU64,
    pub frames_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Coalesced writes handed to the socket (each one `write_all` of many frames).
    pub writes: AtomicU64,
    pub handshakes_ok: AtomicU64,
    /// Handshakes refused for a wrong secret, node id, key id, reflection or replay.
    pub handshake_auth_failures: AtomicU64,
    /// Links killed by a frame whose tag did not verify.
    pub frame_auth_failures: AtomicU64,
    pub requests_served: AtomicU64,
    pub calls_timed_out: AtomicU64,
}

/// A copy of [`PeerStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerStatsSnapshot {
    pub frames_sent: u64,
    pub frames_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub writes: u64,
    pub handshakes_ok: u64,
    pub handshake_auth_failures: u64,
    pub frame_auth_failures: u64,
    pub requests_served: u64,
    pub calls_timed_out: u64,
}

impl PeerStats {
    pub fn snapshot(&self) -> PeerStatsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PeerStatsSnapshot {
            frames_sent: get(&self.frames_sent),
            frames_received: get(&self.frames_received),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            writes: get(&self.writes),
            handshakes_ok: get(&self.handshakes_ok),
            handshake_auth_failures: get(&self.handshake_auth_failures),
            frame_auth_failures: get(&self.frame_auth_failures),
            requests_served: get(&self.requests_served),
            calls_timed_out: get(&self.calls_timed_out),
        }
    }
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
