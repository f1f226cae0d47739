//! es-raft's limits and default timers.

/// Default Raft timers (DESIGN §4, "Many groups"): raised from openraft's so 1,000
/// idle groups per node stay cheap. A follower that hears nothing for 1.5-3 s
/// starts an election.
pub const HEARTBEAT_MS_DEFAULT: u64 = 300;
pub const ELECTION_MIN_MS_DEFAULT: u64 = 1_500;
pub const ELECTION_MAX_MS_DEFAULT: u64 = 3_000;
/// How long a group sits settled (nothing appended, every live follower matched
/// and committed) before its leader quiesces it (`host/quiesce.rs`).
pub const QUIESCE_AFTER_MS_DEFAULT: u64 = 2_000;
/// How often the host looks for groups to quiesce or wake.
pub const QUIESCE_CHECK_MS: u64 = 500;
/// Groups named in one quiesce request to a peer.
pub const QUIESCE_BATCH: usize = 4_096;

/// How long a peer's link must stay down before this node replaces that peer as
/// the leader of the groups it led (`RaftHost` "elect on link loss"): a dead
/// process's link stays down, a glitch is redialed within es-peer's first backoff
/// (50 ms) and a handshake.
pub const LINK_LOSS_GRACE_MS: u64 = 200;
/// The longest the successor's side of such a hand-over may take (openraft waits,
/// at most an election timeout, for its log to be flushed).
pub const LINK_LOSS_ELECT_MS: u64 = 3_000;

/// The longest a proposal waits to be committed (and a retried batch for its
/// original to be committed) before it answers `ProposeError::Timeout`.
pub const PROPOSE_TIMEOUT_MS: u64 = 10_000;

/// The longest closing one group (openraft's shutdown) may take.
pub const GROUP_SHUTDOWN_MS: u64 = 5_000;

/// Entries per append-entries RPC (openraft's `max_payload_entries`).
pub const APPEND_ENTRIES_MAX: u64 = 256;

/// Log entries kept behind a snapshot before openraft purges them. Purge only moves
/// the Raft log start (segments go by retention), so a generous lag costs nothing
/// but lets a briefly lagging follower catch up from the log.
pub const PURGE_LAG_ENTRIES: u64 = 1 << 20;

/// How often the host looks for groups whose retention waits for a Raft purge.
pub const RETENTION_PURGE_CHECK_MS: u64 = 1_000;

/// The RPC kinds at and above this belong to the broker (`RaftHost::call` and the
/// `app` handler); below it, to Raft.
pub const APP_KIND_MIN: u8 = 128;

/// How often each node brings the voters of the groups it leads to the cluster's
/// members (`RaftHost::set_members`), and the most groups it changes at once.
pub const MEMBERSHIP_CHECK_MS: u64 = 500;
pub const MEMBERSHIP_CHANGES_AT_ONCE: usize = 16;
/// The longest one group's step of a membership change may take before the next
/// round tries again.
pub const MEMBERSHIP_STEP_MS: u64 = 10_000;
