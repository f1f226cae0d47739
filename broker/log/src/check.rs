//! A read-only check of one partition directory: the recovery scan (length, CRC and
//! offset continuity of every batch, within the segment's offset bounds) with none
//! of its repairs, for `es-broker doctor` on a stopped broker.

use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::files;

/// What the check found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    pub path: PathBuf,
    pub size: u64,
    /// The newest non-empty segment: damage there is a torn tail the next start
    /// trims; in any other segment it is corruption the broker will not serve.
    pub newest: bool,
    /// The first bad byte and why.
    pub damage: Option<(u64, String)>,
}

/// Scans every segment of the partition in `dir`, oldest first, without writing
/// anything. `batch_bytes_max` is the largest batch the topic accepts.
pub fn check_partition(dir: &Path, batch_bytes_max: usize) -> Result<Vec<SegmentCheck>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(|| format!("listing {}", dir.display()))? {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        if let Some(base) = files::parse_segment_name(&entry.file_name().to_string_lossy()) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    let sizes = bases
        .iter()
        .map(|&b| {
            let path = files::segment_path(dir, b, files::LOG_EXT);
            std::fs::metadata(&path).map(|m| m.len()).ctx(|| format!("reading size of {}", path.display()))
        })
        .collect::<Result<Vec<u64>>>()?;
    // Recovery drops empty newest segments (a roll that crashed), so the newest
    // non-empty one is the active segment.
    let newest = sizes.iter().rposition(|&s| s > 0);
    let mut out = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let upper = if Some(i) >= newest { u64::MAX } else { bases[i + 1] };
        let compacted = files::segment_path(dir, base, files::COMPACTED_EXT).exists();
        let path = files::segment_path(dir, base, files::LOG_EXT);
        let damage = crate::segment::check_file(&path, base, upper, compacted, batch_bytes_max)
            .ctx(|| format!("scanning {}", path.display()))?;
        out.push(SegmentCheck { path, size: sizes[i], newest: Some(i) == newest, damage });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogConfig, LogManager, ManagerOptions};

    /// Writes at least three segments into a fresh log and closes it cleanly.
    fn partition_with_segments() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let manager = LogManager::new(root.path(), ManagerOptions::default()).unwrap();
        let config = LogConfig { segment_bytes: es_core::limits::SEGMENT_BYTES_MIN, ..LogConfig::default() };
        let (log, _) = manager.open_partition("t-0", config).unwrap();
        let dir = root.path().join("t-0");
        let value = vec![7u8; 16 * 1024];
        for _ in 0..1000 {
            let record = es_core::Record::from_value(value.clone());
            log.append_records(&[record], es_core::LeaderEpoch(1)).unwrap().wait().unwrap();
            if check_partition(&dir, es_core::limits::BATCH_BYTES_MAX_DEFAULT).unwrap().len() >= 3 {
                break;
            }
        }
        manager.shutdown().unwrap();
        (root, dir)
    }

    #[test]
    fn a_clean_partition_has_no_damage_and_checking_changes_nothing() {
        let (_root, dir) = partition_with_segments();
        let before: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        let checks = check_partition(&dir, es_core::limits::BATCH_BYTES_MAX_DEFAULT).unwrap();
        assert!(checks.len() >= 3, "{checks:?}");
        assert!(checks.iter().all(|c| c.damage.is_none()), "{checks:?}");
        assert_eq!(checks.iter().filter(|c| c.newest).count(), 1);
        let after: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn a_flipped_byte_in_a_sealed_segment_is_found_with_its_position() {
        let (_root, dir) = partition_with_segments();
        let first = files::segment_path(&dir, 0, files::LOG_EXT);
        let mut bytes = std::fs::read(&first).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&first, &bytes).unwrap();
        let checks = check_partition(&dir, es_core::limits::BATCH_BYTES_MAX_DEFAULT).unwrap();
        let bad = checks.iter().find(|c| c.path == first).unwrap();
        assert!(!bad.newest);
        assert_eq!(bad.damage.as_ref().map(|d| d.0), Some(0), "{bad:?}");
        assert!(checks.iter().filter(|c| c.path != first).all(|c| c.damage.is_none()), "{checks:?}");
    }
}
