//! One conformance suite for the cold tier, run against every backend: the
//! directory store, and S3 stores on two real peers started here: moto_server (PyPI
//! `moto[server]`, from the tests' venv) and s3s-fs (crates.io, the release pinned in
//! `tests/src/s3s.rs`, installed by `.ci/run`), which also checks SigV4 signatures.
//! Without moto installed its part is skipped with a message, except under CI
//! (`CI=true`), where it must run; without s3s-fs every case fails, saying what to
//! install. A case a peer cannot pass is named in [`GAPS`] with the reason, and says
//! so when skipped. Faults are injected by wrapping a store.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_core::{LeaderEpoch, ManualClock, Record};
use es_log::{
    ColdOptions, ColdStore, DirStore, Expect, Listed, LogConfig, LogError, LogManager, ManagerOptions,
    PartitionLog, S3Config, S3Store,
};

// ---------------------------------------------------------------- backends

/// moto_server on a free loopback port, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> Option<PathBuf> {
    let venv = std::env::var_os("ES_PYTHON_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/es/venv")))?;
    let bin = venv.join("bin/moto_server");
    bin.exists().then_some(bin)
}

/// Starts moto, or says why not: `None` only outside CI.
fn start_moto() -> Option<Moto> {
    let Some(bin) = moto_binary() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "moto_server is not installed in the tests' venv; CI must run the S3 conformance suite (.ci/run installs tests/python/requirements.txt)"
        );
        eprintln!(
            "SKIPPED the S3 half of the cold-tier conformance suite: moto_server is not installed (pip install 'moto[server]' into ~/.cache/es/venv)"
        );
        return None;
    };
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting moto_server");
    let moto = Moto { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto_server did not listen within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(moto)
}

/// Creates a bucket with a plain unsigned PUT (moto does not check signatures).
fn create_bucket(port: u16, bucket: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "creating bucket {bucket}: {answer}");
}

/// The key pair of moto (which checks none) and of s3s-fs (which checks signatures).
const MOTO_KEYS: (&str, &str) = ("testing", "testing");
const S3S_KEYS: (&str, &str) = ("es-conformance", "s3s-fs-secret-0123");

fn s3_config(port: u16, bucket: &str, (key_id, secret): (&str, &str)) -> S3Config {
    S3Config {
        bucket: bucket.into(),
        prefix: "es/cold".into(),
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        region: "us-east-1".into(),
        access_key_id: Some(key_id.into()),
        secret_access_key: Some(secret.into()),
        session_token: None,
        path_style: true,
        allow_http: true,
        part_size: 5 * 1024 * 1024,
        op_timeout: Duration::from_secs(20),
    }
}

/// s3s-fs out of process (tests/src/s3s.rs, shared with es-tests' cold_tier.rs).
#[allow(dead_code)]
#[path = "../../../tests/src/s3s.rs"]
mod s3s;

/// Cases a peer cannot pass, as (peer, case, why): each_backend skips them on that
/// peer only, printing the reason; every other case it runs runs on every backend.
/// (moto's put_object also checks, then writes, with no lock, but under Python's
/// GIL no race has got through it here: 650 of 650 had one winner.)
const GAPS: &[(&str, &str, &str)] = &[(
    "s3s-fs",
    "racing_puts",
    "s3s-fs 0.14.1's conditional PUT is not atomic: it checks If-None-Match / If-Match, then \
     writes and renames with no lock between, so racing writers all succeed (still so in 0.17.0)",
)];

fn gap(peer: &str, case: &str) -> Option<&'static str> {
    GAPS.iter().find(|(p, c, _)| *p == peer && *c == case).map(|(_, _, why)| *why)
}

/// Runs `suite` against the directory store, an S3 store on moto (where it is
/// installed; always under CI) and one on s3s-fs, each in a new bucket and local
/// directory, so suites never see each other's objects.
fn each_backend(name: &str, suite: impl Fn(Arc<dyn ColdStore>, &Path)) {
    eprintln!("== {name} on the directory store");
    let dir = tempfile::tempdir().unwrap();
    suite(Arc::new(DirStore::new(dir.path().join("store")).unwrap()), dir.path());
    let bucket = name.replace('_', "-");
    if let Some(moto) = start_moto() {
        eprintln!("== {name} on moto_server");
        create_bucket(moto.port, &bucket);
        let dir = tempfile::tempdir().unwrap();
        suite(Arc::new(S3Store::new(s3_config(moto.port, &bucket, MOTO_KEYS)).unwrap()), dir.path());
    }
    if let Some(why) = gap("s3s-fs", name) {
        eprintln!("SKIPPED {name} on s3s-fs {}: {why}", s3s::VERSION);
        return;
    }
    eprintln!("== {name} on s3s-fs {}", s3s::VERSION);
    let server = s3s::S3sFs::start(S3S_KEYS.0, S3S_KEYS.1);
    server.create_bucket(&bucket);
    let dir = tempfile::tempdir().unwrap();
    suite(Arc::new(S3Store::new(s3_config(server.port, &bucket, S3S_KEYS)).unwrap()), dir.path());
}

/// A store that can be switched off, delegating to a real one otherwise.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn ColdStore>,
    down: AtomicBool,
}

impl Faulty {
    fn check(&self, op: &'static str, key: &str) -> es_log::Result<()> {
        match self.down.load(Ordering::SeqCst) {
            true => Err(LogError::ColdStore {
                op,
                key: key.into(),
                reason: "connection refused (injected)".into(),
            }),
            false => Ok(()),
        }
    }
}

impl ColdStore for Faulty {
    fn put_file(&self, key: &str, path: &Path) -> es_log::Result<()> {
        self.check("put", key)?;
        self.inner.put_file(key, path)
    }
    fn put_if(&self, key: &str, data: Bytes, expect: &Expect) -> es_log::Result<String> {
        self.check("conditional put", key)?;
        self.inner.put_if(key, data, expect)
    }
    fn get(&self, key: &str) -> es_log::Result<Option<(Bytes, String)>> {
        self.check("get", key)?;
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> es_log::Result<Bytes> {
        self.check("get", key)?;
        self.inner.get_range(key, range)
    }
    fn list(&self, prefix: &str) -> es_log::Result<Vec<Listed>> {
        self.check("list", prefix)?;
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> es_log::Result<()> {
        self.check("delete", key)?;
        self.inner.delete(key)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

// ---------------------------------------------------------------- helpers

fn manager(dir: &Path, clock: Arc<ManualClock>, cold: ColdOptions) -> LogManager {
    let opts =
        ManagerOptions { housekeeping_interval: None, clock, cold: Some(cold), ..ManagerOptions::default() };
    LogManager::new(dir.join("data"), opts).unwrap()
}

fn cold_cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        retention_bytes: 8_000,
        retention_ms: -1,
        cold_tier: true,
        ..LogConfig::default()
    }
}

/// Appends `n` records with timestamp `ts`, one per batch; returns their values.
fn fill(p: &PartitionLog, from: u64, n: u64, ts: i64) {
    for i in from..from + n {
        let r = Record {
            value: Some(format!("v{i:08}-{}", "x".repeat(40)).into()),
            timestamp: Some(ts),
            ..Record::default()
        };
        p.append_records(&[r], LeaderEpoch(1)).unwrap().wait().unwrap();
    }
}

/// Every record value from `from` to the high watermark, read back batch by batch.
fn read_all(p: &PartitionLog, from: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = from;
    while at < p.high_watermark() {
        let r = p.read(at, 1 << 16).unwrap();
        for b in r.batches() {
            for rec in b.records() {
                out.push(String::from_utf8(rec.unwrap().value.unwrap().to_vec()).unwrap());
            }
            at = b.header.next_offset();
        }
    }
    out
}

fn expected(from: u64, to: u64) -> Vec<String> {
    (from..to).map(|i| format!("v{i:08}-{}", "x".repeat(40))).collect()
}

fn local_logs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------- the suite

#[test]
fn the_store_contract_holds() {
    each_backend("store_contract", |store, dir| {
        let file = dir.join("obj");
        std::fs::write(&file, b"0123456789").unwrap();
        store.put_file("p-0/a.log", &file).unwrap();
        assert_eq!(store.get_range("p-0/a.log", 2..5).unwrap(), Bytes::from_static(b"234"));
        assert_eq!(store.get("p-0/a.log").unwrap().unwrap().0, Bytes::from_static(b"0123456789"));
        assert_eq!(store.get("p-0/missing").unwrap(), None);
        // Conditional writes: create-only, then only over the version read.
        let v1 = store.put_if("p-0/manifest", Bytes::from_static(b"one"), &Expect::Absent).unwrap();
        let again = store.put_if("p-0/manifest", Bytes::from_static(b"two"), &Expect::Absent);
        assert!(matches!(again, Err(LogError::ColdConflict { .. })), "{again:?}");
        let v2 =
            store.put_if("p-0/manifest", Bytes::from_static(b"two"), &Expect::Version(v1.clone())).unwrap();
        let stale = store.put_if("p-0/manifest", Bytes::from_static(b"three"), &Expect::Version(v1));
        assert!(matches!(stale, Err(LogError::ColdConflict { .. })), "{stale:?}");
        assert_eq!(store.get("p-0/manifest").unwrap().unwrap(), (Bytes::from_static(b"two"), v2));
        let keys: Vec<String> = store.list("p-0/").unwrap().into_iter().map(|l| l.key).collect();
        assert_eq!(keys, ["p-0/a.log", "p-0/manifest"]);
        assert_eq!(store.list("p-0/").unwrap()[0].size, 10);
        store.delete("p-0/a.log").unwrap();
        store.delete("p-0/a.log").unwrap();
        assert_eq!(store.list("p-0/").unwrap().len(), 1);
        assert!(store.list("nothing/").unwrap().is_empty());
        // Past the part size (5 MiB here) an S3 upload is multipart; same contract.
        let big: Vec<u8> = (0..(5 * 1024 * 1024 + 4096) as u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &big).unwrap();
        store.put_file("p-1/big.log", &file).unwrap();
        let n = big.len() as u64;
        assert_eq!(
            store.get_range("p-1/big.log", n - 10..n).unwrap(),
            Bytes::copy_from_slice(&big[big.len() - 10..])
        );
        assert_eq!(store.list("p-1/").unwrap(), [Listed { key: "p-1/big.log".into(), size: n }]);
    });
}

#[test]
fn expired_segments_go_cold_and_read_back_after_eviction_and_restart() {
    each_backend("tiering", |store, dir| {
        let clock = Arc::new(ManualClock::new(0));
        // A one-byte cache: every cold read beyond the newest fetch downloads again.
        let cold = ColdOptions { cache_bytes: 1, ..ColdOptions::new(store.clone()) };
        let m = manager(dir, clock.clone(), cold.clone());
        let (p, _) = m.open_partition("t-0", cold_cfg()).unwrap();
        fill(&p, 0, 600, 0);
        p.flush().unwrap();
        let report = p.housekeeping().unwrap();
        assert!(!report.tiered_segments.is_empty(), "{report:?}");
        let info = p.info();
        assert!(info.cold_segment_count > 0 && info.cold_size_bytes > 0, "{info:?}");
        assert_eq!(info.log_start_offset, 0, "cold data is still readable");
        // The local copies of tiered segments are gone; the store has their objects.
        let local = local_logs(&dir.join("data/t-0"));
        let first_local = format!("{:020}.log", report.tiered_segments[0]);
        assert!(!local.contains(&first_local), "{local:?}");
        let objects = store.list("t-0/").unwrap();
        assert!(objects.iter().any(|o| o.key == "t-0/manifest"));
        assert_eq!(objects.len(), 1 + 4 * info.cold_segment_count, "{objects:?}");
        assert_eq!(read_all(&p, 0), expected(0, 600));
        let status = m.cold_status().unwrap();
        assert!(status.uploads > 0 && status.fetches > 0 && status.refused == 0, "{status:?}");
        assert!(status.cached_bytes <= 4096 + 1024, "the cache keeps one segment: {status:?}");
        drop(p);
        m.shutdown().unwrap();
        drop(m);
        // A crash after the manifest named a segment but before its local copy went:
        // put a cold segment's files back beside the local ones.
        let (part, cache) = (dir.join("data/t-0"), dir.join("data/t-0/cold-cache"));
        let cached = local_logs(&cache);
        let revived = cached.first().expect("one cold segment is cached").clone();
        for ext in ["log", "index", "timeindex", "raftidx"] {
            let name = revived.replace(".log", &format!(".{ext}"));
            std::fs::copy(cache.join(&name), part.join(&name)).unwrap();
        }
        // After a restart the cold segments come from the local manifest, and the
        // interrupted move is finished: the local copy is gone.
        let m = manager(dir, clock, cold);
        let (p, _) = m.open_partition("t-0", cold_cfg()).unwrap();
        assert!(!local_logs(&part).contains(&revived), "{:?}", local_logs(&part));
        assert_eq!(p.info().cold_segment_count, info.cold_segment_count);
        assert_eq!(read_all(&p, 0), expected(0, 600));
        assert_eq!(p.offset_for_timestamp(0).unwrap(), Some(0));
    });
}

#[test]
fn cold_retention_and_topic_deletion_remove_objects() {
    each_backend("cold_retention", |store, dir| {
        let clock = Arc::new(ManualClock::new(0));
        let cold = ColdOptions { retention_bytes: 8_000, ..ColdOptions::new(store.clone()) };
        let m = manager(dir, clock, cold);
        let (p, _) = m.open_partition("t-0", cold_cfg()).unwrap();
        fill(&p, 0, 900, 0);
        p.flush().unwrap();
        let report = p.housekeeping().unwrap();
        assert!(!report.deleted_cold_segments.is_empty(), "{report:?}");
        let info = p.info();
        assert!(info.cold_size_bytes <= 8_000, "{info:?}");
        assert!(info.log_start_offset > 0);
        assert!(matches!(p.read(0, 100), Err(LogError::OffsetOutOfRange { .. })));
        let start = info.log_start_offset;
        assert_eq!(read_all(&p, start), expected(start, 900));
        let objects = store.list("t-0/").unwrap();
        assert_eq!(
            objects.len(),
            1 + 4 * info.cold_segment_count,
            "deleted segments' objects are gone: {objects:?}"
        );
        // DeleteRecords below a cold segment's end removes it from the tier too.
        let next_cold_end = start + 1;
        p.delete_records_before(next_cold_end).unwrap();
        p.delete_cold().unwrap();
        assert!(store.list("t-0/").unwrap().is_empty());
        assert_eq!(p.info().cold_segment_count, 0);
    });
}

#[test]
fn a_corrupted_object_is_refused_and_never_served() {
    each_backend("corrupt", |store, dir| {
        let clock = Arc::new(ManualClock::new(0));
        let cold = ColdOptions { cache_bytes: 1, ..ColdOptions::new(store.clone()) };
        let m = manager(dir, clock, cold);
        let (p, _) = m.open_partition("t-0", cold_cfg()).unwrap();
        fill(&p, 0, 600, 0);
        p.flush().unwrap();
        let tiered = p.housekeeping().unwrap().tiered_segments;
        assert!(tiered.len() >= 2);
        // Tamper with the first segment's object (same size, one byte changed).
        let key = store
            .list("t-0/")
            .unwrap()
            .into_iter()
            .map(|l| l.key)
            .find(|k| k.starts_with(&format!("t-0/{:020}-", tiered[0])) && k.ends_with(".log"))
            .unwrap();
        let mut bytes = store.get(&key).unwrap().unwrap().0.to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let tampered = dir.join("tampered");
        std::fs::write(&tampered, &bytes).unwrap();
        store.put_file(&key, &tampered).unwrap();
        // Reading a later cold segment evicts the first from the one-byte cache.
        assert!(!p.read(tiered[1], 100).unwrap().data.is_empty());
        let refused = p.read(0, 100);
        assert!(matches!(refused, Err(LogError::ColdCorrupt { .. })), "{refused:?}");
        assert!(m.cold_status().unwrap().refused >= 1);
        // Later segments are still served.
        assert!(!p.read(tiered[1], 100).unwrap().data.is_empty());
    });
}

#[test]
fn a_store_that_is_down_keeps_segments_local_and_uploads_retry_with_backoff() {
    each_backend("store_down", |store, dir| {
        let clock = Arc::new(ManualClock::new(0));
        let faulty = Arc::new(Faulty { inner: store, down: AtomicBool::new(true) });
        let m = manager(dir, clock.clone(), ColdOptions::new(faulty.clone()));
        let (p, _) = m.open_partition("t-0", cold_cfg()).unwrap();
        fill(&p, 0, 600, 0);
        p.flush().unwrap();
        let before = p.info();
        assert!(p.housekeeping().is_err(), "the failed upload is reported");
        assert_eq!(p.info().segment_count, before.segment_count, "nothing left the local disk");
        assert_eq!(read_all(&p, 0), expected(0, 600), "hot data keeps being served");
        let status = m.cold_status().unwrap();
        assert_eq!(status.upload_failures, 1);
        assert!(status.last_error.as_deref().unwrap().contains("injected"), "{status:?}");
        // Within the backoff no upload is tried, even with the store back.
        faulty.down.store(false, Ordering::SeqCst);
        assert!(p.housekeeping().unwrap().tiered_segments.is_empty());
        clock.advance_ms(1_000);
        assert!(!p.housekeeping().unwrap().tiered_segments.is_empty());
        assert_eq!(m.cold_status().unwrap().last_error, None);
        assert_eq!(read_all(&p, 0), expected(0, 600));
    });
}

/// A slow store: an endpoint that accepts connections and never answers. Every
/// call gives up within its bound, and the broker's thread is free again.
#[test]
fn a_store_that_never_answers_is_given_up_on_within_the_bound() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let config = S3Config { op_timeout: Duration::from_secs(1), ..s3_config(port, "never", MOTO_KEYS) };
    let store = S3Store::new(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj");
    std::fs::write(&file, b"x").unwrap();
    let started = Instant::now();
    let put = store.put_file("p-0/a.log", &file);
    assert!(matches!(put, Err(LogError::ColdStore { .. })), "{put:?}");
    assert!(store.get("p-0/a.log").is_err());
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    drop(silent);
}

/// Conditional puts are the tier's only guard when two writers meet (a manifest is
/// published with If-None-Match, then replaced with If-Match): of writers racing
/// for the same condition exactly one wins, and the others are told of a conflict.
#[test]
fn racing_conditional_puts_have_exactly_one_winner() {
    const WRITERS: usize = 8;
    each_backend("racing_puts", |store, _| {
        // Each race writes bytes of its own: the directory store's version is the
        // sha256 of the bytes, so rewriting the same bytes would keep the version.
        let race = |key: &str, expect: Expect| -> Vec<es_log::Result<String>> {
            let start = Arc::new(Barrier::new(WRITERS));
            let writers: Vec<_> = (0..WRITERS)
                .map(|i| {
                    let (store, start, key, expect) =
                        (store.clone(), start.clone(), key.to_owned(), expect.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        store.put_if(&key, Bytes::from(format!("{expect:?} writer {i}")), &expect)
                    })
                })
                .collect();
            writers.into_iter().map(|w| w.join().unwrap()).collect()
        };
        let winner = |results: &[es_log::Result<String>], key: &str, expect: &Expect| -> String {
            let won: Vec<usize> = (0..WRITERS).filter(|&i| results[i].is_ok()).collect();
            assert_eq!(won.len(), 1, "{key}: exactly one racing writer wins: {results:?}");
            for r in results.iter().filter(|r| r.is_err()) {
                assert!(matches!(r, Err(LogError::ColdConflict { .. })), "{key}: {r:?}");
            }
            let (bytes, version) = store.get(key).unwrap().unwrap();
            assert_eq!(
                bytes,
                format!("{expect:?} writer {}", won[0]),
                "{key}: the winner's bytes are stored"
            );
            assert_eq!(&version, results[won[0]].as_ref().unwrap(), "{key}: and its version");
            version
        };
        for round in 0..5 {
            let key = format!("p-{round}/manifest");
            let created = winner(&race(&key, Expect::Absent), &key, &Expect::Absent);
            let replace = Expect::Version(created);
            winner(&race(&key, replace.clone()), &key, &replace);
        }
    });
}

/// A request the store refuses (here: signed with the wrong secret, which s3s-fs
/// checks and moto does not) is an error: never a missing object, never a conflict,
/// and nothing is written.
#[test]
fn a_refused_request_is_an_error_not_an_absent_object_or_a_conflict() {
    let server = s3s::S3sFs::start(S3S_KEYS.0, S3S_KEYS.1);
    server.create_bucket("refused");
    let wrong = S3Store::new(s3_config(server.port, "refused", (S3S_KEYS.0, "not-the-secret"))).unwrap();
    let right = S3Store::new(s3_config(server.port, "refused", S3S_KEYS)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj");
    std::fs::write(&file, b"x").unwrap();
    right.put_file("p-0/a.log", &file).unwrap();
    let put = wrong.put_file("p-0/b.log", &file);
    assert!(matches!(put, Err(LogError::ColdStore { .. })), "{put:?}");
    let create = wrong.put_if("p-0/manifest", Bytes::from_static(b"m"), &Expect::Absent);
    assert!(matches!(create, Err(LogError::ColdStore { .. })), "{create:?}");
    let got = wrong.get("p-0/a.log");
    assert!(matches!(got, Err(LogError::ColdStore { .. })), "{got:?}");
    let missing = wrong.get("p-0/missing");
    assert!(
        matches!(missing, Err(LogError::ColdStore { .. })),
        "a refused read is not an absent object: {missing:?}"
    );
    assert!(wrong.list("p-0/").is_err());
    assert!(wrong.delete("p-0/a.log").is_err());
    let keys: Vec<String> = right.list("p-0/").unwrap().into_iter().map(|l| l.key).collect();
    assert_eq!(keys, ["p-0/a.log"], "nothing the wrong key sent was written or deleted");
}
