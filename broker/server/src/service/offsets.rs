//! Offset resolution, once for every protocol. Kafka's ListOffsets semantics:
//! `Earliest` is the log start, `Latest` the high watermark, and `Timestamp(ts)`
//! the first offset whose record timestamp is >= ts, or `None` when every record
//! is older (Kafka answers offset -1). As in Kafka, the timestamp -1 means latest
//! and -2 earliest; any other negative timestamp is refused. A consumer starting
//! "at a timestamp" with no such record starts at the high watermark: it waits for
//! the next record.

use es_core::LeaderEpoch;
use es_log::PartitionInfo;

use super::fetch::Replicas;
use super::{Call, PartitionHandle, Principal, Resource, Service};
use crate::service::error::{BrokerError, Result};

/// Which offset to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    Timestamp(i64),
    /// The first offset holding the greatest record timestamp (Kafka's -3, KIP-734).
    MaxTimestamp,
}

/// Kafka's ListOffsets timestamp for "latest".
pub const LATEST_TIMESTAMP: i64 = -1;
/// Kafka's ListOffsets timestamp for "earliest".
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// Kafka's ListOffsets timestamp for "the record with the greatest timestamp".
pub const MAX_TIMESTAMP: i64 = -3;

impl OffsetSpec {
    /// A timestamp as a client gives it, with Kafka's meanings for -1 and -2.
    pub fn from_timestamp(ts: i64) -> Result<OffsetSpec> {
        match ts {
            LATEST_TIMESTAMP => Ok(OffsetSpec::Latest),
            EARLIEST_TIMESTAMP => Ok(OffsetSpec::Earliest),
            MAX_TIMESTAMP => Ok(OffsetSpec::MaxTimestamp),
            ts if ts >= 0 => Ok(OffsetSpec::Timestamp(ts)),
            ts => Err(BrokerError::InvalidRequest(format!(
                "timestamp must be milliseconds since the epoch (>= 0), -1 (latest), -2 (earliest) or -3 \
                 (the greatest timestamp); got {ts}"
            ))),
        }
    }
}

/// Where a consumer starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// An exact offset; outside [log start, high watermark] it is `OffsetOutOfRange`.
    At(u64),
    Spec(OffsetSpec),
}

/// One partition's offsets, with the timestamp lookup when one was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub partition: u32,
    pub earliest: u64,
    pub latest: u64,
    /// `Some(lookup)` when a timestamp was given.
    pub at_timestamp: Option<Option<u64>>,
}

/// Kafka's OffsetForLeaderEpoch answer for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochEnd {
    /// The largest epoch <= the one asked this log has, and where it ends: the first
    /// offset of the next epoch, or the high watermark for the current one (never
    /// past it: a reader is never pointed beyond what is durable).
    At { epoch: i32, end_offset: u64 },
    /// The epoch asked is undefined (-1) or newer than any this log knows: Kafka's
    /// (-1, -1).
    Undefined,
}

/// Where `epoch` ends on a log whose epochs start at `starts` (oldest first), whose
/// current epoch is `current` and whose high watermark is `hw`; Kafka's
/// `LeaderEpochFileCache.endOffsetFor`, clamped to the high watermark.
pub fn epoch_end(starts: &[(LeaderEpoch, u64)], epoch: i32, current: LeaderEpoch, hw: u64) -> EpochEnd {
    if epoch < 0 || epoch > current.0 {
        return EpochEnd::Undefined;
    }
    if epoch == current.0 {
        return EpochEnd::At { epoch, end_offset: hw };
    }
    let higher = starts.iter().find(|(e, _)| e.0 > epoch);
    let floor = starts.iter().rev().find(|(e, _)| e.0 <= epoch);
    let at = |epoch: i32, end: u64| EpochEnd::At { epoch, end_offset: end.min(hw) };
    match (floor, higher) {
        // Nothing after it: it runs to the end (the current epoch, or an epoch
        // whose successors have appended nothing yet).
        (Some((e, _)), None) => at(e.0, hw),
        (None, None) => at(epoch, hw),
        (Some((e, _)), Some((_, next))) => at(e.0, *next),
        // Older than every epoch this log has: it ends where the first one starts.
        (None, Some((_, first))) => at(epoch, *first),
    }
}

/// The leader epoch of the batch holding `offset` (the epoch a reader positioned
/// there carries; the offset after the last is in the latest epoch), or `current`
/// when the log records no epoch at or below it.
pub fn epoch_of(starts: &[(LeaderEpoch, u64)], offset: u64, current: LeaderEpoch) -> LeaderEpoch {
    starts.iter().rev().find(|(_, start)| *start <= offset).map_or(current, |(e, _)| *e)
}

/// Resolves `spec` on one partition (blocking: a timestamp lookup reads indexes).
pub fn resolve(handle: &PartitionHandle, spec: OffsetSpec) -> Result<Option<u64>> {
    // Every protocol's timestamp passes here, so -1/-2 mean the same everywhere.
    let spec = match spec {
        OffsetSpec::Timestamp(ts) => OffsetSpec::from_timestamp(ts)?,
        OffsetSpec::Earliest | OffsetSpec::Latest | OffsetSpec::MaxTimestamp => spec,
    };
    let info = handle.info();
    match spec {
        OffsetSpec::Earliest => Ok(Some(info.log_start_offset)),
        OffsetSpec::Latest => Ok(Some(info.high_watermark)),
        OffsetSpec::MaxTimestamp => {
            Ok(handle.max_timestamp_offset()?.map(|(o, _)| o.max(info.log_start_offset)))
        }
        // Retention may have removed the segment holding the match's batch start.
        OffsetSpec::Timestamp(ts) => {
            Ok(handle.offset_for_timestamp(ts)?.map(|o| o.max(info.log_start_offset)))
        }
    }
}

/// The offset a read starting at `start` begins with.
pub fn start_offset(handle: &PartitionHandle, start: Start) -> Result<u64> {
    match start {
        Start::At(offset) => {
            let info = handle.info();
            if offset < info.log_start_offset || offset > info.high_watermark {
                return Err(BrokerError::OffsetOutOfRange {
                    partition: handle.partition,
                    requested: offset,
                    log_start: info.log_start_offset,
                    high_watermark: info.high_watermark,
                });
            }
            Ok(offset)
        }
        Start::Spec(spec) => Ok(resolve(handle, spec)?.unwrap_or_else(|| handle.high_watermark())),
    }
}

impl Service {
    /// One partition's offset for `spec`, on a replica `from` allows and that has
    /// the caller's `leader_epoch`, as for a fetch ([`PartitionHandle::check_read`]).
    pub async fn list_offset(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
        from: Replicas,
        leader_epoch: Option<i32>,
    ) -> Result<Option<u64>> {
        let handle = self.read_handle(principal, Call::ListOffsets, topic, partition)?;
        handle.check_read(from, leader_epoch)?;
        blocking(move || resolve(&handle, spec)).await
    }

    /// The offset a consume of one partition starts at.
    pub async fn start_offset(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        start: Start,
    ) -> Result<u64> {
        let handle = self.read_handle(principal, Call::Fetch, topic, partition)?;
        blocking(move || start_offset(&handle, start)).await
    }

    /// Every partition's offsets, with a timestamp lookup when `timestamp` is given.
    pub async fn topic_offsets(
        &self,
        principal: &Principal,
        topic: &str,
        timestamp: Option<i64>,
    ) -> Result<Vec<PartitionOffsets>> {
        self.authorize(principal, Call::ListOffsets, Resource::Topic(topic.to_owned()))?;
        // Refused before any lookup, so a bad timestamp on a missing topic is a 400.
        timestamp.map(OffsetSpec::from_timestamp).transpose()?;
        let topic = self.topic(topic)?;
        let handles =
            (0..topic.partition_count()).map(|p| self.partition(&topic, p)).collect::<Result<Vec<_>>>()?;
        blocking(move || {
            let mut out = Vec::with_capacity(handles.len());
            for h in &handles {
                let info = h.info();
                let at_timestamp = timestamp.map(|ts| resolve(h, OffsetSpec::Timestamp(ts))).transpose()?;
                out.push(PartitionOffsets {
                    partition: h.partition,
                    earliest: info.log_start_offset,
                    latest: info.high_watermark,
                    at_timestamp,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Kafka's DeleteRecords on one partition: records below `before` (`None`: the
    /// high watermark) stop being served; answers the new log start. Internal
    /// topics are the broker's own, so refused as a write to them is.
    pub async fn delete_records(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        before: Option<u64>,
    ) -> Result<u64> {
        let handle = self.read_handle(principal, Call::DeleteRecords, topic, partition)?;
        self.check_running()?;
        handle.topic.check_client_write()?;
        blocking(move || handle.delete_records_before(before.unwrap_or_else(|| handle.high_watermark())))
            .await
    }

    /// The leader epoch of the batch holding `offset` (ListOffsets answers it, and a
    /// Kafka consumer validates its position with it after a leader change).
    pub fn offset_epoch(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        offset: u64,
    ) -> Result<LeaderEpoch> {
        let handle = self.read_handle(principal, Call::ListOffsets, topic, partition)?;
        Ok(epoch_of(&handle.epoch_starts(), offset, handle.leader_epoch))
    }

    /// Kafka's OffsetForLeaderEpoch on one partition, as its leader answers it.
    /// `current_leader_epoch` (`None`: not named) fences a caller with stale
    /// metadata (`BrokerError::LeaderEpoch`).
    pub fn epoch_end_offset(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        current_leader_epoch: Option<i32>,
        epoch: i32,
    ) -> Result<EpochEnd> {
        let handle = self.read_handle(principal, Call::ListOffsets, topic, partition)?;
        handle.check_read(Replicas::Leader, current_leader_epoch)?;
        Ok(epoch_end(&handle.epoch_starts(), epoch, handle.leader_epoch, handle.high_watermark()))
    }

    /// Kafka's DescribeProducers on one partition: its idempotent producers.
    pub fn describe_producers(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
    ) -> Result<Vec<es_log::ProducerSummary>> {
        Ok(self.read_handle(principal, Call::DescribeProducers, topic, partition)?.producers())
    }

    /// One partition's log start and high watermark, as a reader may see them
    /// (in memory: no blocking work).
    pub fn partition_info(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionInfo> {
        Ok(self.read_handle(principal, Call::Fetch, topic, partition)?.info())
    }

    fn read_handle(
        &self,
        principal: &Principal,
        call: Call,
        topic: &str,
        partition: u32,
    ) -> Result<PartitionHandle> {
        self.authorize(principal, call, Resource::Topic(topic.to_owned()))?;
        self.partition(&self.topic(topic)?, partition)
    }
}

/// Runs blocking registry or log work off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BrokerError::Internal(format!("blocking task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_ends_where_the_next_begins_as_in_kafka() {
        let e = LeaderEpoch;
        let starts = [(e(1), 0), (e(3), 10), (e(4), 25)];
        let at = |epoch, end_offset| EpochEnd::At { epoch, end_offset };
        // The current epoch runs to the high watermark.
        assert_eq!(epoch_end(&starts, 4, e(4), 30), at(4, 30));
        assert_eq!(epoch_end(&starts, 3, e(4), 30), at(3, 25));
        // An epoch this log never had answers the largest one below it.
        assert_eq!(epoch_end(&starts, 2, e(4), 30), at(1, 10));
        // Older than every epoch: it ends where the first one starts.
        assert_eq!(epoch_end(&starts, 0, e(4), 30), at(0, 0));
        // Undefined, or newer than the leader's: (-1, -1).
        assert_eq!(epoch_end(&starts, -1, e(4), 30), EpochEnd::Undefined);
        assert_eq!(epoch_end(&starts, 5, e(4), 30), EpochEnd::Undefined);
        // A leader elected in epoch 5 that has appended nothing yet: its epoch
        // runs to the high watermark (Kafka's leader records its epoch on election).
        assert_eq!(epoch_end(&starts, 5, e(5), 30), at(5, 30));
        // Never past the high watermark (an uncommitted tail of a new epoch).
        assert_eq!(epoch_end(&starts, 3, e(4), 20), at(3, 20));
        // A single node: one epoch, maybe none recorded yet.
        assert_eq!(epoch_end(&[], 0, e(0), 7), at(0, 7));
        assert_eq!(epoch_end(&[(e(0), 0)], 0, e(0), 7), at(0, 7));
    }

    #[test]
    fn an_offset_is_in_the_epoch_of_the_batch_holding_it() {
        let e = LeaderEpoch;
        let starts = [(e(1), 0), (e(3), 10), (e(4), 25)];
        assert_eq!(epoch_of(&starts, 0, e(4)), e(1));
        assert_eq!(epoch_of(&starts, 9, e(4)), e(1));
        assert_eq!(epoch_of(&starts, 10, e(4)), e(3));
        assert_eq!(epoch_of(&starts, 30, e(4)), e(4));
        assert_eq!(epoch_of(&[], 5, e(0)), e(0));
        // What ListOffsets answers validates: the epoch's end is at or after it.
        for offset in [0, 9, 10, 24, 25, 30] {
            let epoch = epoch_of(&starts, offset, e(4));
            let EpochEnd::At { end_offset, .. } = epoch_end(&starts, epoch.0, e(4), 30) else { panic!() };
            assert!(end_offset >= offset, "offset {offset}: epoch {epoch:?} ends at {end_offset}");
        }
    }

    #[test]
    fn timestamps_take_kafkas_meanings() {
        assert_eq!(OffsetSpec::from_timestamp(-1).unwrap(), OffsetSpec::Latest);
        assert_eq!(OffsetSpec::from_timestamp(-2).unwrap(), OffsetSpec::Earliest);
        assert_eq!(OffsetSpec::from_timestamp(0).unwrap(), OffsetSpec::Timestamp(0));
        assert_eq!(OffsetSpec::from_timestamp(-3).unwrap(), OffsetSpec::MaxTimestamp);
        assert!(matches!(OffsetSpec::from_timestamp(-4), Err(BrokerError::InvalidRequest(_))));
        assert!(matches!(OffsetSpec::from_timestamp(i64::MIN), Err(BrokerError::InvalidRequest(_))));
    }
}
