//! A bounded set of warm instances per plugin: creating a store and instance
//! costs tens of microseconds to milliseconds, a call on a warm one far less.

use std::sync::Mutex;

use wasmtime::Store;

use crate::sandbox::HostState;

/// One instantiated and configured plugin with its store; `B` is the world's
/// generated bindings.
pub(crate) struct Warm<B> {
    pub(crate) store: Store<HostState>,
    pub(crate) bindings: B,
    pub(crate) calls: u64,
}

/// Idle warm instances. Callers take one per call and give it back when it is
/// still healthy; the pool keeps at most `max_idle`, so memory stays bounded even
/// after a burst of concurrent calls created more.
pub(crate) struct Pool<B> {
    idle: Mutex<Vec<Warm<B>>>,
    max_idle: usize,
}

impl<B> Pool<B> {
    pub(crate) fn new(max_idle: usize) -> Self {
        Self { idle: Mutex::new(Vec::with_capacity(max_idle)), max_idle }
    }

    pub(crate) fn take(&self) -> Option<Warm<B>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    pub(crate) fn give(&self, warm: Warm<B>) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(warm);
        }
    }

    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
