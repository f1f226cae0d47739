//! Quota tests on a ManualClock: exact throttles, caps, isolation between keys, the
//! rate a well-behaved client ends up with, and the bounded limiter maps.

use std::net::{IpAddr, Ipv4Addr};

use es_core::ManualClock;

use super::*;

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(1_000_000))
}

fn id(n: u8) -> KeyId {
    KeyId::parse(&format!("{n:016x}")).unwrap()
}

#[test]
fn a_bucket_is_charged_after_the_fact_and_throttles_by_debt_over_rate() {
    let mut bucket = TokenBucket::new(100, 100, 0);
    assert_eq!(bucket.charge(0, 100), 0, "the burst is free");
    assert_eq!(bucket.charge(0, 50), 500, "50 units of debt at 100/s");
    assert_eq!(bucket.throttle_ms(250), 250);
    assert_eq!(bucket.throttle_ms(500), 0);
    assert_eq!(bucket.charge(500, 1), 10);
    assert_eq!(bucket.throttle_ms(100), 10, "a clock stepping back refills nothing");
    assert_eq!(bucket.throttle_ms(10_000_000), 0);
    assert_eq!(bucket.charge(10_000_000, 100), 0, "the refill stops at the burst");
    assert_eq!(bucket.charge(10_000_000, 1), 10);
}

#[test]
fn the_throttle_is_capped_but_the_debt_is_not_forgiven() {
    let mut bucket = TokenBucket::new(1_000, 0, 0);
    assert_eq!(bucket.charge(0, 1_000_000), THROTTLE_MS_MAX);
    assert_eq!(bucket.throttle_ms(THROTTLE_MS_MAX as i64), THROTTLE_MS_MAX, "1000 s of debt, 30 s paid");
    assert_eq!(bucket.throttle_ms(1_000_000), 0);
    assert_eq!(TokenBucket::new(0, 0, 0).charge(0, 1), 1_000, "a zero rate is taken as 1/s");
}

/// A client that sends `bytes` per request and honours every throttle, for `ms`.
fn run_client(
    quotas: &mut ByteQuotas,
    clock: &ManualClock,
    key: &KeyId,
    own: &QuotaOverride,
    bytes: u64,
    ms: i64,
) -> u64 {
    let end = clock.now_ms() + ms;
    let mut sent = 0;
    while clock.now_ms() < end {
        sent += bytes;
        let throttle = quotas.charge(key, Direction::Produce, bytes, own);
        clock.advance_ms(throttle.max(1) as i64);
    }
    sent
}

fn produce_at(rate: u64) -> QuotaOverride {
    QuotaOverride { produce_bytes_per_s: Some(rate), ..Default::default() }
}

#[test]
fn a_throttled_key_converges_to_its_rate_and_never_slows_another() {
    let clock = clock();
    let default = KeyQuota { produce_bytes_per_s: Some(10_000), fetch_bytes_per_s: None };
    let mut quotas = ByteQuotas::new(default, clock.clone());
    let (none, fast_own) = (QuotaOverride::default(), produce_at(1_000_000));
    // 100 s at 1 KB a request: the burst (10 s of rate) plus 100 s at the rate.
    let slow = run_client(&mut quotas, &clock, &id(1), &none, 1_000, 100_000);
    assert!((1_100_000..=1_102_000).contains(&slow), "{slow}");
    // The other key, with its own higher rate, sees none of that debt.
    assert_eq!(quotas.charge(&id(2), Direction::Produce, 500_000, &fast_own), 0);
    assert_eq!(quotas.charge(&id(1), Direction::Fetch, u64::MAX / 2, &none), 0, "no fetch quota: unlimited");
    let fast = run_client(&mut quotas, &clock, &id(2), &fast_own, 100_000, 10_000);
    assert!((19_500_000..=20_100_000).contains(&fast), "{fast}");
}

#[test]
fn an_override_replaces_the_default_in_both_directions_and_keeps_the_debt() {
    let clock = clock();
    let mut quotas = ByteQuotas::new(KeyQuota::default(), clock.clone());
    let slow = produce_at(100);
    assert_eq!(quotas.charge(&id(1), Direction::Produce, u64::MAX / 4, &QuotaOverride::default()), 0);
    // 10 s of burst at 100 B/s, then 1,000 bytes of debt: 10 s to wait.
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 2_000, &slow), 10_000);
    assert_eq!(quotas.charge(&id(1), Direction::Fetch, 1 << 40, &slow), 0, "fetch keeps its default");
    // Raised to 1,000 B/s: the same debt is paid ten times faster, and not forgiven.
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 0, &produce_at(1_000)), 1_000);
    clock.advance_ms(1_000);
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 0, &produce_at(1_000)), 0);
    // Lowered: tokens above the new burst are dropped, so the new rate holds at once.
    clock.advance_ms(1_000_000);
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 10, &produce_at(1)), 0);
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 1, &produce_at(1)), 1_000);
    // Back to the default (unlimited): the bucket and its debt are gone.
    assert_eq!(quotas.charge(&id(1), Direction::Produce, 1 << 40, &QuotaOverride::default()), 0);
    quotas.forget(&id(1));
}

#[test]
fn auth_failures_are_limited_per_address_and_per_key() {
    let clock = clock();
    let mut limits = AuthFailureLimits::new(clock.clone());
    let attacker = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let honest = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    for _ in 0..AUTH_FAILURES_BURST_DEFAULT {
        assert_eq!(limits.delay_ms(attacker, None), 0);
        limits.record_failure(attacker, None);
    }
    limits.record_failure(attacker, None);
    assert_eq!(limits.delay_ms(attacker, None), 500, "one failure of debt at 2/s");
    assert_eq!(limits.delay_ms(honest, Some(&id(7))), 0, "a valid key elsewhere is not held");
    clock.advance_ms(500);
    assert_eq!(limits.delay_ms(attacker, None), 0);

    // Many addresses guessing one key id: the key's own limit holds them all.
    for n in 0..=AUTH_FAILURES_BURST_DEFAULT {
        limits.record_failure(IpAddr::V4(Ipv4Addr::new(10, 1, 0, n as u8)), Some(&id(9)));
    }
    assert_eq!(limits.delay_ms(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), Some(&id(9))), 200);
    assert_eq!(limits.delay_ms(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), Some(&id(8))), 0);
}

#[test]
fn a_full_limiter_forgets_the_least_indebted_first() {
    let clock = clock();
    let mut limiter: RateLimiter<u32> = RateLimiter::new(1, 1, clock.clone());
    assert_eq!(limiter.charge(&0, 100), 30_000.min(THROTTLE_MS_MAX));
    for n in 1..(RATE_LIMITER_ENTRIES_MAX as u32 + 1_000) {
        limiter.charge(&n, 2);
    }
    assert!(limiter.len() <= RATE_LIMITER_ENTRIES_MAX);
    assert_eq!(limiter.throttle_ms(&0), THROTTLE_MS_MAX, "the biggest debtor is still tracked");
    clock.advance_ms(1_000_000);
    limiter.charge(&u32::MAX, 1);
    for n in 0..RATE_LIMITER_ENTRIES_MAX as u32 {
        limiter.charge(&(n + 1_000_000), 1);
    }
    assert!(limiter.len() <= RATE_LIMITER_ENTRIES_MAX && !limiter.is_empty());
}

#[test]
fn request_rates_are_limited_per_address_and_per_key() {
    let clock = clock();
    let mut limits = RequestRateLimits::new(Some(100), Some(10), 1, clock.clone());
    let (a, b) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    for _ in 0..10 {
        assert_eq!(limits.charge(a, Some(&id(1)), None), 0);
    }
    assert_eq!(limits.charge(b, Some(&id(1)), None), 100, "the key's limit follows it to another address");
    assert_eq!(limits.charge(b, Some(&id(2)), None), 0);
    for _ in 0..90 {
        limits.charge(a, None, None);
    }
    assert_eq!(limits.charge(a, None, None), 10, "one request of debt at 100/s");
    clock.advance_ms(100);
    assert_eq!(limits.charge(b, Some(&id(1)), None), 100);
}

#[test]
fn a_keys_own_request_rate_applies_with_or_without_a_default() {
    let clock = clock();
    let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
    let mut unlimited = RequestRateLimits::new(None, None, 1, clock.clone());
    for _ in 0..1_000 {
        assert_eq!(unlimited.charge(c, Some(&id(1)), None), 0);
    }
    assert_eq!(unlimited.charge(c, Some(&id(2)), Some(2)), 0);
    assert_eq!(unlimited.charge(c, Some(&id(2)), Some(2)), 0);
    assert_eq!(unlimited.charge(c, Some(&id(2)), Some(2)), 500, "one request of debt at its own 2/s");
    assert_eq!(unlimited.throttle_ms(c, Some(&id(2))), 500);
    assert_eq!(unlimited.throttle_ms(c, Some(&id(1))), 0);
    let mut limited = RequestRateLimits::new(None, Some(1), 1, clock.clone());
    for _ in 0..50 {
        assert_eq!(limited.charge(c, Some(&id(3)), Some(100)), 0, "a higher own rate replaces the default");
    }
    assert_eq!(limited.charge(c, Some(&id(4)), None), 0);
    assert_eq!(limited.charge(c, Some(&id(4)), None), 1_000);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// A client that honours every throttle never moves more than the burst plus
        /// the rate over the time it ran, plus its last request (charged after the
        /// fact). It holds for requests up to the cap's worth of rate; a bigger one is
        /// throttled by the cap only, as in Kafka, and pays the rest of its debt later.
        #[test]
        fn an_obedient_client_stays_within_burst_plus_rate(
            rate in 1u64..100_000,
            raw_sizes in proptest::collection::vec(any::<u64>(), 1..200),
            pauses in proptest::collection::vec(0i64..2_000, 1..200),
        ) {
            let mut bucket = TokenBucket::new(rate, rate, 0);
            let (mut now, mut sent) = (0i64, 0u64);
            let size_max = rate * THROTTLE_MS_MAX / 1_000;
            for (i, raw) in raw_sizes.iter().enumerate() {
                let size = 1 + raw % size_max;
                let throttle = bucket.charge(now, size);
                sent += size;
                prop_assert!(throttle <= THROTTLE_MS_MAX);
                let allowed = rate + rate * now as u64 / 1_000 + size;
                prop_assert!(sent <= allowed, "{} > {}", sent, allowed);
                now += throttle as i64 + pauses[i % pauses.len()];
            }
            // Once the debt is paid, the client is not throttled at all.
            let paid = now + (sent as i64 * 1_000 / rate as i64) + 1;
            prop_assert_eq!(bucket.throttle_ms(paid), 0);
        }
    }
}
