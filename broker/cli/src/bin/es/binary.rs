//! `--protocol binary` for `es produce` and `es consume`: the same commands over the
//! binary protocol with es-client (pipelined, batching, idempotent producer). Output
//! matches the HTTP path: consumed records are turned into the HTTP API's JSON shape
//! and printed by the same code.

use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use clap::{Args, ValueEnum};
use es_client::{
    Client, ClientOptions, Consumed, Consumer, ProduceFinding, Producer, ProducerOptions, RecordMetadata,
};
use es_core::Record;
use es_protocol::OffsetSpec;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    Http,
    Binary,
}

/// Which protocol a data command uses.
#[derive(Debug, Clone, Args)]
pub struct Transport {
    /// http (default) or binary (es-client over the binary protocol).
    #[arg(long, value_enum, default_value = "http")]
    pub protocol: Protocol,
    /// The broker's binary-protocol address, for --protocol binary.
    #[arg(long, env = "ES_BROKER_BINARY", default_value = "127.0.0.1:9001")]
    pub binary_broker: String,
}

/// Where the binary protocol goes and which key logs in there.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    pub transport: &'a Transport,
    pub api_key: Option<&'a str>,
    pub tls: Option<&'a es_client::ClientTls>,
}

impl Transport {
    pub fn is_binary(&self) -> bool {
        self.protocol == Protocol::Binary
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")
}

async fn connect(t: &Endpoint<'_>) -> anyhow::Result<std::sync::Arc<Client>> {
    let (addr, api_key) = (t.transport.binary_broker.as_str(), t.api_key);
    let options = ClientOptions {
        api_key: api_key.map(str::to_owned),
        tls: t.tls.cloned(),
        ..ClientOptions::default()
    };
    let client = Client::connect(addr, options)
        .await
        .with_context(|| format!("connecting to {addr}; is es-broker listening there (--bind-binary)?"))?;
    Ok(std::sync::Arc::new(client))
}

/// Sends every record (batched by the producer) and waits until all are
/// durable. Returns where each went, in input order (with `--json`, printed as it
/// comes: the record's topic, partition, offset and any validator finding).
pub fn produce(
    t: Endpoint<'_>,
    topic: &str,
    partition: Option<u32>,
    records: impl Iterator<Item = anyhow::Result<Record>>,
    idempotent: bool,
    json_out: bool,
) -> anyhow::Result<Vec<RecordMetadata>> {
    runtime()?.block_on(async {
        let client = connect(&t).await?;
        let producer =
            Producer::new(client, ProducerOptions { idempotent, ..ProducerOptions::default() }).await?;
        // Queued in input order, so lines keep their order within a partition.
        let mut sends = Vec::new();
        for record in records {
            sends.push(producer.enqueue(topic, partition, record?).await?);
        }
        let mut placed = Vec::with_capacity(sends.len());
        for send in sends {
            let meta = send.await.context("producing over the binary protocol")?;
            if json_out {
                let mut line =
                    json!({"topic": meta.topic, "partition": meta.partition, "offset": meta.offset});
                if let Some(f) = &meta.finding {
                    line["finding"] = finding_json(f);
                }
                println!("{line}");
            }
            placed.push(meta);
        }
        Ok(placed)
    })
}

/// A validator finding in the HTTP answer's shape, so both protocols print alike.
pub fn finding_json(f: &ProduceFinding) -> Value {
    let outcome = if f.dead_letter.is_some() { "dead-lettered" } else { "warned" };
    json!({"index": f.index, "plugin": f.plugin, "code": f.code, "reason": f.reason, "outcome": outcome})
}

/// Reads `partitions` (all when `None`) from `start`, printing each record with
/// `print` (false stops). Stops at the end unless `follow`.
pub fn consume(
    t: Endpoint<'_>,
    topic: &str,
    partition: Option<u32>,
    start: Start,
    follow: bool,
    max_records: Option<usize>,
    mut print: impl FnMut(u32, &Value) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let client = connect(&t).await?;
        let partitions: Vec<u32> = match partition {
            Some(p) => vec![p],
            None => (0..client.describe_topic(topic).await?.partitions.len() as u32).collect(),
        };
        let mut consumer = Consumer::new(client.clone());
        let mut ends = Vec::new();
        for p in &partitions {
            match start {
                Start::Earliest => drop(consumer.assign(topic, *p, OffsetSpec::Earliest).await?),
                Start::Latest => drop(consumer.assign(topic, *p, OffsetSpec::Latest).await?),
                Start::At(offset) => consumer.seek(topic, *p, offset),
            }
            ends.push(client.list_offsets(topic, *p, OffsetSpec::Latest).await?.unwrap_or(0));
        }
        consumer.max_wait_ms = if follow { 1000 } else { 0 };
        let mut left = max_records.unwrap_or(usize::MAX);
        loop {
            for r in consumer.poll().await? {
                if left == 0 || !print(r.partition, &to_json(&r))? {
                    return Ok(());
                }
                left -= 1;
            }
            let caught_up = partitions
                .iter()
                .zip(&ends)
                .all(|(p, end)| consumer.position(topic, *p).unwrap_or(0) >= *end);
            if left == 0 || (!follow && caught_up) {
                return Ok(());
            }
            if !follow {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    })
}

/// A consumed record in the HTTP API's shape (base64, so any bytes pass).
fn to_json(r: &Consumed) -> Value {
    let b64 = |v: &Option<bytes::Bytes>| v.as_ref().map(|b| B64.encode(b));
    json!({
        "offset": r.offset,
        "timestamp": r.timestamp,
        "encoding": "base64",
        "key": b64(&r.key),
        "value": b64(&r.value),
        "headers": r.headers.iter().map(|(k, v)| json!({"key": k, "value": b64(v)})).collect::<Vec<_>>(),
    })
}

/// Where a binary consume starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
    At(u64),
}

/// Parses `--offset` / `--from-beginning` / `--follow` as the HTTP path does.
pub fn start(offset: Option<&str>, from_beginning: bool, follow: bool) -> anyhow::Result<Start> {
    Ok(match (offset, from_beginning, follow) {
        (Some("earliest"), ..) | (None, true, _) | (None, false, false) => Start::Earliest,
        (Some("latest"), ..) | (None, false, true) => Start::Latest,
        (Some(n), ..) => match n.parse::<u64>() {
            Ok(o) => Start::At(o),
            Err(_) => bail!("--offset takes earliest, latest or a number; got {n:?}"),
        },
    })
}
