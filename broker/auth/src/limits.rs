//! Every size, count and rate limit of the auth library in one place, with its default.

/// Random bytes in an API key's secret (256 bits: guessing is hopeless, so the
/// auth-failure limits exist to bound load, not to protect the secret).
pub const SECRET_BYTES: usize = 32;
/// Random bytes in a key id (64 bits, shown as 16 lowercase hex digits).
pub const KEY_ID_BYTES: usize = 8;
/// Longest human name of a key (`es key create --name ...`).
pub const KEY_NAME_BYTES_MAX: usize = 128;
/// Most keys one broker holds (keys are few: one per application or person).
pub const KEYS_MAX: usize = 100_000;
/// Most grants one key holds.
pub const GRANTS_PER_KEY_MAX: usize = 1_000;
/// Longest resource name a grant or a request may name (Kafka's topic name limit).
pub const RESOURCE_NAME_BYTES_MAX: usize = 249;

/// Bytes of random salt in a SCRAM credential.
pub const SCRAM_SALT_BYTES: usize = 32;
/// PBKDF2 iterations for new SCRAM credentials (RFC 7677's minimum is 4096).
pub const SCRAM_ITERATIONS_DEFAULT: u32 = 4096;
/// No credential may use fewer iterations than this.
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;
/// No credential may ask for more (a stored credential with a huge count would make
/// every client spend minutes; it bounds what a corrupt record can cost).
pub const SCRAM_ITERATIONS_MAX: u32 = 1_000_000;
/// Random bytes in the server's part of a SCRAM nonce (24 base64 characters).
pub const SCRAM_SERVER_NONCE_BYTES: usize = 18;
/// Longest client nonce accepted.
pub const SCRAM_CLIENT_NONCE_BYTES_MAX: usize = 256;

/// Largest client message any SASL step accepts. Real PLAIN and SCRAM messages are
/// under 300 bytes; the Kafka listener's pre-auth frame cap sits above this.
pub const SASL_MESSAGE_BYTES_MAX: usize = 4096;
/// Most client messages one SASL session accepts (SCRAM needs two, PLAIN one).
pub const SASL_STEPS_MAX: u32 = 4;
/// Longest SASL user name (a key id is 16 bytes; this leaves room for mistakes).
pub const SASL_USERNAME_BYTES_MAX: usize = 256;

/// Longest throttle a quota may impose on one response (Kafka's default quota window
/// is 11 samples of 1 s, so it never throttles longer than about that).
pub const THROTTLE_MS_MAX: u64 = 30_000;
/// Most addresses (or key ids) one rate limiter tracks; idle entries are evicted first.
pub const RATE_LIMITER_ENTRIES_MAX: usize = 65_536;
/// Default burst of a byte-rate quota, in seconds of its rate (Kafka: 11 x 1 s windows).
pub const QUOTA_BURST_SECONDS_DEFAULT: u64 = 10;
/// Default auth failures per second per address, with the burst below.
pub const AUTH_FAILURES_PER_S_PER_ADDRESS_DEFAULT: u64 = 2;
/// Default auth failures per second per key id.
pub const AUTH_FAILURES_PER_S_PER_KEY_DEFAULT: u64 = 5;
/// Failures allowed at once before the limits above apply.
pub const AUTH_FAILURES_BURST_DEFAULT: u64 = 10;
/// Default burst of a request-rate limit, in seconds of its rate.
pub const REQUEST_RATE_BURST_SECONDS_DEFAULT: u64 = 1;
