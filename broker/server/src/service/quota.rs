//! Quotas: how long a caller must wait after a request. None today; the answer
//! already flows back to the listeners (Kafka's `throttle_time_ms`, HTTP 429
//! with `Retry-After`, a throttle over binary).

use crate::service::authz::Principal;

/// Which way bytes move, for byte-rate quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Produce,
    Fetch,
}

/// How long to hold the caller back, in milliseconds (0: not at all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throttle {
    pub ms: u64,
}

/// Per-principal byte-rate quotas. No quota is configured today.
#[derive(Debug, Default)]
pub struct Quotas {}

impl Quotas {
    /// Charges `bytes` to `principal` after the fact, as Kafka does, and says how
    /// long it must wait before its next request.
    pub fn charge(&self, principal: &Principal, direction: Direction, bytes: usize) -> Throttle {
        let _ = (principal, direction, bytes);
        Throttle::default()
    }
}
