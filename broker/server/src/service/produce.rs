//! Produce, in two phases. [`Service::begin_produce`] routes, checks sizes, runs
//! the topic's validators, plans the dead letters (sizes and `es.dlq.*` headers
//! included) and only then appends everything, in arrival order, so a refused
//! request writes nothing. [`PendingProduce::durable`] waits for the fsyncs and
//! gives the acknowledgement. Its input is encoded batches, one per partition:
//! what binary and Kafka clients send, and what HTTP encodes its JSON records
//! into, so every protocol runs the same checks over the same bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use es_core::batch::BatchView;
use es_core::{Clock, ProducerInfo, Record, SystemClock};
use es_log::Appended;

use super::partition::{AnswerAt, Pending};
use super::quota::{Direction, Throttle};
use super::{Call, PartitionHandle, Principal, Resource, Service};
use crate::partitioner;
use crate::plugins::binding::{Checked, EncodedCheckError, Finding, Outcome, dead_letter_record};
use crate::registry::Topic;
use crate::service::error::{BrokerError, Result};

/// One partition's encoded batch.
#[derive(Debug)]
pub struct PartitionBatch {
    pub partition: u32,
    pub batch: Vec<u8>,
    /// The caller's name for each record, in batch order (HTTP: the record's index
    /// in the request); findings and errors use them. `None`: the batch position.
    pub ids: Option<Vec<usize>>,
}

/// A topic open for one produce request, and the partitioner its records are
/// routed with: explicit partition, else murmur2 of the key (as Kafka), else one
/// partition for every unkeyed record of the request (sticky).
pub struct ProduceTarget {
    topic: Arc<Topic>,
    sticky: Option<u32>,
}

impl ProduceTarget {
    pub fn route(&mut self, explicit: Option<u32>, key: Option<&[u8]>) -> Result<u32> {
        route(&self.topic, &mut self.sticky, explicit, key)
    }

    pub fn name(&self) -> String {
        self.topic.name()
    }
}

fn route(topic: &Topic, sticky: &mut Option<u32>, explicit: Option<u32>, key: Option<&[u8]>) -> Result<u32> {
    match (explicit, key) {
        (Some(p), _) => topic.partition(u64::from(p)).map(|_| p),
        (None, Some(key)) => Ok(partitioner::partition_for_key(key, topic.partition_count())),
        (None, None) => Ok(*sticky.get_or_insert_with(|| topic.sticky_partition())),
    }
}

/// Appends whose offsets are assigned; await [`PendingProduce::durable`].
pub struct PendingProduce {
    main: Vec<(u32, Vec<usize>, Option<Pending>, u64)>,
    dead: Vec<(String, u32, Vec<usize>, Pending)>,
    findings: Vec<Finding>,
    throttle: Throttle,
    /// When the produce began, for its latency once durable.
    timer: LatencyTimer,
}

/// A produce's start, its protocol and where its latency is counted.
struct LatencyTimer {
    started: std::time::Instant,
    protocol: crate::metrics::Protocol,
    metrics: Arc<crate::metrics::Metrics>,
}

/// The acknowledgement, sent once everything is durable.
#[derive(Debug)]
pub struct ProduceAck {
    pub partitions: Vec<PartitionAck>,
    pub dead_letters: Vec<DeadLettered>,
    /// Findings on records that were written anyway (`warn`) or dead-lettered.
    pub findings: Vec<Finding>,
    pub throttle: Throttle,
}

impl ProduceAck {
    /// True when an idempotent producer's retry was recognised (nothing new written).
    pub fn duplicate(&self) -> bool {
        self.partitions.iter().any(|p| p.written.is_some_and(|a| a.duplicate))
    }
}

/// What one partition's batch became.
#[derive(Debug)]
pub struct PartitionAck {
    pub partition: u32,
    /// The offsets of the records kept; `None` when every one was dead-lettered.
    pub written: Option<Appended>,
    /// Ids of the records written, in offset order (`written.base_offset + i`).
    pub ids: Vec<usize>,
    /// The partition's high watermark when the request was planned.
    pub high_watermark: u64,
}

/// One record sent to a dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLettered {
    pub id: usize,
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

/// One batch after its checks: its handle, record count and ids.
struct Planned {
    handle: PartitionHandle,
    batch: Vec<u8>,
    ids: Vec<usize>,
    idempotent: bool,
    /// The batch's producer id; -1 for a plain batch.
    producer_id: i64,
}

impl Service {
    /// Opens `topic` for a produce: authorizes, refuses while shutting down and
    /// refuses internal topics, whatever the protocol.
    pub fn produce_target(&self, principal: &Principal, topic: &str) -> Result<ProduceTarget> {
        self.authorize(principal, Call::Produce, Resource::Topic(topic.to_owned()))?;
        self.check_running()?;
        let topic = self.topic(topic)?;
        topic.check_client_write()?;
        Ok(ProduceTarget { topic, sticky: None })
    }

    /// Phase one: everything up to and including the appends. Either every batch
    /// (and every dead letter) is appended, or nothing is.
    pub async fn begin_produce(
        &self,
        principal: &Principal,
        target: ProduceTarget,
        batches: Vec<PartitionBatch>,
    ) -> Result<PendingProduce> {
        let timer = LatencyTimer {
            started: std::time::Instant::now(),
            protocol: self.protocol,
            metrics: self.metrics().clone(),
        };
        self.check_running()?;
        if batches.is_empty() {
            return Err(BrokerError::InvalidRequest("a produce carries at least one batch".into()));
        }
        self.refuse_while_throttled(principal, Direction::Produce)?;
        let topic = target.topic;
        let bytes = batches.iter().map(|b| b.batch.len()).sum();
        let throttle = self.quotas.charge(principal, Direction::Produce, bytes);
        let mut planned = Vec::with_capacity(batches.len());
        for b in batches {
            let handle = self.partition(&topic, b.partition)?;
            planned.push(inspect(handle, b.batch, b.ids)?);
        }
        self.check_producers(principal, &planned)?;
        let idempotent = planned.iter().any(|p| p.idempotent);
        if idempotent && planned.len() > 1 {
            return Err(BrokerError::InvalidRequest(
                "an idempotent produce writes one batch to one partition: give every record the same \
                 partition (or keys that map to one)"
                    .into(),
            ));
        }
        let checked = self.validate(&topic, &mut planned).await?;
        if let Some(codec) = topic.config().compression()? {
            planned = recompress(planned, codec).await?;
        }
        let dead = refusal(&topic.name(), checked.as_ref(), idempotent)?;
        let findings = checked
            .map(|c| c.findings.into_iter().filter(|f| f.outcome != Outcome::Rejected).collect())
            .unwrap_or_default();
        let plan = self.plan_dead_letters(&topic, planned, &dead)?;
        plan.append(findings, throttle, timer)
    }

    /// Opens `topic` and begins a produce of `batches` (the binary path).
    pub async fn produce(
        &self,
        principal: &Principal,
        topic: &str,
        batches: Vec<PartitionBatch>,
    ) -> Result<PendingProduce> {
        let target = self.produce_target(principal, topic)?;
        self.begin_produce(principal, target, batches).await
    }

    /// Runs the chain over every batch at once, off the async workers; `None` when
    /// the topic has no validators. Findings name records by the caller's ids.
    async fn validate(&self, topic: &Arc<Topic>, planned: &mut [Planned]) -> Result<Option<Checked>> {
        let chain = self.registry.validators(topic).await;
        if chain.is_empty() {
            return Ok(None);
        }
        if let Some(link) = chain.awaiting_blob() {
            // Never written unvalidated: refused (retriable) until the blob is here.
            return Err(BrokerError::PluginUnavailable {
                plugin: link.spec.plugin.clone(),
                sha256: link.sha256.clone(),
            });
        }
        let name: Arc<str> = Arc::from(topic.name());
        let mut checks = Vec::with_capacity(planned.len());
        for p in planned.iter_mut() {
            let (batch, max) = (std::mem::take(&mut p.batch), p.handle.config().batch_bytes_max);
            let check = chain.clone().check_encoded(name.clone(), p.handle.partition, batch, max);
            checks.push(tokio::spawn(check));
        }
        let mut all = Checked::default();
        for (p, check) in planned.iter_mut().zip(checks) {
            let failed = |reason: String| BrokerError::PluginFailed {
                topic: name.to_string(),
                plugin: "-".into(),
                reason,
            };
            let (mut checked, batch) = match check.await {
                Err(e) => return Err(failed(format!("the validation task failed: {e}"))),
                Ok(Err(EncodedCheckError::Invalid(e))) => {
                    return Err(BrokerError::InvalidBatch(e.to_string()));
                }
                Ok(Err(EncodedCheckError::Task(reason))) => return Err(failed(reason)),
                Ok(Ok(done)) => done,
            };
            p.batch = batch;
            for f in &mut checked.findings {
                f.index = p.ids.get(f.index).copied().unwrap_or(f.index);
            }
            all.merge(checked);
        }
        Ok(Some(all))
    }

    /// Splits dead-lettered records out of their batches and builds the
    /// dead-letter batches, every size checked, before anything is appended.
    fn plan_dead_letters(
        &self,
        topic: &Arc<Topic>,
        planned: Vec<Planned>,
        dead: &BTreeMap<usize, Finding>,
    ) -> Result<Plan> {
        let mut plan = Plan::default();
        let mut letters: BTreeMap<(String, u32), Vec<(usize, Record)>> = BTreeMap::new();
        let mut targets: BTreeMap<String, (Arc<Topic>, Option<u32>)> = BTreeMap::new();
        let now = SystemClock.now_ms();
        for p in planned {
            let hw = p.handle.high_watermark();
            if dead.is_empty() || !p.ids.iter().any(|id| dead.contains_key(id)) {
                plan.main.push(MainBatch {
                    handle: p.handle,
                    batch: Some(p.batch),
                    ids: p.ids,
                    high_watermark: hw,
                });
                continue;
            }
            let records = decode(&p.batch, p.handle.config().batch_bytes_max)?;
            let (mut kept, mut kept_ids) = (Vec::new(), Vec::new());
            for (record, id) in records.into_iter().zip(&p.ids) {
                let Some(finding) = dead.get(id) else {
                    kept.push(record);
                    kept_ids.push(*id);
                    continue;
                };
                let dlq = finding.dead_letter_topic.clone().expect("dead-letter findings name their topic");
                if !targets.contains_key(&dlq) {
                    targets.insert(dlq.clone(), (self.topic(&dlq)?, None));
                }
                let (dlq_topic, sticky) = targets.get_mut(&dlq).expect("inserted above");
                let partition = route(dlq_topic, sticky, None, record.key.as_deref())?;
                let letter = dead_letter_record(&record, &topic.name(), p.handle.partition, finding);
                letters.entry((dlq, partition)).or_default().push((*id, letter));
            }
            let batch = if kept.is_empty() { None } else { Some(encode(&kept, now)?) };
            let handle = p.handle;
            let batch = match batch {
                Some(b) => Some(inspect(handle.clone(), b, Some(kept_ids.clone()))?.batch),
                None => None,
            };
            plan.main.push(MainBatch { handle, batch, ids: kept_ids, high_watermark: hw });
        }
        for ((dlq, partition), records) in letters {
            let handle = self.partition(&targets[&dlq].0, partition)?;
            let (ids, records): (Vec<usize>, Vec<Record>) = records.into_iter().unzip();
            let checked = inspect(handle, encode(&records, now)?, Some(ids))?;
            plan.dead.push((dlq, checked));
        }
        Ok(plan)
    }
}

/// Re-encodes every batch whose codec is not the topic's `compression.type` (off
/// the async workers: it is CPU work), then checks each against the partition's
/// `max.message.bytes` again, since another codec may make it larger (as Kafka).
async fn recompress(planned: Vec<Planned>, codec: es_core::Compression) -> Result<Vec<Planned>> {
    super::offsets::blocking(move || {
        planned
            .into_iter()
            .map(|mut p| {
                let hard = es_core::limits::BATCH_BYTES_MAX_HARD;
                let recompressed = es_core::batch::recompress(&p.batch, codec, hard)
                    .map_err(|e| BrokerError::InvalidBatch(e.to_string()))?;
                let Some(batch) = recompressed else { return Ok(p) };
                p.batch = batch;
                let max = p.handle.config().batch_bytes_max;
                if p.batch.len() > max {
                    let partition = p.handle.partition;
                    return Err(BrokerError::BatchTooLarge { partition, size: p.batch.len(), max });
                }
                Ok(p)
            })
            .collect()
    })
    .await
}

/// Every append of one request, checked and ready.
#[derive(Default)]
struct Plan {
    main: Vec<MainBatch>,
    dead: Vec<(String, Planned)>,
}

/// A request batch as it will be appended: `None` when every record was dead-lettered.
struct MainBatch {
    handle: PartitionHandle,
    batch: Option<Vec<u8>>,
    ids: Vec<usize>,
    high_watermark: u64,
}

impl Plan {
    /// Appends in arrival order (the request's batches, then its dead letters);
    /// the fsyncs of all of them overlap. Every partition's leadership is checked
    /// before the first append, so a NotLeader here means nothing was written.
    fn append(
        self,
        findings: Vec<Finding>,
        throttle: Throttle,
        timer: LatencyTimer,
    ) -> Result<PendingProduce> {
        for m in self.main.iter().filter(|m| m.batch.is_some()) {
            m.handle.check_leader()?;
        }
        for (_, p) in &self.dead {
            p.handle.check_leader()?;
        }
        // Kafka answers acks=all once the high watermark moved, and an HTTP client
        // reading its own write expects the same; es's binary protocol is answered
        // at the commit (docs/protocol.md).
        let answer = match timer.protocol {
            crate::metrics::Protocol::Kafka | crate::metrics::Protocol::Http => AnswerAt::Seen,
            crate::metrics::Protocol::Binary => AnswerAt::Commit,
        };
        let mut main = Vec::with_capacity(self.main.len());
        for m in self.main {
            let pending = m.batch.map(|b| m.handle.append(b, answer)).transpose()?;
            main.push((m.handle.partition, m.ids, pending, m.high_watermark));
        }
        let mut dead = Vec::with_capacity(self.dead.len());
        for (topic, p) in self.dead {
            dead.push((topic, p.handle.partition, p.ids, p.handle.append(p.batch, answer)?));
        }
        Ok(PendingProduce { main, dead, findings, throttle, timer })
    }
}

impl PendingProduce {
    /// Phase two: resolves once every append of the request is durable.
    ///
    /// A NotLeader of one append (leadership moved between the check and the
    /// proposal) becomes LeadershipLost when the request made others, which may be
    /// written: a NotLeader (HTTP 421) promises that nothing was, so that a client
    /// may resend the whole request to the leader.
    pub async fn durable(self) -> Result<ProduceAck> {
        let appends = self.main.iter().filter(|m| m.2.is_some()).count() + self.dead.len();
        let settle = |e: BrokerError| match e {
            BrokerError::NotLeader { topic, partition, leader } if appends > 1 => {
                BrokerError::LeadershipLost { topic, partition, leader }
            }
            other => other,
        };
        let mut partitions = Vec::with_capacity(self.main.len());
        for (partition, ids, pending, high_watermark) in self.main {
            let written = match pending {
                Some(p) => Some(p.durable().await.map_err(settle)?),
                None => None,
            };
            partitions.push(PartitionAck { partition, written, ids, high_watermark });
        }
        let mut dead_letters = Vec::new();
        for (topic, partition, ids, pending) in self.dead {
            let appended = pending.durable().await.map_err(settle)?;
            for (i, id) in ids.into_iter().enumerate() {
                let offset = appended.base_offset + i as u64;
                dead_letters.push(DeadLettered { id, topic: topic.clone(), partition, offset });
            }
        }
        let t = &self.timer;
        t.metrics.produce_latency(t.protocol, t.started.elapsed());
        Ok(ProduceAck { partitions, dead_letters, findings: self.findings, throttle: self.throttle })
    }
}

/// The records dead-lettered, by id, or the refusal: a rejected record, a failed
/// plugin, or any dead letter in an idempotent batch (written whole or not at all).
fn refusal(topic: &str, checked: Option<&Checked>, idempotent: bool) -> Result<BTreeMap<usize, Finding>> {
    let Some(checked) = checked else { return Ok(BTreeMap::new()) };
    if let Some((plugin, reason)) = &checked.plugin_failure {
        return Err(BrokerError::PluginFailed {
            topic: topic.to_owned(),
            plugin: plugin.clone(),
            reason: reason.clone(),
        });
    }
    let dead: BTreeMap<usize, Finding> =
        checked.dead_lettered().into_iter().map(|(id, f)| (id, f.clone())).collect();
    if checked.refuses() {
        return Err(BrokerError::ValidationFailed {
            topic: topic.to_owned(),
            findings: checked.findings.clone(),
        });
    }
    if idempotent && !dead.is_empty() {
        let findings = checked
            .findings
            .iter()
            .map(|f| Finding { outcome: Outcome::Rejected, dead_letter_topic: None, ..f.clone() })
            .collect();
        return Err(BrokerError::ValidationFailed { topic: topic.to_owned(), findings });
    }
    Ok(dead)
}

impl Service {
    /// An idempotent batch must carry a producer id this broker issued: an invented
    /// id would otherwise start a sequence no one can fence (Kafka: UNKNOWN_PRODUCER_ID).
    /// With auth on, the id must also be the caller's: another key's id is
    /// refused exactly as one never issued.
    fn check_producers(&self, principal: &Principal, planned: &[Planned]) -> Result<()> {
        let auth = self.registry.auth();
        let state = auth.enabled().then(|| auth.state());
        let foreign = |id: i64| {
            let who = principal.key.clone().map_or(es_auth::Principal::Anonymous, es_auth::Principal::Key);
            state.as_ref().is_some_and(|s| !s.authorize_producer_id(&who, id).is_allowed())
        };
        match planned
            .iter()
            .map(|p| p.producer_id)
            .find(|&id| id >= 0 && (!self.registry.producer_id_issued(id) || foreign(id)))
        {
            Some(id) => Err(BrokerError::UnknownProducerId(id)),
            None => Ok(()),
        }
    }
}

/// Checks one batch against its partition's limits: the batch size, that it
/// decodes, and every record's size (key + value + headers), naming the record.
fn inspect(handle: PartitionHandle, batch: Vec<u8>, ids: Option<Vec<usize>>) -> Result<Planned> {
    let config = handle.config();
    let too_large = |size: usize| BrokerError::BatchTooLarge {
        partition: handle.partition,
        size,
        max: config.batch_bytes_max,
    };
    let hard = es_core::limits::BATCH_BYTES_MAX_HARD;
    if batch.len() > hard {
        return Err(too_large(batch.len()));
    }
    let invalid = |e: es_core::CodecError| BrokerError::InvalidBatch(e.to_string());
    let view = BatchView::parse(&batch, hard).map_err(invalid)?;
    if view.header.total_len() != batch.len() {
        return Err(BrokerError::InvalidBatch("bytes after the batch".into()));
    }
    // Transactions are not implemented: a transactional or control batch from a
    // client is refused whole rather than stored as if it were plain records.
    if view.header.is_control() || view.header.is_transactional() {
        return Err(BrokerError::InvalidBatch(
            "transactional and control batches are not supported yet; produce without a transactional id"
                .into(),
        ));
    }
    // Records first: one oversized record is named, whatever the batch's size.
    let plain = view.plain_records(hard).map_err(invalid)?;
    let mut count = 0;
    for (i, record) in plain.iter().enumerate() {
        let size = record.map_err(invalid)?.payload_len();
        if size > config.record_bytes_max {
            let index = ids.as_ref().and_then(|ids| ids.get(i).copied()).unwrap_or(i);
            return Err(BrokerError::RecordTooLarge { index, size, max: config.record_bytes_max });
        }
        count += 1;
    }
    if batch.len() > config.batch_bytes_max {
        return Err(too_large(batch.len()));
    }
    let idempotent = view.header.producer.producer_id >= 0;
    let ids = ids.unwrap_or_else(|| (0..count).collect());
    if ids.len() != count {
        return Err(BrokerError::Internal(format!("{} ids for a batch of {count} records", ids.len())));
    }
    let producer_id = view.header.producer.producer_id;
    Ok(Planned { handle, batch, ids, idempotent, producer_id })
}

/// The records of a batch, owned (only the dead-letter path needs them).
fn decode(batch: &[u8], max: usize) -> Result<Vec<Record>> {
    let invalid = |e: es_core::CodecError| BrokerError::InvalidBatch(e.to_string());
    let view = BatchView::parse(batch, max).map_err(invalid)?;
    let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD).map_err(invalid)?;
    plain.iter().map(|r| r.map(|r| r.to_record()).map_err(invalid)).collect()
}

/// One batch of `records` with es_core's encoder (the broker-built batches: HTTP's
/// and the dead letters).
pub fn encode(records: &[Record], now_ms: i64) -> Result<Vec<u8>> {
    encode_as(records, now_ms, ProducerInfo::NONE)
}

/// Like [`encode`], for an idempotent producer's batch.
pub fn encode_as(records: &[Record], now_ms: i64, producer: ProducerInfo) -> Result<Vec<u8>> {
    es_core::batch::encode(records, now_ms, producer).map_err(|e| BrokerError::InvalidRequest(e.to_string()))
}
