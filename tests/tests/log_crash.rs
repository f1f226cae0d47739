//! Crash test of the partition log: a child process appends from several threads and
//! is killed with SIGKILL at a random moment, over and over on the same directory.
//! After every kill the log is reopened here and must hold every acknowledged batch,
//! byte for byte, at its offsets, with contiguous offsets up to the high watermark and
//! nothing served past it; it must then accept appends again.
//!
//! A second test does the same with 64 partitions and 64 writer threads, which all
//! share the per-disk journal: every acknowledged batch of every partition must be
//! there after the kill, byte for byte, in order.
//!
//! `ES_CRASH_CYCLES` sets the number of cycles (default 100), `ES_CRASH_MANY_CYCLES`
//! those of the 64-partition test (default 100, about 45 s here), `ES_CRASH_SEED` the
//! random seed (printed), `ES_CRASH_KEEP=1` keeps the directory for inspection.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use es_core::batch::BatchView;
use es_log::{LogError, LogManager, ManagerOptions};
use es_tests::crashload::{self, Ack, BatchId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CHILD: &str = env!("CARGO_BIN_EXE_es-log-crash-child");
const WRITER_THREADS: u32 = 4;
/// Longest wait for the child to open the log and acknowledge its first append.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for a killed child to be reaped and its output drained.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// The child exits by itself after this many seconds if the test loses track of it.
const CHILD_MAX_SECS: &str = "60";

#[derive(Debug, Default)]
struct Totals {
    acked: usize,
    trims: usize,
    trimmed_bytes: u64,
    partial_lines: usize,
    /// Batches in the log that no one acknowledged (durable, but the kill came first).
    unacked_durable: usize,
    longest_cycle: Duration,
    /// Kills that landed right after a roll: the newest segment file was still empty.
    after_roll: usize,
}

#[test]
fn acknowledged_appends_survive_sigkill() {
    let cycles: u32 = std::env::var("ES_CRASH_CYCLES")
        .ok()
        .map_or(100, |s| s.parse().expect("ES_CRASH_CYCLES is a number"));
    let seed: u64 = std::env::var("ES_CRASH_SEED")
        .ok()
        .map_or_else(|| rand::rng().random(), |s| s.parse().expect("ES_CRASH_SEED"));
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let base = if std::env::var_os("ES_CRASH_KEEP").is_some() { tmp.keep() } else { tmp.path().to_owned() };
    let root = base.join("data");
    let stderr_path = base.join("child.stderr");
    eprintln!("crash test: {cycles} cycles, seed {seed}, dir {}", root.display());

    // Every batch acknowledged so far, by base offset: (id, last offset).
    let mut acked: BTreeMap<u64, (BatchId, u64)> = BTreeMap::new();
    let mut expected_end = 0u64;
    let mut totals = Totals::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        let cycle_start = Instant::now();
        let generation = cycle + 1;
        let run_ms = rng.random_range(10..=60);
        let run = run_child(&root, &stderr_path, generation, run_ms, (WRITER_THREADS, 1, None));
        assert_eq!(
            run.ready_hw, expected_end,
            "cycle {cycle}: the child reopened the log at a different high watermark than the checker left it"
        );
        totals.partial_lines += usize::from(run.partial_line);
        for ack in &run.acks {
            let id = BatchId { generation, thread: ack.thread, seq: ack.seq };
            let expected_last = ack.base_offset + crashload::records(id).len() as u64 - 1;
            assert_eq!(
                ack.last_offset, expected_last,
                "cycle {cycle}: {ack:?} spans the wrong number of offsets"
            );
            assert!(
                ack.base_offset >= expected_end,
                "cycle {cycle}: {ack:?} reuses an offset below the recovered log end {expected_end}"
            );
            if let Some(prev) = acked.insert(ack.base_offset, (id, ack.last_offset)) {
                panic!("cycle {cycle}: offset {} acknowledged twice: {prev:?} and {id:?}", ack.base_offset);
            }
        }
        totals.acked += run.acks.len();

        totals.after_roll += usize::from(newest_segment_is_empty(&root.join(crashload::PARTITION)));
        let checked = check_recovered_log(&root, &acked, generation, cycle, &mut rng);
        totals.trims += usize::from(checked.trimmed.is_some());
        totals.trimmed_bytes += checked.trimmed.unwrap_or(0);
        // Durable batches whose ack the kill cut off are in the log but not in `acked`.
        totals.unacked_durable = checked.batches - acked.len();
        acked.insert(checked.marker.0, (checked.marker.1, checked.marker.2));
        expected_end = checked.marker.2 + 1;
        totals.longest_cycle = totals.longest_cycle.max(cycle_start.elapsed());
    }
    let elapsed = started.elapsed();
    eprintln!(
        "crash test summary: {cycles} cycles in {elapsed:.1?} (longest {:.1?}); {} batches acknowledged by children, \
         {} durable batches in the log never acknowledged, {} acknowledged in the log at the end (offsets 0..{expected_end}); \
         {} recoveries trimmed a torn tail ({} bytes); {} partial ack lines cut by the kill; {} kills right after a roll (empty newest segment)",
        totals.longest_cycle,
        totals.acked,
        totals.unacked_durable,
        acked.len(),
        totals.trims,
        totals.trimmed_bytes,
        totals.partial_lines,
        totals.after_roll,
    );
}

struct ChildRun {
    ready_hw: u64,
    acks: Vec<Ack>,
    partial_line: bool,
}

enum Line {
    Complete(String),
    Partial,
}

/// Starts the child, lets it acknowledge appends for about `run_ms`, kills it with
/// SIGKILL and returns every complete line it printed.
/// `shape`: writer threads, partitions and the journal's file size (`None`: the
/// default).
fn run_child(
    root: &Path,
    stderr_path: &Path,
    generation: u32,
    run_ms: u64,
    shape: (u32, u32, Option<u64>),
) -> ChildRun {
    let (threads, partitions, journal_file_bytes) = shape;
    let stderr = std::fs::File::create(stderr_path).unwrap();
    let mut child = Command::new(CHILD)
        .arg(root)
        .arg(generation.to_string())
        .arg(threads.to_string())
        .arg(CHILD_MAX_SECS)
        .arg(partitions.to_string())
        .args(journal_file_bytes.map(|b| b.to_string()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("starting the crash child");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Line>();
    let reader = std::thread::spawn(move || {
        let mut out = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match out.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) if buf.ends_with(b"\n") => {
                    let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                    if tx.send(Line::Complete(line)).is_err() {
                        return;
                    }
                }
                Ok(_) => {
                    let _ = tx.send(Line::Partial);
                    return;
                }
            }
        }
    });

    let mut lines = Vec::new();
    let mut partial_line = false;
    let fail = |child: &mut Child, what: String| -> ! {
        let _ = child.kill();
        let _ = child.wait();
        let err = std::fs::read_to_string(stderr_path).unwrap_or_default();
        panic!("generation {generation}: {what}; child stderr:\n{err}");
    };

    // Wait for `ready` and the first ack, then let it run.
    let deadline = Instant::now() + START_TIMEOUT;
    while !lines.iter().any(|l: &String| l.starts_with("ack ")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Line::Complete(l)) => lines.push(l),
            Ok(Line::Partial) | Err(_) => {
                let status = child.try_wait().ok().flatten();
                fail(&mut child, format!("no ack within {START_TIMEOUT:?} (exit status {status:?})"));
            }
        }
    }
    std::thread::sleep(Duration::from_millis(run_ms));
    if let Ok(Some(status)) = child.try_wait() {
        fail(&mut child, format!("the child exited by itself: {status}"));
    }
    child.kill().expect("SIGKILL to the crash child");
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        match child.try_wait().expect("waiting for the crash child") {
            Some(status) => {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(
                    status.signal(),
                    Some(libc::SIGKILL),
                    "generation {generation}: the child did not die of SIGKILL: {status}"
                );
                break;
            }
            None if Instant::now() > deadline => {
                panic!("generation {generation}: the killed child was not reaped within {EXIT_TIMEOUT:?}")
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    // The pipe is closed now; drain what the child wrote before it died.
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Line::Complete(l)) => lines.push(l),
            Ok(Line::Partial) => partial_line = true,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("generation {generation}: the child's stdout did not close within {EXIT_TIMEOUT:?}")
            }
        }
    }
    reader.join().expect("stdout reader");

    let mut ready_hw = None;
    let mut acks = Vec::new();
    for l in &lines {
        if let Some(hw) = l.strip_prefix("ready ") {
            assert!(ready_hw.is_none(), "two ready lines");
            ready_hw = Some(hw.parse().expect("ready <hw>"));
        } else {
            acks.push(Ack::parse(l).unwrap_or_else(|| panic!("generation {generation}: bad line {l:?}")));
        }
    }
    ChildRun { ready_hw: ready_hw.expect("the child printed ready before acking"), acks, partial_line }
}

struct Checked {
    trimmed: Option<u64>,
    /// Batches found in the log before the checker's own append.
    batches: usize,
    /// The checker's own append: (base offset, id, last offset).
    marker: (u64, BatchId, u64),
}

/// Reopens the log as the broker would after the crash and checks it completely.
fn check_recovered_log(
    root: &Path,
    acked: &BTreeMap<u64, (BatchId, u64)>,
    generation: u32,
    cycle: u32,
    rng: &mut StdRng,
) -> Checked {
    let manager =
        LogManager::new(root, ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() })
            .unwrap();
    let (log, report) = manager
        .open_partition(crashload::PARTITION, crashload::config())
        .unwrap_or_else(|e| panic!("cycle {cycle}: reopening after the crash failed: {e}"));
    assert!(
        report.corrupt_segments.is_empty(),
        "cycle {cycle}: a process crash left corrupt sealed segments: {:?}",
        report.corrupt_segments
    );
    let hw = log.high_watermark();
    let info = log.info();
    assert_eq!(info.log_start_offset, 0, "cycle {cycle}: {info:?}");
    assert_eq!(
        info.log_end_offset, hw,
        "cycle {cycle}: after recovery the log end must equal the high watermark: {info:?}"
    );

    // Walk the whole log: contiguous offsets, every batch byte-identical to what its
    // id says, every writer's batches a gap-free prefix of its sequence.
    let mut found: HashMap<u64, (BatchId, u64)> = HashMap::new();
    let mut next_seq: HashMap<(u32, u32), u64> = HashMap::new();
    let mut offset = 0u64;
    while offset < hw {
        let r = log.read(offset, 1 << 20).unwrap_or_else(|e| {
            panic!("cycle {cycle}: reading offset {offset} below the high watermark {hw}: {e}")
        });
        assert!(
            !r.data.is_empty(),
            "cycle {cycle}: offset {offset} is below the high watermark {hw} but the log returns nothing there \
             (a hole in the offsets; report {report:?}, {info:?}); newest segments: {}",
            describe_segments(log.dir())
        );
        let mut consumed = 0;
        for view in r.batches() {
            consumed += view.header.total_len();
            check_batch(&view, offset, cycle, &mut next_seq);
            let id = crashload::id_of(&view).unwrap();
            found.insert(offset, (id, view.header.last_offset()));
            offset = view.header.next_offset();
        }
        assert_eq!(consumed, r.data.len(), "cycle {cycle}: a read returned a partial batch");
    }
    assert_eq!(offset, hw, "cycle {cycle}: the last batch ends past the high watermark");

    for (base, (id, last)) in acked {
        match found.get(base) {
            Some((fid, flast)) if fid == id && flast == last => {}
            other => panic!(
                "cycle {cycle}: acknowledged batch {id:?} at {base}..={last} is lost after recovery; \
                 the log has {other:?} there (high watermark {hw}, report {report:?})"
            ),
        }
    }

    // Nothing is served at or past the high watermark.
    let at_hw = log.read(hw, 1 << 20).unwrap();
    assert!(at_hw.data.is_empty(), "cycle {cycle}: data served at the high watermark");
    assert_eq!(at_hw.high_watermark, hw);
    assert!(
        matches!(log.read(hw + 1, 1 << 20), Err(LogError::OffsetOutOfRange { .. })),
        "cycle {cycle}: reading past the high watermark must fail"
    );

    // The recovered log accepts appends, at the recovered end.
    let id = BatchId { generation, thread: crashload::CHECKER_THREAD, seq: 0 };
    let appended = log
        .append_records(&crashload::records(id), crashload::EPOCH)
        .unwrap()
        .wait()
        .unwrap_or_else(|e| panic!("cycle {cycle}: append after recovery failed: {e}"));
    assert_eq!(appended.base_offset, hw, "cycle {cycle}: append after recovery");
    let back = log.read(hw, 1).unwrap();
    let view = back.batches().next().expect("the new batch reads back");
    assert_eq!(view.bytes(), &crashload::expected_bytes(id, hw)[..]);
    assert_eq!(log.high_watermark(), appended.last_offset + 1);

    // Leave the log either cleanly closed (indexes written) or as a crash would.
    if rng.random_bool(0.5) {
        manager.shutdown().unwrap();
    }
    drop(log);
    drop(manager);
    Checked {
        trimmed: report.trimmed.map(|t| t.bytes),
        batches: found.len(),
        marker: (appended.base_offset, id, appended.last_offset),
    }
}

/// Checks one batch read at `offset`: it starts there, it is byte-identical to the
/// batch its id describes, and it is the next one of its writer.
fn check_batch(view: &BatchView<'_>, offset: u64, cycle: u32, next_seq: &mut HashMap<(u32, u32), u64>) {
    assert_eq!(
        view.header.base_offset, offset,
        "cycle {cycle}: offsets are not contiguous: expected a batch at {offset}, got one at {}",
        view.header.base_offset
    );
    let id =
        crashload::id_of(view).unwrap_or_else(|| panic!("cycle {cycle}: the batch at {offset} has no id"));
    let expected = crashload::expected_bytes(id, offset);
    assert!(
        view.bytes() == &expected[..],
        "cycle {cycle}: the batch at {offset} ({id:?}) differs from what was appended"
    );
    let seq = next_seq.entry((id.generation, id.thread)).or_insert(0);
    assert_eq!(
        id.seq, *seq,
        "cycle {cycle}: writer {}/{} has seq {} at offset {offset}, expected {} \
         (a writer appends only after its previous batch is durable)",
        id.generation, id.thread, id.seq, *seq
    );
    *seq += 1;
}

/// `<base offset>.log: <bytes>` for the newest few segment files, for failure messages.
fn describe_segments(dir: &Path) -> String {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .map(|e| {
                    let len = e.metadata().map_or(0, |m| m.len());
                    (e.file_name().to_string_lossy().into_owned(), len)
                })
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    let skip = logs.len().saturating_sub(4);
    logs[skip..].iter().map(|(name, len)| format!("{name}: {len} bytes")).collect::<Vec<_>>().join(", ")
}

/// True when the partition has more than one segment and the newest `.log` is empty.
fn newest_segment_is_empty(dir: &Path) -> bool {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().map_or(1, |m| m.len())))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs.len() > 1 && logs.last().is_some_and(|l| l.1 == 0)
}

/// Partitions and writer threads of the many-partition crash test.
const MANY: u32 = 64;

/// 64 partitions, 64 writers, one journal (every other run with small files, so
/// rotations and recycled files are among the kill points): kill -9 at random moments; after each
/// kill every acknowledged batch of every partition is there byte for byte at its
/// offset, offsets are contiguous, each writer's batches are a gap-free prefix of
/// its sequence, and nothing is served past any high watermark.
#[test]
fn acknowledged_appends_survive_sigkill_across_64_partitions() {
    let cycles: u32 = std::env::var("ES_CRASH_MANY_CYCLES")
        .ok()
        .map_or(100, |s| s.parse().expect("ES_CRASH_MANY_CYCLES is a number"));
    let seed: u64 = std::env::var("ES_CRASH_SEED")
        .ok()
        .map_or_else(|| rand::rng().random(), |s| s.parse().expect("ES_CRASH_SEED"));
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let base = if std::env::var_os("ES_CRASH_KEEP").is_some() { tmp.keep() } else { tmp.path().to_owned() };
    let root = base.join("data");
    let stderr_path = base.join("child.stderr");
    eprintln!("many-partition crash test: {cycles} cycles, seed {seed}, dir {}", root.display());
    // Per partition: acknowledged batches by base offset.
    let mut acked: Vec<BTreeMap<u64, (BatchId, u64)>> = vec![BTreeMap::new(); MANY as usize];
    let (mut total_acks, mut replayed, started) = (0usize, 0u64, Instant::now());
    for cycle in 0..cycles {
        let generation = cycle + 1;
        // Every other cycle with 1 MiB journal files: several rotations a run, each
        // checkpoint recycling the file before (its new salt) into the next.
        let journal_file_bytes = (cycle % 2 == 1).then_some(1 << 20);
        let shape = (MANY, MANY, journal_file_bytes);
        let run = run_child(&root, &stderr_path, generation, rng.random_range(20..=120), shape);
        for ack in &run.acks {
            let id = BatchId { generation, thread: ack.thread, seq: ack.seq };
            let part = (ack.thread % MANY) as usize;
            if let Some(prev) = acked[part].insert(ack.base_offset, (id, ack.last_offset)) {
                panic!(
                    "cycle {cycle}: partition {part} offset {} acknowledged twice: {prev:?}, {id:?}",
                    ack.base_offset
                );
            }
        }
        total_acks += run.acks.len();
        replayed += check_partitions(&root, &acked, cycle);
    }
    eprintln!(
        "many-partition crash test: {cycles} cycles in {:.1?}; {total_acks} acknowledged batches over {MANY} partitions, all found; {replayed} batches replayed from the journal",
        started.elapsed()
    );
}

/// Reopens the log (replaying the journal) and checks every partition; returns the
/// number of batches the replay had to append.
fn check_partitions(root: &Path, acked: &[BTreeMap<u64, (BatchId, u64)>], cycle: u32) -> u64 {
    let manager =
        LogManager::new(root, ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() })
            .unwrap_or_else(|e| panic!("cycle {cycle}: recovery failed: {e}"));
    let replayed = manager.journal_replay().appended;
    for (part, acked) in acked.iter().enumerate() {
        let name = crashload::partition_of(part as u32, MANY);
        let (log, report) = manager.open_partition(&name, crashload::config()).unwrap();
        assert!(report.corrupt_segments.is_empty(), "cycle {cycle}: {name}: {report:?}");
        let hw = log.high_watermark();
        assert_eq!(log.info().log_end_offset, hw, "cycle {cycle}: {name}: log end past the watermark");
        let mut found: HashMap<u64, (BatchId, u64)> = HashMap::new();
        let mut next_seq: HashMap<(u32, u32), u64> = HashMap::new();
        let mut offset = 0u64;
        while offset < hw {
            let r = log.read(offset, 1 << 20).unwrap();
            assert!(
                !r.data.is_empty(),
                "cycle {cycle}: {name}: nothing at {offset} below the watermark {hw}"
            );
            for view in r.batches() {
                check_batch(&view, offset, cycle, &mut next_seq);
                found.insert(offset, (crashload::id_of(&view).unwrap(), view.header.last_offset()));
                offset = view.header.next_offset();
            }
        }
        for (base, (id, last)) in acked {
            assert_eq!(
                found.get(base),
                Some(&(*id, *last)),
                "cycle {cycle}: {name}: acknowledged batch {id:?} at {base}..={last} lost (watermark {hw})"
            );
        }
        assert!(
            log.read(hw, 1 << 20).unwrap().data.is_empty(),
            "cycle {cycle}: {name}: data at the watermark"
        );
    }
    manager.shutdown().unwrap();
    replayed
}
