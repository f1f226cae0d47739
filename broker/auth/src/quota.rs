//! Quotas as Kafka does them: a bottomless token bucket charged after the fact.
//!
//! A request is served first and its cost (bytes, or 1 for a request or a failed
//! login) is charged afterwards; the bucket may go below zero, and the debt divided
//! by the rate is how long the client must wait (`throttle_ms`, capped at
//! [`THROTTLE_MS_MAX`] per response while the debt itself stays). The broker answers
//! at once with that throttle and stops reading the connection until it has passed,
//! so a throttled client slows down without being disconnected, and other keys are
//! not slowed. Integer arithmetic in milli-units keeps every test exact.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;

use es_core::Clock;
use serde::{Deserialize, Serialize};

use crate::error::AuthError;
use crate::key::KeyId;
use crate::limits::{
    AUTH_FAILURES_BURST_DEFAULT, AUTH_FAILURES_PER_S_PER_ADDRESS_DEFAULT,
    AUTH_FAILURES_PER_S_PER_KEY_DEFAULT, QUOTA_BURST_SECONDS_DEFAULT, RATE_LIMITER_ENTRIES_MAX,
    THROTTLE_MS_MAX,
};

/// A token bucket that refills at `rate_per_s` up to `burst` and may go into debt.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_s: u64,
    burst: u64,
    /// Tokens times 1000, so a refill of `elapsed_ms * rate_per_s` is exact.
    tokens_milli: i128,
    last_ms: i64,
}

impl TokenBucket {
    /// A full bucket. A rate of 0 is taken as 1 (no quota is "unlimited", not 0).
    pub fn new(rate_per_s: u64, burst: u64, now_ms: i64) -> TokenBucket {
        TokenBucket {
            rate_per_s: rate_per_s.max(1),
            burst,
            tokens_milli: i128::from(burst) * 1000,
            last_ms: now_ms,
        }
    }

    fn refill(&mut self, now_ms: i64) {
        // A clock that steps back refills nothing rather than charging.
        let elapsed_ms = now_ms.saturating_sub(self.last_ms).max(0);
        self.last_ms = self.last_ms.max(now_ms);
        let refill = i128::from(elapsed_ms) * i128::from(self.rate_per_s);
        self.tokens_milli = (self.tokens_milli + refill).min(i128::from(self.burst) * 1000);
    }

    /// Charges `amount` for work already done; returns how long to throttle.
    pub fn charge(&mut self, now_ms: i64, amount: u64) -> u64 {
        self.refill(now_ms);
        self.tokens_milli -= i128::from(amount) * 1000;
        self.throttle_now()
    }

    /// How long to throttle now, without charging anything.
    pub fn throttle_ms(&mut self, now_ms: i64) -> u64 {
        self.refill(now_ms);
        self.throttle_now()
    }

    fn throttle_now(&self) -> u64 {
        if self.tokens_milli >= 0 {
            return 0;
        }
        let rate = i128::from(self.rate_per_s);
        let ms = (-self.tokens_milli + rate - 1) / rate;
        u64::try_from(ms).unwrap_or(u64::MAX).min(THROTTLE_MS_MAX)
    }

    /// Takes a new rate and burst (an operator changed the key's quota): what was
    /// earned so far at the old rate is kept, and so is any debt, which the new rate
    /// now pays off; tokens above the new burst are dropped.
    pub fn set_rate(&mut self, now_ms: i64, rate_per_s: u64, burst: u64) {
        let rate_per_s = rate_per_s.max(1);
        if (rate_per_s, burst) == (self.rate_per_s, self.burst) {
            return;
        }
        self.refill(now_ms);
        self.rate_per_s = rate_per_s;
        self.burst = burst;
        self.tokens_milli = self.tokens_milli.min(i128::from(burst) * 1000);
    }

    fn in_debt(&self) -> bool {
        self.tokens_milli < 0
    }

    fn tokens_milli(&self) -> i128 {
        self.tokens_milli
    }
}

/// Buckets keyed by address or key id, all with one rate, at most
/// [`RATE_LIMITER_ENTRIES_MAX`] of them.
#[derive(Debug)]
pub struct RateLimiter<K> {
    rate_per_s: u64,
    burst: u64,
    buckets: HashMap<K, TokenBucket>,
    clock: Arc<dyn Clock>,
}

impl<K: Hash + Eq + Clone> RateLimiter<K> {
    pub fn new(rate_per_s: u64, burst: u64, clock: Arc<dyn Clock>) -> RateLimiter<K> {
        RateLimiter { rate_per_s, burst, buckets: HashMap::new(), clock }
    }

    /// Charges `amount` to `key`; returns how long `key` must wait.
    pub fn charge(&mut self, key: &K, amount: u64) -> u64 {
        self.charge_at(key, amount, self.rate_per_s, self.burst)
    }

    /// Charges `amount` to `key` at a rate of its own (a per-key quota override).
    pub fn charge_at(&mut self, key: &K, amount: u64, rate_per_s: u64, burst: u64) -> u64 {
        let now_ms = self.clock.now_ms();
        if !self.buckets.contains_key(key) {
            self.make_room(now_ms);
            self.buckets.insert(key.clone(), TokenBucket::new(rate_per_s, burst, now_ms));
        }
        let bucket = self.buckets.get_mut(key).expect("inserted above");
        bucket.set_rate(now_ms, rate_per_s, burst);
        bucket.charge(now_ms, amount)
    }

    /// Forgets `key`'s bucket (its limit was lifted).
    pub fn forget(&mut self, key: &K) {
        self.buckets.remove(key);
    }

    /// How long `key` must wait now (0 for a key never charged).
    pub fn throttle_ms(&mut self, key: &K) -> u64 {
        let now_ms = self.clock.now_ms();
        self.buckets.get_mut(key).map_or(0, |b| b.throttle_ms(now_ms))
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// At capacity, forgets every bucket not in debt (it would start full anyway);
    /// if all are in debt, forgets the one with the least. The scan is O(entries),
    /// paid only while the limiter is full.
    fn make_room(&mut self, now_ms: i64) {
        if self.buckets.len() < RATE_LIMITER_ENTRIES_MAX {
            return;
        }
        self.buckets.retain(|_, b| {
            b.refill(now_ms);
            b.in_debt()
        });
        if self.buckets.len() >= RATE_LIMITER_ENTRIES_MAX {
            let least = self.buckets.iter().max_by_key(|(_, b)| b.tokens_milli()).map(|(k, _)| k.clone());
            least.map(|k| self.buckets.remove(&k));
        }
    }
}

/// Which way bytes flow, each with its own quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Produce,
    Fetch,
}

/// The broker's default byte rates for every key; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyQuota {
    pub produce_bytes_per_s: Option<u64>,
    pub fetch_bytes_per_s: Option<u64>,
}

impl KeyQuota {
    fn rate(&self, direction: Direction) -> Option<u64> {
        match direction {
            Direction::Produce => self.produce_bytes_per_s,
            Direction::Fetch => self.fetch_bytes_per_s,
        }
    }
}

/// One key's own limits, stored with the key (`es key create --produce-bytes-per-s`,
/// `es key quota`). Each `None` keeps the broker's default for that limit; a value
/// replaces it for this key only, higher or lower. As in Kafka, a per-user quota
/// overrides the default rather than adding to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_bytes_per_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_bytes_per_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<u64>,
}

impl QuotaOverride {
    /// Overrides nothing: the key follows the broker's defaults.
    pub fn is_empty(&self) -> bool {
        *self == QuotaOverride::default()
    }

    /// A rate is at least 1 per second (0 would mean "never", which is revoking).
    pub fn validate(&self) -> Result<(), AuthError> {
        let rates = [
            ("produce_bytes_per_s", self.produce_bytes_per_s),
            ("fetch_bytes_per_s", self.fetch_bytes_per_s),
            ("requests_per_s", self.requests_per_s),
        ];
        match rates.iter().find(|(_, r)| *r == Some(0)) {
            Some((name, _)) => Err(AuthError::InvalidQuota(format!(
                "{name} is at least 1; leave it out to keep the broker's default, or revoke the key"
            ))),
            None => Ok(()),
        }
    }

    fn bytes_rate(&self, direction: Direction) -> Option<u64> {
        match direction {
            Direction::Produce => self.produce_bytes_per_s,
            Direction::Fetch => self.fetch_bytes_per_s,
        }
    }
}

/// One bucket per (key, direction); the burst is [`QUOTA_BURST_SECONDS_DEFAULT`] of the rate.
#[derive(Debug)]
pub struct ByteQuotas {
    default: KeyQuota,
    buckets: HashMap<(KeyId, Direction), TokenBucket>,
    clock: Arc<dyn Clock>,
}

impl ByteQuotas {
    pub fn new(default: KeyQuota, clock: Arc<dyn Clock>) -> ByteQuotas {
        ByteQuotas { default, buckets: HashMap::new(), clock }
    }

    /// Charges `bytes` moved for `key`, at the rate of its own `quota` where it sets
    /// one and the default otherwise; returns the throttle to answer with. A key whose
    /// rate changed keeps its debt, paid off at the new rate.
    pub fn charge(&mut self, key: &KeyId, direction: Direction, bytes: u64, quota: &QuotaOverride) -> u64 {
        let Some(rate) = quota.bytes_rate(direction).or(self.default.rate(direction)) else {
            self.buckets.remove(&(key.clone(), direction));
            return 0;
        };
        let now_ms = self.clock.now_ms();
        let burst = rate.saturating_mul(QUOTA_BURST_SECONDS_DEFAULT);
        let bucket = self
            .buckets
            .entry((key.clone(), direction))
            .or_insert_with(|| TokenBucket::new(rate, burst, now_ms));
        bucket.set_rate(now_ms, rate, burst);
        bucket.charge(now_ms, bytes)
    }

    /// Forgets a key's buckets (it was revoked).
    pub fn forget(&mut self, key: &KeyId) {
        self.buckets.retain(|(k, _), _| k != key);
    }
}

/// Failed logins, limited per client address and per key id.
#[derive(Debug)]
pub struct AuthFailureLimits {
    by_address: RateLimiter<IpAddr>,
    by_key: RateLimiter<KeyId>,
}

impl AuthFailureLimits {
    pub fn new(clock: Arc<dyn Clock>) -> AuthFailureLimits {
        let burst = AUTH_FAILURES_BURST_DEFAULT;
        AuthFailureLimits {
            by_address: RateLimiter::new(AUTH_FAILURES_PER_S_PER_ADDRESS_DEFAULT, burst, clock.clone()),
            by_key: RateLimiter::new(AUTH_FAILURES_PER_S_PER_KEY_DEFAULT, burst, clock),
        }
    }

    /// How long to hold the next attempt from `address` for `key` (the id the user
    /// name parses to, if it does). Successes are never charged, so a client with a
    /// valid key from a clean address is not held.
    pub fn delay_ms(&mut self, address: IpAddr, key: Option<&KeyId>) -> u64 {
        let by_key = key.map_or(0, |k| self.by_key.throttle_ms(k));
        self.by_address.throttle_ms(&address).max(by_key)
    }

    pub fn record_failure(&mut self, address: IpAddr, key: Option<&KeyId>) {
        self.by_address.charge(&address, 1);
        if let Some(key) = key {
            self.by_key.charge(key, 1);
        }
    }
}

/// Requests per second, limited per client address and per key, charged one per
/// request after it is served (like the byte quotas, so a burst is answered at once).
/// Either default may be unset (unlimited); a key's own rate applies even then.
#[derive(Debug)]
pub struct RequestRateLimits {
    by_address: Option<RateLimiter<IpAddr>>,
    by_key: RateLimiter<KeyId>,
    per_key_default: Option<u64>,
    burst_s: u64,
}

impl RequestRateLimits {
    /// `burst_s` seconds of each rate may be used at once.
    pub fn new(
        per_address_per_s: Option<u64>,
        per_key_per_s: Option<u64>,
        burst_s: u64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let by_address =
            per_address_per_s.map(|rate| RateLimiter::new(rate, rate.saturating_mul(burst_s), clock.clone()));
        let key_rate = per_key_per_s.unwrap_or(1);
        RequestRateLimits {
            by_address,
            by_key: RateLimiter::new(key_rate, key_rate.saturating_mul(burst_s), clock),
            per_key_default: per_key_per_s,
            burst_s,
        }
    }

    /// Charges one served request; returns the throttle (the larger of the two).
    /// `own_rate` is the key's own requests-per-second, if it has one.
    pub fn charge(&mut self, address: IpAddr, key: Option<&KeyId>, own_rate: Option<u64>) -> u64 {
        let by_key = key.map_or(0, |k| match own_rate.or(self.per_key_default) {
            Some(rate) => self.by_key.charge_at(k, 1, rate, rate.saturating_mul(self.burst_s)),
            None => {
                self.by_key.forget(k);
                0
            }
        });
        let by_address = self.by_address.as_mut().map_or(0, |l| l.charge(&address, 1));
        by_address.max(by_key)
    }

    /// How long the next request from `address` for `key` must wait, charging nothing.
    pub fn throttle_ms(&mut self, address: IpAddr, key: Option<&KeyId>) -> u64 {
        let by_key = key.map_or(0, |k| self.by_key.throttle_ms(k));
        self.by_address.as_mut().map_or(0, |l| l.throttle_ms(&address)).max(by_key)
    }
}

#[cfg(test)]
mod tests;
