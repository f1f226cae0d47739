//! Crash points for the black-box tests: `ES_FAILPOINT=<name>` makes the process
//! abort (as kill -9 would stop it: no destructor, no flush) the first time it
//! reaches the point of that name, so a test can kill a node between two steps
//! that are otherwise microseconds apart. Unset (always, outside those tests) a
//! point costs one load of a cached value.
//!
//! The points: `raft-snapshot-installed` (a follower kept a leader's snapshot,
//! its log not yet started over), `raft-start-over` (the fresh segment of a log
//! starting over is durable, the old segments not yet removed).

use std::sync::OnceLock;

/// The variable naming the point to abort at.
pub const FAILPOINT_ENV: &str = "ES_FAILPOINT";

/// Aborts the process if `ES_FAILPOINT` names `point`.
pub fn hit(point: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var(FAILPOINT_ENV).ok().filter(|v| !v.is_empty()));
    if armed.as_deref() == Some(point) {
        eprintln!("{FAILPOINT_ENV}={point}: aborting here, as a crash would");
        std::process::abort();
    }
}
