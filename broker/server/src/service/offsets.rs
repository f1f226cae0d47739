//! Offset resolution, once for every protocol. Kafka's ListOffsets semantics:
//! `Earliest` is the log start, `Latest` the high watermark, and `Timestamp(ts)`
//! the first offset whose record timestamp is >= ts, or `None` when every record
//! is older (Kafka answers offset -1). As in Kafka, the timestamp -1 means latest
//! and -2 earliest; any other negative timestamp is refused. A consumer starting
//! "at a timestamp" with no such record starts at the high watermark: it waits for
//! the next record.

use es_log::PartitionInfo;

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
    /// One partition's offset for `spec`.
    pub async fn list_offset(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Option<u64>> {
        let handle = self.read_handle(principal, Call::ListOffsets, topic, partition)?;
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
    fn timestamps_take_kafkas_meanings() {
        assert_eq!(OffsetSpec::from_timestamp(-1).unwrap(), OffsetSpec::Latest);
        assert_eq!(OffsetSpec::from_timestamp(-2).unwrap(), OffsetSpec::Earliest);
        assert_eq!(OffsetSpec::from_timestamp(0).unwrap(), OffsetSpec::Timestamp(0));
        assert_eq!(OffsetSpec::from_timestamp(-3).unwrap(), OffsetSpec::MaxTimestamp);
        assert!(matches!(OffsetSpec::from_timestamp(-4), Err(BrokerError::InvalidRequest(_))));
        assert!(matches!(OffsetSpec::from_timestamp(i64::MIN), Err(BrokerError::InvalidRequest(_))));
    }
}
