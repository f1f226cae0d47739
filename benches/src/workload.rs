//! The payload benchmarks write: one batch of fixed-size records, encoded once up
//! front so the measured loop spends no time in the codec.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::Bytes;
use es_core::{ProducerInfo, Record};

/// A pre-encoded batch and what it holds.
#[derive(Debug)]
pub struct Workload {
    /// The encoded batch (header included); appends stamp offset and term in place.
    pub batch: Vec<u8>,
    pub records_per_batch: usize,
    pub record_bytes: usize,
}

impl Workload {
    /// `records` records, each with a `record_bytes`-byte value, no key, no headers.
    pub fn encode(records: usize, record_bytes: usize) -> Result<Workload> {
        let value: Vec<u8> = (0..record_bytes).map(|i| (i % 251) as u8).collect();
        let value = Bytes::from(value);
        let batch: Vec<Record> = (0..records).map(|_| Record::from_value(value.clone())).collect();
        let batch = es_core::batch::encode(&batch, now_ms(), ProducerInfo::NONE)
            .context("encoding the benchmark batch")?;
        Ok(Workload { batch, records_per_batch: records, record_bytes })
    }

    /// `records` keyed records ([`json_records`]), for validators that check keys
    /// and JSON values.
    pub fn encode_json(records: usize, record_bytes: usize) -> Result<Workload> {
        let batch: Vec<Record> = json_records(records, record_bytes)?
            .into_iter()
            .map(|(k, v)| Record::keyed(Bytes::from(k), Bytes::from(v)))
            .collect();
        let batch = es_core::batch::encode(&batch, now_ms(), ProducerInfo::NONE)
            .context("encoding the benchmark batch")?;
        Ok(Workload { batch, records_per_batch: records, record_bytes })
    }

    /// The same records with the records section compressed, as a Kafka client
    /// with `compression.type` set would send them.
    pub fn compressed(&self, codec: es_core::compression::Compression) -> Result<Workload> {
        let batch =
            es_core::batch::compress(&self.batch, codec).context("compressing the benchmark batch")?;
        Ok(Workload { batch, records_per_batch: self.records_per_batch, record_bytes: self.record_bytes })
    }

    pub fn batch_bytes(&self) -> usize {
        self.batch.len()
    }
}

/// Which partitions a producer's requests go to: producer `worker` of `workers`
/// sends its `request`-th batch to `(worker + request * workers) mod partitions`.
/// With as many producers as partitions (or a multiple) each keeps one partition;
/// with fewer, each moves on after every batch, as a Kafka producer's sticky
/// partitioner does, so one producer still writes to every partition.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub worker: usize,
    pub workers: usize,
    pub partitions: usize,
}

impl Spread {
    pub fn partition(&self, request: u64) -> usize {
        let step = (request as usize % self.partitions.max(1)) * self.workers;
        (self.worker + step) % self.partitions.max(1)
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// `records` (key, value) pairs: 8-byte keys `key00000`.. and values that are JSON
/// objects of exactly `record_bytes` bytes,
/// `{"id":7,"amount":12.5,"currency":"EUR","note":"xx..."}`, padded in `note`.
pub fn json_records(records: usize, record_bytes: usize) -> Result<Vec<(String, String)>> {
    (0..records)
        .map(|i| {
            let head = format!(r#"{{"id":{i},"amount":12.5,"currency":"EUR","note":""#);
            let pad = record_bytes.checked_sub(head.len() + 2).with_context(|| {
                format!("JSON records need at least {} bytes, not {record_bytes}", head.len() + 2)
            })?;
            Ok((format!("key{:05}", i % 100_000), format!("{head}{}\"}}", "x".repeat(pad))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Spread;

    fn first(worker: usize, workers: usize, partitions: usize) -> Vec<usize> {
        let s = Spread { worker, workers, partitions };
        (0..8).map(|r| s.partition(r)).collect()
    }

    #[test]
    fn producers_keep_a_partition_when_they_cover_them_and_rotate_otherwise() {
        assert_eq!(first(5, 8, 4), vec![1; 8]);
        assert_eq!(first(3, 8, 1), vec![0; 8]);
        assert_eq!(first(0, 1, 4), vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(first(1, 2, 4), vec![1, 3, 1, 3, 1, 3, 1, 3]);
    }
}
