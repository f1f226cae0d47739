//! The doctor's checks of the data directory: writable, fsync latency, free space
//! and inodes against the topics' retention, the open-file limit against the
//! segments, every segment scanned read-only, and a journal left by a crash.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Finding;
use crate::resolve::Effective;

/// fsync probe rounds: enough for a median, short enough to be unnoticed.
const FSYNC_ROUNDS: usize = 16;
/// A median fdatasync slower than this makes every produce round slow.
const FSYNC_SLOW: Duration = Duration::from_millis(50);
/// Below this share of the disk (or of the inodes) free, doctor warns.
const FREE_SHARE_MIN: f64 = 0.05;
/// File descriptors beyond segments: listeners, connections, journal, metadata.
const FDS_BESIDES_SEGMENTS: u64 = 1024;

pub fn data_dir(cfg: &Effective) -> Vec<Finding> {
    let dir = crate::data_dir(cfg);
    let mut out = vec![];
    match writable(&dir) {
        Ok(Some(latency)) => {
            out.push(Finding::ok("data-dir", format!("{} exists and is writable", dir.display())));
            out.push(fsync(&latency));
        }
        Ok(None) => {
            out.push(Finding::ok(
                "data-dir",
                format!("{} does not exist yet; the first start creates it", dir.display()),
            ));
            return out;
        }
        Err(e) => {
            let fix = "create it, or make it writable by the broker's user, or set log.data_dir to another directory";
            out.push(Finding::fail("data-dir", format!("{}: {e}", dir.display()), fix));
            return out;
        }
    }
    let topics = topics(&dir);
    out.extend(space(&dir, &topics));
    let partitions = partition_dirs(&dir);
    out.push(segments_found(&partitions, &topics, &dir));
    out.push(open_files(&partitions));
    out.push(journal(cfg, &dir));
    out
}

/// fdatasync latencies of a probe file in `dir`, or `None` if `dir` does not exist
/// but could be created. The probe is removed.
fn writable(dir: &Path) -> std::io::Result<Option<Vec<Duration>>> {
    if !dir.exists() {
        let parent = dir.ancestors().skip(1).find(|a| a.exists()).unwrap_or(Path::new("/"));
        if !parent.is_dir() {
            return Err(std::io::Error::other(format!(
                "cannot be created: {} is not a directory",
                parent.display()
            )));
        }
        probe(parent)
            .map_err(|e| std::io::Error::other(format!("cannot be created in {}: {e}", parent.display())))?;
        return Ok(None);
    }
    if !dir.is_dir() {
        return Err(std::io::Error::other("is not a directory"));
    }
    probe(dir).map(Some).map_err(|e| std::io::Error::other(format!("is not writable: {e}")))
}

fn probe(dir: &Path) -> std::io::Result<Vec<Duration>> {
    let path = dir.join(format!(".es-doctor-probe-{}.tmp", std::process::id()));
    let result = timed_syncs(&path);
    let _ = std::fs::remove_file(&path);
    result
}

fn timed_syncs(path: &Path) -> std::io::Result<Vec<Duration>> {
    let mut file = File::options().write(true).create_new(true).open(path)?;
    let block = [0u8; 4096];
    let mut latencies = Vec::with_capacity(FSYNC_ROUNDS);
    for _ in 0..FSYNC_ROUNDS {
        file.write_all(&block)?;
        let start = Instant::now();
        file.sync_data()?;
        latencies.push(start.elapsed());
    }
    Ok(latencies)
}

fn fsync(latencies: &[Duration]) -> Finding {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let max = sorted.last().copied().unwrap_or_default();
    let text = format!("fdatasync of 4 KiB: median {median:.2?}, max {max:.2?} over {} rounds", sorted.len());
    if median > FSYNC_SLOW {
        Finding::warn(
            "fsync",
            text,
            "every produce waits on one fsync per round: put the journal on a faster disk (journal.dir)",
        )
    } else {
        Finding::ok("fsync", text)
    }
}

/// What doctor needs of one topic's metadata file.
#[derive(Debug, Clone)]
struct Topic {
    name: String,
    partitions: u64,
    /// retention.bytes per partition; `None` is unbounded.
    retention_bytes: Option<u64>,
    max_message_bytes: usize,
}

/// The topics in `<data>/topics/*.json` (unreadable ones are the start's to report).
fn topics(dir: &Path) -> Vec<Topic> {
    let Ok(entries) = std::fs::read_dir(dir.join("topics")) else { return vec![] };
    let mut out = vec![];
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(text) = std::fs::read(&path) else { continue };
        let Ok(meta) = serde_json::from_slice::<serde_json::Value>(&text) else { continue };
        let config = &meta["config"];
        out.push(Topic {
            name: meta["name"].as_str().unwrap_or_default().to_owned(),
            partitions: meta["partitions"].as_u64().unwrap_or(0),
            retention_bytes: config["retention.bytes"].as_i64().and_then(|b| u64::try_from(b).ok()),
            max_message_bytes: config["max.message.bytes"].as_u64().map_or(0, |b| b as usize),
        });
    }
    out
}

fn space(dir: &Path, topics: &[Topic]) -> Vec<Finding> {
    let stat = match rustix::fs::statvfs(dir) {
        Ok(s) => s,
        Err(e) => {
            return vec![Finding::warn("disk", format!("statvfs {}: {e}", dir.display()), "check the mount")];
        }
    };
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let total = stat.f_blocks.saturating_mul(stat.f_frsize).max(1);
    let used = tree_size(&dir.join("partitions"));
    let bounded: u64 =
        topics.iter().filter_map(|t| t.retention_bytes.map(|b| b.saturating_mul(t.partitions))).sum();
    let unbounded = topics.iter().filter(|t| t.retention_bytes.is_none()).count();
    let text = format!("{} free of {}; the logs use {}", gib(free), gib(total), gib(used));
    let mut out = vec![];
    if bounded > used.saturating_add(free) {
        out.push(Finding::warn(
            "disk",
            format!("{text}; retention.bytes lets the topics grow to {}", gib(bounded)),
            "lower retention.bytes on the largest topics, or give the data directory more room",
        ));
    } else if unbounded > 0 && (free as f64) < total as f64 * FREE_SHARE_MIN {
        out.push(Finding::warn(
            "disk",
            format!("{text}; {unbounded} topics have no retention.bytes bound"),
            "set retention.bytes or retention.ms on them, or free space",
        ));
    } else if (free as f64) < total as f64 * FREE_SHARE_MIN {
        out.push(Finding::warn("disk", text, "free space: a full disk stops every produce"));
    } else {
        out.push(Finding::ok("disk", text));
    }
    out.push(inodes(stat.f_favail, stat.f_files));
    out
}

fn inodes(free: u64, total: u64) -> Finding {
    let text = format!("{free} inodes free of {total}");
    // Some filesystems (btrfs) report no inode limit at all.
    if total > 0 && (free as f64) < total as f64 * FREE_SHARE_MIN {
        Finding::warn(
            "inodes",
            text,
            "every segment takes up to four files: free inodes or use a larger filesystem",
        )
    } else {
        Finding::ok("inodes", text)
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => tree_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// `<data>/partitions/<topic>-<n>` directories (not the journal).
fn partition_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("partitions")) else { return vec![] };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != es_log::JOURNAL_DIR)
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The batch limit of the topic owning a partition directory.
fn batch_max(partition: &Path, topics: &[Topic]) -> usize {
    let name = partition.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let topic = name.rsplit_once('-').map_or(name.as_str(), |(t, _)| t);
    let own = topics.iter().find(|t| t.name == topic).map_or(0, |t| t.max_message_bytes);
    own.max(es_core::limits::BATCH_BYTES_READ_FLOOR)
}

/// Every segment scanned like recovery does, changing nothing. One finding for a
/// healthy directory, one per damaged segment otherwise.
fn segments_found(partitions: &[PathBuf], topics: &[Topic], dir: &Path) -> Finding {
    let (mut count, mut damaged) = (0, vec![]);
    for p in partitions {
        match es_log::check_partition(p, batch_max(p, topics)) {
            Ok(checks) => {
                count += checks.len();
                damaged.extend(checks.into_iter().filter(|c| c.damage.is_some()));
            }
            Err(e) => return Finding::fail("segments", e.to_string(), "check the directory's permissions"),
        }
    }
    let corrupt: Vec<_> = damaged.iter().filter(|c| !c.newest).collect();
    if let Some(first) = corrupt.first() {
        let (pos, reason) = first.damage.clone().unwrap_or_default();
        let others = corrupt.len() - 1;
        return Finding::fail(
            "segments",
            format!(
                "{} is corrupt at byte {pos} ({reason}); the broker will not serve records past it{}",
                first.path.display(),
                if others > 0 { format!(" ({others} more corrupt segments)") } else { String::new() }
            ),
            format!(
                "restore from a backup: `es-tools restore --archive BACKUP.tar --data-dir {}` \
                 (docs/operations.md, \"Backup and restore\")",
                dir.display()
            ),
        );
    }
    if let Some(torn) = damaged.first() {
        let (pos, reason) = torn.damage.clone().unwrap_or_default();
        return Finding::warn(
            "segments",
            format!("{} has a torn tail at byte {pos} ({reason})", torn.path.display()),
            "the next start trims it: those writes were never acknowledged (a crash cut them)",
        );
    }
    Finding::ok(
        "segments",
        format!("{count} segments in {} partitions scanned, all consistent", partitions.len()),
    )
}

/// The soft open-file limit against what the broker may hold: pooled segment
/// readers, one active segment per partition, and connections.
fn open_files(partitions: &[PathBuf]) -> Finding {
    let segments: u64 = partitions
        .iter()
        .map(|p| {
            std::fs::read_dir(p).map_or(0, |d| {
                d.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "log")).count() as u64
            })
        })
        .sum();
    let readers = segments.min(es_core::limits::OPEN_SEGMENT_FILES_MAX_DEFAULT as u64);
    let need = readers + partitions.len() as u64 + FDS_BESIDES_SEGMENTS;
    let Some(limit) = soft_nofile() else {
        return Finding::ok("open-files", "the open-file limit could not be read (not Linux?)");
    };
    let text = format!(
        "open-file limit {limit}; {} partitions, {segments} segments need about {need}",
        partitions.len()
    );
    if limit < need {
        Finding::warn(
            "open-files",
            text,
            format!("raise it: `ulimit -n {need}`, or LimitNOFILE={need} in the systemd unit"),
        )
    } else {
        Finding::ok("open-files", text)
    }
}

/// The soft `Max open files` of this process (the broker inherits the same shell's).
fn soft_nofile() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line.trim_start_matches("Max open files").split_whitespace().next()?;
    if soft == "unlimited" { Some(u64::MAX) } else { soft.parse().ok() }
}

fn journal(cfg: &Effective, dir: &Path) -> Finding {
    let journal_dir =
        cfg.path("journal.dir").unwrap_or_else(|| dir.join("partitions").join(es_log::JOURNAL_DIR));
    match es_log::pending_journal_files(&journal_dir) {
        Ok(files) if files.is_empty() => {
            Finding::ok("journal", "no journal pending: the last stop was clean")
        }
        Ok(files) => Finding::warn(
            "journal",
            format!(
                "{} journal files pending in {}: the broker did not stop cleanly",
                files.len(),
                journal_dir.display()
            ),
            "the next start replays them (nothing to do); `es-tools dump` needs --replay-journal until then",
        ),
        Err(e) => Finding::fail("journal", e.to_string(), "check journal.dir's permissions"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn fsync_is_timed_and_slow_medians_warn() {
        let fast = [Duration::from_micros(100); 5];
        assert_eq!(fsync(&fast).status, Status::Ok);
        let slow = [Duration::from_millis(80); 5];
        assert_eq!(fsync(&slow).status, Status::Warn);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(writable(dir.path()).unwrap().unwrap().len(), FSYNC_ROUNDS);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe is removed");
    }

    #[test]
    fn a_path_below_a_file_cannot_be_a_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"").unwrap();
        let e = writable(&dir.path().join("f/data")).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
        assert!(writable(&dir.path().join("new/data")).unwrap().is_none());
    }

    fn segment(dir: &Path, base: u64, bytes: &[u8]) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{base:020}.log"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn garbage_in_a_sealed_segment_fails_and_in_the_newest_warns() {
        let data = tempfile::tempdir().unwrap();
        let partition = data.path().join("partitions/t-0");
        let newest = segment(&partition, 0, &[0xee; 100]);
        let parts = partition_dirs(data.path());
        let torn = segments_found(&parts, &[], data.path());
        assert_eq!(torn.status, Status::Warn, "{torn:?}");
        assert!(torn.message.contains(newest.to_str().unwrap()), "{torn:?}");
        segment(&partition, 10, &[0xee; 100]);
        let corrupt = segments_found(&parts, &[], data.path());
        assert_eq!(corrupt.status, Status::Fail, "{corrupt:?}");
        assert!(
            corrupt.message.contains(&format!("{} is corrupt at byte 0", newest.display())),
            "{corrupt:?}"
        );
        assert!(corrupt.fix.unwrap().contains("es-tools restore --archive"));
    }

    #[test]
    fn a_pending_journal_warns() {
        let data = tempfile::tempdir().unwrap();
        let cfg = crate::resolve::resolve(&crate::resolve::Inputs::default()).unwrap();
        assert_eq!(journal(&cfg, data.path()).status, Status::Ok);
        let dir = data.path().join("partitions").join(es_log::JOURNAL_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000001.journal"), b"x").unwrap();
        let pending = journal(&cfg, data.path());
        assert_eq!(pending.status, Status::Warn);
        assert!(pending.message.starts_with("1 journal files pending"), "{pending:?}");
        assert_eq!(partition_dirs(data.path()), Vec::<PathBuf>::new(), "the journal is no partition");
    }

    #[test]
    fn the_open_file_limit_is_read() {
        assert!(soft_nofile().is_some_and(|n| n > 0));
    }

    #[test]
    fn a_partition_belongs_to_the_topic_before_its_last_dash() {
        let topics = [Topic {
            name: "a-b".into(),
            partitions: 2,
            retention_bytes: None,
            max_message_bytes: usize::MAX,
        }];
        assert_eq!(batch_max(Path::new("/d/partitions/a-b-1"), &topics), usize::MAX);
        assert_eq!(
            batch_max(Path::new("/d/partitions/c-0"), &topics),
            es_core::limits::BATCH_BYTES_READ_FLOOR
        );
    }
}
