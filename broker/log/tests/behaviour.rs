//! Behaviour of the partition log through its public API: rolls, indexes, reads by
//! offset and timestamp, truncation, the replica path, limits and group commit.

use std::sync::Arc;

use es_core::batch::{self, BatchHeader, BatchView, TimestampType};
use es_core::{LeaderEpoch, ManualClock, ProducerInfo, Record};
use es_log::{LogConfig, LogError, LogManager, ManagerOptions, PartitionLog};

fn manager(dir: &std::path::Path, clock: Arc<ManualClock>) -> LogManager {
    let opts = ManagerOptions {
        housekeeping_interval: None,
        clock,
        cold_dir: Some(dir.join("cold")),
        ..ManagerOptions::default()
    };
    LogManager::new(dir.join("data"), opts).unwrap()
}

fn small() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes: 256, ..LogConfig::default() }
}

fn value(i: u64) -> Record {
    Record {
        key: Some(format!("k{}", i % 7).into()),
        value: Some(format!("value-{i:06}").into()),
        headers: vec![],
        timestamp: Some(1_000 + i as i64),
    }
}

/// Appends `n` single-record batches and returns nothing; offsets are 0..n.
fn fill(p: &PartitionLog, n: u64) {
    for i in 0..n {
        let a = p.append_records(&[value(i)], LeaderEpoch(1)).unwrap().wait().unwrap();
        assert_eq!(a.base_offset, i);
    }
}

fn offsets_from(p: &PartitionLog, from: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = from;
    while next < p.high_watermark() {
        let r = p.read(next, 1000).unwrap();
        assert!(!r.data.is_empty(), "no data at {next} below the high watermark");
        for b in r.batches() {
            for rec in b.records() {
                out.push(rec.unwrap().offset);
            }
            next = b.header.next_offset();
        }
    }
    out
}

#[test]
fn segments_roll_by_size_and_every_offset_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    fill(&p, 300);
    assert!(p.info().segment_count > 3, "expected rolls, got {:?}", p.info());
    for start in [0u64, 1, 57, 123, 299] {
        let r = p.read(start, 1).unwrap();
        let first = r.batches().next().unwrap();
        assert!(first.header.base_offset <= start && start <= first.header.last_offset());
    }
    assert_eq!(offsets_from(&p, 0), (0..300).collect::<Vec<_>>());
    // Restart: sealed segments load their index, the active one is scanned.
    p.close().unwrap();
    drop(p);
    m.shutdown().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, report) = m.open_partition("t-0", small()).unwrap();
    assert!(report.trimmed.is_none() && report.corrupt_segments.is_empty());
    assert_eq!(p.high_watermark(), 300);
    assert_eq!(offsets_from(&p, 150), (150..300).collect::<Vec<_>>());
    assert_eq!(p.append_records(&[value(300)], LeaderEpoch(1)).unwrap().wait().unwrap().base_offset, 300);
}

#[test]
fn missing_or_garbage_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
        let (p, _) = m.open_partition("t-0", small()).unwrap();
        fill(&p, 200);
        m.shutdown().unwrap();
    }
    let pdir = dir.path().join("data/t-0");
    let mut indexes: Vec<_> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "index"))
        .collect();
    indexes.sort();
    std::fs::remove_file(&indexes[0]).unwrap();
    std::fs::write(&indexes[1], b"garbage!garbage!").unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    assert_eq!(offsets_from(&p, 0), (0..200).collect::<Vec<_>>());
    assert!(indexes[0].exists(), "rebuilt index is written back");
}

#[test]
fn segments_roll_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let m = manager(dir.path(), clock.clone());
    let cfg = LogConfig { segment_ms: 1000, ..LogConfig::default() };
    let (p, _) = m.open_partition("t-0", cfg).unwrap();
    fill(&p, 3);
    assert_eq!(p.info().segment_count, 1);
    clock.advance_ms(1000);
    fill_from(&p, 3, 2);
    assert_eq!(p.info().segment_count, 2);
}

fn fill_from(p: &PartitionLog, from: u64, n: u64) {
    for i in from..from + n {
        assert_eq!(p.append_records(&[value(i)], LeaderEpoch(1)).unwrap().wait().unwrap().base_offset, i);
    }
}

#[test]
fn read_by_timestamp_finds_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    fill(&p, 250); // timestamps 1000..1250
    assert_eq!(p.offset_for_timestamp(0).unwrap(), Some(0));
    assert_eq!(p.offset_for_timestamp(1_000).unwrap(), Some(0));
    assert_eq!(p.offset_for_timestamp(1_137).unwrap(), Some(137));
    assert_eq!(p.offset_for_timestamp(1_249).unwrap(), Some(249));
    assert_eq!(p.offset_for_timestamp(1_250).unwrap(), None);
}

#[test]
fn reads_respect_max_bytes_but_return_at_least_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let big: Vec<Record> = (0..50).map(value).collect();
    p.append_records(&big, LeaderEpoch(1)).unwrap().wait().unwrap();
    p.append_records(&big, LeaderEpoch(1)).unwrap().wait().unwrap();
    let r = p.read(10, 1).unwrap();
    let batches: Vec<BatchView<'_>> = r.batches().collect();
    assert_eq!(batches.len(), 1, "a fetch in the middle of a batch returns that whole batch");
    assert_eq!(batches[0].header.base_offset, 0);
    assert_eq!(p.read(0, 1 << 20).unwrap().batches().count(), 2);
}

#[test]
fn out_of_range_offsets_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    fill(&p, 5);
    assert!(p.read(5, 100).unwrap().data.is_empty());
    match p.read(6, 100) {
        Err(LogError::OffsetOutOfRange { requested: 6, log_start: 0, high_watermark: 5 }) => {}
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
}

#[test]
fn limits_and_bad_batches_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let cfg = LogConfig { batch_bytes_max: 4096, record_bytes_max: 1000, ..LogConfig::default() };
    let (p, _) = m.open_partition("t-0", cfg).unwrap();
    let huge = Record::from_value(vec![0u8; 1001]);
    assert!(matches!(
        p.append_records(&[huge], LeaderEpoch(1)),
        Err(LogError::RecordTooLarge { size: 1001, max: 1000 })
    ));
    let many: Vec<Record> = (0..10).map(|_| Record::from_value(vec![1u8; 900])).collect();
    assert!(matches!(p.append_records(&many, LeaderEpoch(1)), Err(LogError::BatchTooLarge { .. })));
    let mut bad = batch::encode(&[Record::from_value("x")], 0, ProducerInfo::NONE).unwrap();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(matches!(p.append(bad, LeaderEpoch(1)), Err(LogError::InvalidBatch(_))));
    assert!(matches!(p.append(vec![1, 2, 3], LeaderEpoch(1)), Err(LogError::InvalidBatch(_))));
    assert_eq!(p.info().log_end_offset, 0);
    assert_eq!(p.high_watermark(), 0);
}

#[test]
fn replica_path_keeps_bytes_and_checks_offsets_and_terms() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (leader, _) = m.open_partition("leader", LogConfig::default()).unwrap();
    let (follower, _) = m.open_partition("follower", LogConfig::default()).unwrap();
    leader.append_records(&[value(0), value(1)], LeaderEpoch(3)).unwrap().wait().unwrap();
    leader.append_records(&[value(2)], LeaderEpoch(4)).unwrap().wait().unwrap();
    let data = leader.read(0, 1 << 20).unwrap();
    let batches: Vec<Vec<u8>> = data.batches().map(|b| b.bytes().to_vec()).collect();
    assert!(matches!(
        follower.append_replica(batches[1].clone()),
        Err(LogError::OffsetMismatch { expected: 0, got: 2 })
    ));
    for b in &batches {
        follower.append_replica(b.clone()).unwrap().wait().unwrap();
    }
    assert_eq!(follower.read(0, 1 << 20).unwrap().data, data.data, "replicas store byte-identical batches");
    assert_eq!(follower.epoch_starts(), vec![(LeaderEpoch(3), 0), (LeaderEpoch(4), 2)]);
    assert!(matches!(
        leader.append_records(&[value(9)], LeaderEpoch(2)),
        Err(LogError::StaleEpoch { epoch: LeaderEpoch(2), latest: LeaderEpoch(4) })
    ));
}

#[test]
fn truncate_after_discards_the_suffix_and_terms() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    fill(&p, 100);
    for i in 100..150 {
        p.append_records(&[value(i)], LeaderEpoch(2)).unwrap().wait().unwrap();
    }
    assert!(matches!(p.truncate_after(200), Ok(())));
    p.truncate_after(119).unwrap();
    assert_eq!(p.high_watermark(), 120);
    assert_eq!(p.info().log_end_offset, 120);
    assert_eq!(p.epoch_starts(), vec![(LeaderEpoch(1), 0), (LeaderEpoch(2), 100)]);
    p.truncate_after(49).unwrap();
    assert_eq!(p.epoch_starts(), vec![(LeaderEpoch(1), 0)]);
    assert_eq!(offsets_from(&p, 0), (0..50).collect::<Vec<_>>());
    assert_eq!(p.append_records(&[value(50)], LeaderEpoch(3)).unwrap().wait().unwrap().base_offset, 50);
    // The truncation is durable.
    drop(p);
    m.shutdown().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    assert_eq!(p.high_watermark(), 51);
    assert_eq!(p.epoch_starts(), vec![(LeaderEpoch(1), 0), (LeaderEpoch(3), 50)]);
}

#[test]
fn truncation_inside_a_batch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    p.append_records(&[value(0), value(1), value(2)], LeaderEpoch(1)).unwrap().wait().unwrap();
    assert!(matches!(p.truncate_after(0), Err(LogError::NotBatchBoundary { offset: 1 })));
}

#[test]
fn concurrent_writers_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let per_writer = 200u64;
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for i in 0..per_writer {
                    p.append_records(&[value(i)], LeaderEpoch(1)).unwrap().wait().unwrap();
                }
            });
        }
    });
    let stats = m.stats();
    let appends = stats.appends.load(std::sync::atomic::Ordering::Relaxed);
    let fsyncs = stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(appends, 8 * per_writer);
    assert!(fsyncs < appends, "group commit must merge fsyncs: {fsyncs} fsyncs for {appends} appends");
    // The metrics' histograms saw every round and every fsync of them. A round is
    // observed just after its waiters are woken, so wait (bounded) for the last.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stats.round_appends.snapshot().sum < appends {
        assert!(std::time::Instant::now() < deadline, "the last round was never observed");
        std::thread::yield_now();
    }
    let rounds = stats.round_appends.snapshot();
    assert_eq!(rounds.sum, appends, "round sizes add up to the appends");
    assert_eq!(rounds.count, stats.rounds.load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(stats.fsync_latency.snapshot().count, fsyncs);
    assert_eq!(p.high_watermark(), 8 * per_writer);
    let mut seen = offsets_from(&p, 0);
    seen.dedup();
    assert_eq!(seen.len() as u64, 8 * per_writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_appends_resolve_and_wake_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let mut hw = p.subscribe();
    let pending = p.append_records(&[value(0)], LeaderEpoch(1)).unwrap();
    let appended = pending.durable().await.unwrap();
    assert_eq!(appended.base_offset, 0);
    tokio::time::timeout(std::time::Duration::from_secs(5), hw.wait_for(|v| *v >= 1)).await.unwrap().unwrap();
}

/// A crash right after a roll: the new, empty segment was created, but the old
/// segment's last batches never reached the disk. Recovery must fall back to the
/// old segment and trim it, not start the log after a hole.
#[test]
fn crash_after_roll_with_torn_previous_segment_recovers_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("data/t-0");
    {
        let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        fill(&p, 10);
        p.flush().unwrap();
        drop(p);
        m.shutdown().unwrap();
    }
    let seg0 = pdir.join("00000000000000000000.log");
    let len = std::fs::metadata(&seg0).unwrap().len();
    // Tear the last batch and fake the roll's empty successor at the in-memory end.
    std::fs::OpenOptions::new().write(true).open(&seg0).unwrap().set_len(len - 5).unwrap();
    std::fs::write(pdir.join("00000000000000000010.log"), b"").unwrap();
    for ext in ["index", "timeindex"] {
        let _ = std::fs::remove_file(pdir.join(format!("00000000000000000000.{ext}")));
    }
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, report) = m.open_partition("t-0", LogConfig::default()).unwrap();
    assert!(report.trimmed.is_some());
    assert_eq!(p.high_watermark(), 9);
    assert_eq!(offsets_from(&p, 0), (0..9).collect::<Vec<_>>());
    assert_eq!(p.append_records(&[value(9)], LeaderEpoch(1)).unwrap().wait().unwrap().base_offset, 9);
}

fn producer_batch(id: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let records: Vec<Record> =
        (0..n).map(|i| Record::from_value(format!("p{id}-e{epoch}-s{}", seq + i as i32))).collect();
    let producer = ProducerInfo { producer_id: id, producer_epoch: epoch, base_sequence: seq };
    batch::encode(&records, 5, producer).unwrap()
}

#[test]
fn idempotent_retries_get_the_original_offsets_even_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
        let (p, _) = m.open_partition("t-0", small()).unwrap();
        let first = p.append(producer_batch(9, 0, 0, 3), LeaderEpoch(1)).unwrap().wait().unwrap();
        assert_eq!((first.base_offset, first.last_offset, first.duplicate), (0, 2, false));
        let again = p.append(producer_batch(9, 0, 0, 3), LeaderEpoch(1)).unwrap().wait().unwrap();
        assert_eq!((again.base_offset, again.last_offset, again.duplicate), (0, 2, true));
        assert_eq!(p.high_watermark(), 3, "the retry wrote nothing");
        assert!(matches!(
            p.append(producer_batch(9, 0, 5, 1), LeaderEpoch(1)),
            Err(LogError::OutOfOrderSequence { expected: 3, got: 5, .. })
        ));
        p.append(producer_batch(9, 0, 3, 2), LeaderEpoch(1)).unwrap().wait().unwrap();
        // Enough traffic to roll segments, so the snapshot and the replay both matter.
        fill_from(&p, 5, 60);
        p.append(producer_batch(9, 0, 5, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
        // No clean close: the state must come back from the snapshot plus the log.
    }
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    let hw = p.high_watermark();
    let retry = p.append(producer_batch(9, 0, 5, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, hw - 1);
    assert_eq!(p.high_watermark(), hw);
    assert_eq!(p.producer_state(9), Some((0, 5)));
    let retry = p.append(producer_batch(9, 0, 3, 2), LeaderEpoch(1)).unwrap().wait().unwrap();
    assert_eq!((retry.base_offset, retry.duplicate), (3, true));
    // A new epoch fences the old one.
    p.append(producer_batch(9, 1, 0, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
    assert!(matches!(
        p.append(producer_batch(9, 0, 6, 1), LeaderEpoch(1)),
        Err(LogError::ProducerFenced { epoch: 0, current: 1, .. })
    ));
}

#[test]
fn producer_state_follows_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", small()).unwrap();
    p.append(producer_batch(4, 0, 0, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
    p.append(producer_batch(4, 0, 1, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
    p.truncate_after(0).unwrap();
    assert_eq!(p.producer_state(4), Some((0, 0)));
    let again = p.append(producer_batch(4, 0, 1, 1), LeaderEpoch(1)).unwrap().wait().unwrap();
    assert_eq!((again.base_offset, again.duplicate), (1, false));
}

#[test]
fn gzip_batches_are_stored_and_served_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let records: Vec<Record> = (0..200).map(value).collect();
    let plain = batch::encode(&records, 0, ProducerInfo::NONE).unwrap();
    let packed = batch::compress(&plain, batch::Compression::Gzip).unwrap();
    let a = p.append(packed.clone(), LeaderEpoch(1)).unwrap().wait().unwrap();
    assert_eq!((a.base_offset, a.last_offset), (0, 199));
    let r = p.read(150, 1).unwrap();
    let view = r.batches().next().unwrap();
    assert_eq!(view.header.base_offset, 0);
    let sent = BatchView::parse(&packed, packed.len()).unwrap();
    assert_eq!(view.records_section(), sent.records_section(), "stored as sent");
    let stamped = BatchHeader { leader_epoch: LeaderEpoch(1), ..sent.header };
    assert_eq!(view.header, stamped, "only the base offset and the epoch are stamped");
    let got: Vec<u64> = view.plain_records(1 << 26).unwrap().iter().map(|r| r.unwrap().offset).collect();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    assert_eq!(p.offset_for_timestamp(1_150).unwrap(), Some(150));
    // Compressed records are checked in plain form: one past the record limit is refused.
    let cfg = LogConfig { record_bytes_max: 1000, ..LogConfig::default() };
    let (small, _) = m.open_partition("t-1", cfg).unwrap();
    let big = batch::encode(&[Record::from_value(vec![0u8; 1001])], 0, ProducerInfo::NONE).unwrap();
    let big = batch::compress(&big, batch::Compression::Gzip).unwrap();
    assert!(matches!(
        small.append(big, LeaderEpoch(1)),
        Err(LogError::RecordTooLarge { size: 1001, max: 1000 })
    ));
}

#[test]
fn log_append_time_topics_stamp_the_leaders_clock() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(5_000)));
    let cfg = LogConfig { timestamp_type: TimestampType::LogAppendTime, ..LogConfig::default() };
    let (p, _) = m.open_partition("t-0", cfg).unwrap();
    let (q, _) = m.open_partition("t-1", LogConfig::default()).unwrap();
    for log in [&p, &q] {
        log.append_records(&[value(0), value(1)], LeaderEpoch(1)).unwrap().wait().unwrap();
    }
    let r = p.read(0, 1 << 20).unwrap();
    let view = r.batches().next().unwrap();
    assert_eq!(view.header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!((view.header.base_timestamp, view.header.max_timestamp), (1_000, 5_000));
    let times: Vec<i64> = view.records().map(|r| r.unwrap().timestamp).collect();
    assert_eq!(times, vec![5_000, 5_000], "every record reads as the append time");
    let r = q.read(0, 1 << 20).unwrap();
    let view = r.batches().next().unwrap();
    assert_eq!(view.header.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(view.records().map(|r| r.unwrap().timestamp).collect::<Vec<_>>(), vec![1_000, 1_001]);
}

#[test]
fn batches_need_a_known_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let unknown = LeaderEpoch::UNKNOWN;
    assert!(
        matches!(p.append_records(&[value(0)], unknown), Err(LogError::UnknownEpoch { epoch }) if epoch == unknown)
    );
    // A producer's batch carries epoch -1 until a leader stamps it: no replica takes it.
    let unstamped = batch::encode(&[value(0)], 0, ProducerInfo::NONE).unwrap();
    assert!(matches!(p.append_replica(unstamped), Err(LogError::UnknownEpoch { .. })));
    assert_eq!(p.info().log_end_offset, 0);
}

#[test]
fn a_fresh_data_directory_is_marked_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    p.append_records(&[value(0)], LeaderEpoch(1)).unwrap().wait().unwrap();
    drop(p);
    m.shutdown().unwrap();
    drop(m);
    assert_eq!(std::fs::read_to_string(data.join(es_log::FORMAT_FILE)).unwrap(), "es-log 2\n");
    let m = manager(dir.path(), Arc::new(ManualClock::new(0)));
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    assert_eq!(p.info().log_end_offset, 1);
}

#[test]
fn data_directories_of_the_old_format_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("t-0")).unwrap();
    // The old layout's first batch: 64-byte header with magic 1 at byte 24.
    let mut old = vec![0u8; 80];
    old[24] = 1;
    std::fs::write(data.join("t-0").join("00000000000000000000.log"), &old).unwrap();
    let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let err = LogManager::new(&data, opts.clone()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LogError::OldFormat { .. }), "{err:?}");
    assert!(text.contains("magic 1") && text.contains("move the directory away or delete it"), "{text}");
    assert!(!data.join(es_log::FORMAT_FILE).exists(), "a refused directory is not marked");
    // A marker from another format is refused too.
    std::fs::remove_dir_all(data.join("t-0")).unwrap();
    std::fs::write(data.join(es_log::FORMAT_FILE), "es-log 1\n").unwrap();
    assert!(matches!(LogManager::new(&data, opts), Err(LogError::OldFormat { .. })));
}
