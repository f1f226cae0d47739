//! Every limit and default of the group coordinators, in one place.

/// Longest group id es accepts (Kafka has none; es keys offsets and names by it).
pub const GROUP_ID_BYTES_MAX: usize = 249;
/// Kafka's `group.initial.rebalance.delay.ms`: how long a new group's join barrier
/// waits for more members before the first generation.
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: u64 = 3_000;
/// Kafka's `group.min.session.timeout.ms`.
pub const SESSION_TIMEOUT_MS_MIN_DEFAULT: u64 = 6_000;
/// Kafka's `group.max.session.timeout.ms`.
pub const SESSION_TIMEOUT_MS_MAX_DEFAULT: u64 = 1_800_000;
/// Longest rebalance timeout a member may ask for (it bounds a parked join).
pub const REBALANCE_TIMEOUT_MS_MAX: u64 = 3_600_000;
/// Most members (joined or holding an issued member id) one classic group may have.
pub const CLASSIC_GROUP_MEMBERS_MAX: usize = 1_000;
/// Kafka's `offset.metadata.max.bytes`: the longest metadata string of a commit.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4_096;
