//! The bounded local cache of cold segments' `.log` files, shared by every
//! partition of a manager. Past the byte bound the least recently read files are
//! deleted (and their read handles closed); the next read fetches them again.
//! Index files are not counted: they are small and always kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::segment::Segment;

struct Cached {
    size: u64,
    used: u64,
    segment: Weak<Segment>,
}

#[derive(Default)]
struct Inner {
    tick: u64,
    total: u64,
    files: HashMap<PathBuf, Cached>,
}

pub(crate) struct ColdCache {
    max_bytes: u64,
    inner: Mutex<Inner>,
}

impl ColdCache {
    pub fn new(max_bytes: u64) -> Arc<ColdCache> {
        Arc::new(ColdCache { max_bytes, inner: Mutex::new(Inner::default()) })
    }

    /// Marks a cached file as just read; false when it is not in the cache.
    pub fn touch(&self, path: &Path) -> bool {
        let mut inner = self.inner.lock().expect("cold cache lock");
        inner.tick += 1;
        let tick = inner.tick;
        inner.files.get_mut(path).map(|c| c.used = tick).is_some()
    }

    /// Adds a file now on disk, then evicts others until the bound holds (the new
    /// one stays even when it alone exceeds the bound: it is about to be read).
    pub fn insert(&self, path: &Path, size: u64, segment: &Arc<Segment>) {
        let evicted = {
            let mut inner = self.inner.lock().expect("cold cache lock");
            inner.tick += 1;
            let cached = Cached { size, used: inner.tick, segment: Arc::downgrade(segment) };
            if let Some(old) = inner.files.insert(path.to_owned(), cached) {
                inner.total -= old.size;
            }
            inner.total += size;
            let mut evicted = Vec::new();
            while inner.total > self.max_bytes {
                let oldest =
                    inner.files.iter().filter(|(p, _)| p.as_path() != path).min_by_key(|(_, c)| c.used);
                let Some(oldest) = oldest.map(|(p, _)| p.clone()) else { break };
                let c = inner.files.remove(&oldest).expect("just found");
                inner.total -= c.size;
                evicted.push((oldest, c.segment));
            }
            evicted
        };
        for (path, segment) in evicted {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(file = %path.display(), error = %e, "evicting a cached cold segment failed");
            }
            if let Some(s) = segment.upgrade() {
                s.close_reader();
            }
        }
    }

    /// Drops a file that was deleted for another reason (retention, topic deletion).
    pub fn forget(&self, path: &Path) {
        let mut inner = self.inner.lock().expect("cold cache lock");
        if let Some(c) = inner.files.remove(path) {
            inner.total -= c.size;
        }
    }

    pub fn bytes(&self) -> u64 {
        self.inner.lock().expect("cold cache lock").total
    }
}
