//! Every size, count and time limit of the peer links in one place, with its default.

/// Largest frame (message header, payload and tag) a link accepts. Raft's append
/// RPCs carry whole record batches (es-core caps one at 64 MiB hard), so the cap
/// leaves room for one such batch plus its envelope; the length prefix is checked
/// against it before anything is allocated.
pub const FRAME_BYTES_MAX: usize = 72 * 1024 * 1024;
/// Bytes of the HMAC-SHA256 tag each frame carries: the first 16 of 32 (128 bits, as
/// TLS's truncated tags; forging one still takes 2^128 guesses, and each wrong guess
/// kills the link).
pub const FRAME_TAG_BYTES: usize = 16;
/// Bytes of each side's handshake nonce (256 bits: never repeats by chance).
pub const NONCE_BYTES: usize = 32;
/// Shortest shared secret a configuration may give (128 bits).
pub const SECRET_BYTES_MIN: usize = 16;

/// Messages waiting for a link's writer. Callers wait (bounded by their timeout)
/// when it is full, so a slow peer cannot grow memory without limit.
pub const SEND_QUEUE_MESSAGES_MAX: usize = 8192;
/// Most frames one write carries: the writer drains the queue into one buffer and
/// hands it to the socket at once (many groups' heartbeats in one syscall).
pub const COALESCE_FRAMES_MAX: usize = 4096;
/// Most bytes one coalesced write gathers before it is sent (a large frame is
/// always sent whole, alone if need be).
pub const COALESCE_BYTES_MAX: usize = 1024 * 1024;
/// Requests one link may have outstanding in each direction: calls beyond it wait
/// for a slot (bounded by their timeout); incoming requests beyond it stop the
/// reader until a handler finishes (backpressure onto the peer).
pub const IN_FLIGHT_MAX: usize = 16_384;
/// Handshakes the acceptor runs at once: an unauthenticated dialer holds one of
/// these, never more, until the handshake timeout.
pub const HANDSHAKES_MAX: usize = 64;
/// Client nonces the acceptor remembers to refuse a replayed hello, and its own
/// nonces it remembers to refuse a reflected one.
pub const NONCES_REMEMBERED_MAX: usize = 4096;

/// Default time to open the TCP connection to a peer.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// Default time for the whole handshake, each side.
pub const HANDSHAKE_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// Default time one RPC may take, the wait for a link included.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// First wait before a redial after a failure; doubles up to the maximum.
pub const BACKOFF_MS_MIN_DEFAULT: u64 = 50;
/// Longest wait between two dials of the same peer.
pub const BACKOFF_MS_MAX_DEFAULT: u64 = 2_000;
/// Default idle time after which a link sends a keepalive frame (only a link with
/// nothing else to send pays for it).
pub const KEEPALIVE_MS_DEFAULT: u64 = 500;
/// Default time without any frame from the peer after which a link is closed and
/// redialed: a peer that vanished without closing its socket (a partition, a
/// stopped process) is noticed, not waited on forever.
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Link losses queued for a subscriber of `PeerNode::link_losses` that has not
/// read them yet (a peer id each; one that falls further behind skips the oldest).
pub const LINK_LOSSES_QUEUED: usize = 64;
/// Pause after a failed accept (out of file descriptors) before the next one.
pub const ACCEPT_ERROR_PAUSE_MS: u64 = 50;
/// How long shutdown waits for the link tasks to finish.
pub const SHUTDOWN_DRAIN_MS: u64 = 2_000;
