//! Reading a whole partition back in offset order: how the broker rebuilds the
//! state an internal topic holds (committed offsets, the schema registry) on start.

use es_core::RecordView;

use crate::{LogError, PartitionLog};

/// Bytes read per step of a replay.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError<E> {
    /// The log could not be read.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A batch or record in the log does not decode.
    #[error("unreadable record at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// The caller refused a record.
    #[error("{0}")]
    Apply(E),
}

impl PartitionLog {
    /// Calls `apply` with every record from the log start to the high watermark,
    /// in offset order, reading a megabyte at a time. Stops at the first error.
    pub fn replay<E>(
        &self,
        mut apply: impl FnMut(&RecordView<'_>) -> Result<(), E>,
    ) -> Result<(), ReplayError<E>> {
        let corrupt =
            |offset: u64, e: es_core::CodecError| ReplayError::Corrupt { offset, reason: e.to_string() };
        let mut offset = self.info().log_start_offset;
        while offset < self.high_watermark() {
            let read = self.read(offset, REPLAY_READ_BYTES)?;
            let mut next = offset;
            for batch in read.batches() {
                let plain = batch
                    .plain_records(es_core::limits::BATCH_BYTES_MAX_HARD)
                    .map_err(|e| corrupt(next, e))?;
                for r in plain.iter() {
                    let r = r.map_err(|e| corrupt(next, e))?;
                    // A read starts at the batch holding `offset`: skip what came before.
                    if r.offset >= offset {
                        apply(&r).map_err(ReplayError::Apply)?;
                    }
                }
                next = next.max(batch.header.next_offset());
            }
            if next == offset {
                break;
            }
            offset = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use es_core::{LeaderEpoch, Record};

    use super::*;
    use crate::{LogConfig, LogManager, ManagerOptions};

    #[test]
    fn replays_every_record_in_order_and_stops_at_the_first_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::new(dir.path(), ManagerOptions::default()).unwrap();
        let (log, _) = manager.open_partition("t-0", LogConfig::default()).unwrap();
        for batch in 0..3 {
            let records: Vec<Record> = (0..4).map(|i| Record::keyed(format!("k{batch}{i}"), "v")).collect();
            log.append_records(&records, LeaderEpoch(1)).unwrap().wait().unwrap();
        }
        let mut seen = Vec::new();
        log.replay(|r| {
            seen.push((r.offset, r.key.map(<[u8]>::to_vec)));
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(seen.len(), 12);
        assert!(seen.iter().enumerate().all(|(i, (offset, _))| *offset == i as u64));
        assert_eq!(seen[5].1.as_deref(), Some(&b"k11"[..]));

        let mut calls = 0;
        let e = log.replay(|r| {
            calls += 1;
            if r.offset == 6 { Err("refused") } else { Ok(()) }
        });
        assert!(matches!(e, Err(ReplayError::Apply("refused"))));
        assert_eq!(calls, 7);
    }
}
