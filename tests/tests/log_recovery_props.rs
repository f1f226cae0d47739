//! Property tests of partition-log recovery from damaged files: a log of random
//! batches is written and closed, then its files are damaged the way a crash or a bad
//! disk would, and the reopened log must hold exactly what the guarantee says.
//!
//! - A torn or bit-flipped newest segment reopens to exactly the longest valid prefix
//!   of batches before the damage: every batch before it byte-identical, nothing from
//!   the damaged batch on, appends continuing at the end of that prefix.
//! - A damaged sealed segment is never served as valid: reading the damaged batch
//!   fails with `LogError::Corrupt` naming the file; the newest segment still reads.
//! - A crash between a segment roll and the flush of the rolled segment's tail must
//!   not leave a hole in the offsets.
//!
//! The term field (bytes 12..20 of a batch) is outside the CRC by design (the leader
//! stamps it after encoding, as Kafka's partition leader epoch), so no test flips it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use es_core::Record;
use es_core::batch::{self, BatchHeader};
use es_core::{LeaderEpoch, ProducerInfo};
use es_log::{LogConfig, LogError, LogManager, ManagerOptions, PartitionLog, RecoveryReport};
use proptest::prelude::*;
use proptest::test_runner::Config;

const PARTITION: &str = "p-0";
const EPOCH: LeaderEpoch = LeaderEpoch(3);
/// Bytes of a v2 batch header that hold partitionLeaderEpoch: not covered by the CRC
/// nor by the offset-continuity check, so a flip there is not detectable.
const EPOCH_BYTES: std::ops::Range<usize> = 12..16;

/// One batch to write: record count, value length, content seed.
type Spec = (usize, usize, u8);

fn config(index_interval_bytes: u32) -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes, ..LogConfig::default() }
}

fn records(i: usize, (count, value_len, seed): Spec) -> Vec<Record> {
    (0..count)
        .map(|j| Record {
            key: Some(Bytes::from(format!("b{i}-r{j}"))),
            value: Some(Bytes::from(
                (0..value_len).map(|k| (k as u8).wrapping_mul(31) ^ seed ^ j as u8).collect::<Vec<u8>>(),
            )),
            headers: vec![],
            timestamp: Some(10_000 + i as i64),
        })
        .collect()
}

fn encoded(i: usize, spec: Spec, base: u64) -> Vec<u8> {
    let mut b = batch::encode(&records(i, spec), 0, ProducerInfo::NONE).unwrap();
    batch::stamp(&mut b, base, EPOCH);
    b
}

#[derive(Debug, Clone)]
struct Written {
    base: u64,
    next: u64,
    bytes: Vec<u8>,
    /// Base offset of the segment file that holds the batch, and its position there.
    segment: u64,
    position: u64,
}

struct Log {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: PathBuf,
    batches: Vec<Written>,
    /// Segment base offsets, ascending; the last is the newest.
    segments: Vec<u64>,
    config: LogConfig,
}

impl Log {
    fn seg_path(&self, base: u64, ext: &str) -> PathBuf {
        self.dir.join(format!("{base:020}.{ext}"))
    }

    fn newest(&self) -> u64 {
        *self.segments.last().unwrap()
    }

    fn in_segment(&self, seg: u64) -> Vec<Written> {
        self.batches.iter().filter(|b| b.segment == seg).cloned().collect()
    }

    /// The offset the log must end at when it holds exactly `prefix` batches.
    fn end_of_prefix(&self, prefix: usize) -> u64 {
        prefix.checked_sub(1).map_or(0, |i| self.batches[i].next)
    }
}

fn manager(root: &Path) -> LogManager {
    LogManager::new(root, ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() })
        .unwrap()
}

fn open(log: &Log) -> (LogManager, Arc<PartitionLog>, RecoveryReport) {
    let m = manager(&log.root);
    let (p, report) = m.open_partition(PARTITION, log.config.clone()).unwrap();
    (m, p, report)
}

/// Writes the batches (all queued, then all awaited, so they share fsyncs), rolls
/// to a new segment before batch `roll_after` if asked (after the last one: a new
/// empty segment), closes the log cleanly or as a crash would (no
/// index for the newest segment), and maps every batch to its segment file and
/// position.
fn write_log(specs: &[Spec], index_interval_bytes: u32, clean_close: bool, roll_after: Option<usize>) -> Log {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    let config = config(index_interval_bytes);
    let m = manager(&root);
    let (p, _) = m.open_partition(PARTITION, config.clone()).unwrap();
    let mut pending = Vec::new();
    let mut batches = Vec::new();
    let mut wait_all = |pending: &mut Vec<(usize, es_log::PendingAppend)>| {
        for (i, pa) in pending.drain(..) {
            let a = pa.wait().unwrap();
            batches.push(Written {
                base: a.base_offset,
                next: a.last_offset + 1,
                bytes: encoded(i, specs[i], a.base_offset),
                segment: 0,
                position: 0,
            });
        }
    };
    for (i, s) in specs.iter().enumerate() {
        if roll_after == Some(i) {
            wait_all(&mut pending);
            p.force_roll().unwrap();
        }
        pending.push((i, p.append_records(&records(i, *s), EPOCH).unwrap()));
    }
    wait_all(&mut pending);
    if roll_after == Some(specs.len()) {
        p.force_roll().unwrap();
    }
    let dir = p.dir().to_owned();
    if clean_close {
        m.shutdown().unwrap();
    }
    drop(p);
    drop(m);

    let mut segments: Vec<u64> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log").map(|s| s.parse().unwrap())
        })
        .collect();
    segments.sort_unstable();
    let mut i = 0;
    for &seg in &segments {
        let data = std::fs::read(dir.join(format!("{seg:020}.log"))).unwrap();
        let mut pos = 0usize;
        while pos < data.len() {
            let h = BatchHeader::parse(&data[pos..], usize::MAX).unwrap();
            let b = &mut batches[i];
            assert_eq!(h.base_offset, b.base, "layout walk");
            assert_eq!(&data[pos..pos + h.total_len()], &b.bytes[..], "file bytes");
            b.segment = seg;
            b.position = pos as u64;
            pos += h.total_len();
            i += 1;
        }
    }
    assert_eq!(i, batches.len(), "every batch is in a segment file");
    Log { _tmp: tmp, root, dir, batches, segments, config }
}

/// Reads everything below the high watermark, checking that offsets are contiguous.
fn read_all(p: &PartitionLog) -> Result<Vec<u8>, String> {
    let hw = p.high_watermark();
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < hw {
        let r = p.read(offset, 1 << 20).map_err(|e| format!("read at {offset} (hw {hw}): {e}"))?;
        if r.data.is_empty() {
            return Err(format!("read at {offset} returned nothing below the high watermark {hw}"));
        }
        for v in r.batches() {
            if v.header.base_offset != offset {
                return Err(format!("expected a batch at {offset}, got one at {}", v.header.base_offset));
            }
            out.extend_from_slice(v.bytes());
            offset = v.header.next_offset();
        }
    }
    if offset != hw {
        return Err(format!("the last batch ends at {offset}, past the hw {hw}"));
    }
    Ok(out)
}

/// The reopened log holds exactly `batches[..prefix]` (the ones of older segments
/// included), serves nothing after it, and appends continue at its end.
fn check_exact_prefix(log: &Log, p: &PartitionLog, prefix: usize) -> Result<(), TestCaseError> {
    let end = log.end_of_prefix(prefix);
    let hw = p.high_watermark();
    prop_assert_eq!(hw, end, "high watermark after recovery");
    prop_assert_eq!(p.info().log_end_offset, end, "log end after recovery");
    let expected: Vec<u8> = log.batches[..prefix].iter().flat_map(|b| b.bytes.iter().copied()).collect();
    let got = read_all(p).map_err(TestCaseError::fail)?;
    prop_assert!(
        got == expected,
        "the log holds {} bytes, expected exactly the {} bytes of the first {} batches",
        got.len(),
        expected.len(),
        prefix
    );
    let at_end = p.read(end, 1 << 20).unwrap();
    prop_assert!(at_end.data.is_empty(), "data served at the end");
    let past = p.read(end + 1, 1 << 20);
    prop_assert!(
        matches!(past, Err(LogError::OffsetOutOfRange { .. })),
        "reading past the end must fail as out of range"
    );
    let a = p.append_records(&records(9999, (2, 10, 7)), EPOCH).unwrap().wait().unwrap();
    prop_assert_eq!(a.base_offset, end, "append after recovery");
    let back = p.read(end, 1).unwrap();
    prop_assert_eq!(back.batches().next().map(|v| v.bytes().to_vec()), Some(encoded(9999, (2, 10, 7), end)));
    Ok(())
}

/// Deletes the newest segment's index files, as a crash leaves them.
fn drop_newest_indexes(log: &Log) {
    for ext in ["index", "timeindex"] {
        let _ = std::fs::remove_file(log.seg_path(log.newest(), ext));
    }
}

/// Position of the newest segment's last offset-index entry, if it has an index.
fn last_index_position(log: &Log) -> Option<u64> {
    let idx = std::fs::read(log.seg_path(log.newest(), "index")).ok()?;
    let e = idx.chunks_exact(8).last()?;
    Some(u64::from(u32::from_be_bytes(e[4..8].try_into().unwrap())))
}

fn specs(max: usize) -> impl Strategy<Value = Vec<Spec>> {
    proptest::collection::vec((1usize..=4, 0usize..400, any::<u8>()), 1..max)
}

fn interval() -> impl Strategy<Value = u32> {
    prop_oneof![Just(64u32), Just(700), Just(4096)]
}

fn cfg() -> Config {
    Config { cases: 64, failure_persistence: None, ..Config::default() }
}

proptest! {
    #![proptest_config(cfg())]

    /// (a) A torn newest segment: cut at any byte.
    #[test]
    fn truncated_newest_segment_recovers_the_longest_whole_prefix(
        specs in specs(40),
        interval in interval(),
        clean in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let log = write_log(&specs, interval, clean, None);
        let newest = log.newest();
        let path = log.seg_path(newest, "log");
        let len = std::fs::metadata(&path).unwrap().len();
        let cut = cut.index(len as usize + 1) as u64;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();

        // Survivors: every batch of older segments, and the newest segment's batches
        // that end at or before the cut.
        let prefix = log
            .batches
            .iter()
            .take_while(|b| b.segment != newest || b.position + b.bytes.len() as u64 <= cut)
            .count();
        let boundary = log.batches[..prefix]
            .iter()
            .rfind(|b| b.segment == newest)
            .map_or(0, |b| b.position + b.bytes.len() as u64);
        let (_m, p, report) = open(&log);
        prop_assert!(report.corrupt_segments.is_empty(), "{:?}", report.corrupt_segments);
        if boundary == cut {
            prop_assert!(report.trimmed.is_none(), "cut on a batch boundary: {:?}", report.trimmed);
        } else {
            let t = report.trimmed.clone().expect("a torn tail is reported");
            prop_assert_eq!(t.file, path.clone());
            prop_assert_eq!(t.position, boundary);
            prop_assert_eq!(t.bytes, cut - boundary);
        }
        if boundary == 0 && log.segments.len() > 1 {
            // An empty newest segment above an older one is removed on open (it may
            // hide a torn predecessor after an interrupted roll), so it may be gone.
            prop_assert!(std::fs::metadata(&path).map_or(true, |m| m.len() == 0), "an empty newest segment");
        } else {
            prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), boundary, "the torn tail is cut off the file");
        }
        check_exact_prefix(&log, &p, prefix)?;
    }

    /// (b) A flipped bit in one of the last few batches of the newest segment. With
    /// the newest segment's index gone (as after a crash) the damage may be anywhere
    /// in those batches; with an index from a clean close, at or after its last entry
    /// (recovery checks CRCs from there on; earlier damage is caught when read).
    #[test]
    fn bit_flip_in_newest_segment_recovers_the_prefix_before_it(
        specs in specs(40),
        interval in interval(),
        clean in any::<bool>(),
        keep_index in any::<bool>(),
        last_k in 1usize..=4,
        pick in any::<prop::sample::Index>(),
        byte in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let log = write_log(&specs, interval, clean, None);
        let newest = log.newest();
        if !(clean && keep_index) {
            drop_newest_indexes(&log);
        }
        let from = last_index_position(&log).unwrap_or(0);
        let candidates: Vec<usize> = (0..log.batches.len())
            .filter(|&i| log.batches[i].segment == newest && log.batches[i].position >= from)
            .collect();
        let candidates = &candidates[candidates.len().saturating_sub(last_k)..];
        prop_assume!(!candidates.is_empty());
        let victim = candidates[pick.index(candidates.len())];
        let b = &log.batches[victim];
        let in_batch: Vec<usize> = (0..b.bytes.len()).filter(|i| !EPOCH_BYTES.contains(i)).collect();
        let at = b.position + in_batch[byte.index(in_batch.len())] as u64;
        let path = log.seg_path(newest, "log");
        let mut data = std::fs::read(&path).unwrap();
        data[at as usize] ^= 1 << bit;
        std::fs::write(&path, &data).unwrap();

        let (_m, p, report) = open(&log);
        prop_assert!(report.corrupt_segments.is_empty(), "{:?}", report.corrupt_segments);
        let t = report.trimmed.clone().expect("the damaged tail is reported");
        prop_assert_eq!(t.file, path.clone());
        prop_assert_eq!(t.position, b.position, "trimmed at the damaged batch ({})", t.reason);
        prop_assert_eq!(t.bytes, data.len() as u64 - b.position);
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), b.position);
        check_exact_prefix(&log, &p, victim)?;
    }

    /// (c) A damaged byte in a sealed (older) segment: the damaged batch is never
    /// served; reading it fails with `Corrupt` naming the file; other batches are
    /// either served byte-identical or refused as corrupt, never altered; the newest
    /// segment reads and appends as before. The damaged byte is in the CRC field or
    /// the bytes it covers.
    #[test]
    fn damaged_sealed_segment_is_never_served(
        specs in specs(50),
        interval in interval(),
        drop_index in any::<bool>(),
        pick_seg in any::<prop::sample::Index>(),
        pick_batch in any::<prop::sample::Index>(),
        byte in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let log = write_log(&specs, interval, true, None);
        prop_assume!(log.segments.len() >= 2);
        let sealed = &log.segments[..log.segments.len() - 1];
        let seg = sealed[pick_seg.index(sealed.len())];
        let in_seg = log.in_segment(seg);
        let victim = &in_seg[pick_batch.index(in_seg.len())];
        let covered: Vec<usize> = (20..victim.bytes.len()).collect();
        let at = victim.position + covered[byte.index(covered.len())] as u64;
        check_sealed_damage(&log, seg, victim, at, bit, drop_index, false)?;
    }
}

fn check_sealed_damage(
    log: &Log,
    seg: u64,
    victim: &Written,
    at: u64,
    bit: u8,
    drop_index: bool,
    header_damage: bool,
) -> Result<(), TestCaseError> {
    let path = log.seg_path(seg, "log");
    let mut data = std::fs::read(&path).unwrap();
    data[at as usize] ^= 1 << bit;
    std::fs::write(&path, &data).unwrap();
    if drop_index {
        for ext in ["index", "timeindex"] {
            std::fs::remove_file(log.seg_path(seg, ext)).unwrap();
        }
    }
    let (_m, p, report) = open(log);
    prop_assert!(report.trimmed.is_none(), "{:?}", report.trimmed);
    if drop_index {
        // The index is rebuilt with a full scan, which finds the damage: at the
        // damaged batch when its CRC fails; a raised base offset looks like a
        // compaction gap, so it may only be noticed at the batch after it.
        let found: Vec<(PathBuf, u64)> = report.corrupt_segments.iter().map(|c| (c.0.clone(), c.1)).collect();
        prop_assert!(
            found.len() == 1
                && found[0].0 == path
                && (found[0].1 == victim.position || (header_damage && found[0].1 > victim.position)),
            "report {:?}, damaged batch at {} of {}",
            found,
            victim.position,
            path.display()
        );
    }
    let total_end = log.batches.last().unwrap().next;
    prop_assert_eq!(p.high_watermark(), total_end);

    let is_corrupt_here = |e: &LogError| matches!(e, LogError::Corrupt { file, .. } if *file == path);
    for b in &log.batches {
        // One batch at a time (max_bytes 1 still returns one whole batch).
        let r = p.read(b.base, 1);
        if b.base == victim.base {
            match &r {
                Err(e) if is_corrupt_here(e) => {}
                other => prop_assert!(
                    false,
                    "reading the damaged batch at {} must fail as corrupt in {}; got {:?}",
                    b.base,
                    path.display(),
                    other.as_ref().map(|r| r.data.len())
                ),
            }
        } else if b.segment == seg && b.base > victim.base {
            match &r {
                Err(e) => prop_assert!(is_corrupt_here(e), "batch {} after the damage: {e}", b.base),
                Ok(r) => prop_assert_eq!(
                    r.batches().next().map(|v| v.bytes().to_vec()),
                    Some(b.bytes.clone()),
                    "batch {} after the damage",
                    b.base
                ),
            }
        } else {
            let r = r.map_err(|e| TestCaseError::fail(format!("read at {}: {e}", b.base)))?;
            prop_assert_eq!(
                r.batches().next().map(|v| v.bytes().to_vec()),
                Some(b.bytes.clone()),
                "intact batch {}",
                b.base
            );
        }
    }
    // A large read over the damaged segment never returns the damaged batch.
    for start in log.in_segment(seg).iter().map(|b| b.base) {
        let r = p.read(start, 1 << 20);
        if let Err(e) = &r {
            prop_assert!(is_corrupt_here(e), "read at {start}: {e}");
        }
        if let Ok(r) = r {
            let mut views = 0;
            for v in r.batches() {
                let want = log
                    .batches
                    .iter()
                    .find(|b| b.base == v.header.base_offset)
                    .expect("a batch the log holds");
                prop_assert!(v.bytes() == &want.bytes[..], "batch {} served altered", v.header.base_offset);
                prop_assert!(v.header.base_offset != victim.base, "the damaged batch was served");
                views += 1;
            }
            prop_assert!(views > 0 || start >= total_end);
        }
    }
    // The newest segment is untouched and readable, and the log appends.
    let newest = log.in_segment(log.newest());
    let first = newest[0].base;
    let r = p.read(first, 1 << 20).unwrap();
    let got: Vec<u8> = r.batches().flat_map(|v| v.bytes().to_vec()).collect();
    let want: Vec<u8> = newest.iter().flat_map(|b| b.bytes.clone()).collect();
    prop_assert!(got == want, "the newest segment reads back whole");
    let a = p.append_records(&records(9999, (1, 5, 1)), EPOCH).unwrap().wait().unwrap();
    prop_assert_eq!(a.base_offset, total_end);
    Ok(())
}

proptest! {
    #![proptest_config(cfg())]

    /// (c, header) Like the test above, with the damage in the batch's base offset
    /// (not covered by the CRC; the continuity check is meant to catch it) or its
    /// length field. Reading the damaged range must fail as corrupt, not skip it.
    #[test]
    fn damaged_sealed_batch_header_is_never_served_or_skipped(
        specs in specs(50),
        interval in interval(),
        drop_index in any::<bool>(),
        pick_seg in any::<prop::sample::Index>(),
        pick_batch in any::<prop::sample::Index>(),
        byte in 0usize..12,
        bit in 0u8..8,
    ) {
        let log = write_log(&specs, interval, true, None);
        prop_assume!(log.segments.len() >= 2);
        let sealed = &log.segments[..log.segments.len() - 1];
        let seg = sealed[pick_seg.index(sealed.len())];
        let in_seg = log.in_segment(seg);
        let victim = &in_seg[pick_batch.index(in_seg.len())];
        check_sealed_damage(&log, seg, victim, victim.position + byte as u64, bit, drop_index, true)?;
    }

    /// (d) A crash between a roll and the flush of the rolled segment's tail. The
    /// roll creates the new segment file (and syncs the directory) at once, while the
    /// rolled segment's last batches may still wait for the flusher, and its index is
    /// written only after that flush. So a crash can leave an empty newest segment
    /// whose base offset counts batches the segment before it never received, and
    /// that segment cut short (possibly inside a batch) and without index files.
    /// Recovery must end the log after the last whole batch: no hole in the offsets.
    #[test]
    fn crash_between_roll_and_tail_flush_leaves_no_hole(
        specs in specs(40),
        interval in interval(),
        clean in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let log = write_log(&specs, interval, clean, Some(specs.len()));
        let (prev, newest) = (log.segments[log.segments.len() - 2], log.newest());
        prop_assert_eq!(std::fs::metadata(log.seg_path(newest, "log")).unwrap().len(), 0);
        for ext in ["index", "timeindex"] {
            let _ = std::fs::remove_file(log.seg_path(prev, ext));
        }
        let path = log.seg_path(prev, "log");
        let len = std::fs::metadata(&path).unwrap().len();
        let cut = cut.index(len as usize) as u64;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
        let prefix = log
            .batches
            .iter()
            .take_while(|b| b.segment != prev || b.position + b.bytes.len() as u64 <= cut)
            .count();
        let (_m, p, _report) = open(&log);
        check_exact_prefix(&log, &p, prefix)?;
    }
}

/// The simplest case of (d): three batches, a roll, and a crash before the third
/// batch reached the rolled segment.
#[test]
fn roll_then_crash_before_the_rolled_tail_is_written_leaves_no_hole() {
    let specs = [(1, 10, 1), (2, 10, 2), (1, 10, 3)];
    let log = write_log(&specs, 4096, false, Some(specs.len()));
    assert_eq!(log.segments, vec![0, 4], "one full segment and the new empty one");
    // The on-disk state of a crash after the roll created 00..04.log, before the
    // flusher wrote batch 2 (offset 3) to 00..00.log and sealed it.
    for ext in ["index", "timeindex"] {
        let _ = std::fs::remove_file(log.seg_path(0, ext));
    }
    let path = log.seg_path(0, "log");
    let keep = log.batches[2].position;
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(keep).unwrap();

    let (_m, p, report) = open(&log);
    let r = p.read(3, 1 << 20);
    assert_eq!(
        p.high_watermark(),
        3,
        "offset 3 was never written, yet the log reopens with high watermark {} \
         (read at 3: {:?} bytes; report {report:?})",
        p.high_watermark(),
        r.map(|r| r.data.len())
    );
    let a = p.append_records(&records(7, (1, 1, 1)), EPOCH).unwrap().wait().unwrap();
    assert_eq!(a.base_offset, 3);
    assert_eq!(read_all(&p).unwrap().len() as u64, keep + encoded(7, (1, 1, 1), 3).len() as u64);
}

/// The simplest case of the header-damage test: one bit of the base offset of the
/// first batch of a sealed segment (outside the CRC by design) flips.
#[test]
fn sealed_batch_with_damaged_base_offset_is_refused_not_skipped() {
    let specs = [(1, 10, 1), (1, 10, 2), (1, 10, 3), (1, 10, 4)];
    // Offsets 0..=2 in segment 0, offset 3 in segment 3.
    let log = write_log(&specs, 4096, true, Some(3));
    assert_eq!(log.segments, vec![0, 3]);
    let path = log.seg_path(0, "log");
    let mut data = std::fs::read(&path).unwrap();
    data[0] ^= 1; // base offset 0 becomes 2^56
    std::fs::write(&path, &data).unwrap();

    let (_m, p, report) = open(&log);
    let r = p.read(0, 1 << 20);
    let served: Option<Vec<u64>> =
        r.as_ref().ok().map(|r| r.batches().map(|v| v.header.base_offset).collect());
    assert!(
        matches!(&r, Err(LogError::Corrupt { file, .. }) if *file == path),
        "reading offset 0 of a damaged sealed segment must fail as corrupt; \
         it served batches at offsets {served:?} (report {report:?})"
    );
}
