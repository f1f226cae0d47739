//! Shared helpers of the black-box tests: the deterministic batch contents that the
//! crash child writes and the crash test regenerates to check bytes, and the `ack`
//! line protocol between them, and the handle that runs a real es-broker.

pub mod broker;
pub mod cluster;
pub mod faults;
pub mod kafka_wire;
pub mod peers;
pub mod python;
pub mod s3s;
pub mod walkthrough;

pub mod crashload {
    //! Every batch the crash child appends is a pure function of its [`BatchId`]
    //! (generation = crash cycle, writer thread, sequence number): its record count,
    //! keys, values, headers and timestamps. The first record's key names the id, so
    //! the checker can regenerate the exact bytes of any batch it finds in the log,
    //! acknowledged or not.

    use bytes::Bytes;
    use es_core::batch::{self, BatchView};
    use es_core::{Header, LeaderEpoch, ProducerInfo, Record};

    /// The partition directory name the child and the checker share.
    pub const PARTITION: &str = "crash-0";

    /// The partition writer `thread` appends to when the child runs `partitions`
    /// partitions (partition 0 is [`PARTITION`]).
    pub fn partition_of(thread: u32, partitions: u32) -> String {
        format!("crash-{}", thread % partitions.max(1))
    }
    /// The leader epoch every batch is appended with.
    pub const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;
    /// The writer "thread" id the checker uses for its own post-recovery appends.
    pub const CHECKER_THREAD: u32 = 999;
    /// Segment size of the crash log: small, so segments roll during every cycle.
    pub const SEGMENT_BYTES: u64 = 64 * 1024;

    /// Identity of one appended batch.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct BatchId {
        pub generation: u32,
        pub thread: u32,
        pub seq: u64,
    }

    /// The log configuration both sides use.
    pub fn config() -> es_log::LogConfig {
        es_log::LogConfig {
            segment_bytes: SEGMENT_BYTES,
            index_interval_bytes: 1024,
            ..es_log::LogConfig::default()
        }
    }

    /// splitmix64: a tiny deterministic generator.
    struct Mix(u64);

    impl Mix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn bytes(&mut self, n: usize) -> Vec<u8> {
            let mut out = Vec::with_capacity(n + 8);
            while out.len() < n {
                out.extend_from_slice(&self.next().to_le_bytes());
            }
            out.truncate(n);
            out
        }
    }

    /// The records of batch `id`. Every timestamp is explicit, so the encoded batch
    /// does not depend on the appender's clock.
    pub fn records(id: BatchId) -> Vec<Record> {
        let mut rng = Mix((u64::from(id.generation) << 48) ^ (u64::from(id.thread) << 40) ^ id.seq);
        let count = 1 + (rng.next() % 4) as usize;
        (0..count)
            .map(|i| {
                let key = if i == 0 {
                    format!("{}:{}:{}", id.generation, id.thread, id.seq)
                } else {
                    format!("r{i}")
                };
                let value_len = (rng.next() % 600) as usize;
                let value = match rng.next() % 10 {
                    0 => None,
                    _ => Some(Bytes::from(rng.bytes(value_len))),
                };
                let headers = match rng.next() % 3 {
                    0 => vec![Header { key: "h".into(), value: Some(Bytes::from(rng.bytes(8))) }],
                    1 => vec![Header { key: "null".into(), value: None }],
                    _ => vec![],
                };
                Record {
                    key: Some(Bytes::from(key)),
                    value,
                    headers,
                    timestamp: Some(1_700_000_000_000 + (id.seq as i64) * 3 + i as i64),
                }
            })
            .collect()
    }

    /// The exact bytes the log must hold for batch `id` appended at `base_offset`.
    pub fn expected_bytes(id: BatchId, base_offset: u64) -> Vec<u8> {
        let mut bytes = batch::encode(&records(id), 0, ProducerInfo::NONE).expect("encoding a test batch");
        batch::stamp(&mut bytes, base_offset, EPOCH);
        bytes
    }

    /// The id a batch read back from the log claims (from its first record's key).
    pub fn id_of(view: &BatchView<'_>) -> Option<BatchId> {
        let first = view.records().next()?.ok()?;
        let key = std::str::from_utf8(first.key?).ok()?;
        let mut parts = key.split(':');
        let id = BatchId {
            generation: parts.next()?.parse().ok()?,
            thread: parts.next()?.parse().ok()?,
            seq: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(id)
    }

    /// One acknowledged append, as the child reports it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Ack {
        pub base_offset: u64,
        pub last_offset: u64,
        pub thread: u32,
        pub seq: u64,
    }

    impl Ack {
        pub fn line(&self) -> String {
            format!("ack {} {} {} {}", self.base_offset, self.last_offset, self.thread, self.seq)
        }

        /// Parses `ack <base_offset> <last_offset> <thread> <seq>`.
        pub fn parse(line: &str) -> Option<Ack> {
            let mut parts = line.split_whitespace();
            if parts.next()? != "ack" {
                return None;
            }
            let ack = Ack {
                base_offset: parts.next()?.parse().ok()?,
                last_offset: parts.next()?.parse().ok()?,
                thread: parts.next()?.parse().ok()?,
                seq: parts.next()?.parse().ok()?,
            };
            parts.next().is_none().then_some(ack)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn ids_round_trip_through_the_bytes() {
            for seq in 0..50 {
                let id = BatchId { generation: 7, thread: 3, seq };
                let bytes = expected_bytes(id, 100 + seq);
                let view = BatchView::parse(&bytes, usize::MAX).unwrap();
                view.validate_records().unwrap();
                assert_eq!(id_of(&view), Some(id));
                assert_eq!(expected_bytes(id, 100 + seq), bytes);
            }
            let ack = Ack { base_offset: 1, last_offset: 3, thread: 2, seq: 9 };
            assert_eq!(Ack::parse(&ack.line()), Some(ack));
            assert_eq!(Ack::parse("ack 1 3 2"), None);
        }
    }
}
