//! The binary-protocol rows, through es-client: produce (one request in flight per
//! connection), pipelined small produces (many in flight on one connection), and
//! consume (a fetch loop over data written earlier in the run). Every await that
//! talks to the broker is bounded by [`REQUEST_TIMEOUT`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use es_client::{Client, ClientOptions, Consumer};
use es_protocol::{FetchPartition, OffsetSpec, Request, Response};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use super::row::{Shape, SuiteRow, Tally};
use crate::latency;
use crate::timed::{self, Control};
use crate::workload::{Spread, Workload};

/// Bound on every request, and on connecting.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Fetch size of the consume rows.
pub const FETCH_BYTES: u32 = 4 << 20;
/// How long a fetch may wait for data (never needed: the data is already there).
const FETCH_WAIT_MS: u32 = 100;

/// Connects a client with `connections` pooled connections and no retries (a
/// retried produce could write twice and would hide failures).
pub fn connect(rt: &Runtime, addr: &str, connections: usize) -> Result<Arc<Client>> {
    let options = ClientOptions {
        connections,
        retries: 0,
        failover_timeout_ms: 0,
        backoff_ms: 50,
        request_timeout_ms: REQUEST_TIMEOUT.as_millis() as u64,
        api_key: None,
        tls: None,
    };
    let client = rt
        .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, Client::connect(addr, options)).await })
        .map_err(|_| anyhow!("connecting to {addr} timed out"))?
        .with_context(|| format!("connecting to es://{addr}"))?;
    Ok(Arc::new(client))
}

pub fn create_topic(rt: &Runtime, client: &Client, topic: &str, partitions: usize) -> Result<()> {
    rt.block_on(client.create_topic(topic, partitions as u32, Vec::new()))
        .with_context(|| format!("creating topic {topic} over the binary protocol"))
}

/// Produce on an existing topic with a client of `connections` pooled connections:
/// `connections` workers, worker *i* on connection *i* sending to partition
/// *i mod partitions* (or, with fewer workers than partitions, moving on after
/// each batch: [`Spread`]), each waiting for its batch to be durable before the next.
/// (`Client::produce` picks the connection by partition, which would put all eight
/// workers of a one-partition topic on one connection; `call_on` picks it by worker.)
#[allow(clippy::too_many_arguments)]
pub fn produce_on(
    rt: &Runtime,
    client: &Client,
    label: &str,
    topic: &str,
    partitions: usize,
    connections: usize,
    w: &Workload,
    duration: Duration,
) -> Result<SuiteRow> {
    produce_capped(rt, client, label, topic, (partitions, connections), w, duration, None)
}

/// [`produce_on`] with `(partitions, connections)`, stopping early once `cap` bytes
/// were written (a bound on the disk a row fills).
#[allow(clippy::too_many_arguments)]
pub fn produce_capped(
    rt: &Runtime,
    client: &Client,
    label: &str,
    topic: &str,
    (partitions, connections): (usize, usize),
    w: &Workload,
    duration: Duration,
    cap: Option<u64>,
) -> Result<SuiteRow> {
    let batch = Bytes::from(w.batch.clone());
    let timed = timed::run_capped(label, duration, cap, connections, |i, ctl| {
        let spread = Spread { worker: i, workers: connections, partitions };
        rt.block_on(produce_loop(client, i, topic, spread, &batch, w.records_per_batch, ctl))
    })?;
    let shape = Shape {
        kind: "binary_produce",
        connections,
        partitions,
        records_per_request: w.records_per_batch,
        in_flight: 1,
    };
    SuiteRow::from_timed(label, shape, timed)
}

async fn produce_loop(
    client: &Client,
    slot: usize,
    topic: &str,
    spread: Spread,
    batch: &Bytes,
    records: usize,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    while ctl.running() {
        let partition = spread.partition(t.requests) as u32;
        produce_one(client, slot, topic, partition, (batch, records), &mut t, ctl).await?;
    }
    Ok(t)
}

/// One produce of `batch` (of `records` records) on connection `slot`, waited for
/// and counted in `t`.
pub(crate) async fn produce_one(
    client: &Client,
    slot: usize,
    topic: &str,
    partition: u32,
    (batch, records): (&Bytes, usize),
    t: &mut Tally,
    ctl: &Control,
) -> Result<()> {
    let start = Instant::now();
    let req = Request::Produce { topic: topic.to_owned(), partition, batch: batch.clone() };
    match client.call_on(slot, req, false).await.context("produce")? {
        Response::Produce { .. } => {}
        other => bail!("unexpected answer to a produce: {other:?}"),
    }
    latency::record_since(&mut t.latency, start);
    t.requests += 1;
    t.records += records as u64;
    t.bytes += batch.len() as u64;
    ctl.add_bytes(batch.len());
    Ok(())
}

/// One connection, one partition, `in_flight` produces of `w`'s small batch in
/// flight at all times (`Client::produce_pipelined`).
pub fn pipelined_row(
    rt: &Runtime,
    label: &str,
    addr: &str,
    topic: &str,
    in_flight: usize,
    w: &Workload,
    duration: Duration,
) -> Result<SuiteRow> {
    let client = connect(rt, addr, 1)?;
    create_topic(rt, &client, topic, 1)?;
    let batch = Bytes::from(w.batch.clone());
    let timed = timed::run(label, duration, 1, |_, ctl| {
        rt.block_on(pipelined_loop(&client, topic, &batch, w.records_per_batch, in_flight, ctl))
    })?;
    let shape = Shape {
        kind: "binary_pipelined_produce",
        connections: 1,
        partitions: 1,
        records_per_request: w.records_per_batch,
        in_flight,
    };
    SuiteRow::from_timed(label, shape, timed)
}

async fn pipelined_loop(
    client: &Client,
    topic: &str,
    batch: &Bytes,
    records: usize,
    in_flight: usize,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    let mut set: JoinSet<Result<Duration>> = JoinSet::new();
    let done = |t: &mut Tally, took: Duration| {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        t.latency.saturating_record(us.max(1));
        t.requests += 1;
        t.records += records as u64;
        t.bytes += batch.len() as u64;
        ctl.add_bytes(batch.len());
    };
    while ctl.running() {
        if set.len() >= in_flight {
            let took = joined(set.join_next().await)?;
            done(&mut t, took);
            continue;
        }
        let start = Instant::now();
        let queued = tokio::time::timeout(REQUEST_TIMEOUT, client.produce_pipelined(topic, 0, batch.clone()))
            .await
            .map_err(|_| anyhow!("queueing a pipelined produce timed out"))?
            .context("queueing a pipelined produce")?;
        set.spawn(async move {
            tokio::time::timeout(REQUEST_TIMEOUT, queued)
                .await
                .map_err(|_| anyhow!("a pipelined produce got no answer in {REQUEST_TIMEOUT:?}"))?
                .context("pipelined produce")?;
            Ok(start.elapsed())
        });
    }
    // What is still in flight completes (each bounded by the timeout) and counts.
    while let Some(r) = set.join_next().await {
        let took = joined(Some(r))?;
        done(&mut t, took);
    }
    Ok(t)
}

fn joined(r: Option<Result<Result<Duration>, tokio::task::JoinError>>) -> Result<Duration> {
    match r {
        Some(Ok(r)) => r,
        Some(Err(e)) => Err(anyhow!("a pipelined produce task failed: {e}")),
        None => Err(anyhow!("no pipelined produce in flight")),
    }
}

/// How a consume row reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeMode {
    /// `es_client::Consumer::poll`: what an application gets, records decoded (CRC
    /// checked) and copied out.
    Consumer,
    /// `Client::fetch` only, counting records from the batch headers: the broker's
    /// and the wire's share, without the client's decoding.
    RawFetch,
}

/// One connection reading partition 0 of `topic` (already written) from the start
/// in `FETCH_BYTES` fetches; back to the start when it reaches the end, so the row
/// always runs its full time. `bytes_per_record` turns records into log bytes.
pub fn consume_row(
    rt: &Runtime,
    label: &str,
    addr: &str,
    topic: &str,
    mode: ConsumeMode,
    bytes_per_record: f64,
    duration: Duration,
) -> Result<SuiteRow> {
    let client = connect(rt, addr, 1)?;
    let end = rt
        .block_on(client.list_offsets(topic, 0, OffsetSpec::Latest))
        .with_context(|| format!("reading the end offset of {topic}-0"))?
        .unwrap_or(0);
    if end == 0 {
        bail!("{topic}-0 is empty; the consume row reads what the produce rows wrote");
    }
    let timed = timed::run(label, duration, 1, |_, ctl| match mode {
        ConsumeMode::Consumer => rt.block_on(consumer_loop(&client, topic, end, bytes_per_record, ctl)),
        ConsumeMode::RawFetch => rt.block_on(fetch_loop(&client, topic, end, FETCH_BYTES, ctl)),
    })?;
    let shape = Shape {
        kind: match mode {
            ConsumeMode::Consumer => "binary_consume",
            ConsumeMode::RawFetch => "binary_fetch_no_decode",
        },
        connections: 1,
        partitions: 1,
        records_per_request: 0,
        in_flight: 1,
    };
    let mut row = SuiteRow::from_timed(label, shape, timed)?;
    row.shape.records_per_request = (row.records / row.requests.max(1)) as usize;
    row.notes.push(format!("read {topic}-0, offsets 0..{end}"));
    Ok(row)
}

async fn consumer_loop(
    client: &Arc<Client>,
    topic: &str,
    end: u64,
    bytes_per_record: f64,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    let mut consumer = Consumer::new(client.clone());
    consumer.max_wait_ms = FETCH_WAIT_MS;
    consumer.max_bytes = FETCH_BYTES;
    consumer.partition_max_bytes = FETCH_BYTES;
    consumer.seek(topic, 0, 0);
    let mut wraps = 0u64;
    while ctl.running() {
        let start = Instant::now();
        let records = consumer.poll().await.context("consumer poll")?;
        latency::record_since(&mut t.latency, start);
        let bytes = (records.len() as f64 * bytes_per_record) as u64;
        t.requests += 1;
        t.records += records.len() as u64;
        t.bytes += bytes;
        ctl.add_bytes(bytes as usize);
        if consumer.position(topic, 0).unwrap_or(0) >= end {
            consumer.seek(topic, 0, 0);
            wraps += 1;
        }
    }
    t.notes.push(format!("went back to offset 0 {wraps} time(s) after reaching offset {end}"));
    Ok(t)
}

/// Fetches `topic`-0 from 0 to `end` and over again, `max_bytes` per fetch.
pub async fn fetch_loop(
    client: &Client,
    topic: &str,
    end: u64,
    max_bytes: u32,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    let mut offset = 0u64;
    let mut wraps = 0u64;
    while ctl.running() {
        let start = Instant::now();
        let part = FetchPartition { topic: topic.to_owned(), partition: 0, offset, max_bytes };
        let results = client.fetch(FETCH_WAIT_MS, max_bytes, vec![part]).await.context("fetch")?;
        latency::record_since(&mut t.latency, start);
        let data = results.into_iter().next().context("a fetch answer without partitions")?.data;
        let mut rest = &data[..];
        while !rest.is_empty() {
            let h = es_core::BatchHeader::parse(rest, usize::MAX).context("a fetched batch header")?;
            if h.base_offset >= offset {
                t.records += u64::from(h.record_count);
            }
            offset = offset.max(h.next_offset());
            rest = rest.get(h.total_len()..).unwrap_or_default();
        }
        t.requests += 1;
        t.bytes += data.len() as u64;
        ctl.add_bytes(data.len());
        if offset >= end {
            offset = 0;
            wraps += 1;
        }
    }
    t.notes.push(format!("went back to offset 0 {wraps} time(s) after reaching offset {end}"));
    Ok(t)
}
