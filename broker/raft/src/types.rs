//! The openraft type configuration of an es partition group.

use std::fmt;

use bytes::Bytes;
use es_core::LeaderEpoch;
use serde::{Deserialize, Serialize};

use crate::entry::EsEntry;

/// A Raft term: a Kafka leader epoch (a non-negative i32), so the term stored in
/// a batch's partitionLeaderEpoch is the log id's term.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Term(u32);

impl Term {
    /// The largest term: Kafka's partitionLeaderEpoch is an i32.
    pub const MAX: Term = Term(i32::MAX as u32);

    pub(crate) fn as_u32(self) -> u32 {
        self.0
    }

    pub fn epoch(self) -> LeaderEpoch {
        LeaderEpoch(self.0 as i32)
    }

    /// The term a stored batch's leader epoch stands for (`None` for -1, unstamped).
    pub fn from_epoch(epoch: LeaderEpoch) -> Option<Term> {
        u32::try_from(epoch.0).ok().map(Term)
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Saturates at [`Term::MAX`]: openraft's test suite builds terms from u64s.
impl From<u64> for Term {
    fn from(t: u64) -> Self {
        Term(t.min(u64::from(Term::MAX.0)) as u32)
    }
}

impl openraft::vote::RaftTerm for Term {
    fn next(&self) -> Self {
        // A group that reached 2^31 elections stops electing (it never happens).
        Term(self.0.saturating_add(1).min(Term::MAX.0))
    }

    fn as_u64(&self) -> Option<u64> {
        Some(u64::from(self.0))
    }
}

/// The application data of a normal entry: one encoded v2 data batch, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchData(pub Bytes);

impl fmt::Display for BatchData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch of {} bytes", self.0.len())
    }
}

/// What applying a data entry answers: the offsets it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub base_offset: u64,
    pub next_offset: u64,
}

openraft::declare_raft_types!(
    /// The openraft types of an es partition group.
    pub TypeConfig:
        D = BatchData,
        R = Applied,
        NodeId = u64,
        Node = openraft::impls::BasicNode,
        Term = Term,
        LeaderId = openraft::impls::leader_id_std::LeaderId<Term, u64>,
        Entry = EsEntry,
);

pub(crate) type LeaderId = openraft::impls::leader_id_std::LeaderId<Term, u64>;
pub(crate) type CommittedLeaderId = <LeaderId as openraft::vote::RaftLeaderId>::Committed;
pub(crate) type LogId = openraft::LogId<CommittedLeaderId>;
pub(crate) type Vote = openraft::impls::Vote<LeaderId>;
pub(crate) type Membership = openraft::Membership<u64, openraft::impls::BasicNode>;
pub(crate) type StoredMembership =
    openraft::StoredMembership<CommittedLeaderId, u64, openraft::impls::BasicNode>;
pub(crate) type Payload = openraft::EntryPayload<BatchData, u64, openraft::impls::BasicNode>;
