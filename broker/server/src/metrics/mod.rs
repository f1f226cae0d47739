//! Prometheus metrics (`GET /metrics`, the metric list in docs/operations.md).
//!
//! Hot paths only move atomics that already exist: a topic's [`TopicStats`]
//! live in its `Topic`, a binding's counters in its `Link`, the log's in its
//! `FlushStats`, a key's in [`KeyStats`] (one read-locked map lookup per
//! authenticated request, no allocation once the key is known). Nothing is
//! registered per label on the hot path: partition sizes and offsets, group lag
//! and process figures are read only when someone scrapes. [`expose`] walks all
//! of it per scrape and writes only the series the caller's [`Scope`] allows.

pub mod expose;
mod process;
pub mod scope;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use es_core::histogram::Histogram;

pub use expose::{CONTENT_TYPE, render};
pub use scope::Scope;

/// How metrics are kept (`--metrics`, `--metrics-kafka-compat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsOptions {
    /// Off: the hot paths skip every counter and `/metrics` answers 404.
    pub enabled: bool,
    /// Also expose Kafka's JMX-exporter names (`kafka_server_brokertopicmetrics_*`).
    pub kafka_compat: bool,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        Self { enabled: true, kafka_compat: false }
    }
}

/// The protocol a request came in on, for the per-protocol latency series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http,
    Binary,
    Kafka,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Http, Protocol::Binary, Protocol::Kafka];

    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Binary => "binary",
            Protocol::Kafka => "kafka",
        }
    }

    fn index(self) -> usize {
        match self {
            Protocol::Http => 0,
            Protocol::Binary => 1,
            Protocol::Kafka => 2,
        }
    }
}

/// Kafka API keys with a latency histogram of their own; higher keys share the last.
const KAFKA_API_SLOTS: usize = 128;

/// Broker-wide series that are not owned by a topic, key or log.
#[derive(Debug)]
pub struct Metrics {
    options: MetricsOptions,
    produce: [Histogram; 3],
    fetch: [Histogram; 3],
    /// Indexed by Kafka API key.
    kafka_api: Box<[Histogram]>,
    connections: [AtomicI64; 3],
    /// Schema-registry requests: [reads, writes] x [2xx, 4xx, 5xx].
    schema_requests: [[AtomicU64; 3]; 2],
}

impl Metrics {
    pub fn new(options: MetricsOptions) -> Metrics {
        Metrics {
            options,
            produce: std::array::from_fn(|_| Histogram::latency()),
            fetch: std::array::from_fn(|_| Histogram::latency()),
            kafka_api: (0..KAFKA_API_SLOTS).map(|_| Histogram::latency()).collect(),
            connections: std::array::from_fn(|_| AtomicI64::new(0)),
            schema_requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }

    pub fn enabled(&self) -> bool {
        self.options.enabled
    }

    pub fn options(&self) -> MetricsOptions {
        self.options
    }

    /// A produce, from its call to its acknowledgement (fsync included).
    pub fn produce_latency(&self, protocol: Protocol, took: Duration) {
        if self.options.enabled {
            self.produce[protocol.index()].observe_duration(took);
        }
    }

    /// A fetch, from its call to its answer (a long poll's wait included).
    pub fn fetch_latency(&self, protocol: Protocol, took: Duration) {
        if self.options.enabled {
            self.fetch[protocol.index()].observe_duration(took);
        }
    }

    /// One Kafka request, from its decode to its reply being ready.
    pub fn kafka_request(&self, api_key: i16, took: Duration) {
        if self.options.enabled {
            let slot = usize::try_from(api_key).unwrap_or(0).min(KAFKA_API_SLOTS - 1);
            self.kafka_api[slot].observe_duration(took);
        }
    }

    /// Counts one open connection on `protocol`'s listener until the guard drops.
    pub fn connection(self: &Arc<Self>, protocol: Protocol) -> ConnectionGuard {
        self.connections[protocol.index()].fetch_add(1, Ordering::Relaxed);
        ConnectionGuard { metrics: self.clone(), protocol }
    }

    /// One schema-registry request: a write or a read, and the HTTP status it got.
    pub fn schema_request(&self, write: bool, status: u16) {
        let class = match status {
            500.. => 2,
            400..=499 => 1,
            _ => 0,
        };
        self.schema_requests[usize::from(write)][class].fetch_add(1, Ordering::Relaxed);
    }
}

/// Decrements a listener's connection gauge when the connection ends.
#[derive(Debug)]
pub struct ConnectionGuard {
    metrics: Arc<Metrics>,
    protocol: Protocol,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.metrics.connections[self.protocol.index()].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A topic's traffic, owned by the topic so that counting is one atomic add.
#[derive(Debug)]
pub struct TopicStats {
    enabled: bool,
    records_in: AtomicU64,
    bytes_in: AtomicU64,
    records_out: AtomicU64,
    bytes_out: AtomicU64,
}

impl TopicStats {
    pub fn new(enabled: bool) -> TopicStats {
        let zero = || AtomicU64::new(0);
        TopicStats { enabled, records_in: zero(), bytes_in: zero(), records_out: zero(), bytes_out: zero() }
    }

    /// (records, bytes) of a run of whole batches about to be counted; nothing
    /// parsed while metrics are off.
    pub fn measure(&self, data: &[u8]) -> (u64, u64) {
        if self.enabled { (records_in(data), data.len() as u64) } else { (0, 0) }
    }

    /// Records appended (dead letters count for their dead-letter topic).
    pub fn produced(&self, records: u64, bytes: u64) {
        if self.enabled {
            self.records_in.fetch_add(records, Ordering::Relaxed);
            self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Records handed to a consumer (whole batches, as read).
    pub fn fetched(&self, records: u64, bytes: u64) {
        if self.enabled {
            self.records_out.fetch_add(records, Ordering::Relaxed);
            self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Whole batches handed to a consumer, as read: [`TopicStats::measure`] then
    /// [`TopicStats::fetched`].
    pub fn fetched_batches(&self, data: &[u8]) {
        let (records, bytes) = self.measure(data);
        self.fetched(records, bytes);
    }

    /// (records in, bytes in, records out, bytes out).
    pub fn read(&self) -> [u64; 4] {
        [&self.records_in, &self.bytes_in, &self.records_out, &self.bytes_out]
            .map(|c| c.load(Ordering::Relaxed))
    }
}

/// The records of a run of whole batches (their headers' counts; no CRC work).
pub fn records_in(mut data: &[u8]) -> u64 {
    let mut records = 0u64;
    while let Ok(h) = es_core::BatchHeader::parse(data, usize::MAX) {
        records += u64::from(h.record_count);
        let Some(rest) = data.get(h.total_len()..) else { break };
        data = rest;
    }
    records
}

/// One key's authentication and authorization figures.
#[derive(Debug, Default)]
pub struct KeyCounters {
    pub auth_successes: AtomicU64,
    pub auth_failures: AtomicU64,
    pub denials: AtomicU64,
    pub throttle_ms: AtomicU64,
    pub throttled_requests: AtomicU64,
}

/// Per-key counters. Failures for ids that name no active key go to one shared
/// `unknown` row, so a caller inventing ids cannot grow the map.
#[derive(Debug, Default)]
pub struct KeyStats {
    disabled: AtomicBool,
    keys: RwLock<HashMap<String, Arc<KeyCounters>>>,
    unknown: KeyCounters,
}

/// The label of failures that name no active key.
pub const UNKNOWN_KEY: &str = "unknown";

impl KeyStats {
    pub fn set_enabled(&self, on: bool) {
        self.disabled.store(!on, Ordering::Relaxed);
    }

    /// The counters of an active key (created on its first use), or the shared row.
    pub fn key(&self, id: Option<&es_auth::KeyId>, active: bool) -> Option<CounterRef<'_>> {
        if self.disabled.load(Ordering::Relaxed) {
            return None;
        }
        let Some(id) = id.filter(|_| active) else { return Some(CounterRef::Shared(&self.unknown)) };
        if let Some(c) = self.keys.read().expect("key stats lock").get(id.as_str()) {
            return Some(CounterRef::Key(c.clone()));
        }
        let mut keys = self.keys.write().expect("key stats lock");
        let c = keys.entry(id.as_str().to_owned()).or_default().clone();
        Some(CounterRef::Key(c))
    }

    /// Every row: (key id, counters) in key order, then `unknown` if it counted anything.
    pub fn rows(&self) -> Vec<(String, [u64; 5])> {
        let read = |c: &KeyCounters| {
            [&c.auth_successes, &c.auth_failures, &c.denials, &c.throttle_ms, &c.throttled_requests]
                .map(|a| a.load(Ordering::Relaxed))
        };
        let keys = self.keys.read().expect("key stats lock");
        let mut rows: Vec<(String, [u64; 5])> = keys.iter().map(|(k, c)| (k.clone(), read(c))).collect();
        rows.sort();
        // The shared row shows only once something landed in it.
        let unknown = read(&self.unknown);
        if unknown.iter().any(|&v| v > 0) {
            rows.push((UNKNOWN_KEY.to_owned(), unknown));
        }
        rows
    }
}

/// A key's counters, or the shared `unknown` row.
#[derive(Debug)]
pub enum CounterRef<'a> {
    Key(Arc<KeyCounters>),
    Shared(&'a KeyCounters),
}

impl std::ops::Deref for CounterRef<'_> {
    type Target = KeyCounters;
    fn deref(&self) -> &KeyCounters {
        match self {
            CounterRef::Key(c) => c,
            CounterRef::Shared(c) => c,
        }
    }
}

/// Bumps one counter by `n`.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Vec<u8> {
        let records: Vec<es_core::Record> =
            (0..n).map(|i| es_core::Record::from_value(i.to_string())).collect();
        es_core::batch::encode(&records, 1, es_core::ProducerInfo::NONE).unwrap()
    }

    #[test]
    fn records_are_counted_from_batch_headers() {
        let mut data = batch(3);
        data.extend(batch(2));
        assert_eq!(records_in(&data), 5);
        assert_eq!(records_in(&data[..10]), 0, "a torn header counts nothing");
    }

    #[test]
    fn unknown_keys_share_one_row_and_disabled_counts_nothing() {
        let stats = KeyStats::default();
        assert!(stats.rows().is_empty(), "no `unknown` row until it counts something");
        let id = es_auth::KeyId::parse("0123456789abcdef").unwrap();
        add(&stats.key(Some(&id), true).unwrap().auth_successes, 1);
        add(&stats.key(Some(&id), false).unwrap().auth_failures, 1);
        add(&stats.key(None, false).unwrap().auth_failures, 1);
        let rows = stats.rows();
        assert_eq!(rows[0], ("0123456789abcdef".to_owned(), [1, 0, 0, 0, 0]));
        assert_eq!(rows[1], (UNKNOWN_KEY.to_owned(), [0, 2, 0, 0, 0]));
        stats.set_enabled(false);
        assert!(stats.key(Some(&id), true).is_none());
    }

    #[test]
    fn connections_are_counted_while_open() {
        let m = Arc::new(Metrics::new(MetricsOptions::default()));
        let a = m.connection(Protocol::Kafka);
        let b = m.connection(Protocol::Kafka);
        drop(a);
        assert_eq!(m.connections[2].load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(m.connections[2].load(Ordering::Relaxed), 0);
    }
}
