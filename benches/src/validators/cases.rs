//! The rows of `es-bench validators` and what they need on the broker: a topic
//! each, the uploaded examples and the bindings, all made before any row is timed;
//! then running one row for a while with the suite's produce loops.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use es_client::Client;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use super::ValidatorsArgs;
use crate::suite::row::SuiteRow;
use crate::suite::{binary, http};
use crate::timed;
use crate::workload::{self, Workload};

/// `rules` may cost at most this share of the throughput without a validator.
const MAX_COST_RULES: f64 = 0.05;
/// `json-schema` may cost at most this share.
const MAX_COST_JSON_SCHEMA: f64 = 0.30;
/// Bound on an upload: the broker compiles the component before it answers
/// (about 25 s for the Python example on this machine).
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// Bound on binding (a load from the compile cache plus one configured instance).
const BIND_TIMEOUT: Duration = Duration::from_secs(120);
/// A small object schema the benchmark's records satisfy.
const SCHEMA: &str = r#"{"type":"object","required":["id","amount","currency"],"properties":{"id":{"type":"integer","minimum":0},"amount":{"type":"number"},"currency":{"type":"string","minLength":3,"maxLength":3},"note":{"type":"string"}}}"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// es-client, the suite's binary produce loop.
    Binary,
    /// HTTP/JSON, the suite's HTTP produce loop.
    Http,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Binary => "binary",
            Protocol::Http => "http",
        }
    }
}

/// One row: a topic of its own, bound to `validators` (JSON null: none).
#[derive(Debug)]
pub struct Case {
    pub label: String,
    pub protocol: Protocol,
    pub topic: String,
    pub validators: Value,
    /// Index of the row without a validator of the same protocol.
    pub baseline: Option<usize>,
    pub max_cost: Option<f64>,
}

/// An example component uploaded to the broker before the rows.
#[derive(Debug, Serialize)]
pub struct Upload {
    pub name: String,
    pub path: PathBuf,
    pub bytes: usize,
    /// Upload until the broker's answer: checking, compiling, storing.
    pub seconds: f64,
}

/// Everything the rows run against.
pub struct Setup<'a> {
    rt: &'a Runtime,
    args: &'a ValidatorsArgs,
    client: Arc<Client>,
    url: String,
    w: &'a Workload,
    /// One HTTP produce body per partition, the same records as `w`.
    bodies: Vec<String>,
    pub cases: Vec<Case>,
    pub uploads: Vec<Upload>,
}

impl<'a> Setup<'a> {
    /// Uploads the examples, creates one topic per row and binds its validators.
    pub fn prepare(
        rt: &'a Runtime,
        args: &'a ValidatorsArgs,
        addr: &str,
        url: &str,
        run_id: u64,
        w: &'a Workload,
    ) -> Result<Setup<'a>> {
        let client = binary::connect(rt, addr, args.clients)?;
        let mut uploads = Vec::new();
        for (name, path) in [("example-python", &args.python_wasm), ("example-js", &args.js_wasm)] {
            if let Some(path) = path {
                uploads.push(upload(url, name, path, args)?);
            }
        }
        let cases = plan(args, run_id, &uploads);
        for case in &cases {
            binary::create_topic(rt, &client, &case.topic, args.partitions)?;
            if !case.validators.is_null() {
                bind(url, &case.topic, &case.validators)?;
            }
        }
        let records: Vec<Value> = workload::json_records(args.batch, args.record_bytes)?
            .into_iter()
            .map(|(key, value)| json!({ "key": key, "value": value }))
            .collect();
        let bodies = http::produce_bodies(args.partitions, &records);
        println!();
        Ok(Setup { rt, args, client, url: url.to_owned(), w, bodies, cases, uploads })
    }

    /// Runs `case` for `duration` behind a progress bar labelled `label`.
    pub fn run_case(&self, case: &Case, label: &str, duration: Duration) -> Result<SuiteRow> {
        let a = self.args;
        match case.protocol {
            Protocol::Binary => binary::produce_on(
                self.rt,
                &self.client,
                label,
                &case.topic,
                a.partitions,
                a.clients,
                self.w,
                duration,
            ),
            Protocol::Http => {
                let per_record = self.w.batch_bytes() as f64 / self.w.records_per_batch as f64;
                http::produce_on(
                    label,
                    &self.url,
                    &case.topic,
                    &self.bodies,
                    a.clients,
                    a.batch,
                    per_record,
                    duration,
                )
            }
        }
    }

    /// The broker's counters for the topic's validators (batches, refusals,
    /// failures), which show each validator really ran; null for no validator.
    pub fn counters(&self, case: &Case) -> Result<Value> {
        if case.validators.is_null() {
            return Ok(Value::Null);
        }
        let url = format!("{}/topics/{}/validators", self.url, case.topic);
        let (status, text) = http::get(&url)?;
        if status != 200 {
            bail!("GET {url}: status {status}: {text}");
        }
        let body: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing the answer to GET {url}"))?;
        let pick = |v: &Value| {
            json!({
                "plugin": v["plugin"], "batches": v["batches"], "rejected": v["rejected"],
                "dead_lettered": v["dead_lettered"], "warned": v["warned"],
                "plugin_failures": v["plugin_failures"],
            })
        };
        Ok(Value::Array(
            body["validators"].as_array().map(|v| v.iter().map(pick).collect()).unwrap_or_default(),
        ))
    }
}

/// The rows, baselines first: binary without a validator, `rules`, `json-schema`,
/// the uploaded examples; then the HTTP pair.
fn plan(args: &ValidatorsArgs, run_id: u64, uploads: &[Upload]) -> Vec<Case> {
    let rules = json!([{"plugin": "rules", "config": {"key.required": "true", "value.format": "json"}}]);
    let schema = json!([{"plugin": "json-schema", "config": {"schema": SCHEMA}}]);
    let example = |name: &str| json!([{"plugin": name, "config": {"fields": "id,amount,currency", "key.required": "true"}}]);
    let case = |protocol: Protocol, name: &str, validators: Value, baseline, max_cost| Case {
        label: format!("{} {name}", protocol.name()),
        protocol,
        topic: format!("validators-{run_id}-{}-{name}", protocol.name()),
        validators,
        baseline,
        max_cost,
    };
    let mut cases = vec![
        case(Protocol::Binary, "none", Value::Null, None, None),
        case(Protocol::Binary, "rules", rules.clone(), Some(0), Some(MAX_COST_RULES)),
        case(Protocol::Binary, "json-schema", schema, Some(0), Some(MAX_COST_JSON_SCHEMA)),
    ];
    for u in uploads {
        cases.push(case(Protocol::Binary, &u.name, example(&u.name), Some(0), None));
    }
    if !args.no_http {
        let none = cases.len();
        cases.push(case(Protocol::Http, "none", Value::Null, None, None));
        cases.push(case(Protocol::Http, "rules", rules, Some(none), Some(MAX_COST_RULES)));
    }
    cases
}

/// `POST /plugins/{name}`: the broker checks and compiles the component before it
/// answers. Warm instances for every client, so concurrent batches do not keep
/// creating instances of a guest whose instance costs milliseconds.
fn upload(url: &str, name: &str, path: &Path, args: &ValidatorsArgs) -> Result<Upload> {
    let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let bar = timed::spinner(&format!("upload {name}"));
    bar.set_message(format!("{:.1} MB; the broker compiles it once (about 25 s)", wasm.len() as f64 / 1e6));
    let target = format!(
        "{url}/plugins/{name}?call_deadline_ms={}&warm_instances_max={}",
        args.plugin_deadline_ms, args.clients
    );
    let start = Instant::now();
    let (status, text) = http::send("POST", &target, "application/wasm", &wasm, UPLOAD_TIMEOUT)?;
    let seconds = start.elapsed().as_secs_f64();
    if status != 201 && status != 200 {
        bar.abandon_with_message(format!("status {status}"));
        bail!("uploading {} as {name}: status {status}: {text}", path.display());
    }
    bar.finish_with_message(format!("stored and compiled in {seconds:.1} s"));
    Ok(Upload { name: name.to_owned(), path: path.to_path_buf(), bytes: wasm.len(), seconds })
}

/// `PUT /topics/{topic}/validators`.
fn bind(url: &str, topic: &str, validators: &Value) -> Result<()> {
    let body = json!({ "validators": validators }).to_string();
    let target = format!("{url}/topics/{topic}/validators");
    let (status, text) = http::send("PUT", &target, "application/json", body.as_bytes(), BIND_TIMEOUT)?;
    if status != 200 {
        bail!("binding {validators} to {topic}: status {status}: {text}");
    }
    Ok(())
}
