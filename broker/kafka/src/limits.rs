//! Size limits of the Kafka codec, in one place.

/// The frame cap after authentication: Kafka's `socket.request.max.bytes` default
/// (100 MiB), so any request a Kafka broker takes fits.
pub const FRAME_BYTES_MAX: usize = 100 * 1024 * 1024;

/// The frame cap before SASL authentication completes: Kafka's
/// `sasl.server.max.receive.size` default (512 KiB). An unauthenticated peer sends only
/// ApiVersions, SaslHandshake and SaslAuthenticate, all small.
pub const PRE_AUTH_FRAME_BYTES_MAX: usize = 512 * 1024;

/// The size prefix of every Kafka frame.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// Unknown tagged fields accepted in one request. The crate keeps each in a BTreeMap, and
/// a tiny struct carrying one costs a ~400-byte node for 2 wire bytes; clients send none
/// today (every tag they send is a known one), so a small cap loses nothing.
pub const UNKNOWN_TAGGED_FIELDS_MAX: usize = 64;
