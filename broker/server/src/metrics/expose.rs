//! One scrape: a prometheus-client registry built for this caller, holding one
//! collector that reads every counter and, only now, the partitions, group lag
//! and process figures, writing only what the caller's [`Scope`] allows. Names
//! and meanings are listed in docs/operations.md; tests check it against a scrape.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use es_core::histogram::Snapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::{Protocol, Scope, process};
use crate::registry::{Registry, Topic};

/// The `Content-Type` of the answer: Prometheus' text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The exposition for `scope`'s caller.
pub fn render(registry: &Arc<Registry>, scope: Scope) -> Result<String, std::fmt::Error> {
    let mut reg = prometheus_client::registry::Registry::default();
    reg.register_collector(Box::new(Exposition { registry: registry.clone(), scope }));
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &reg)?;
    Ok(out)
}

type Labels = Vec<(&'static str, String)>;
type Fmt = Result<(), std::fmt::Error>;

struct Exposition {
    registry: Arc<Registry>,
    scope: Scope,
}

impl std::fmt::Debug for Exposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exposition")
    }
}

impl Collector for Exposition {
    fn encode(&self, mut enc: DescriptorEncoder) -> Fmt {
        let topics: Vec<(String, Arc<Topic>)> = self
            .registry
            .list()
            .into_iter()
            .map(|t| (t.name(), t))
            .filter(|(name, _)| self.scope.topic(name))
            .collect();
        self.topic_traffic(&mut enc, &topics)?;
        partitions(&mut enc, &topics, &self.registry)?;
        self.raft_groups(&mut enc, &topics)?;
        plugins(&mut enc, &topics)?;
        self.group_lag(&mut enc)?;
        self.keys(&mut enc)?;
        if self.scope.broker() {
            self.broker(&mut enc)?;
        }
        if self.registry.metrics().options().kafka_compat {
            self.kafka_compat(&mut enc, &topics)?;
        }
        Ok(())
    }
}

impl Exposition {
    fn topic_traffic(&self, enc: &mut DescriptorEncoder, topics: &[(String, Arc<Topic>)]) -> Fmt {
        let names = [
            ("es_records_produced", "Records appended to the topic (dead letters count for their topic)"),
            ("es_bytes_in", "Batch bytes appended to the topic"),
            ("es_records_fetched", "Records handed to consumers, as whole batches read"),
            ("es_bytes_out", "Batch bytes handed to consumers"),
        ];
        for (i, (name, help)) in names.into_iter().enumerate() {
            let rows = topics.iter().map(|(n, t)| (vec![("topic", n.clone())], t.stats.read()[i]));
            counters(enc, name, help, rows)?;
        }
        Ok(())
    }

    /// In a cluster, each data partition's Raft group as this node sees it.
    fn raft_groups(&self, enc: &mut DescriptorEncoder, topics: &[(String, Arc<Topic>)]) -> Fmt {
        let Some(cluster) = self.registry.cluster() else { return Ok(()) };
        let mut groups = Vec::new();
        for (name, topic) in topics {
            for p in 0..topic.partition_count() {
                if let Some(group) = cluster.replica(topic, p) {
                    let labels: Labels = vec![("topic", name.clone()), ("partition", p.to_string())];
                    groups.push((labels, group.status(), group));
                }
            }
        }
        let leader =
            groups.iter().map(|(l, s, _)| (l.clone(), i64::from(s.leader == Some(cluster.node_id()))));
        gauges(enc, "es_raft_leader", "1 where this node leads the partition's Raft group, else 0", leader)?;
        let quiet = groups.iter().map(|(l, s, _)| (l.clone(), i64::from(s.quiesced)));
        gauges(
            enc,
            "es_raft_quiesced",
            "1 where the partition's Raft group is quiet here (idle: no ticks, no heartbeats), else 0",
            quiet,
        )?;
        let term = groups.iter().map(|(l, s, _)| (l.clone(), i64::from(s.term.0)));
        gauges(enc, "es_raft_term", "The group's current Raft term (the Kafka leader epoch)", term)?;
        let changes = groups.iter().map(|(l, _, g)| (l.clone(), g.figures().leader_changes.load(Relaxed)));
        counters(
            enc,
            "es_raft_leader_changes",
            "Leaders this node learned of (one per leader and term)",
            changes,
        )?;
        let lag = groups.iter().flat_map(|(l, s, _)| {
            s.follower_lag.iter().map(move |(f, lag)| {
                let mut labels = l.clone();
                labels.push(("follower", f.to_string()));
                (labels, i64::try_from(*lag).unwrap_or(i64::MAX))
            })
        });
        gauges(
            enc,
            "es_raft_follower_lag_entries",
            "On the leader: entries a follower's log is behind the leader's",
            lag,
        )?;
        let commit =
            groups.iter().map(|(l, _, g)| (l.clone(), g.figures().commit_latency.snapshot())).collect();
        histograms(
            enc,
            "es_raft_commit_seconds",
            "A proposal from this leader to its majority commit",
            SECONDS,
            commit,
        )
    }

    fn group_lag(&self, enc: &mut DescriptorEncoder) -> Fmt {
        let groups = self.registry.groups();
        let mut rows: Vec<(Labels, i64)> = Vec::new();
        for (group, _, _) in groups.list().into_iter().filter(|(g, _, _)| self.scope.group(g)) {
            let mut lag: BTreeMap<String, u64> = BTreeMap::new();
            // Only the coordinator reports a group's lag (one series per group in a
            // cluster), over the partitions it replicates: it has no high watermark
            // of the others (`GET /groups/{group}` asks their replicas).
            for c in groups.fetch(&group).unwrap_or_default() {
                let Ok(topic) = self.registry.topic(&c.topic) else { continue };
                if !self.registry.hosts(&topic, c.partition) {
                    continue;
                }
                let Ok(log) = topic.partition(u64::from(c.partition)) else { continue };
                if self.scope.topic(&c.topic) {
                    let behind = log.high_watermark().saturating_sub(c.offset);
                    *lag.entry(c.topic).or_default() += behind;
                }
            }
            for (topic, behind) in lag {
                rows.push((vec![("group", group.clone()), ("topic", topic)], behind as i64));
            }
        }
        gauges(
            enc,
            "es_consumer_group_lag",
            "Records between a group's committed offsets and the high watermarks, summed per topic",
            rows,
        )
    }

    fn keys(&self, enc: &mut DescriptorEncoder) -> Fmt {
        let rows: Vec<(String, [u64; 5])> =
            self.registry.auth().stats().rows().into_iter().filter(|(k, _)| self.scope.key(k)).collect();
        let names = [
            ("es_auth_successes", "Requests whose API key authenticated"),
            ("es_auth_failures", "Refused credentials (key `unknown`: ids that name no active key)"),
            ("es_authorization_denials", "Calls the grants refused"),
        ];
        for (i, (name, help)) in names.into_iter().enumerate() {
            let series = rows.iter().map(|(k, c)| (vec![("key", k.clone())], c[i]));
            counters(enc, name, help, series)?;
        }
        let throttle = rows.iter().map(|(k, c)| (vec![("key", k.clone())], c[3] as f64 / 1_000.0));
        let mut m = enc.encode_descriptor(
            "es_quota_throttle_seconds",
            "Time clients were told to hold back by byte-rate quotas",
            None,
            MetricType::Counter,
        )?;
        for (labels, secs) in throttle {
            ConstCounter::new(secs).encode(m.encode_family(&labels)?)?;
        }
        let refused = rows.iter().map(|(k, c)| (vec![("key", k.clone())], c[4]));
        counters(
            enc,
            "es_quota_throttled_requests",
            "Requests refused while the key's quota was in debt",
            refused,
        )
    }

    fn broker(&self, enc: &mut DescriptorEncoder) -> Fmt {
        let m = self.registry.metrics();
        let per_protocol = |h: &dyn Fn(Protocol) -> Snapshot| {
            Protocol::ALL
                .iter()
                .map(|p| (vec![("protocol", p.label().to_owned())], h(*p)))
                .collect::<Vec<_>>()
        };
        let produce = per_protocol(&|p| m.produce[p.index()].snapshot());
        histograms(
            enc,
            "es_produce_latency_seconds",
            "Produce calls to their acknowledgement",
            SECONDS,
            produce,
        )?;
        let fetch = per_protocol(&|p| m.fetch[p.index()].snapshot());
        histograms(
            enc,
            "es_fetch_latency_seconds",
            "Fetches to their answer, long-poll wait included",
            SECONDS,
            fetch,
        )?;
        let apis = m.kafka_api.iter().enumerate().filter(|(_, h)| h.count() > 0);
        let apis: Vec<_> = apis.map(|(k, h)| (vec![("api", kafka_api_name(k))], h.snapshot())).collect();
        histograms(
            enc,
            "es_kafka_request_latency_seconds",
            "Kafka requests, decode to reply",
            SECONDS,
            apis,
        )?;
        self.log(enc)?;
        // HTTP connections are axum's to accept; the binary and Kafka accept loops
        // are counted.
        let conns = Protocol::ALL
            .iter()
            .map(|p| (vec![("listener", p.label().to_owned())], m.connections[p.index()].load(RELAXED)));
        gauges(enc, "es_listener_connections", "Open connections per listener", conns)?;
        let mut schema = Vec::new();
        for (w, kind) in ["read", "write"].into_iter().enumerate() {
            for (c, status) in ["2xx", "4xx", "5xx"].into_iter().enumerate() {
                let labels = vec![("kind", kind.to_owned()), ("status", status.to_owned())];
                schema.push((labels, m.schema_requests[w][c].load(RELAXED)));
            }
        }
        counters(
            enc,
            "es_schema_registry_requests",
            "Schema-registry requests by kind and status class",
            schema,
        )?;
        process_series(enc)
    }

    fn log(&self, enc: &mut DescriptorEncoder) -> Fmt {
        let stats = self.registry.log_stats();
        let rounds = vec![(Labels::new(), stats.round_appends.snapshot())];
        histograms(
            enc,
            "es_log_group_commit_appends",
            "Appends acknowledged per group-commit round",
            1.0,
            rounds,
        )?;
        let fsyncs = vec![(Labels::new(), stats.fsync_latency.snapshot())];
        histograms(enc, "es_log_fsync_latency_seconds", "fdatasync calls of group commit", SECONDS, fsyncs)?;
        let one = |v: &std::sync::atomic::AtomicU64| vec![(Labels::new(), v.load(RELAXED))];
        counters(enc, "es_log_flush_rounds", "Group-commit rounds", one(&stats.rounds))?;
        counters(enc, "es_log_fsyncs", "fdatasync calls of group commit", one(&stats.fsyncs))?;
        counters(
            enc,
            "es_log_direct_rounds",
            "Group-commit rounds that synced their segments instead of the journal",
            one(&stats.direct_rounds),
        )?;
        counters(
            enc,
            "es_log_checkpoint_fsyncs",
            "Segment fdatasync calls of journal checkpoints",
            one(&stats.checkpoint_fsyncs),
        )?;
        counters(
            enc,
            "es_log_appended_bytes",
            "Bytes written and synced by group commit (journal records or segment data)",
            one(&stats.bytes),
        )?;
        self.cold(enc)
    }

    /// The cold tier's counters; `es_cold_store_up` is 0 while uploads fail.
    fn cold(&self, enc: &mut DescriptorEncoder) -> Fmt {
        let Some(s) = self.registry.cold_status() else { return Ok(()) };
        let one = |v: u64| vec![(Labels::new(), v)];
        counters(enc, "es_cold_uploads", "Segments uploaded to the cold store", one(s.uploads))?;
        counters(
            enc,
            "es_cold_upload_failures",
            "Segment uploads that failed (retried with backoff)",
            one(s.upload_failures),
        )?;
        counters(enc, "es_cold_fetches", "Objects fetched back from the cold store", one(s.fetches))?;
        counters(
            enc,
            "es_cold_refused_objects",
            "Fetched objects refused: size or sha256 not the manifest's",
            one(s.refused),
        )?;
        let gauge = |v: u64| vec![(Labels::new(), v as i64)];
        gauges(enc, "es_cold_cache_bytes", "Bytes of cold segments cached locally", gauge(s.cached_bytes))?;
        let up = u64::from(s.last_error.is_none());
        gauges(enc, "es_cold_store_up", "1 unless the last cold-store upload failed", gauge(up))
    }

    /// Kafka's JMX-exporter names (`kafka.server:type=BrokerTopicMetrics`), the
    /// per-topic rows plus the all-topics row without a topic label.
    fn kafka_compat(&self, enc: &mut DescriptorEncoder, topics: &[(String, Arc<Topic>)]) -> Fmt {
        let names = [
            ("kafka_server_brokertopicmetrics_messagesin", "MessagesInPerSec", 0),
            ("kafka_server_brokertopicmetrics_bytesin", "BytesInPerSec", 1),
            ("kafka_server_brokertopicmetrics_bytesout", "BytesOutPerSec", 3),
        ];
        for (name, help, i) in names {
            let mut rows: Vec<(Labels, u64)> =
                topics.iter().map(|(n, t)| (vec![("topic", n.clone())], t.stats.read()[i])).collect();
            if self.scope.broker() {
                rows.push((Labels::new(), rows.iter().map(|(_, v)| v).sum()));
            }
            counters(enc, name, help, rows)?;
        }
        Ok(())
    }
}

const RELAXED: std::sync::atomic::Ordering = std::sync::atomic::Ordering::Relaxed;
/// Nanoseconds to seconds.
const SECONDS: f64 = 1e-9;

/// One figure of a partition's info.
type InfoField = fn(&es_log::PartitionInfo) -> u64;

/// The partitions this node holds a replica of (`Registry::hosts`).
fn partitions(enc: &mut DescriptorEncoder, topics: &[(String, Arc<Topic>)], registry: &Registry) -> Fmt {
    let infos: Vec<(Labels, es_log::PartitionInfo)> = topics
        .iter()
        .flat_map(|(n, t)| {
            t.partitions
                .iter()
                .enumerate()
                .filter(|(p, _)| registry.hosts(t, *p as u32))
                .map(|(p, log)| (vec![("topic", n.clone()), ("partition", p.to_string())], log.info()))
        })
        .collect();
    let fields: [(&str, &str, InfoField); 6] = [
        ("es_partition_high_watermark", "The offset below which records are durable and readable", |i| {
            i.high_watermark
        }),
        ("es_partition_log_start_offset", "The first offset still held (after retention)", |i| {
            i.log_start_offset
        }),
        ("es_partition_size_bytes", "Bytes of the partition's local segments", |i| i.size_bytes),
        ("es_partition_segments", "Local segment files of the partition", |i| i.segment_count as u64),
        ("es_partition_cold_segments", "Segments of the partition in the cold tier", |i| {
            i.cold_segment_count as u64
        }),
        ("es_partition_cold_size_bytes", "Bytes of the partition in the cold tier", |i| i.cold_size_bytes),
    ];
    for (name, help, field) in fields {
        let rows = infos.iter().map(|(l, i)| (l.clone(), field(i) as i64));
        gauges(enc, name, help, rows)?;
    }
    Ok(())
}

fn plugins(enc: &mut DescriptorEncoder, topics: &[(String, Arc<Topic>)]) -> Fmt {
    let mut rows: Vec<(Labels, [u64; 4], Snapshot)> = Vec::new();
    for (name, topic) in topics {
        for (i, link) in topic.validators().links.iter().enumerate() {
            let labels = vec![
                ("topic", name.clone()),
                ("binding", i.to_string()),
                ("plugin", link.spec.plugin.clone()),
            ];
            let c = &link.counters;
            let counts =
                [&c.calls, &c.plugin_failures, &c.deadline_kills, &c.memory_kills].map(|a| a.load(RELAXED));
            rows.push((labels, counts, c.latency.snapshot()));
        }
    }
    let names = [
        ("es_plugin_calls", "Validator calls (a retry after a missed deadline counts again)"),
        ("es_plugin_failures", "Batches a validator failed on (trap, deadline, memory, bad answer)"),
        ("es_plugin_deadline_kills", "Calls interrupted at their deadline"),
        ("es_plugin_memory_kills", "Calls stopped for growing past the memory cap"),
    ];
    for (i, (name, help)) in names.into_iter().enumerate() {
        counters(enc, name, help, rows.iter().map(|(l, c, _)| (l.clone(), c[i])))?;
    }
    let latency = rows.into_iter().map(|(l, _, h)| (l, h)).collect();
    histograms(enc, "es_plugin_call_latency_seconds", "Validator call time", SECONDS, latency)
}

fn process_series(enc: &mut DescriptorEncoder) -> Fmt {
    let one = |v: Option<u64>| v.map(|v| (Labels::new(), v as i64)).into_iter().collect::<Vec<_>>();
    gauges(enc, "es_process_open_fds", "Open file descriptors of the broker", one(process::open_fds()))?;
    gauges(
        enc,
        "es_process_resident_memory_bytes",
        "Resident memory of the broker",
        one(process::resident_bytes()),
    )
}

/// `snake_case` of a Kafka API key's name (`ListOffsets` -> `list_offsets`).
fn kafka_api_name(key: usize) -> String {
    use es_kafka::kafka_protocol::messages::ApiKey;
    let Some(api) = i16::try_from(key).ok().and_then(|k| ApiKey::try_from(k).ok()) else {
        return format!("key_{key}");
    };
    let mut out = String::new();
    for (i, ch) in format!("{api:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// A counter family; nothing at all when it has no rows (no HELP without samples).
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, u64)>,
) -> Fmt {
    let rows: Vec<_> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, i64)>,
) -> Fmt {
    let rows: Vec<_> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Histograms whose raw values are scaled by `scale` (nanoseconds to seconds).
fn histograms(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    scale: f64,
    rows: Vec<(Labels, Snapshot)>,
) -> Fmt {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, s) in rows {
        let mut buckets: Vec<(f64, u64)> =
            s.bounds.iter().map(|b| *b as f64 * scale).zip(s.counts.iter().copied()).collect();
        buckets.push((f64::INFINITY, s.counts.last().copied().unwrap_or(0)));
        m.encode_family(&labels)?.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            s.sum as f64 * scale,
            s.count,
            &buckets,
            None,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_api_names_are_snake_case() {
        assert_eq!(kafka_api_name(0), "produce");
        assert_eq!(kafka_api_name(2), "list_offsets");
        assert_eq!(kafka_api_name(127), "key_127");
    }
}
