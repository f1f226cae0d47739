//! The Kafka-protocol rows: N producer connections sending one pre-encoded v2 batch
//! per Produce (acks=all) with up to K requests in flight each, and one consumer
//! fetching partition 0 from offset 0 to its end and over again. The same code runs
//! against es's Kafka listener and Apache Kafka, so only the broker differs.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ProduceResponse};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use super::wire::{self, Conn, PRODUCE_VERSION};
use crate::latency;
use crate::suite::row::{Shape, SuiteRow, Tally};
use crate::timed::{self, Control};
use crate::workload::{Spread, Workload};

/// Fetch size of the consume rows, as the binary suite's.
const FETCH_BYTES: i32 = 4 << 20;
/// How long a fetch may wait for data (never needed: the data is already there).
const FETCH_WAIT_MS: i32 = 100;

/// What a produce row sends.
pub struct ProduceShape<'a> {
    pub label: &'a str,
    pub addr: &'a str,
    pub topic: &'a str,
    pub partitions: usize,
    pub producers: usize,
    pub in_flight: usize,
    /// Bytes after which the row stops early.
    pub cap: Option<u64>,
}

/// `producers` connections, producer *i* on partition *i mod partitions*, or on
/// each partition in turn when there are fewer producers than partitions ([`Spread`]).
pub fn produce_row(rt: &Runtime, s: &ProduceShape<'_>, w: &Workload, duration: Duration) -> Result<SuiteRow> {
    let batch = Bytes::from(w.batch.clone());
    let conns = (0..s.producers)
        .map(|_| rt.block_on(Conn::connect(s.addr)).map(|c| std::sync::Mutex::new(Some(c))))
        .collect::<Result<Vec<_>>>()?;
    let timed = timed::run_capped(s.label, duration, s.cap, s.producers, |i, ctl| {
        let spread = Spread { worker: i, workers: s.producers, partitions: s.partitions };
        let taken = conns[i].lock().map_err(|_| anyhow!("a poisoned connection"))?.take();
        let Some(conn) = taken else { bail!("producer {i} has no connection") };
        rt.block_on(produce_loop(conn, s.topic, spread, &batch, w.records_per_batch, s.in_flight, ctl))
    })?;
    let shape = Shape {
        kind: "kafka_produce",
        connections: s.producers,
        partitions: s.partitions,
        records_per_request: w.records_per_batch,
        in_flight: s.in_flight,
    };
    SuiteRow::from_timed(s.label, shape, timed)
}

/// The writer sends while fewer than `in_flight` requests await their answer; the
/// reader, a task of its own, takes the answers in order (Kafka answers a
/// connection's requests in the order sent) and times each from its send.
async fn produce_loop(
    conn: Conn,
    topic: &str,
    spread: Spread,
    batch: &Bytes,
    records: usize,
    in_flight: usize,
    ctl: &Control,
) -> Result<Tally> {
    let (sent_tx, mut sent_rx) = mpsc::channel::<(i32, Instant)>(in_flight);
    let (done_tx, mut done_rx) = mpsc::channel::<Result<Duration>>(in_flight);
    let Conn { mut read, mut write, .. } = conn;
    let mut next_id = 0i32;
    let reader = tokio::spawn(async move {
        while let Some((id, start)) = sent_rx.recv().await {
            let answer = read_answer(&mut read, id).await.map(|()| start.elapsed());
            let failed = answer.is_err();
            if done_tx.send(answer).await.is_err() || failed {
                break;
            }
        }
    });
    let mut t = Tally::new()?;
    let mut outstanding = 0usize;
    let mut sent = 0u64;
    let result = async {
        while ctl.running() || outstanding > 0 {
            if ctl.running() && outstanding < in_flight {
                next_id = next_id.wrapping_add(1);
                let id = next_id;
                let req = wire::produce_request(topic, spread.partition(sent) as i32, batch.clone());
                sent += 1;
                let f = wire::frame(ApiKey::Produce, PRODUCE_VERSION, id, &req)?;
                let start = Instant::now();
                wire::write_frame(&mut write, &f).await?;
                sent_tx.send((id, start)).await.map_err(|_| anyhow!("the response reader stopped"))?;
                outstanding += 1;
                continue;
            }
            let took = done_rx.recv().await.context("the response reader stopped")??;
            outstanding -= 1;
            let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            t.latency.saturating_record(us.max(1));
            t.requests += 1;
            t.records += records as u64;
            t.bytes += batch.len() as u64;
            ctl.add_bytes(batch.len());
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    drop(sent_tx);
    reader.abort();
    result.map(|()| t)
}

async fn read_answer(read: &mut tokio::net::tcp::OwnedReadHalf, id: i32) -> Result<()> {
    let (got, resp) =
        wire::decode_response::<ProduceResponse>(wire::read_frame(read).await?, PRODUCE_VERSION)?;
    if got != id {
        bail!("produce answer {got} arrived for request {id}");
    }
    match wire::produce_error(&resp) {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// One consumer reading `topic`-0 from offset 0 to the end (the high watermark at
/// the start), then from 0 again until the time is up. Records are counted from
/// the batch headers; the CRC and the records are not decoded, as in the binary
/// suite's "fetch, no decode" row, so the broker's and the wire's share is measured.
pub fn consume_row(
    rt: &Runtime,
    label: &str,
    addr: &str,
    topic: &str,
    bytes_per_record: f64,
    duration: Duration,
) -> Result<SuiteRow> {
    let mut conn = rt.block_on(Conn::connect(addr))?;
    let (_, end) = rt.block_on(conn.fetch(topic, 0, 1, 0))?;
    if end <= 0 {
        bail!("{topic}-0 is empty; the consume row reads what the produce rows wrote");
    }
    let conn = std::sync::Mutex::new(Some(conn));
    let timed = timed::run(label, duration, 1, |_, ctl| {
        let taken = conn.lock().map_err(|_| anyhow!("a poisoned connection"))?.take();
        let Some(mut c) = taken else { bail!("the consumer has no connection") };
        rt.block_on(consume_loop(&mut c, topic, end, bytes_per_record, ctl))
    })?;
    let shape = Shape {
        kind: "kafka_fetch_no_decode",
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

async fn consume_loop(
    c: &mut Conn,
    topic: &str,
    end: i64,
    bytes_per_record: f64,
    ctl: &Control,
) -> Result<Tally> {
    let mut t = Tally::new()?;
    let mut offset = 0i64;
    let mut wraps = 0u64;
    let mut recent = VecDeque::with_capacity(2);
    while ctl.running() {
        let start = Instant::now();
        let (records, _) = c.fetch(topic, offset, FETCH_BYTES, FETCH_WAIT_MS).await?;
        latency::record_since(&mut t.latency, start);
        let (n, next) = wire::count_batches(&records, offset)?;
        // Two fetches in a row that do not move mean a batch larger than the fetch size.
        recent.push_back(next);
        if recent.len() > 2 {
            recent.pop_front();
        }
        if next == offset && recent.len() == 2 && recent.iter().all(|&o| o == offset) {
            bail!("the fetch at {topic}-0 offset {offset} makes no progress");
        }
        let bytes = (n as f64 * bytes_per_record) as u64;
        t.requests += 1;
        t.records += n;
        t.bytes += bytes;
        ctl.add_bytes(bytes as usize);
        offset = next;
        if offset >= end {
            offset = 0;
            wraps += 1;
        }
    }
    t.notes.push(format!("went back to offset 0 {wraps} time(s) after reaching offset {end}"));
    Ok(t)
}
