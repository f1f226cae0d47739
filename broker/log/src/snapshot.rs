//! A partition's part of an online snapshot (`es-tools dump --online`): a cut at the
//! log end, every segment below it sealed (synced, indexes written), then hard links
//! to those segments' files in a snapshot directory, beside the producer state and
//! leader epochs as of the cut.
//!
//! Hard links rather than holds: a sealed segment's files are never changed in place
//! (compaction renames a rewritten file over the old name, retention and tiering
//! unlink or rename, index files are replaced atomically), so a link keeps exactly
//! the bytes that were linked for as long as the snapshot directory exists, whatever
//! retention, compaction, tiering, DeleteRecords or a topic deletion do afterwards;
//! none of them has to know that a snapshot exists. The one in-place change of a
//! sealed file, a Raft truncation of an uncommitted suffix, happens only in Raft
//! mode, which [`PartitionLog::cut_for_snapshot`] refuses.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::cold::tier::{CACHE_DIR, MANIFEST_FILE};
use crate::error::{IoContext, LogError, Result};
use crate::files::{self, COMPACTED_EXT, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::partition::{PartitionLog, wait_drained};
use crate::segment::Segment;

/// A partition's cut: where it was rolled and its state there. Taken under the
/// partition lock, so nothing appended after the cut is in it. It holds the
/// housekeeping lock until it is linked: compaction looks at the whole log, so a
/// record below the cut whose key is written again after it would otherwise be
/// compacted away before it is linked, and the snapshot would hold neither.
pub struct SnapshotCut<'a> {
    _housekeeping: std::sync::MutexGuard<'a, bool>,
    /// The offset after the last batch in the snapshot (the log end at the cut).
    pub log_end: u64,
    producers: String,
    epochs: String,
    start_floor: u64,
    /// Every local segment below the cut (the one just rolled among them).
    below: Vec<Arc<Segment>>,
}

/// What a partition put into a snapshot directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSnapshot {
    /// The partition's directory name (`<topic>-<n>`).
    pub name: String,
    /// The first offset the snapshot's segments hold (or the log end if none).
    pub log_start: u64,
    pub log_end: u64,
    /// Base offsets of the segment logs linked, ascending.
    pub segments: Vec<u64>,
    /// Every file written, relative to the partition's snapshot directory, sorted.
    pub files: Vec<String>,
}

const PRODUCER_STATE_FILE: &str = "producer-state";
const LOG_START_FILE: &str = crate::log_start::LOG_START_FILE;

impl PartitionLog {
    /// Rolls the active segment (if it holds anything) and records the cut. Holds
    /// the partition lock only for the roll, as a roll by size does: appends after
    /// it go to the new segment and wait for nothing else.
    pub fn cut_for_snapshot(&self) -> Result<SnapshotCut<'_>> {
        if self.raft_mode.load(Ordering::Acquire) {
            return Err(LogError::InvalidConfig(format!(
                "partition {} is a Raft replica: its segments may hold entries not yet committed, which a snapshot must not take",
                self.name
            )));
        }
        self.progress.check()?;
        // Retention, tiering, compaction and DeleteRecords hold this lock: nothing
        // below the cut changes until it is linked.
        let housekeeping = self.housekeeping.lock().expect("housekeeping lock");
        if *housekeeping {
            return Err(LogError::InvalidConfig(format!("partition {} is being deleted", self.name)));
        }
        let mut inner = self.inner.lock().expect("partition lock");
        let active = inner.active().clone();
        if active.size() > 0 {
            self.roll(&mut inner, &active)?;
        }
        let log_end = inner.next_offset;
        let below = inner.segments.range(..log_end).map(|(_, s)| s.clone()).collect();
        Ok(SnapshotCut {
            _housekeeping: housekeeping,
            log_end,
            producers: inner.producers.encode(log_end),
            epochs: inner.epochs.encode(),
            start_floor: inner.start_floor,
            below,
        })
    }

    /// Waits until every segment below the cut is sealed, which the flusher does
    /// only after the fsync that makes its last bytes durable; then links them into
    /// `<into>/<partition>`. No partition lock is held while waiting.
    pub fn link_snapshot(&self, cut: SnapshotCut<'_>, into: &Path) -> Result<PartitionSnapshot> {
        for seg in &cut.below {
            wait_drained(seg);
            if !seg.state.read().expect("segment state lock").sealed {
                self.progress.check()?;
                let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
                return Err(LogError::io(format!("waiting for {} to be sealed", seg.log_path.display()), e));
            }
        }
        self.progress.check()?;
        let durable = self.progress.durable_offset.load(Ordering::Acquire);
        assert!(
            durable >= cut.log_end,
            "sealed segments below {} but durable only to {durable}",
            cut.log_end
        );
        let dir = into.join(&self.name);
        std::fs::create_dir_all(&dir).ctx(|| format!("creating {}", dir.display()))?;
        let (bases, log_start) = {
            let inner = self.inner.lock().expect("partition lock");
            let bases: Vec<u64> = inner.segments.range(..cut.log_end).map(|(b, _)| *b).collect();
            (bases, inner.log_start().min(cut.log_end))
        };
        let mut files = Vec::new();
        for &base in &bases {
            self.link_segment(base, &dir, &mut files)?;
        }
        self.link_cold(&dir, &mut files)?;
        write_state(&cut, &dir, &mut files)?;
        files.sort();
        Ok(PartitionSnapshot {
            name: self.name.clone(),
            log_start,
            log_end: cut.log_end,
            segments: bases,
            files,
        })
    }

    /// The segment's log first: a compaction that renamed a rewritten log in place
    /// wrote its `.compacted` marker before, so a linked rewritten log always has it.
    fn link_segment(&self, base: u64, dir: &Path, files: &mut Vec<String>) -> Result<()> {
        let log = files::segment_path(&self.dir, base, LOG_EXT);
        link(&log, dir, files, true)?;
        for ext in [COMPACTED_EXT, INDEX_EXT, TIME_INDEX_EXT, crate::raft_index::RAFT_EXT] {
            link(&files::segment_path(&self.dir, base, ext), dir, files, false)?;
        }
        Ok(())
    }

    /// The cold tier's manifest and the cached index files that open cold segments
    /// (the objects themselves stay in the store, as with an offline dump).
    fn link_cold(&self, dir: &Path, files: &mut Vec<String>) -> Result<()> {
        link(&self.dir.join(MANIFEST_FILE), dir, files, false)?;
        let cache = self.dir.join(CACHE_DIR);
        let Ok(entries) = std::fs::read_dir(&cache) else {
            return Ok(());
        };
        let into = dir.join(CACHE_DIR);
        std::fs::create_dir_all(&into).ctx(|| format!("creating {}", into.display()))?;
        for entry in entries {
            let path = entry.ctx(|| format!("listing {}", cache.display()))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_file() && !name.ends_with(files::TMP_SUFFIX) {
                let before = files.len();
                link(&path, &into, files, false)?;
                if let Some(added) = files.get_mut(before) {
                    *added = format!("{CACHE_DIR}/{added}");
                }
            }
        }
        Ok(())
    }
}

/// The producer state, leader epochs and log start as of the cut (not the live
/// files, which later rolls replace), and an empty segment at the cut, as a stopped
/// broker leaves one: a restored partition whose older segments all went (retention,
/// tiering) still starts its offsets at the cut, never again at 0.
fn write_state(cut: &SnapshotCut, dir: &Path, files: &mut Vec<String>) -> Result<()> {
    let mut state = vec![
        (PRODUCER_STATE_FILE.to_owned(), cut.producers.clone()),
        (crate::epochs::EPOCHS_FILE.to_owned(), cut.epochs.clone()),
        (segment_file_name(cut.log_end, LOG_EXT), String::new()),
    ];
    if cut.start_floor > 0 {
        state.push((LOG_START_FILE.to_owned(), format!("{}\n", cut.start_floor)));
    }
    for (name, text) in state {
        let path = dir.join(&name);
        std::fs::write(&path, text).ctx(|| format!("writing {}", path.display()))?;
        files.push(name);
    }
    Ok(())
}

/// `<base offset, 20 digits>.<ext>`, the name `files::segment_path` gives.
fn segment_file_name(base: u64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// Hard-links `from` into `dir` under its own name; a missing optional file is
/// skipped.
fn link(from: &Path, dir: &Path, files: &mut Vec<String>, required: bool) -> Result<()> {
    let name = from.file_name().and_then(|n| n.to_str()).expect("es names its files in UTF-8").to_owned();
    let to: PathBuf = dir.join(&name);
    match std::fs::hard_link(from, &to) {
        Ok(()) => {
            files.push(name);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => Err(LogError::io(
            format!(
                "linking {} into {}: a snapshot directory must be on the partitions' filesystem",
                from.display(),
                dir.display()
            ),
            e,
        )),
        Err(e) => Err(LogError::io(format!("linking {} into {}", from.display(), dir.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use es_core::{LeaderEpoch, Record};

    use crate::config::LogConfig;
    use crate::manager::{LogManager, ManagerOptions};

    fn append(p: &crate::PartitionLog, n: usize) {
        for i in 0..n {
            let r = Record::from_value(format!("value {i} {}", "x".repeat(400)));
            p.append_records(&[r], LeaderEpoch(0)).unwrap().wait().unwrap();
        }
    }

    /// The snapshot keeps exactly the bytes below the cut: later appends are not
    /// in it, and retention deleting the live segments leaves the links whole.
    #[test]
    fn a_snapshot_keeps_the_cut_through_later_appends_and_retention() {
        let dir = tempfile::tempdir().unwrap();
        let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
        let m = LogManager::new(dir.path().join("partitions"), opts).unwrap();
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let (p, _) = m.open_partition("t-0", config).unwrap();
        append(&p, 30);
        let cut = p.cut_for_snapshot().unwrap();
        assert_eq!(cut.log_end, 30);
        append(&p, 5);
        let snap = dir.path().join("snap");
        let taken = p.link_snapshot(cut, &snap).unwrap();
        assert_eq!((taken.log_start, taken.log_end), (0, 30));
        assert!(taken.segments.len() > 2, "{taken:?}");
        assert!(taken.files.contains(&"producer-state".to_owned()), "{taken:?}");
        let linked: Vec<Vec<u8>> = taken
            .segments
            .iter()
            .map(|b| std::fs::read(snap.join("t-0").join(super::segment_file_name(*b, "log"))).unwrap())
            .collect();
        p.set_config(LogConfig { segment_bytes: 4096, retention_bytes: 0, ..LogConfig::default() }).unwrap();
        assert!(!p.housekeeping().unwrap().deleted_segments.is_empty());
        for (base, bytes) in taken.segments.iter().zip(&linked) {
            let path = snap.join("t-0").join(super::segment_file_name(*base, "log"));
            assert_eq!(&std::fs::read(path).unwrap(), bytes, "segment {base} changed");
        }
        let empty = snap.join("t-0").join(super::segment_file_name(30, "log"));
        assert_eq!(std::fs::metadata(empty).unwrap().len(), 0, "the empty segment at the cut");
        // The snapshot opens as a partition holding exactly [0, 30).
        std::fs::copy(dir.path().join("partitions/FORMAT"), snap.join("FORMAT")).unwrap();
        let m2 = LogManager::new(&snap, ManagerOptions { housekeeping_interval: None, ..Default::default() });
        let (q, _) = m2.unwrap().open_partition("t-0", LogConfig::default()).unwrap();
        assert_eq!((q.info().log_start_offset, q.info().log_end_offset), (0, 30));
    }

    #[test]
    fn an_idle_partition_is_cut_at_its_log_end_without_a_roll() {
        let dir = tempfile::tempdir().unwrap();
        let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
        let m = LogManager::new(dir.path().join("partitions"), opts).unwrap();
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        let taken = p.link_snapshot(p.cut_for_snapshot().unwrap(), &dir.path().join("snap")).unwrap();
        assert_eq!((taken.log_end, taken.segments.len()), (0, 0));
        append(&p, 3);
        p.force_roll().unwrap();
        let taken = p.link_snapshot(p.cut_for_snapshot().unwrap(), &dir.path().join("snap2")).unwrap();
        assert_eq!((taken.log_start, taken.log_end, taken.segments.clone()), (0, 3, vec![0]));
    }
}
