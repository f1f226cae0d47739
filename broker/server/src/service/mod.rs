//! The protocol-neutral service every listener calls (HTTP, binary, and later
//! Kafka): typed requests in, typed results or a [`BrokerError`] out. A listener
//! keeps only its framing, wire types, wire-shape limits and encoding.
//!
//! The seams the next issues plug into live here, one place each:
//! authorization ([`authz`]), quotas ([`quota`]), leader routing and the log
//! append ([`partition`]: a [`PartitionHandle`] carries the leader epoch and is
//! the only thing that appends, so replication replaces it without touching a
//! listener).

pub mod admin;
pub mod authz;
pub mod error;
pub mod fetch;
pub mod groups;
pub mod kafka_groups;
pub mod offsets;
pub mod partition;
pub mod plugins;
pub mod produce;
pub mod quota;
pub mod snapshot;

use std::sync::Arc;

pub use authz::{Access, Call, Principal, Resource};
pub use error::{BrokerError, Result};
pub use partition::PartitionHandle;

use crate::metrics::Protocol;
use crate::registry::{Registry, Topic};

/// The broker as the listeners see it. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    registry: Arc<Registry>,
    quotas: Arc<quota::Quotas>,
    polls: Arc<fetch::PollGauge>,
    /// The listener this service answers for: its latencies are counted under it.
    protocol: Protocol,
}

impl Service {
    pub fn new(registry: Arc<Registry>) -> Service {
        let polls = registry.poll_gauge();
        let quotas = Arc::new(quota::Quotas::new(registry.auth().clone()));
        Service { registry, quotas, polls, protocol: Protocol::Binary }
    }

    /// This service as `protocol`'s listener uses it (latency metrics per protocol).
    pub fn with_protocol(mut self, protocol: Protocol) -> Service {
        self.protocol = protocol;
        self
    }

    /// Refuses a request of `d` while `principal` is throttled, on the listeners
    /// that refuse (HTTP, binary). Kafka is never refused: it mutes the connection
    /// instead (KIP-219), after answering.
    fn refuse_while_throttled(&self, principal: &Principal, d: quota::Direction) -> Result<()> {
        match self.protocol {
            Protocol::Http | Protocol::Binary => self.quotas.check(principal, d),
            Protocol::Kafka => Ok(()),
        }
    }

    /// How long `principal` must wait before its next request of `d` (0: not at
    /// all), charging nothing: the `throttle_time_ms` a Kafka response carries.
    pub fn throttle_ms(&self, principal: &Principal, d: quota::Direction) -> u64 {
        self.quotas.pending(principal, d).ms
    }

    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        self.registry.metrics()
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Authorizes `call` on `resource` for `principal`: always the first step, before
    /// any lookup, so a refusal never says whether the resource exists.
    fn authorize(&self, principal: &Principal, call: Call, resource: Resource) -> Result<()> {
        authz::authorize(self.registry.auth(), principal, &authz::Operation { call, resource })
    }

    fn check_running(&self) -> Result<()> {
        if self.registry.is_shutting_down() {
            return Err(BrokerError::ShuttingDown);
        }
        Ok(())
    }

    fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.registry.topic(name)
    }

    /// The handle a read or write of one partition goes through: the leader
    /// routing seam. A single node leads every partition it has; in a cluster the
    /// partition's Raft group says who leads.
    ///
    /// A cluster's data partition without a group here (placed on other nodes, or
    /// its group not open yet) is never read or written locally: NotLeader, with
    /// the leader its replicas announce when known.
    fn partition(&self, topic: &Arc<Topic>, partition: u32) -> Result<PartitionHandle> {
        if let Some(cluster) = self.registry.cluster()
            && topic.kind != crate::registry::TopicKind::Internal
        {
            if let Some(group) = cluster.replica(topic, partition) {
                // A replica the partition moved away from serves only while it
                // still leads (the move hands leadership over once the new
                // replicas caught up): as a follower its copy is about to be
                // discarded, and a reader there would see the log go back to 0.
                if group.is_leader() || self.registry.hosts(topic, partition) {
                    return PartitionHandle::replicated(topic, partition, cluster, group);
                }
                return Err(cluster.not_leader(topic.name(), partition, group.leader()));
            }
            topic.partition(u64::from(partition))?;
            let leader = cluster.remote(topic, partition).and_then(|r| r.leader);
            return Err(cluster.not_leader(topic.name(), partition, leader));
        }
        PartitionHandle::local(topic, partition)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use es_core::{ProducerInfo, Record};

    use super::*;
    use crate::registry::BrokerOptions;
    use crate::service::fetch::{FetchPartition, FetchRequest, Replicas};
    use crate::service::produce::PartitionBatch;

    fn service(dir: &std::path::Path) -> Service {
        Service::new(Registry::open(BrokerOptions::new(dir)).unwrap().0)
    }

    fn batch(values: &[&str]) -> Vec<u8> {
        let records: Vec<Record> = values.iter().map(|v| Record::from_value(v.to_string())).collect();
        es_core::batch::encode(&records, 1_000, ProducerInfo::NONE).unwrap()
    }

    fn one(partition: u32, values: &[&str]) -> Vec<PartitionBatch> {
        vec![PartitionBatch { partition, batch: batch(values), ids: None }]
    }

    fn fetch_req(topic: &str, wait_ms: u64) -> FetchRequest {
        let p = FetchPartition {
            topic: topic.into(),
            partition: 0,
            offset: 0,
            max_bytes: 1 << 20,
            leader_epoch: None,
        };
        FetchRequest {
            partitions: vec![p],
            max_wait_ms: wait_ms,
            min_bytes: 1,
            max_bytes: 1 << 20,
            from: Replicas::Any,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_long_poll_wakes_on_the_append() {
        let dir = tempfile::tempdir().unwrap();
        let s = service(dir.path());
        let who = &Principal::ANONYMOUS;
        let small = BTreeMap::from([("max.message.bytes".to_owned(), serde_json::json!(4096))]);
        s.create_topic(who, "t".into(), 1, small).await.unwrap();
        let poller = {
            let s = s.clone();
            tokio::spawn(async move { s.fetch(&Principal::ANONYMOUS, fetch_req("t", 30_000)).await })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.parked_polls() == 0 {
            assert!(Instant::now() < deadline, "the poll never parked");
            tokio::task::yield_now().await;
        }
        let started = Instant::now();
        let ack = s.produce(who, "t", one(0, &["a", "b"])).await.unwrap().durable().await.unwrap();
        assert_eq!(ack.partitions[0].written.map(|a| (a.base_offset, a.last_offset)), Some((0, 1)));
        let read = poller.await.unwrap().unwrap().pop().unwrap().unwrap();
        assert!(!read.data.is_empty());
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(s.parked_polls(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_limits_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let s = service(dir.path());
        let who = &Principal::ANONYMOUS;
        let small = BTreeMap::from([("max.message.bytes".to_owned(), serde_json::json!(4096))]);
        s.create_topic(who, "t".into(), 1, small).await.unwrap();
        let over = s.fetch(who, fetch_req("t", crate::limits::WAIT_MS_MAX + 1)).await.err().unwrap();
        assert_eq!(over.code(), "invalid_request");
        for internal in ["__es_offsets", "__es_schemas"] {
            let e = s.produce(who, internal, one(0, &["x"])).await.err().unwrap();
            assert_eq!(e.code(), "internal_topic", "{internal}");
        }
        let big = "x".repeat(4097);
        let e = s.produce(who, "t", one(0, &["ok", &big])).await.err().unwrap();
        assert!(matches!(e, BrokerError::RecordTooLarge { index: 1, .. }), "{e:?}");
        let e = s.produce(who, "t", vec![]).await.err().unwrap();
        assert_eq!(e.code(), "invalid_request");
        s.registry().begin_shutdown();
        let e = s.produce(who, "t", one(0, &["late"])).await.err().unwrap();
        assert_eq!(e.code(), "shutting_down");
        let offsets = s.topic_offsets(who, "t", Some(0)).await.unwrap();
        assert_eq!((offsets[0].latest, offsets[0].at_timestamp), (0, Some(None)));
    }
}
