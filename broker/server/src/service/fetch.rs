//! Fetch: whole batches from many partitions, with one long-poll. HTTP consume
//! and binary fetch both call it; only their encodings of the answer differ.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use es_log::ReadResult;

use super::quota::Direction;
use super::{Call, PartitionHandle, Principal, Resource, Service};
use crate::limits;
use crate::service::error::{BrokerError, Result};

/// One partition to read from `offset`, at most `max_bytes` of it (at least one batch).
#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub max_bytes: usize,
    /// The leader epoch the caller knows the partition by (Kafka's
    /// `current_leader_epoch`, KIP-320); a replica with another refuses the read.
    /// `None`: not checked (HTTP, binary, Kafka before Fetch v9).
    pub leader_epoch: Option<i32>,
}

#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub partitions: Vec<FetchPartition>,
    /// Wait up to this long for `min_bytes` (at most `limits::WAIT_MS_MAX`).
    pub max_wait_ms: u64,
    pub min_bytes: usize,
    /// Budget over all partitions; the first partition with data gets a batch anyway.
    pub max_bytes: usize,
    /// Which replicas answer; the others refuse with NotLeader.
    pub from: Replicas,
}

/// Which replicas of a partition serve a fetch. Every replica serves up to its
/// committed high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// The leader only: Kafka clients before Fetch v11 (a follower answers
    /// NOT_LEADER_OR_FOLLOWER, as Kafka does) and ListOffsets.
    Leader,
    /// Any replica that knows a leader: Kafka consumers from Fetch v11 (KIP-392).
    /// One that knows none (mid-election, or a fenced leader) refuses, so clients
    /// refresh their metadata, and a fenced node sheds the connection
    /// (`kafka/fenced.rs`).
    Led,
    /// Any replica: HTTP and the binary protocol.
    Any,
}

/// Where a consumer is sent to read a partition (KIP-392's preferred read replica).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadElsewhere {
    pub node: u64,
    pub high_watermark: u64,
    pub log_start: u64,
}

/// Each partition's read, in request order; a failed partition does not fail the others.
pub type Fetched = Vec<Result<ReadResult>>;

/// Long polls parked right now (tests wait on it instead of sleeping).
#[derive(Debug, Default)]
pub struct PollGauge(AtomicUsize);

impl PollGauge {
    pub fn parked(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

struct Parked<'a>(&'a PollGauge);

impl<'a> Parked<'a> {
    fn new(gauge: &'a PollGauge) -> Self {
        gauge.0.fetch_add(1, Ordering::AcqRel);
        Parked(gauge)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Service {
    /// Reads every partition; while fewer than `min_bytes` came back, no partition
    /// failed and the wait has time left, parks until any high watermark moves or
    /// shutdown begins, then reads again. A reader that follows leaders (Kafka:
    /// `Replicas::Leader` or `Led`) also wakes when a partition's leader or leader
    /// epoch changes, and its partitions are checked again, so one this replica may
    /// no longer serve it answers at once, as Kafka's delayed fetch does. HTTP and
    /// the binary protocol read any replica's log, which a leadership change does
    /// not take away.
    pub async fn fetch(&self, principal: &Principal, req: FetchRequest) -> Result<Fetched> {
        let started = Instant::now();
        let fetched = self.fetch_polling(principal, req).await;
        self.metrics().fetch_latency(self.protocol, started.elapsed());
        fetched
    }

    async fn fetch_polling(&self, principal: &Principal, req: FetchRequest) -> Result<Fetched> {
        check_shape(&req)?;
        self.refuse_while_throttled(principal, Direction::Fetch)?;
        let handles_now = || -> Vec<Result<PartitionHandle>> {
            req.partitions.iter().map(|p| self.fetch_handle(principal, p, req.from)).collect()
        };
        let mut handles = handles_now();
        let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms);
        let mut shutdown = self.registry.shutdown_signal();
        let follows_leaders = req.from != Replicas::Any;
        loop {
            let watches: Vec<_> = handles.iter().flatten().map(PartitionHandle::subscribe).collect();
            // Each fires at once if its leader moved since its handle was made.
            let leaders: Vec<_> = match follows_leaders {
                true => handles.iter().flatten().filter_map(PartitionHandle::subscribe_leader).collect(),
                false => Vec::new(),
            };
            let reads = read_all(&req, &handles).await?;
            let total: usize = reads.iter().flatten().flatten().map(|r| r.data.len()).sum();
            let failed = handles.iter().any(Result::is_err) || reads.iter().flatten().any(Result::is_err);
            let now = Instant::now();
            let stopping = *shutdown.borrow();
            if total >= req.min_bytes || failed || now >= deadline || stopping {
                let _ = self.quotas.charge(principal, Direction::Fetch, total);
                count_out(&handles, &reads);
                return Ok(answers(handles, reads));
            }
            let _parked = Parked::new(&self.polls);
            // Each task answers whether a leader moved.
            let mut set = tokio::task::JoinSet::new();
            for mut w in watches {
                set.spawn(async move {
                    let _ = w.changed().await;
                    false
                });
            }
            for mut w in leaders {
                set.spawn(async move {
                    // A group that closed changes no more: wait on the others.
                    if w.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    true
                });
            }
            let moved = tokio::select! {
                woken = tokio::time::timeout(deadline - now, set.join_next()) => {
                    matches!(woken, Ok(Some(Ok(true))))
                }
                _ = shutdown.wait_for(|s| *s) => false,
            };
            set.abort_all();
            if moved {
                handles = handles_now();
            }
        }
    }

    /// One partition read for the one reader that does not follow leaders, the
    /// HTTP consumer session, when the partition is not served here: authorized and
    /// charged as a fetch (the caller checks the quota once per poll, before any
    /// read), then read on a replica elsewhere (`cluster/reads.rs`), from `offset`
    /// or that replica's log start, and counted in this node's per-topic fetch
    /// series. No long poll.
    pub async fn read_elsewhere(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: usize,
    ) -> Result<ReadResult> {
        let (topic, cluster) = self.placed_elsewhere(principal, topic)?;
        let read = cluster.partition_read(&topic, partition, offset, max_bytes).await?;
        let _ = self.quotas.charge(principal, Direction::Fetch, read.data.len());
        // Served to the client from here: counted here, as a local read is.
        topic.stats.fetched_batches(&read.data);
        Ok(read)
    }

    /// Refuses while the caller's fetch quota is in debt: what a reader that reads
    /// partitions here and elsewhere in one poll checks once, before any read.
    pub fn check_fetch_quota(&self, principal: &Principal) -> Result<()> {
        self.refuse_while_throttled(principal, Direction::Fetch)
    }

    /// A partition's ends asked of a replica elsewhere, for the HTTP consumer
    /// session (its start positions); authorized as a fetch.
    pub async fn ends_elsewhere(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
    ) -> Result<crate::cluster::ends::PartitionEnds> {
        let (topic, cluster) = self.placed_elsewhere(principal, topic)?;
        cluster.partition_ends_elsewhere(&topic, partition).await
    }

    fn placed_elsewhere(
        &self,
        principal: &Principal,
        topic: &str,
    ) -> Result<(std::sync::Arc<crate::registry::Topic>, std::sync::Arc<crate::cluster::Cluster>)> {
        self.authorize(principal, Call::Fetch, Resource::Topic(topic.to_owned()))?;
        let topic = self.topic(topic)?;
        let cluster = self
            .registry
            .cluster()
            .cloned()
            .ok_or_else(|| BrokerError::Internal("a single node has no other replica".into()))?;
        Ok((topic, cluster))
    }

    /// Long polls parked now.
    pub fn parked_polls(&self) -> usize {
        self.polls.parked()
    }

    /// The partition a fetch reads, on a replica `from` allows.
    fn fetch_handle(
        &self,
        principal: &Principal,
        p: &FetchPartition,
        from: Replicas,
    ) -> Result<PartitionHandle> {
        self.authorize(principal, Call::Fetch, Resource::Topic(p.topic.clone()))?;
        let handle = self.partition(&self.topic(&p.topic)?, p.partition)?;
        handle.check_read(from, p.leader_epoch)?;
        Ok(handle)
    }

    /// KIP-392, for a Kafka fetch that names the consumer's rack: the in-sync
    /// replica in that rack to read `partition` from at `offset`, when this node
    /// leads it from another rack, with the partition's high watermark and log
    /// start for the answer. `None`: read here, as for an offset outside log start
    /// to high watermark: the read answers it (OFFSET_OUT_OF_RANGE below the log
    /// start or past the log's end, so the consumer resets rather than being sent
    /// to a replica that would answer the same and back; nothing yet in between),
    /// or for a read this replica refuses (a stale leader epoch: the read says so).
    /// The caller authorized the topic for fetching.
    pub fn preferred_read_replica(&self, at: &FetchPartition, rack: &str) -> Option<ReadElsewhere> {
        let handle = self.partition(&self.topic(&at.topic).ok()?, at.partition).ok()?;
        handle.check_read(Replicas::Led, at.leader_epoch).ok()?;
        let (log_start, high_watermark) = (handle.info().log_start_offset, handle.high_watermark());
        let offset = at.offset;
        if offset < log_start || offset > high_watermark {
            return None;
        }
        let node = handle.preferred_read_replica(rack)?;
        Some(ReadElsewhere { node, high_watermark, log_start })
    }
}

/// The limits every protocol shares: 1 to `FETCH_PARTITIONS_MAX` partitions, a
/// wait no longer than `WAIT_MS_MAX` (an error, never silently clamped).
fn check_shape(req: &FetchRequest) -> Result<()> {
    if req.partitions.is_empty() || req.partitions.len() > limits::FETCH_PARTITIONS_MAX {
        return Err(BrokerError::InvalidRequest(format!(
            "a fetch names 1 to {} partitions",
            limits::FETCH_PARTITIONS_MAX
        )));
    }
    check_wait(req.max_wait_ms)
}

/// A long poll waits at most `WAIT_MS_MAX`: longer is an error on every
/// protocol, never silently clamped.
pub fn check_wait(wait_ms: u64) -> Result<()> {
    if wait_ms > limits::WAIT_MS_MAX {
        return Err(BrokerError::InvalidRequest(format!(
            "wait_ms is at most {}; got {wait_ms}",
            limits::WAIT_MS_MAX
        )));
    }
    Ok(())
}

/// One read of every partition found, on the blocking pool (reads may touch
/// disk); `None` where the partition's lookup failed.
async fn read_all(
    req: &FetchRequest,
    handles: &[Result<PartitionHandle>],
) -> Result<Vec<Option<Result<ReadResult>>>> {
    let jobs: Vec<(u64, usize, Option<PartitionHandle>)> = req
        .partitions
        .iter()
        .zip(handles)
        .map(|(p, h)| (p.offset, p.max_bytes, h.as_ref().ok().cloned()))
        .collect();
    let budget = req.max_bytes;
    tokio::task::spawn_blocking(move || {
        let mut used = 0usize;
        jobs.into_iter()
            .map(|(offset, part_max, handle)| {
                let handle = handle?;
                // The first partition with data always gets at least one whole batch.
                let room = part_max.min(budget.saturating_sub(used)).max(1);
                let read = handle.read(offset, room);
                if let Ok(r) = &read {
                    used += r.data.len();
                }
                Some(read)
            })
            .collect()
    })
    .await
    .map_err(|e| BrokerError::Internal(format!("the fetch task failed: {e}")))
}

/// Counts each topic's records and bytes out (whole batches, as read).
fn count_out(handles: &[Result<PartitionHandle>], reads: &[Option<Result<ReadResult>>]) {
    for (handle, read) in handles.iter().zip(reads) {
        if let (Ok(h), Some(Ok(r))) = (handle, read) {
            h.topic.stats.fetched_batches(&r.data);
        }
    }
}

/// Each partition's answer: its lookup error, or its read.
fn answers(handles: Vec<Result<PartitionHandle>>, reads: Vec<Option<Result<ReadResult>>>) -> Fetched {
    handles
        .into_iter()
        .zip(reads)
        .map(|(handle, read)| match (handle, read) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(read)) => read,
            (Ok(_), None) => Err(BrokerError::Internal("a fetch partition was not read".into())),
        })
        .collect()
}
