//! Micro-benchmark of the plugin boundary: per-call and per-record cost of the
//! `rules` plugin (and of a guest that checks nothing) on batches of 1 and 500
//! records of 256 bytes, plus instance, compile and thread-hop costs.
//!
//! Run: `cargo run --release -p es-plugin-host --example plugin_bench`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_core::Record;
use es_plugin_host::builtin::{self, RULES};
use es_plugin_host::{BatchTarget, EngineLimits, PluginEngine, PluginLimits, Validator};

const VALUE_BYTES: usize = 256;
const TARGET: BatchTarget<'static> = BatchTarget { topic: "bench", partition: 0, schema_id: None };

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = PluginEngine::new(dir.path(), EngineLimits::default())?;
    println!("es plugin micro-bench: records of {VALUE_BYTES}-byte values with 8-byte keys; medians\n");
    compile_costs(&engine)?;
    let noop = fixture("es_fixture_hostile")?;
    let rules_config = [("key.required", "true"), ("value.max.bytes", "1024"), ("value.format", "utf8")];
    println!("{:<38} {:>12} {:>12} {:>14}", "guest", "batch of 1", "batch of 500", "per record");
    boundary(&engine, "no-op guest (boundary only)", &noop, &[("mode", "ok")])?;
    boundary(&engine, "rules (key, size, utf8)", RULES, &rules_config)?;
    boundary(&engine, "rules (value.format=json)", RULES, &[("value.format", "json")])?;
    println!();
    instance_cost(&engine)?;
    thread_hop_cost(&engine)?;
    Ok(())
}

fn fixture(name: &str) -> anyhow::Result<Vec<u8>> {
    Ok(std::fs::read(format!("{}/{name}.wasm", env!("ES_GUEST_WASM_DIR")))?)
}

fn records(count: usize, json: bool) -> Vec<Record> {
    let value: Vec<u8> = if json {
        let mut v = format!("{{\"payload\":\"{}\"}}", "x".repeat(VALUE_BYTES - 14)).into_bytes();
        v.truncate(VALUE_BYTES);
        v
    } else {
        vec![b'x'; VALUE_BYTES]
    };
    (0..count).map(|i| Record::keyed(Bytes::from(format!("key{i:05}")), Bytes::from(value.clone()))).collect()
}

fn config(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Median of `iterations` timed calls after a warm-up.
fn median_call(v: &Validator, records: &[Record], iterations: usize) -> anyhow::Result<Duration> {
    for _ in 0..iterations / 10 {
        v.validate(TARGET, records)?;
    }
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let found = v.validate(TARGET, records)?;
        times.push(start.elapsed());
        anyhow::ensure!(found.is_empty(), "bench records must pass: {found:?}");
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn boundary(engine: &PluginEngine, label: &str, wasm: &[u8], pairs: &[(&str, &str)]) -> anyhow::Result<()> {
    let v = Validator::load(engine, label, wasm, config(pairs), PluginLimits::default())?;
    let json = pairs.contains(&("value.format", "json"));
    let one = median_call(&v, &records(1, json), 20_000)?;
    let many = median_call(&v, &records(500, json), 1_000)?;
    let per_record = many.saturating_sub(one) / 499;
    println!("{label:<38} {:>12} {:>12} {:>14}", fmt(one), fmt(many), fmt(per_record));
    Ok(())
}

/// A fresh instance per call (recycle after every call) against a warm one.
fn instance_cost(engine: &PluginEngine) -> anyhow::Result<()> {
    for name in builtin::NAMES {
        let pairs = match *name {
            "json-schema" => config(&[("schema", r#"{"type":"object"}"#)]),
            "avro" => config(&[("schema", r#""string""#)]),
            _ => vec![],
        };
        let limits = PluginLimits { recycle_after_calls: 1, ..PluginLimits::default() };
        let v = Validator::load(engine, name, builtin::builtin(name).unwrap_or_default(), pairs, limits)?;
        let batch = records(1, true);
        let mut times: Vec<Duration> = (0..200)
            .map(|_| {
                let start = Instant::now();
                // Whether the record passes does not matter here, only the cost.
                let _ = v.validate(TARGET, &batch);
                start.elapsed()
            })
            .collect();
        times.sort();
        println!("fresh instance + configure + call, {name:<12} {:>10}", fmt(times[times.len() / 2]));
    }
    Ok(())
}

/// `validate` called directly against `validate_blocking` (tokio's blocking pool).
fn thread_hop_cost(engine: &PluginEngine) -> anyhow::Result<()> {
    let v = Arc::new(Validator::load(engine, "rules", RULES, vec![], PluginLimits::default())?);
    let batch: Arc<[Record]> = records(1, false).into();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (direct, hop) = rt.block_on(async {
        let mut direct = Vec::new();
        let mut hop = Vec::new();
        for _ in 0..5_000 {
            let start = Instant::now();
            v.validate(TARGET, &batch)?;
            direct.push(start.elapsed());
            let start = Instant::now();
            v.clone().validate_blocking("bench".into(), 0, None, batch.clone()).await?;
            hop.push(start.elapsed());
        }
        direct.sort();
        hop.sort();
        anyhow::Ok((direct[direct.len() / 2], hop[hop.len() / 2]))
    })?;
    println!("batch of 1 from a tokio task: direct {}, via spawn_blocking {}", fmt(direct), fmt(hop));
    Ok(())
}

/// First load (compile + cache write) against a load from the cache.
fn compile_costs(engine: &PluginEngine) -> anyhow::Result<()> {
    for name in builtin::NAMES {
        let wasm = builtin::builtin(name).unwrap_or_default();
        let pairs = match *name {
            "json-schema" => config(&[("schema", "{}")]),
            "avro" => config(&[("schema", r#""string""#)]),
            _ => vec![],
        };
        let start = Instant::now();
        Validator::load(engine, name, wasm, pairs.clone(), PluginLimits::default())?;
        let cold = start.elapsed();
        let start = Instant::now();
        Validator::load(engine, name, wasm, pairs, PluginLimits::default())?;
        let cached = start.elapsed();
        println!(
            "load {name:<12} ({:>5} KiB): compile+load {:>10}, from cache {:>10}",
            wasm.len() / 1024,
            fmt(cold),
            fmt(cached)
        );
    }
    println!();
    Ok(())
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}
