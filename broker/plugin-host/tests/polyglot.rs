//! The example validators written in Python (componentize-py) and JavaScript
//! (componentize-js), built by `plugins/examples/build.sh` and run through the
//! real host: they load inside the sandbox, read the packed batch right, report
//! configuration errors, and stay warm across calls.
//!
//! build.sh installs its tools on first use (downloads from PyPI and the npm
//! registry). When they cannot be had (exit status 3) the tests fail if `CI` is
//! set and are skipped with a loud message otherwise.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use es_core::Record;
use es_plugin_host::{Action, PluginError, PluginLimits, Validator};

/// A first run downloads the tools (~400 MB) and builds both components.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// build.sh's exit status when the tools are missing or cannot be installed.
const TOOLS_UNAVAILABLE: i32 = 3;

/// The directory holding `example_python.wasm` and `example_js.wasm`, built once
/// per test binary; `None` when the tools are unavailable outside CI. A failed
/// build is remembered too, so it runs (and may time out) once, not once per test.
fn examples_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
    match DIR.get_or_init(|| build_examples().and_then(compile_examples)) {
        Ok(dir) => dir.as_deref(),
        Err(e) => panic!("{e}"),
    }
}

fn build_examples() -> Result<Option<PathBuf>, String> {
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../..");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-examples");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let log_path = out.join("build.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("create build.log: {e}"))?;
    let log_err = log.try_clone().map_err(|e| format!("clone the log handle: {e}"))?;
    let started = Instant::now();
    // GNU timeout runs build.sh in its own process group and signals the whole
    // group, so pip, npm and node go too; the loop below is only a backstop.
    let mut child = Command::new("timeout")
        .args(["--kill-after=10s", &format!("{}s", BUILD_TIMEOUT.as_secs()), "bash"])
        .arg(root.join("plugins/examples/build.sh"))
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("run plugins/examples/build.sh: {e}"))?;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("wait for build.sh: {e}"))? {
            break status;
        }
        if started.elapsed() > BUILD_TIMEOUT + Duration::from_secs(30) {
            let _ = child.kill();
            break child.wait().map_err(|e| format!("wait for build.sh: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = read_log(&log_path);
    println!("build.sh took {:.1} s:\n{log}", started.elapsed().as_secs_f64());
    if status.code() == Some(TOOLS_UNAVAILABLE) {
        if in_ci() {
            return Err(format!("CI is set and the plugin tools are unavailable:\n{log}"));
        }
        // Written to the process's stderr directly, not through `eprintln!`, which
        // the test harness captures and shows only for failing tests.
        let _ = writeln!(
            std::io::stderr(),
            "\n!!! SKIPPED: the Python/JavaScript plugin tools are unavailable, so the polyglot \
             examples were not tested (with CI set this fails):\n{log}"
        );
        return Ok(None);
    }
    if !status.success() {
        return Err(format!("build.sh failed or ran past {BUILD_TIMEOUT:?} ({status}):\n{log}"));
    }
    Ok(Some(out))
}

/// Loads each example once, so its compiled artifact is in the engine's cache
/// before the tests, which run in parallel, load it (each would compile it).
fn compile_examples(dir: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    let Some(dir) = dir else { return Ok(None) };
    for (lang, file) in EXAMPLES {
        let wasm = std::fs::read(dir.join(file)).map_err(|e| format!("read {file}: {e}"))?;
        let started = Instant::now();
        // `load` refuses any import outside `allowed_imports()`, so this is also
        // the sandbox check.
        load_example(lang, &wasm, &[("fields", "id")]).map_err(|e| format!("load {file}: {e}"))?;
        // Compiles, unless an earlier run left the artifact in <target>/tmp/plugin-cache.
        println!("{lang}: first load (compile or cache): {:?}", started.elapsed());
    }
    Ok(Some(dir))
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("(no log: {e})"))
}

/// The two example components: (language, file name).
const EXAMPLES: &[(&str, &str)] = &[("python", "example_python.wasm"), ("js", "example_js.wasm")];

fn wasm(file: &str) -> Option<Vec<u8>> {
    let path = examples_dir()?.join(file);
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())))
}

/// Loads an example with a deadline far above the default 20 ms: these tests check
/// what the examples decide, and on CI's two loaded cores a Python guest's call
/// has run past 20 ms (2026-12-03). Deadlines themselves are tested with hostile
/// guests, not here.
fn load_example(lang: &str, wasm: &[u8], pairs: &[(&str, &str)]) -> Result<Validator, PluginError> {
    let limits = PluginLimits { call_deadline_ms: 1_000, ..PluginLimits::default() };
    Validator::load(engine(), &format!("require-fields-{lang}"), wasm, config(pairs), limits)
}

fn tombstone() -> Record {
    Record { key: Some(Bytes::from_static(b"k")), ..Record::default() }
}

#[test]
fn examples_load_in_the_sandbox_and_describe_themselves() {
    for (lang, file) in EXAMPLES {
        let Some(wasm) = wasm(file) else { return };
        let v = load_example(lang, &wasm, &[("fields", "id")]).unwrap_or_else(|e| panic!("{lang}: {e}"));
        let info = v.info();
        assert_eq!(info.name, "require-fields", "{lang}");
        assert_eq!(info.version, "0.1.0", "{lang}");
        assert_eq!(info.config_keys, ["fields", "key.required", "action"], "{lang}");
        println!("{lang}: {} bytes, {}", wasm.len(), info.description);
    }
}

#[test]
fn examples_flag_exactly_the_broken_records() {
    for (lang, file) in EXAMPLES {
        let Some(wasm) = wasm(file) else { return };
        let v = load_example(lang, &wasm, &[("fields", "id, amount"), ("key.required", "true")]).unwrap();
        let good = with_header(keyed("k", br#"{"id":1,"amount":2.5,"x":null}"#), "trace-id", b"t");
        let records = vec![
            good.clone(),
            value(br#"{"id":1,"amount":2}"#),
            keyed("k", b"{nope"),
            keyed("k", b"[1,2]"),
            keyed("k", br#"{"id":1}"#),
            tombstone(),
            keyed("k", &[b'"', 0xff, 0xfe, b'"']),
            keyed("k", br#"{"amount":1,"id":"a"}"#),
            keyed("k", b"42"),
        ];
        let found = v.validate(target(), &records).unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(
            codes(&found),
            vec![
                (1, "key-required".into()),
                (2, "value-not-json".into()),
                (3, "value-not-object".into()),
                (4, "field-missing".into()),
                (6, "value-not-json".into()),
                (8, "value-not-object".into()),
            ],
            "{lang}: {found:?}"
        );
        assert!(found.iter().all(|f| f.action == Action::Reject && !f.reason.is_empty()), "{lang}");
        assert!(found[3].reason.contains("amount"), "{lang}: {}", found[3].reason);
        assert!(v.validate(target(), &[good.clone(), tombstone(), good]).unwrap().is_empty(), "{lang}");
    }
}

#[test]
fn examples_use_the_configured_action() {
    for (lang, file) in EXAMPLES {
        let Some(wasm) = wasm(file) else { return };
        let v = load_example(lang, &wasm, &[("fields", "id"), ("action", "dead-letter")]).unwrap();
        // key.required defaults to false: a keyless record passes.
        let found = v.validate(target(), &[value(br#"{"id":1}"#), value(b"{}")]).unwrap();
        assert_eq!(codes(&found), vec![(1, "field-missing".into())], "{lang}");
        assert_eq!(found[0].action, Action::DeadLetter, "{lang}");
    }
}

#[test]
fn examples_refuse_bad_configuration_at_load() {
    let bad: &[&[(&str, &str)]] = &[
        &[],
        &[("fields", " , ")],
        &[("fields", "id"), ("colour", "blue")],
        &[("fields", "id"), ("key.required", "maybe")],
        &[("fields", "id"), ("action", "drop")],
    ];
    for (lang, file) in EXAMPLES {
        let Some(wasm) = wasm(file) else { return };
        for pairs in bad {
            let err = load_example(lang, &wasm, pairs).unwrap_err();
            let PluginError::Configure { plugin, message } = &err else {
                panic!("{lang} {pairs:?}: expected a configure error, got {err}");
            };
            assert_eq!(plugin, &format!("require-fields-{lang}"));
            assert!(!message.is_empty(), "{lang} {pairs:?}");
        }
        let err = load_example(lang, &wasm, &[("fields", "id"), ("colour", "blue")]).unwrap_err();
        assert!(err.to_string().contains("colour"), "{lang}: {err}");
    }
}

#[test]
fn examples_stay_warm_and_print_their_costs() {
    for (lang, file) in EXAMPLES {
        let Some(wasm) = wasm(file) else { return };
        // A deadline far above the default: this test measures, and on a loaded
        // shared machine a batch of 500 can take longer than 20 ms in these guests
        // (see docs/plugins.md, "Costs").
        let limits = PluginLimits { call_deadline_ms: 1_000, ..PluginLimits::default() };
        let v = Validator::load(
            engine(),
            &format!("require-fields-{lang}-timed"),
            &wasm,
            config(&[("fields", "payload"), ("key.required", "true")]),
            limits,
        )
        .unwrap();
        let one = json_records(1);
        let many = json_records(500);
        let per_call = median(&v, &one, 400);
        let per_batch = median(&v, &many, 20);
        let stats = v.stats();
        assert_eq!(stats.instances_created, 1, "{lang}: the warm instance is reused: {stats:?}");
        assert_eq!(stats.failures, 0, "{lang}");
        assert_eq!(stats.calls, 440 + 22, "{lang}");
        // Printed for docs/plugins.md (run with --nocapture); not asserted: timing
        // belongs in benchmarks, and this machine is shared.
        println!(
            "{lang}: batch of 1: {:.1} us; batch of 500: {:.0} us, {:.2} us/record; {} bytes",
            micros(per_call),
            micros(per_batch),
            micros(per_batch) / 500.0,
            wasm.len(),
        );
        let started = Instant::now();
        drop(load_example(lang, &wasm, &[("fields", "payload")]).unwrap());
        println!("{lang}: load from the cache + first instance + configure + info: {:?}", started.elapsed());
    }
}

/// Records with 8-byte keys and 256-byte JSON values holding the field `payload`.
fn json_records(count: usize) -> Vec<Record> {
    let value = format!("{{\"payload\":\"{}\"}}", "x".repeat(256 - 14));
    assert_eq!(value.len(), 256);
    (0..count).map(|i| keyed(&format!("key{i:05}"), value.as_bytes())).collect()
}

/// Median time of `iterations` calls, after `iterations / 10` warm-up calls.
fn median(v: &Validator, records: &[Record], iterations: usize) -> Duration {
    for _ in 0..iterations / 10 {
        assert!(v.validate(target(), records).unwrap().is_empty());
    }
    let mut times: Vec<Duration> = (0..iterations)
        .map(|_| {
            let started = Instant::now();
            assert!(v.validate(target(), records).unwrap().is_empty());
            started.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
