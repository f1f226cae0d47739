//! The HTTP/JSON produce row: blocking clients (ureq), each posting the same JSON
//! body of records and waiting for the answer, which comes once they are durable.
//! Bodies are built once up front, so the loop measures the broker, not serde.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::row::{Shape, SuiteRow, Tally};
use crate::latency;
use crate::timed::{self, Control};

/// Bound on every request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn agent() -> ureq::Agent {
    agent_with(REQUEST_TIMEOUT)
}

fn agent_with(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout)).build().into()
}

/// POSTs `body` and returns the status and the answer's text.
fn post(agent: &ureq::Agent, url: &str, body: &str) -> Result<(u16, String)> {
    let resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)
        .with_context(|| format!("POST {url}"))?;
    answer(resp, "POST", url)
}

/// A request with a JSON or binary body, with its own bound on the whole exchange
/// (uploading a plugin waits for the broker to compile it). Returns the status and
/// the answer's text.
pub fn send(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, String)> {
    let agent = agent_with(timeout);
    let req = match method {
        "PUT" => agent.put(url),
        _ => agent.post(url),
    };
    let resp =
        req.header("content-type", content_type).send(body).with_context(|| format!("{method} {url}"))?;
    answer(resp, method, url)
}

/// GETs `url` and returns the status and the answer's text.
pub fn get(url: &str) -> Result<(u16, String)> {
    let resp = agent().get(url).call().with_context(|| format!("GET {url}"))?;
    answer(resp, "GET", url)
}

fn answer(mut resp: ureq::http::Response<ureq::Body>, method: &str, url: &str) -> Result<(u16, String)> {
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .with_config()
        .limit(16 * 1024 * 1024)
        .read_to_string()
        .with_context(|| format!("reading the answer to {method} {url}"))?;
    Ok((status, text))
}

pub fn create_topic(url: &str, topic: &str, partitions: usize) -> Result<()> {
    let body = json!({"name": topic, "partitions": partitions}).to_string();
    let (status, text) = post(&agent(), &format!("{url}/topics"), &body)?;
    if status != 201 {
        bail!("creating topic {topic} over HTTP: status {status}: {text}");
    }
    Ok(())
}

/// `clients` workers, worker *i* posting `records` records of `record_bytes`-byte
/// values to partition *i mod partitions*. `bytes_per_record` is the records' size
/// in the log format, so MB/s compares with the binary rows.
#[allow(clippy::too_many_arguments)]
pub fn produce_row(
    label: &str,
    url: &str,
    topic: &str,
    partitions: usize,
    clients: usize,
    records: usize,
    record_bytes: usize,
    bytes_per_record: f64,
    duration: Duration,
) -> Result<SuiteRow> {
    create_topic(url, topic, partitions)?;
    // Printable ASCII, so the JSON string is exactly `record_bytes` bytes of UTF-8.
    let value: String = (0..record_bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let recs: Vec<_> = (0..records).map(|_| json!({ "value": value })).collect();
    let bodies = produce_bodies(partitions, &recs);
    produce_on(label, url, topic, &bodies, clients, records, bytes_per_record, duration)
}

/// One produce body per partition: `records` (JSON objects such as
/// `{"key": .., "value": ..}`), each with that partition added.
pub fn produce_bodies(partitions: usize, records: &[serde_json::Value]) -> Vec<String> {
    (0..partitions)
        .map(|p| {
            let recs: Vec<_> = records
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r["partition"] = json!(p);
                    r
                })
                .collect();
            json!({ "records": recs }).to_string()
        })
        .collect()
}

/// The timed part of [`produce_row`] on an existing topic: worker *i* posts
/// `bodies[i mod bodies.len()]` (from [`produce_bodies`]), `records` records each.
#[allow(clippy::too_many_arguments)]
pub fn produce_on(
    label: &str,
    url: &str,
    topic: &str,
    bodies: &[String],
    clients: usize,
    records: usize,
    bytes_per_record: f64,
    duration: Duration,
) -> Result<SuiteRow> {
    let records_url = format!("{url}/topics/{topic}/records");
    let batch_bytes = (records as f64 * bytes_per_record) as u64;
    let timed = timed::run(label, duration, clients, |i, ctl| {
        produce_loop(&records_url, &bodies[i % bodies.len()], records, batch_bytes, ctl)
    })?;
    let shape = Shape {
        kind: "http_produce",
        connections: clients,
        partitions: bodies.len(),
        records_per_request: records,
        in_flight: 1,
    };
    let mut row = SuiteRow::from_timed(label, shape, timed)?;
    row.notes.push(format!("JSON request body {} B for {records} records", bodies[0].len()));
    Ok(row)
}

fn produce_loop(url: &str, body: &str, records: usize, batch_bytes: u64, ctl: &Control) -> Result<Tally> {
    let agent = agent();
    let mut t = Tally::new()?;
    while ctl.running() {
        let start = Instant::now();
        let (status, text) = post(&agent, url, body)?;
        if status != 200 {
            bail!("produce over HTTP: status {status}: {}", text.chars().take(500).collect::<String>());
        }
        latency::record_since(&mut t.latency, start);
        t.requests += 1;
        t.records += records as u64;
        t.bytes += batch_bytes;
        ctl.add_bytes(batch_bytes as usize);
    }
    Ok(t)
}

/// One client reading partition 0 of `topic` (written by the HTTP produce row) from
/// the start, `max_records` 10,000 per request, and back to the start at the end, so
/// the row runs its full time. Each answer is parsed as JSON, as a client would.
pub fn consume_row(
    label: &str,
    url: &str,
    topic: &str,
    bytes_per_record: f64,
    duration: Duration,
) -> Result<SuiteRow> {
    let base = format!("{url}/topics/{topic}/partitions/0/records");
    let timed = timed::run(label, duration, 1, |_, ctl| consume_loop(&base, bytes_per_record, ctl))?;
    let shape =
        Shape { kind: "http_consume", connections: 1, partitions: 1, records_per_request: 0, in_flight: 1 };
    let mut row = SuiteRow::from_timed(label, shape, timed)?;
    row.shape.records_per_request = (row.records / row.requests.max(1)) as usize;
    row.notes.push(format!("read {topic}-0 with max_records=10000, max_bytes=16 MiB"));
    Ok(row)
}

fn consume_loop(base: &str, bytes_per_record: f64, ctl: &Control) -> Result<Tally> {
    let agent = agent();
    let mut t = Tally::new()?;
    let mut offset = 0u64;
    let mut wraps = 0u64;
    while ctl.running() {
        let start = Instant::now();
        let url = format!("{base}?offset={offset}&max_records=10000&max_bytes=16777216");
        let mut resp = agent.get(&url).call().with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        let text = resp.body_mut().with_config().limit(64 * 1024 * 1024).read_to_string()?;
        if status != 200 {
            bail!("consume over HTTP: status {status}: {}", text.chars().take(500).collect::<String>());
        }
        let body: serde_json::Value = serde_json::from_str(&text).context("parsing the consume answer")?;
        latency::record_since(&mut t.latency, start);
        let n = body["records"].as_array().map_or(0, Vec::len) as u64;
        let next = body["next_offset"].as_u64().unwrap_or(offset);
        let hw = body["high_watermark"].as_u64().unwrap_or(0);
        if n == 0 && hw == 0 {
            bail!("the HTTP consume row found no records; the HTTP produce row writes them");
        }
        let bytes = (n as f64 * bytes_per_record) as u64;
        t.requests += 1;
        t.records += n;
        t.bytes += bytes;
        ctl.add_bytes(bytes as usize);
        offset = if next >= hw {
            wraps += 1;
            0
        } else {
            next
        };
    }
    t.notes.push(format!("went back to offset 0 {wraps} time(s)"));
    Ok(t)
}
