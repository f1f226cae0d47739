//! Misbehaving plugins: each failure comes back as a typed error naming the
//! plugin, the host stays usable, and other plugins keep working.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use es_core::Record;
use es_plugin_host::builtin::RULES;
use es_plugin_host::{EngineLimits, PluginEngine, PluginError, PluginLimits, Validator};

fn hostile(mode: &str, limits: PluginLimits) -> Validator {
    Validator::load(
        engine(),
        &format!("hostile-{mode}"),
        &fixture("es_fixture_hostile"),
        config(&[("mode", mode)]),
        limits,
    )
    .unwrap_or_else(|e| panic!("load hostile {mode}: {e}"))
}

fn records() -> Vec<Record> {
    vec![keyed("k", b"v"), keyed("k2", b"v2")]
}

#[test]
fn an_infinite_loop_hits_the_deadline_and_the_host_recovers() {
    let v = hostile("loop", PluginLimits::default());
    let started = Instant::now();
    let err = v.validate(target(), &records()).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, PluginError::Deadline { deadline_ms: 20, .. }), "{err}");
    assert!(err.to_string().contains("hostile-loop"), "{err}");
    assert!(took < Duration::from_millis(500), "interrupted after {took:?}");
    // The trapped instance is gone; the next call gets a fresh one and fails the same way.
    assert!(matches!(v.validate(target(), &records()), Err(PluginError::Deadline { .. })));
    assert_eq!(v.stats().failures, 2);
    engine_still_works();
}

#[test]
fn a_memory_bomb_hits_the_memory_cap() {
    let limits = PluginLimits { memory_bytes_max: 16 << 20, ..PluginLimits::default() };
    let v = hostile("bomb", limits);
    let err = v.validate(target(), &records()).unwrap_err();
    assert!(matches!(err, PluginError::Memory { limit_bytes, .. } if limit_bytes == 16 << 20), "{err}");
    engine_still_works();
}

#[test]
fn a_panic_is_a_trap_and_the_instance_is_replaced() {
    let v = hostile("trap", PluginLimits::default());
    let created = v.stats().instances_created;
    let err = v.validate(target(), &records()).unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(err.to_string().contains("hostile-trap"), "{err}");
    assert!(err.to_string().contains("panics on purpose"), "the panic message is kept: {err}");
    assert_eq!(v.warm_instances(), 0, "a trapped instance must not go back to the pool");
    let _ = v.validate(target(), &records()).unwrap_err();
    assert_eq!(v.stats().instances_created, created + 1);
    engine_still_works();
}

#[test]
fn deep_recursion_is_a_trap_and_the_host_recovers() {
    let v = hostile("recurse", PluginLimits::default());
    for _ in 0..2 {
        let err = v.validate(target(), &records()).unwrap_err();
        // Rust guests keep their frames' data on a shadow stack in linear memory,
        // so the overflow surfaces as an out-of-bounds access or as wasmtime's
        // call-stack exhaustion, whichever comes first: a trap either way.
        assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    }
}

#[test]
fn out_of_range_indexes_are_garbage() {
    let v = hostile("garbage", PluginLimits::default());
    let err = v.validate(target(), &records()).unwrap_err();
    assert!(matches!(err, PluginError::Garbage { .. }), "{err}");
    assert!(err.to_string().contains("outside a batch of 2 records"), "{err}");
    engine_still_works();
}

#[test]
fn a_log_flood_is_rate_limited_not_fatal() {
    let v = hostile("log-flood", PluginLimits::default());
    let started = Instant::now();
    assert!(v.validate(target(), &records()).unwrap().is_empty());
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[test]
fn a_filesystem_import_is_refused_at_load_by_name() {
    let err = Validator::load(
        engine(),
        "fs-reader",
        &fixture("es_fixture_fs_reader"),
        vec![],
        PluginLimits::default(),
    )
    .unwrap_err();
    match &err {
        PluginError::ForbiddenImport { plugin, import, .. } => {
            assert_eq!(plugin, "fs-reader");
            assert!(import.starts_with("wasi:filesystem/"), "{import}");
        }
        other => panic!("expected ForbiddenImport, got {other}"),
    }
    engine_still_works();
}

#[test]
fn a_core_module_or_random_bytes_are_not_components() {
    for bytes in [&b"\0asm\x01\0\0\0"[..], b"definitely not wasm"] {
        let err = Validator::load(engine(), "junk", bytes, vec![], PluginLimits::default()).unwrap_err();
        assert!(matches!(err, PluginError::NotAComponent { .. }), "{err}");
    }
}

#[test]
fn a_malformed_component_fails_to_compile() {
    let err =
        Validator::load(engine(), "broken", b"\0asm\x0d\0\x01\0\xff\xff", vec![], PluginLimits::default())
            .unwrap_err();
    assert!(matches!(err, PluginError::Compile { .. }), "{err}");
}

#[test]
fn a_component_without_the_validator_exports_is_the_wrong_world() {
    // The smallest valid component: no imports, no exports.
    let err = Validator::load(engine(), "empty", b"\0asm\x0d\0\x01\0", vec![], PluginLimits::default())
        .unwrap_err();
    match &err {
        PluginError::WrongWorld { reason, .. } => assert!(reason.contains("es:plugin/lifecycle"), "{reason}"),
        other => panic!("expected WrongWorld, got {other}"),
    }
}

#[test]
fn limits_above_the_engine_are_refused() {
    let limits = PluginLimits { memory_bytes_max: 1 << 40, ..PluginLimits::default() };
    let err = Validator::load(engine(), "rules", RULES, vec![], limits).unwrap_err();
    assert!(matches!(err, PluginError::Limits { .. }), "{err}");
}

#[test]
fn instances_are_recycled_after_n_calls() {
    let limits = PluginLimits { recycle_after_calls: 3, ..PluginLimits::default() };
    let v = Validator::load(engine(), "rules", RULES, vec![], limits).unwrap();
    for _ in 0..7 {
        v.validate(target(), &records()).unwrap();
    }
    // Load made one instance (1 info call); 7 calls at 3 per instance need two more.
    assert_eq!(v.stats().instances_created, 3, "{:?}", v.stats());
}

#[test]
fn batches_above_the_cap_are_split_and_indexes_stay_global() {
    let limits = PluginLimits { batch_bytes_max: 1024, ..PluginLimits::default() };
    let v = Validator::load(engine(), "rules", RULES, config(&[("key.required", "true")]), limits).unwrap();
    let records: Vec<Record> =
        (0..100).map(|i| if i % 10 == 9 { value(&[b'x'; 100]) } else { keyed("k", &[b'x'; 100]) }).collect();
    let before = v.stats().calls;
    let found = v.validate(target(), &records).unwrap();
    assert_eq!(
        found.iter().map(|f| f.index).collect::<Vec<_>>(),
        (0..10).map(|i| i * 10 + 9).collect::<Vec<_>>()
    );
    assert!(v.stats().calls - before > 1, "expected several calls");
    let big = vec![keyed("k", &[0u8; 2048])];
    assert!(matches!(v.validate(target(), &big), Err(PluginError::RecordTooLarge { index: 0, .. })));
}

#[test]
fn concurrent_callers_share_the_pool() {
    let v = Arc::new(load("rules", RULES, &[("key.required", "true")]));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let v = v.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let found = v.validate(target(), &[keyed("k", b"v"), value(b"v")]).unwrap();
                    assert_eq!(found.len(), 1);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert!(v.warm_instances() <= v.limits().warm_instances_max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_callers_can_use_the_blocking_pool() {
    let v = Arc::new(load("rules", RULES, &[("key.required", "true")]));
    let records: Arc<[Record]> = vec![value(b"v")].into();
    let found = v.clone().validate_blocking("orders".into(), 0, None, records).await.unwrap();
    assert_eq!(codes(&found), vec![(0, "key-required".to_owned())]);
}

#[test]
fn the_compiled_artifact_is_cached_on_disk() {
    let path = engine().cache_path(RULES);
    let _ = load("rules", RULES, &[]);
    assert!(path.exists(), "{}", path.display());
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with(".cwasm") && name.len() > 64 + 1 + 6, "{name}");
    // A corrupt artifact is rebuilt rather than trusted. It is swapped in by rename:
    // other tests in this process have the old file mapped, and truncating a mapped
    // file in place would kill them with SIGBUS.
    let tmp = path.with_extension("garbage-tmp");
    std::fs::write(&tmp, b"garbage").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let _ = load("rules", RULES, &[]);
    assert!(std::fs::metadata(&path).unwrap().len() > 1000);
}

#[test]
fn instances_above_the_memory_threshold_are_recycled() {
    let limits = PluginLimits { recycle_memory_bytes: 1, ..PluginLimits::default() };
    let v = Validator::load(engine(), "rules", RULES, vec![], limits).unwrap();
    for _ in 0..3 {
        v.validate(target(), &records()).unwrap();
    }
    // The load's instance served the first call; each later call needed a new one.
    assert_eq!(v.warm_instances(), 0);
    assert_eq!(v.stats().instances_created, 3, "{:?}", v.stats());
}

#[test]
fn a_full_engine_refuses_new_instances_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let small =
        PluginEngine::new(dir.path(), EngineLimits { instances_max: 2, ..EngineLimits::default() }).unwrap();
    let load = |name: &str| Validator::load(&small, name, RULES, vec![], PluginLimits::default());
    // Each loaded validator keeps its first instance warm, holding a slot.
    let (a, _b) = (load("a").unwrap(), load("b").unwrap());
    let err = load("c").unwrap_err();
    assert!(matches!(err, PluginError::Instantiate { .. }), "{err}");
    drop(a);
    load("c").expect("a freed slot is reusable");
}
