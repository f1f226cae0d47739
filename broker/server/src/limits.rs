//! Limits of the serving side in one place: request sizes, partition counts,
//! long-poll and read bounds.

/// Largest HTTP request body accepted by default (a produce batch as JSON; base64
/// values inflate the encoded batch by about a third).
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;
/// Requests served at once by default (long polls included); more get 503.
pub const IN_FLIGHT_REQUESTS_MAX_DEFAULT: usize = 4096;
/// Most partitions one topic may have.
pub const PARTITIONS_MAX: u32 = 1024;
/// Longest topic name (Kafka's limit).
pub const TOPIC_NAME_CHARS_MAX: usize = 249;
/// Longest a consume request may wait for data.
pub const WAIT_MS_MAX: u64 = 60_000;
/// Default and largest number of records one consume returns.
pub const CONSUME_RECORDS_DEFAULT: usize = 500;
pub const CONSUME_RECORDS_MAX: usize = 10_000;
/// Default and largest number of batch bytes one consume reads.
pub const CONSUME_BYTES_DEFAULT: usize = 1024 * 1024;
pub const CONSUME_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Most records one produce request may carry.
pub const PRODUCE_RECORDS_MAX: usize = 100_000;
/// How long graceful shutdown waits for in-flight requests before closing anyway.
pub const SHUTDOWN_DRAIN_MS: u64 = 10_000;
/// How often retention, tiering and compaction run by default.
pub const HOUSEKEEPING_INTERVAL_MS_DEFAULT: u64 = 30_000;
/// Binary protocol: requests in flight per connection (announced in Hello).
pub const BINARY_IN_FLIGHT_MAX: usize = 256;
/// Binary protocol: connections served at once; more are refused at accept.
pub const BINARY_CONNECTIONS_MAX: usize = 1024;
/// Partitions one fetch may name (every protocol).
pub const FETCH_PARTITIONS_MAX: usize = 1024;
/// Largest plugin component accepted by an upload (a Python guest carries its
/// interpreter: tens of MiB).
pub const PLUGIN_BYTES_MAX: usize = 128 * 1024 * 1024;
/// Most validators one topic may have.
pub const VALIDATORS_PER_TOPIC_MAX: usize = 16;
/// Longest a parked Kafka JoinGroup or SyncGroup sleeps between looks at the
/// coordinator's next deadline (a bound, not a poll interval: it wakes on its answer).
pub const CLASSIC_WAIT_TICK_MS_MAX: u64 = 1_000;
/// Longest a parked Kafka JoinGroup or SyncGroup waits in all: past the longest
/// rebalance timeout a member may ask for, it is answered REBALANCE_IN_PROGRESS.
pub const CLASSIC_WAIT_MS_MAX: u64 = es_groups::limits::REBALANCE_TIMEOUT_MS_MAX + 10_000;
/// Kafka listener: requests in flight per connection (read stops while the window
/// is full, so a client past it is slowed, not failed).
pub const KAFKA_IN_FLIGHT_MAX: usize = 256;
/// Kafka listener: the largest frame before SASL completes. Only ApiVersions and the
/// SASL exchange are served then (a SASL message is at most 4 KiB), so a stranger
/// cannot make the broker buffer a 100 MiB frame.
pub const KAFKA_PRE_AUTH_FRAME_BYTES_MAX: usize = 16 * 1024;
/// Kafka listener: how long a SASL login lasts by default (KIP-368): 1 hour.
pub const KAFKA_SESSION_LIFETIME_MS_DEFAULT: u64 = 3_600_000;
/// Kafka listener: the longest a failed login's answer is held back when its
/// address or key id is over the auth-failure limit (the connection closes after).
pub const KAFKA_AUTH_FAILURE_DELAY_MS_MAX: u64 = 2_000;
/// Kafka listener: connections served at once; more are refused at accept.
pub const KAFKA_CONNECTIONS_MAX: usize = 1024;
/// Kafka listener: partitions a topic gets when CreateTopics asks for the broker's
/// default (-1), as Kafka's `num.partitions`.
pub const KAFKA_DEFAULT_PARTITIONS: u32 = 1;
/// TLS: longest a client may take to finish its handshake (a slow or plaintext
/// client holds a connection slot no longer than this).
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// TLS: most `--tls-principal-rule`s (each certificate is matched against all of them).
pub const TLS_PRINCIPAL_RULES_MAX: usize = 1_000;
/// TLS: HTTP connections whose handshake finished, waiting for the HTTP server to
/// take them.
pub const HTTP_TLS_ACCEPT_QUEUE: usize = 128;
/// TLS: HTTP handshakes running at once; more connections are refused at accept.
pub const HTTP_TLS_HANDSHAKES_MAX: usize = 1024;
/// A cluster leader's answer to a forwarded schema-registry write, at most (the
/// answers are small JSON bodies; this bounds what a follower buffers).
pub const FORWARDED_ANSWER_BYTES_MAX: usize = 16 << 20;
/// HTTP: the longest a 429 for a throttled caller is held before it is sent (the
/// rest of the wait is in `Retry-After`), so a client that retries at once is slowed.
pub const HTTP_THROTTLE_DELAY_MS_MAX: u64 = 1_000;
/// Every listener: connections open at once from one client address by default.
pub const CONNECTIONS_PER_ADDRESS_MAX_DEFAULT: usize = 256;
/// Every listener: a connection the client sends nothing on for this long is closed
/// (Kafka's `connections.max.idle.ms` is 10 minutes; longer than any long poll).
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 600_000;
/// Kafka and binary with auth on: how long a new connection has to log in.
pub const AUTH_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// HTTP: how long a client has to send a request's headers, from their first byte.
pub const HTTP_HEADER_READ_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// HTTP: connections open at once; more are refused at accept.
pub const HTTP_CONNECTIONS_MAX_DEFAULT: usize = 4096;
/// TLS: how often the certificate files are looked at for a change to reload.
pub const TLS_WATCH_INTERVAL_MS: u64 = 1_000;
/// Online snapshots (`es-tools dump --online`): the default lease, its bounds, and
/// how many snapshots may be held at once (each pins the disk space of the segments
/// it links until it is released).
pub const SNAPSHOT_LEASE_MS_DEFAULT: u64 = 60_000;
pub const SNAPSHOT_LEASE_MS_MIN: u64 = 1_000;
pub const SNAPSHOT_LEASE_MS_MAX: u64 = 24 * 3_600_000;
pub const SNAPSHOTS_MAX: usize = 4;
