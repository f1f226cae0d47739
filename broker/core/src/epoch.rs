//! The leader epoch a batch was written in: Kafka's `partitionLeaderEpoch`.

/// A leader epoch, as Kafka stores it in every v2 batch: a signed 32-bit number where
/// -1 ([`LeaderEpoch::UNKNOWN`]) is what producers send before a leader stamps the
/// batch. The log only stores known (non-negative) epochs. It is i32, not u32, so the
/// header field reads back exactly as Kafka clients and tools show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// What a producer writes: no leader has stamped the batch yet.
    pub const UNKNOWN: LeaderEpoch = LeaderEpoch(-1);
    /// The epoch of a single-node broker's partitions until replication supplies
    /// epochs (the partition handle will then carry the current one).
    pub const INITIAL: LeaderEpoch = LeaderEpoch(1);

    /// True for an epoch a leader assigned (non-negative).
    pub fn is_known(self) -> bool {
        self.0 >= 0
    }
}

impl std::fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_non_negative_epochs_are_known() {
        assert!(!LeaderEpoch::UNKNOWN.is_known());
        assert!(LeaderEpoch(0).is_known() && LeaderEpoch::INITIAL.is_known());
        assert!(LeaderEpoch(2) > LeaderEpoch::INITIAL);
        assert_eq!(LeaderEpoch(7).to_string(), "7");
    }
}
