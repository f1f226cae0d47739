//! Retention by age and size, the cold tier, and key compaction with tombstones,
//! driven by a manual clock.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use es_core::{LeaderEpoch, ManualClock, Record};
use es_log::{CleanupPolicy, LogConfig, LogError, LogManager, ManagerOptions, PartitionLog};

fn manager(dir: &std::path::Path, clock: Arc<ManualClock>) -> LogManager {
    let opts = ManagerOptions {
        housekeeping_interval: None,
        clock,
        cold_dir: Some(dir.join("cold")),
        ..ManagerOptions::default()
    };
    LogManager::new(dir.join("data"), opts).unwrap()
}

fn cfg() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes: 512, ..LogConfig::default() }
}

/// Appends `n` records with timestamp `ts`, one per batch.
fn fill(p: &PartitionLog, n: u64, ts: i64) {
    for i in 0..n {
        let r = Record {
            value: Some(format!("v{i:08}-{}", "x".repeat(40)).into()),
            timestamp: Some(ts),
            ..Record::default()
        };
        p.append_records(&[r], LeaderEpoch(1)).unwrap().wait().unwrap();
    }
}

#[test]
fn retention_by_age_deletes_only_old_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let m = manager(dir.path(), clock.clone());
    let (p, _) = m.open_partition("t-0", LogConfig { retention_ms: 10_000, ..cfg() }).unwrap();
    fill(&p, 100, 1_000_000);
    p.force_roll().unwrap();
    fill(&p, 100, 1_050_000);
    p.flush().unwrap();
    let before = p.info();
    clock.set_ms(1_020_000);
    let report = p.housekeeping().unwrap();
    assert!(!report.deleted_segments.is_empty());
    let after = p.info();
    assert_eq!(after.log_start_offset, 100, "segments holding only old records are gone: {after:?}");
    assert!(after.segment_count < before.segment_count);
    assert!(matches!(p.read(0, 100), Err(LogError::OffsetOutOfRange { log_start: 100, .. })));
    assert!(!p.read(100, 100).unwrap().data.is_empty());
    // Much later everything sealed is old, but the active segment always stays.
    clock.set_ms(9_000_000);
    p.housekeeping().unwrap();
    assert!(p.info().segment_count >= 1);
    assert_eq!(p.high_watermark(), 200);
}

#[test]
fn retention_by_size_keeps_the_partition_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) =
        m.open_partition("t-0", LogConfig { retention_bytes: 10_000, retention_ms: -1, ..cfg() }).unwrap();
    fill(&p, 600, 0);
    p.flush().unwrap();
    p.housekeeping().unwrap();
    let info = p.info();
    assert!(info.size_bytes <= 10_000 + 4096, "size {} over the limit", info.size_bytes);
    assert!(info.log_start_offset > 0);
    let r = p.read(info.log_start_offset, 1 << 20).unwrap();
    assert_eq!(r.batches().next().unwrap().header.base_offset, info.log_start_offset);
}

/// A log whose reader must consume records before they go (the cluster's
/// metadata log) sets a floor: retention by size stops at the first segment
/// holding an offset at or past it, and goes on once the floor moves.
#[test]
fn retention_keeps_every_segment_from_the_floor_on() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) =
        m.open_partition("t-0", LogConfig { retention_bytes: 10_000, retention_ms: -1, ..cfg() }).unwrap();
    fill(&p, 600, 0);
    p.flush().unwrap();
    p.set_retention_floor(0);
    assert!(p.housekeeping().unwrap().deleted_segments.is_empty(), "nothing below offset 0");
    assert_eq!(p.info().log_start_offset, 0);
    p.set_retention_floor(100);
    p.housekeeping().unwrap();
    let start = p.info().log_start_offset;
    assert!(start > 0 && start <= 100, "only segments wholly below the floor go: start {start}");
    p.set_retention_floor(u64::MAX);
    p.housekeeping().unwrap();
    let info = p.info();
    assert!(info.log_start_offset > 100 && info.size_bytes <= 10_000 + 4096, "{info:?}");
}

#[test]
fn cold_tier_serves_reads_below_the_local_start_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let config = LogConfig { retention_bytes: 8_000, retention_ms: -1, cold_tier: true, ..cfg() };
    {
        let m = manager(dir.path(), clock.clone());
        let (p, _) = m.open_partition("t-0", config.clone()).unwrap();
        fill(&p, 400, 0);
        p.flush().unwrap();
        let report = p.housekeeping().unwrap();
        assert!(!report.tiered_segments.is_empty());
        assert!(report.deleted_segments.is_empty());
        let info = p.info();
        assert!(info.cold_segment_count > 0);
        assert_eq!(info.log_start_offset, 0, "cold data still counts as readable");
        let r = p.read(3, 1).unwrap();
        assert_eq!(r.batches().next().unwrap().header.base_offset, 3);
        drop(p);
        m.shutdown().unwrap();
    }
    let local: Vec<_> = std::fs::read_dir(dir.path().join("data/t-0")).unwrap().collect();
    let cold: Vec<_> = std::fs::read_dir(dir.path().join("cold/t-0")).unwrap().collect();
    assert!(!local.is_empty() && !cold.is_empty());
    let m = manager(dir.path(), clock);
    let (p, _) = m.open_partition("t-0", config).unwrap();
    let mut next = 0;
    while next < 400 {
        let r = p.read(next, 1 << 16).unwrap();
        for b in r.batches() {
            assert_eq!(b.header.base_offset, next);
            next = b.header.next_offset();
        }
    }
}

fn keyed(key: &str, value: Option<&str>, ts: i64) -> Record {
    Record {
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: vec![],
        timestamp: Some(ts),
    }
}

fn all_records(p: &PartitionLog) -> Vec<(u64, Option<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut next = p.info().log_start_offset;
    while next < p.high_watermark() {
        let r = p.read(next, 1 << 20).unwrap();
        if r.data.is_empty() {
            break;
        }
        for b in r.batches() {
            for rec in b.records() {
                let rec = rec.unwrap();
                let s = |v: Option<&[u8]>| v.map(|v| String::from_utf8(v.to_vec()).unwrap());
                out.push((rec.offset, s(rec.key), s(rec.value)));
            }
            next = b.header.next_offset();
        }
    }
    out
}

#[test]
fn compaction_keeps_the_newest_value_per_key_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let m = manager(dir.path(), clock.clone());
    let config = LogConfig { cleanup_policy: CleanupPolicy::Compact, delete_retention_ms: 5_000, ..cfg() };
    let (p, _) = m.open_partition("t-0", config.clone()).unwrap();
    let mut expected: HashMap<String, (u64, Option<String>)> = HashMap::new();
    for i in 0..300u64 {
        let key = format!("key-{}", i % 10);
        let value = format!("value-{i}-{}", "y".repeat(30));
        let tombstone = i >= 290 && i % 10 == 3;
        let rec = keyed(&key, (!tombstone).then_some(value.as_str()), 1_000);
        let off = p.append_records(&[rec], LeaderEpoch(1)).unwrap().wait().unwrap().base_offset;
        expected.insert(key, (off, (!tombstone).then_some(value)));
    }
    // Batches with several records too, and records without a key.
    let off = p
        .append_records(
            &[
                keyed("key-0", Some("last-0"), 1_000),
                Record { value: Some("nokey".into()), ..Record::default() },
            ],
            LeaderEpoch(1),
        )
        .unwrap()
        .wait()
        .unwrap();
    expected.insert("key-0".into(), (off.base_offset, Some("last-0".into())));
    p.force_roll().unwrap();
    p.append_records(&[keyed("key-1", Some("active-1"), 1_000)], LeaderEpoch(1)).unwrap().wait().unwrap();
    expected.insert("key-1".into(), (off.last_offset + 1, Some("active-1".into())));
    p.flush().unwrap();

    let report = p.housekeeping().unwrap();
    assert!(report.records_removed > 250, "{report:?}");
    let records = all_records(&p);
    let mut latest: HashMap<String, (u64, Option<String>)> = HashMap::new();
    let mut last_offset = None;
    for (off, key, value) in &records {
        assert!(last_offset < Some(*off), "offsets stay ordered and unique");
        last_offset = Some(*off);
        if let Some(k) = key {
            assert!(!latest.contains_key(k), "key {k} survives twice");
            latest.insert(k.clone(), (*off, value.clone()));
        }
    }
    assert_eq!(latest, expected, "the newest value (or a young tombstone) per key, at its original offset");
    assert!(records.iter().any(|(_, k, v)| k.is_none() && v.as_deref() == Some("nokey")));

    // Tombstones go once they are older than delete.retention.ms.
    clock.set_ms(10_000);
    p.housekeeping().unwrap();
    let records = all_records(&p);
    assert!(!records.iter().any(|(_, k, _)| k.as_deref() == Some("key-3")), "expired tombstone removed");
    assert!(records.iter().any(|(_, k, v)| k.as_deref() == Some("key-4") && v.is_some()));

    // Survives restart.
    drop(p);
    m.shutdown().unwrap();
    let m = manager(dir.path(), clock);
    let (p, _) = m.open_partition("t-0", config).unwrap();
    assert_eq!(all_records(&p), records);
}

#[test]
fn compact_policy_never_deletes_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let m = manager(dir.path(), clock.clone());
    let (p, _) = m
        .open_partition("t-0", LogConfig { cleanup_policy: CleanupPolicy::Compact, retention_ms: 1, ..cfg() })
        .unwrap();
    fill(&p, 200, 0);
    p.flush().unwrap();
    clock.set_ms(1_000_000);
    p.housekeeping().unwrap();
    assert_eq!(p.info().log_start_offset, 0);
}

#[test]
fn the_background_thread_applies_retention_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ManagerOptions {
        housekeeping_interval: Some(std::time::Duration::from_millis(20)),
        clock: Arc::new(ManualClock::new(0)),
        ..ManagerOptions::default()
    };
    let m = LogManager::new(dir.path().join("data"), opts).unwrap();
    let (p, _) =
        m.open_partition("t-0", LogConfig { retention_bytes: 8_000, retention_ms: -1, ..cfg() }).unwrap();
    fill(&p, 400, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while p.info().log_start_offset == 0 {
        assert!(std::time::Instant::now() < deadline, "housekeeping never ran: {:?}", p.info());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    m.shutdown().unwrap();
}

#[test]
fn compaction_re_encodes_a_partial_batch_with_its_codec_producer_and_timestamps() {
    use es_core::ProducerInfo;
    use es_core::batch::{self, BatchView, Compression};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let m = manager(dir.path(), clock);
    let config = LogConfig { cleanup_policy: CleanupPolicy::Compact, ..cfg() };
    let (p, _) = m.open_partition("t-0", config).unwrap();
    let records: Vec<Record> =
        (0..4).map(|i| keyed(&format!("k{}", i % 2), Some(&format!("v{i}")), 100 + i as i64)).collect();
    let producer = ProducerInfo { producer_id: 7, producer_epoch: 1, base_sequence: 0 };
    let sent = batch::compress(&batch::encode(&records, 0, producer).unwrap(), Compression::Gzip).unwrap();
    p.append(sent, LeaderEpoch(3)).unwrap().wait().unwrap();
    p.force_roll().unwrap();
    p.append_records(&[keyed("other", Some("x"), 1)], LeaderEpoch(3)).unwrap().wait().unwrap();
    p.flush().unwrap();
    assert_eq!(p.housekeeping().unwrap().records_removed, 2);
    let read = p.read(0, 1 << 20).unwrap();
    let view: BatchView<'_> = read.batches().next().unwrap();
    let h = view.header;
    assert_eq!(h.compression().unwrap(), Compression::Gzip);
    assert_eq!((h.producer, h.leader_epoch, h.base_offset), (producer, LeaderEpoch(3), 0));
    let plain = view.plain_records(1 << 20).unwrap();
    let kept: Vec<(u64, i64)> = plain.iter().map(|r| r.map(|r| (r.offset, r.timestamp)).unwrap()).collect();
    assert_eq!(kept, vec![(2, 102), (3, 103)], "the newest per key, at their offsets and timestamps");
}

#[test]
fn delete_records_moves_the_log_start_durably_and_drops_whole_segments_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    {
        let m = manager(dir.path(), clock.clone());
        let (p, _) = m.open_partition("t-0", cfg()).unwrap();
        fill(&p, 200, 5);
        p.flush().unwrap();
        let segments = p.info().segment_count;
        assert!(segments > 2, "the test needs several segments: {segments}");
        // Beyond the high watermark is refused; at or below the start changes nothing.
        assert!(matches!(p.delete_records_before(201), Err(LogError::OffsetOutOfRange { .. })));
        assert_eq!(p.delete_records_before(0).unwrap(), 0);
        assert_eq!(p.delete_records_before(150).unwrap(), 150);
        let info = p.info();
        assert_eq!(info.log_start_offset, 150);
        assert!(info.segment_count < segments, "whole segments below 150 are deleted: {info:?}");
        assert!(matches!(p.read(149, 100), Err(LogError::OffsetOutOfRange { log_start: 150, .. })));
        let first = p.read(150, 1 << 20).unwrap();
        let last = first.batches().last().unwrap().header;
        assert!(last.base_offset >= 150);
        // Moving the start back is a no-op that answers the current start.
        assert_eq!(p.delete_records_before(100).unwrap(), 150);
        // Deleting everything leaves an empty log that still takes appends.
        assert_eq!(p.delete_records_before(200).unwrap(), 200);
        fill(&p, 1, 5);
        p.flush().unwrap();
        assert_eq!(p.read(200, 1 << 20).unwrap().batches().next().unwrap().header.base_offset, 200);
        m.shutdown().unwrap();
    }
    let m = manager(dir.path(), clock);
    let (p, _) = m.open_partition("t-0", cfg()).unwrap();
    assert_eq!(p.info().log_start_offset, 200, "the start survives a restart");
    assert_eq!(p.high_watermark(), 201);
}

#[test]
fn max_timestamp_offset_is_the_first_record_with_the_greatest_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", cfg()).unwrap();
    assert_eq!(p.max_timestamp_offset().unwrap(), None);
    fill(&p, 30, 100);
    fill(&p, 2, 900);
    fill(&p, 30, 500);
    p.flush().unwrap();
    assert_eq!(p.max_timestamp_offset().unwrap(), Some((30, 900)));
}
