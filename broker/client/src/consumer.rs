//! A fetch-loop consumer over explicitly assigned partitions.

use std::sync::Arc;

use bytes::Bytes;
use es_core::BatchView;
use es_protocol::{ErrorCode, FetchPartition, OffsetSpec};

use crate::client::Client;
use crate::error::{ClientError, Result};

/// One consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

#[derive(Debug)]
pub struct Consumer {
    client: Arc<Client>,
    positions: Vec<(String, u32, u64)>,
    pub max_wait_ms: u32,
    pub max_bytes: u32,
    pub partition_max_bytes: u32,
}

impl Consumer {
    pub fn new(client: Arc<Client>) -> Consumer {
        Consumer {
            client,
            positions: Vec::new(),
            max_wait_ms: 500,
            max_bytes: 4 << 20,
            partition_max_bytes: 4 << 20,
        }
    }

    /// Starts reading `topic`/`partition` at `spec` (earliest, latest or a time).
    pub async fn assign(&mut self, topic: &str, partition: u32, spec: OffsetSpec) -> Result<u64> {
        let offset = match self.client.list_offsets(topic, partition, spec).await? {
            Some(o) => o,
            None => self.client.list_offsets(topic, partition, OffsetSpec::Latest).await?.unwrap_or(0),
        };
        self.seek(topic, partition, offset);
        Ok(offset)
    }

    /// Sets the next offset to read for a partition.
    pub fn seek(&mut self, topic: &str, partition: u32, offset: u64) {
        match self.positions.iter_mut().find(|(t, p, _)| t == topic && *p == partition) {
            Some(pos) => pos.2 = offset,
            None => self.positions.push((topic.to_owned(), partition, offset)),
        }
    }

    pub fn position(&self, topic: &str, partition: u32) -> Option<u64> {
        self.positions.iter().find(|(t, p, _)| t == topic && *p == partition).map(|x| x.2)
    }

    /// One fetch over every assigned partition; waits up to `max_wait_ms` for data.
    pub async fn poll(&mut self) -> Result<Vec<Consumed>> {
        let request: Vec<FetchPartition> = self
            .positions
            .iter()
            .map(|(topic, partition, offset)| FetchPartition {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                max_bytes: self.partition_max_bytes,
            })
            .collect();
        let results = self.client.fetch(self.max_wait_ms, self.max_bytes, request).await?;
        let mut out = Vec::new();
        for (pos, result) in self.positions.iter_mut().zip(results) {
            // Not replicated where it was asked: the client now routes it to its
            // leader, and the next poll reads it there.
            if result.error == ErrorCode::NotLeader {
                continue;
            }
            if result.error != ErrorCode::None {
                return Err(ClientError::Broker {
                    code: result.error,
                    message: format!("fetching {}-{} at {}", pos.0, pos.1, pos.2),
                });
            }
            pos.2 = decode_into(&pos.0, pos.1, pos.2, &result.data, &mut out)?;
        }
        Ok(out)
    }
}

/// Decodes whole batches, skipping records before `from`; returns the next offset.
/// Keys, values and headers are slices of the fetched buffer (or of the batch's
/// decompressed records), not copies.
fn decode_into(topic: &str, partition: u32, from: u64, data: &Bytes, out: &mut Vec<Consumed>) -> Result<u64> {
    let mut next = from;
    let mut at = 0;
    while at < data.len() {
        let view = BatchView::parse(&data[at..], usize::MAX)?;
        let plain = view.plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)?;
        let owner = if plain.is_borrowed() {
            data.slice_ref(view.records_section())
        } else {
            Bytes::copy_from_slice(plain.as_bytes())
        };
        let records = es_core::batch::PlainRecords::over(&view.header, &owner);
        for r in records.iter() {
            let r = r?;
            if r.offset >= from {
                out.push(Consumed {
                    topic: topic.to_owned(),
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key.map(|k| owner.slice_ref(k)),
                    value: r.value.map(|v| owner.slice_ref(v)),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.map(|v| owner.slice_ref(v))))
                        .collect(),
                });
            }
        }
        next = next.max(view.header.next_offset());
        at += view.header.total_len();
    }
    Ok(next)
}
