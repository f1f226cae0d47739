//! The Raft entry of an es partition: the stored v2 batch itself. Blank and
//! membership payloads are encoded as Raft control batches (es-core
//! `batch::raft`); a normal payload is the data batch, or the leader's compaction
//! decision (a control batch too). Reading the log back gives
//! the same entry: the term is the batch's partitionLeaderEpoch and the index is
//! es-log's Raft index of the batch.

use std::fmt;

use bytes::Bytes;
use es_core::BatchHeader;
use es_core::batch::{self, BatchView, RaftControl};
use serde::{Deserialize, Serialize};

use crate::types::{BatchData, CommittedLeaderId, LogId, Membership, Payload};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EsEntry {
    leader: CommittedLeaderId,
    index: u64,
    /// The v2 batch: stamped (base offset, leader epoch) once stored.
    batch: Bytes,
}

impl EsEntry {
    /// An entry read from the log.
    pub(crate) fn stored(leader: CommittedLeaderId, index: u64, batch: Bytes) -> Self {
        EsEntry { leader, index, batch }
    }

    pub(crate) fn batch(&self) -> &Bytes {
        &self.batch
    }

    /// The batch's header; entries are built from checked batches, so it parses.
    pub(crate) fn header(&self) -> Option<BatchHeader> {
        BatchHeader::parse(&self.batch, usize::MAX).ok()
    }

    pub(crate) fn control(&self) -> Option<RaftControl<'_>> {
        let view = BatchView::parse(&self.batch, usize::MAX).ok()?;
        batch::raft_control(&view).ok().flatten()
    }
}

impl fmt::Display for EsEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.control() {
            Some(RaftControl::Blank { .. }) => "blank",
            Some(RaftControl::Membership { .. }) => "membership",
            Some(RaftControl::Compaction { .. }) => "compaction",
            None => "data",
        };
        write!(f, "{}-{}: {kind} batch of {} bytes", self.leader, self.index, self.batch.len())
    }
}

/// Control batches carry this timestamp, not the clock: every voter builds the
/// initial membership entry itself, and the replicas stay byte-identical only if
/// its bytes do not depend on when each one did.
const CONTROL_TIMESTAMP: i64 = 0;

fn control_batch(control: RaftControl<'_>) -> Bytes {
    Bytes::from(batch::encode_raft_control(control, CONTROL_TIMESTAMP).expect("a control batch encodes"))
}

/// The control batch for a blank or membership entry at `index`.
fn blank_or_membership(index: u64, membership: Option<&Membership>) -> Bytes {
    let payload = membership.map(|m| serde_json::to_vec(m).expect("a membership serializes"));
    match &payload {
        Some(p) => control_batch(RaftControl::Membership { index, payload: p }),
        None => control_batch(RaftControl::Blank { index }),
    }
}

/// The compaction entry the leader proposes (its index is set when openraft
/// gives it a log id).
pub(crate) fn compaction_batch(horizon_ms: i64) -> Bytes {
    control_batch(RaftControl::Compaction { index: 0, horizon_ms })
}

impl openraft::entry::RaftEntry for EsEntry {
    type CommittedLeaderId = CommittedLeaderId;
    type Payload = Payload;

    fn new(log_id: LogId, payload: Payload) -> Self {
        let batch = match payload {
            Payload::Blank => blank_or_membership(log_id.index, None),
            Payload::Membership(m) => blank_or_membership(log_id.index, Some(&m)),
            Payload::Normal(BatchData(bytes)) => bytes,
        };
        let mut entry = EsEntry { leader: log_id.leader_id, index: log_id.index, batch };
        // A compaction entry is proposed as a normal payload and names its index too
        // (the header first: a data batch is not CRC-checked again here).
        if entry.header().is_some_and(|h| h.is_raft_control())
            && let Some(RaftControl::Compaction { index, horizon_ms }) = entry.control()
            && index != log_id.index
        {
            entry.batch = control_batch(RaftControl::Compaction { index: log_id.index, horizon_ms });
        }
        entry
    }

    fn log_id_parts(&self) -> (&CommittedLeaderId, u64) {
        (&self.leader, self.index)
    }

    fn set_log_id(&mut self, new: LogId) {
        // A control batch names its index: re-encode it (control entries are rare
        // and small).
        if new.index != self.index {
            match self.control() {
                Some(RaftControl::Blank { .. }) => self.batch = blank_or_membership(new.index, None),
                Some(RaftControl::Membership { .. }) => {
                    let m = self.get_membership();
                    self.batch = blank_or_membership(new.index, m.as_ref());
                }
                Some(RaftControl::Compaction { horizon_ms, .. }) => {
                    self.batch = control_batch(RaftControl::Compaction { index: new.index, horizon_ms });
                }
                None => {}
            }
        }
        self.leader = new.leader_id;
        self.index = new.index;
    }

    fn get_membership(&self) -> Option<Membership> {
        match self.control()? {
            RaftControl::Membership { payload, .. } => serde_json::from_slice(payload).ok(),
            RaftControl::Blank { .. } | RaftControl::Compaction { .. } => None,
        }
    }
}
