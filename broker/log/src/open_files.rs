//! Bounds the number of segment files held open for reading across all partitions:
//! past the limit, the least recently used read handles are closed. A reader that
//! already cloned a handle keeps it until its read ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::segment::Segment;

#[derive(Debug)]
pub(crate) struct OpenFiles {
    max: usize,
    clock: AtomicU64,
    open: Mutex<Vec<Weak<Segment>>>,
}

impl OpenFiles {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(OpenFiles { max: max.max(1), clock: AtomicU64::new(1), open: Mutex::new(Vec::new()) })
    }

    /// A logical time for least-recently-used ordering.
    pub fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a newly opened handle and closes the oldest ones above the limit.
    pub fn opened(&self, segment: &Arc<Segment>) {
        let mut open = self.open.lock().expect("open files lock");
        let me = Arc::downgrade(segment);
        open.retain(|w| w.strong_count() > 0 && !w.ptr_eq(&me));
        open.push(me);
        if open.len() <= self.max {
            return;
        }
        open.retain(|w| w.strong_count() > 0);
        while open.len() > self.max {
            let (oldest, _) = open
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.upgrade().map(|s| (i, s.last_used.load(Ordering::Relaxed))))
                .min_by_key(|(_, t)| *t)
                .expect("non-empty");
            if let Some(seg) = open.swap_remove(oldest).upgrade() {
                seg.close_reader();
            }
        }
    }

    /// Handles currently open (for tests and metrics).
    #[allow(dead_code)]
    pub fn count(&self) -> usize {
        self.open.lock().expect("open files lock").iter().filter(|w| w.strong_count() > 0).count()
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("base_offset", &self.base_offset)
            .field("log_path", &self.log_path)
            .finish()
    }
}
