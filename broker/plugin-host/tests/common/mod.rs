//! Helpers shared by the plugin-host tests: one engine per test binary, fixture
//! components built by build.rs, and record builders.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use bytes::Bytes;
use es_core::{Header, Record};
use es_plugin_host::{BatchTarget, EngineLimits, PluginEngine, PluginLimits, Validator};

/// One engine per test binary: engines reserve pooling-allocator address space,
/// and sharing one also shows that a misbehaving plugin leaves it usable.
pub fn engine() -> &'static PluginEngine {
    static ENGINE: OnceLock<PluginEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
        PluginEngine::new(dir, EngineLimits::default()).expect("engine")
    })
}

/// A component built by build.rs from `plugins/fixtures`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("ES_GUEST_WASM_DIR")).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn config(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub fn load(name: &str, wasm: &[u8], pairs: &[(&str, &str)]) -> Validator {
    Validator::load(engine(), name, wasm, config(pairs), PluginLimits::default())
        .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

pub fn target() -> BatchTarget<'static> {
    BatchTarget { topic: "orders", partition: 0, schema_id: None }
}

pub fn value(v: &[u8]) -> Record {
    Record::from_value(Bytes::copy_from_slice(v))
}

pub fn keyed(k: &str, v: &[u8]) -> Record {
    Record::keyed(Bytes::copy_from_slice(k.as_bytes()), Bytes::copy_from_slice(v))
}

pub fn with_header(mut r: Record, key: &str, v: &[u8]) -> Record {
    r.headers.push(Header { key: key.to_owned(), value: Some(Bytes::copy_from_slice(v)) });
    r
}

/// The indexes and codes of a validation result, for compact assertions.
pub fn codes(v: &[es_plugin_host::Violation]) -> Vec<(u32, String)> {
    v.iter().map(|v| (v.index, v.code.clone())).collect()
}

/// Asserts that the rules plugin still works on the shared engine.
pub fn engine_still_works() {
    let rules = load("rules-check", es_plugin_host::builtin::RULES, &[("key.required", "true")]);
    let found = rules.validate(target(), &[keyed("k", b"v"), value(b"no key")]).expect("rules after failure");
    assert_eq!(codes(&found), vec![(1, "key-required".to_owned())]);
}

/// One file of the conformance data in `tests/conformance/` (from other projects'
/// suites; see the README there).
pub fn conformance(file: &str) -> serde_json::Value {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../tests/conformance")
    .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// A built-in schema-compat checker (`builtin::COMPAT_NAMES`), loaded on the
/// shared engine.
pub fn builtin_checker(name: &str) -> es_plugin_host::CompatChecker {
    let wasm = es_plugin_host::builtin::compat(name).unwrap_or_else(|| panic!("no built-in checker {name}"));
    es_plugin_host::CompatChecker::load(
        engine(),
        name,
        wasm,
        Vec::new(),
        es_plugin_host::PluginLimits::compat(),
    )
    .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

/// `checker.check` on string slices, panicking with the error.
pub fn compat_check(
    checker: &es_plugin_host::CompatChecker,
    level: es_plugin_host::CompatLevel,
    proposed: &str,
    existing: &[&str],
) -> Vec<es_plugin_host::Incompatibility> {
    let existing: Vec<es_plugin_host::Schema> = existing.iter().map(|s| (*s).into()).collect();
    checker.check(level, &proposed.into(), &existing).unwrap_or_else(|e| panic!("check: {e}"))
}
