//! A batching producer: records are grouped per partition until the batch is full
//! (records or bytes) or `linger_ms` passes, then sent as one Kafka v2 batch,
//! optionally compressed (gzip, snappy, lz4 or zstd). With idempotence on (the
//! default), each batch carries the producer id, epoch and per-partition sequence,
//! so a retried batch is written once. Batches of one partition are queued in order on one connection, several in
//! flight at a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_core::batch::{self, Compression};
use es_core::{ProducerInfo, Record};
use tokio::sync::{Mutex, oneshot};

use crate::client::{Client, Produced};
use crate::error::{ClientError, Result};
use es_protocol::ProduceFinding;

#[derive(Debug, Clone)]
pub struct ProducerOptions {
    pub linger_ms: u64,
    pub batch_records_max: usize,
    /// Most bytes of one encoded batch, its header included: keep it at or below
    /// the topic's `max.message.bytes` (default 1,048,588), or batches are refused.
    pub batch_bytes_max: usize,
    /// How each batch's records are compressed (the broker stores them as sent).
    pub compression: Compression,
    pub idempotent: bool,
}

impl ProducerOptions {
    /// Gzip on or off: the builder callers used before `compression` existed.
    pub fn gzip(self, on: bool) -> Self {
        Self { compression: if on { Compression::Gzip } else { Compression::None }, ..self }
    }
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            linger_ms: 5,
            batch_records_max: 500,
            batch_bytes_max: 1 << 20,
            compression: Compression::None,
            idempotent: true,
        }
    }
}

/// Where a record landed: its partition, or the dead-letter topic a validator sent
/// it to (then `finding` says why); a validator's warning on a written record is in
/// `finding` too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub finding: Option<ProduceFinding>,
}

impl RecordMetadata {
    pub fn dead_lettered(&self) -> bool {
        self.finding.as_ref().is_some_and(|f| f.dead_letter.is_some())
    }
}

/// Each record's place in a produced batch of `count`: kept records take the
/// partition's offsets in batch order; dead-lettered ones are where the broker put them.
fn placements(key: &Key, count: usize, answer: &Produced) -> Vec<RecordMetadata> {
    let mut next = answer.base_offset;
    (0..count)
        .map(|i| {
            let finding = answer.findings.iter().find(|f| f.index as usize == i).cloned();
            match finding.as_ref().and_then(|f| f.dead_letter.as_ref()) {
                Some(d) => RecordMetadata {
                    topic: d.topic.clone(),
                    partition: d.partition,
                    offset: d.offset,
                    finding: finding.clone(),
                },
                None => {
                    let offset = next;
                    next += 1;
                    RecordMetadata { topic: key.0.clone(), partition: key.1, offset, finding }
                }
            }
        })
        .collect()
}

type Waiter = oneshot::Sender<Result<RecordMetadata>>;
type Key = (String, u32);

#[derive(Default)]
struct Buffer {
    records: Vec<Record>,
    bytes: usize,
    waiters: Vec<Waiter>,
    /// Bumped on every take, so a stale linger timer does not send a newer batch.
    generation: u64,
}

#[derive(Default)]
struct State {
    partition_counts: HashMap<String, u32>,
    sticky: HashMap<String, u32>,
    buffers: HashMap<Key, Buffer>,
}

struct Inner {
    client: Arc<Client>,
    options: ProducerOptions,
    producer: Option<(i64, i16)>,
    state: std::sync::Mutex<State>,
    /// Per partition: the next sequence, locked from numbering to queueing, so
    /// batches reach the socket in sequence order.
    order: std::sync::Mutex<HashMap<Key, Arc<Mutex<i32>>>>,
}

#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("options", &self.inner.options).finish()
    }
}

impl Producer {
    pub async fn new(client: Arc<Client>, options: ProducerOptions) -> Result<Producer> {
        let producer = if options.idempotent { Some(client.init_producer_id().await?) } else { None };
        let inner = Inner {
            client,
            options,
            producer,
            state: std::sync::Mutex::new(State::default()),
            order: std::sync::Mutex::new(HashMap::new()),
        };
        Ok(Producer { inner: Arc::new(inner) })
    }

    /// Queues a record and resolves once its batch is durable on the broker. With no
    /// partition, a keyed record goes where Kafka's partitioner puts it and an
    /// unkeyed one to the topic's current sticky partition.
    pub async fn send(&self, topic: &str, partition: Option<u32>, record: Record) -> Result<RecordMetadata> {
        self.enqueue(topic, partition, record).await?.await
    }

    /// Queues a record and returns the future of its metadata. Records queued one
    /// after another land in that order within their partition (concurrent `send`s
    /// from separate tasks do not promise an order).
    pub async fn enqueue(
        &self,
        topic: &str,
        partition: Option<u32>,
        record: Record,
    ) -> Result<impl std::future::Future<Output = Result<RecordMetadata>> + use<>> {
        let count = self.partition_count(topic).await?;
        let rx = {
            let mut st = self.inner.state.lock().expect("producer state lock");
            let partition = match (partition, &record.key) {
                (Some(p), _) => p,
                (None, Some(k)) => es_core::partitioner::partition_for_key(k, count),
                (None, None) => *st.sticky.entry(topic.to_owned()).or_insert_with(|| rand_partition(count)),
            };
            let key = (topic.to_owned(), partition);
            let (tx, rx) = oneshot::channel();
            let buf = st.buffers.entry(key.clone()).or_default();
            let len = record.encoded_len();
            // A record that would take the batch over the byte limit goes into the
            // next one; the broker refuses a batch above its `max.message.bytes`.
            if !buf.records.is_empty()
                && es_core::BatchHeader::LEN + buf.bytes + len > self.inner.options.batch_bytes_max
            {
                tokio::spawn(send_batch(self.inner.clone(), key.clone(), take(buf)));
            }
            buf.bytes += len;
            buf.records.push(record);
            buf.waiters.push(tx);
            let full = buf.records.len() >= self.inner.options.batch_records_max
                || es_core::BatchHeader::LEN + buf.bytes >= self.inner.options.batch_bytes_max;
            if full {
                let taken = take(buf);
                if partition_is_sticky(&st, topic, partition) {
                    st.sticky.insert(topic.to_owned(), rand_partition(count));
                }
                tokio::spawn(send_batch(self.inner.clone(), key, taken));
            } else if buf.records.len() == 1 {
                tokio::spawn(linger(self.inner.clone(), key, buf.generation));
            }
            rx
        };
        Ok(async move { rx.await.map_err(|_| ClientError::Disconnected("producer dropped".into()))? })
    }

    /// Sends every buffered record now and waits for all of them.
    pub async fn flush(&self) -> Result<()> {
        let batches: Vec<(Key, Buffer)> = {
            let mut st = self.inner.state.lock().expect("producer state lock");
            st.buffers
                .iter_mut()
                .filter(|(_, b)| !b.records.is_empty())
                .map(|(k, b)| (k.clone(), take(b)))
                .collect()
        };
        let handles: Vec<_> =
            batches.into_iter().map(|(k, b)| tokio::spawn(send_batch(self.inner.clone(), k, b))).collect();
        for h in handles {
            let _ = h.await;
        }
        Ok(())
    }

    async fn partition_count(&self, topic: &str) -> Result<u32> {
        if let Some(n) = self.inner.state.lock().expect("producer state lock").partition_counts.get(topic) {
            return Ok(*n);
        }
        let n = self.inner.client.describe_topic(topic).await?.partitions.len() as u32;
        self.inner
            .state
            .lock()
            .expect("producer state lock")
            .partition_counts
            .insert(topic.to_owned(), n.max(1));
        Ok(n.max(1))
    }
}

fn partition_is_sticky(st: &State, topic: &str, partition: u32) -> bool {
    st.sticky.get(topic) == Some(&partition)
}

fn rand_partition(count: u32) -> u32 {
    // Time-seeded is enough to spread sticky partitions; no cryptographic need.
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    nanos % count.max(1)
}

fn take(buf: &mut Buffer) -> Buffer {
    buf.generation += 1;
    Buffer {
        records: std::mem::take(&mut buf.records),
        bytes: std::mem::replace(&mut buf.bytes, 0),
        waiters: std::mem::take(&mut buf.waiters),
        generation: buf.generation,
    }
}

async fn linger(inner: Arc<Inner>, key: Key, generation: u64) {
    tokio::time::sleep(Duration::from_millis(inner.options.linger_ms)).await;
    let taken = {
        let mut st = inner.state.lock().expect("producer state lock");
        match st.buffers.get_mut(&key) {
            Some(b) if b.generation == generation && !b.records.is_empty() => take(b),
            _ => return,
        }
    };
    send_batch(inner, key, taken).await;
}

async fn send_batch(inner: Arc<Inner>, key: Key, buf: Buffer) {
    match send_numbered(&inner, &key, &buf.records).await {
        Ok(answer) => {
            let placed = placements(&key, buf.records.len(), &answer);
            for (w, meta) in buf.waiters.into_iter().zip(placed) {
                let _ = w.send(Ok(meta));
            }
        }
        Err(e) => {
            for w in buf.waiters {
                let _ = w.send(Err(e.clone()));
            }
        }
    }
}

/// Numbers, encodes and queues one batch in partition order; returns the broker's answer.
async fn send_numbered(inner: &Arc<Inner>, key: &Key, records: &[Record]) -> Result<Produced> {
    let order = inner.order.lock().expect("order lock").entry(key.clone()).or_default().clone();
    let mut next_seq = order.lock().await;
    let producer = match inner.producer {
        Some((producer_id, producer_epoch)) => {
            ProducerInfo { producer_id, producer_epoch, base_sequence: *next_seq }
        }
        None => ProducerInfo::NONE,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let plain = batch::encode(records, now, producer)?;
    let bytes = batch::compress(&plain, inner.options.compression)?;
    let bytes = Bytes::from(bytes);
    let pending = inner.client.produce_pipelined(&key.0, key.1, bytes.clone()).await;
    if inner.producer.is_some() {
        *next_seq = es_core::add_sequence(*next_seq, records.len() as u64);
    }
    drop(next_seq);
    let first = match pending {
        Ok(fut) => fut.await,
        Err(e) => Err(e),
    };
    match first {
        Ok(answer) => Ok(answer),
        // An idempotent batch can be resent as is: the broker dedups it.
        Err(e) if e.is_retriable() && inner.producer.is_some() => {
            inner.client.produce(&key.0, key.1, bytes).await
        }
        Err(e) => Err(e),
    }
}
