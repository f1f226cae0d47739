//! Quotas: byte rates per key and direction, as Kafka does them (es-auth's
//! bottomless token bucket, charged after the fact). A request is served first
//! and charged afterwards. On HTTP and binary, while a key's bucket is in debt its
//! next request of that direction is refused at once with
//! [`BrokerError::Throttled`] (HTTP 429 with `Retry-After`, binary `Throttled`);
//! on Kafka nothing is refused: the response carries `throttle_time_ms` and the
//! connection is muted for that long (KIP-219, `kafka/throttle.rs`). Either way a
//! throttled client is slowed, never disconnected, and other keys (own buckets)
//! are never slowed by it.

use std::sync::Arc;

use crate::auth::Auth;
use crate::service::authz::Principal;
use crate::service::error::{BrokerError, Result};

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

/// Per-key byte-rate quotas; anonymous callers (auth off) are never charged.
#[derive(Debug)]
pub struct Quotas {
    auth: Arc<Auth>,
}

fn direction(d: Direction) -> es_auth::Direction {
    match d {
        Direction::Produce => es_auth::Direction::Produce,
        Direction::Fetch => es_auth::Direction::Fetch,
    }
}

impl Quotas {
    pub fn new(auth: Arc<Auth>) -> Quotas {
        Quotas { auth }
    }

    /// Charges `bytes` to `principal` after the fact, as Kafka does, and says how
    /// long it must wait before its next request.
    pub fn charge(&self, principal: &Principal, d: Direction, bytes: usize) -> Throttle {
        let Some(key) = &principal.key else { return Throttle::default() };
        let ms = self.auth.charge(key, direction(d), bytes as u64);
        // A charge of 0 bytes is `check`'s look at the bucket, not a throttle told.
        if ms > 0
            && bytes > 0
            && let Some(c) = self.auth.stats().key(Some(key), true)
        {
            crate::metrics::add(&c.throttle_ms, ms);
        }
        Throttle { ms }
    }

    /// How long `principal` must wait now before its next request of `d`,
    /// charging nothing (what a Kafka response's `throttle_time_ms` says).
    pub fn pending(&self, principal: &Principal, d: Direction) -> Throttle {
        self.charge(principal, d, 0)
    }

    /// Refuses a request while the key's bucket for `d` is in debt.
    pub fn check(&self, principal: &Principal, d: Direction) -> Result<()> {
        match self.charge(principal, d, 0).ms {
            0 => Ok(()),
            ms => {
                if let Some(c) = self.auth.stats().key(principal.key.as_ref(), true) {
                    crate::metrics::add(&c.throttled_requests, 1);
                    crate::metrics::add(&c.throttle_ms, ms);
                }
                Err(BrokerError::Throttled { ms })
            }
        }
    }
}
