//! KIP-219 on the Kafka listener: a throttled connection is muted, not refused.
//! A produce or fetch over its key's quota (or any request over a request-rate
//! limit) is answered at once, its response carrying `throttle_time_ms`, and the
//! reader then reads nothing more from that connection until the throttle has
//! passed. A client that honours the field waits on its own; one that ignores it
//! is held by the broker all the same, and other connections are never touched.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When one connection may be read again.
#[derive(Debug, Default)]
pub struct Mute {
    until: Mutex<Option<Instant>>,
}

impl Mute {
    /// Holds the connection `ms` from now, unless it is held longer already.
    pub fn hold(&self, ms: u64) {
        if ms == 0 {
            return;
        }
        let at = Instant::now() + Duration::from_millis(ms);
        let mut until = self.until.lock().expect("mute lock");
        if until.is_none_or(|u| u < at) {
            *until = Some(at);
        }
    }

    /// The instant reading may resume, when that is still ahead.
    pub fn until(&self) -> Option<Instant> {
        let until = *self.until.lock().expect("mute lock");
        until.filter(|at| *at > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_keeps_the_longer_of_two() {
        let mute = Mute::default();
        assert!(mute.until().is_none());
        mute.hold(0);
        assert!(mute.until().is_none(), "a zero throttle holds nothing");
        mute.hold(60_000);
        let long = mute.until().expect("held");
        mute.hold(10);
        assert_eq!(mute.until(), Some(long), "a shorter hold never shortens a longer one");
    }

    #[test]
    fn a_hold_ends() {
        let mute = Mute::default();
        mute.hold(1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while mute.until().is_some() {
            assert!(Instant::now() < deadline, "a 1 ms hold never ended");
            std::thread::yield_now();
        }
    }
}
