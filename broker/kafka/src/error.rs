//! The crate's one error type: what was wrong with a frame, and where.

use kafka_protocol::messages::ApiKey;

/// A fault in bytes from a peer (or, for `Encode`, in a response es built). Positions
/// are byte offsets into the request body unless the variant says otherwise.
#[derive(Debug, thiserror::Error)]
pub enum KafkaWireError {
    /// The size prefix claims more than the connection's frame cap; nothing was allocated.
    #[error("frame of {size} bytes exceeds the cap of {cap} bytes")]
    FrameTooLarge { size: u64, cap: usize },
    /// The size prefix is negative.
    #[error("frame size prefix {size} is negative")]
    NegativeFrameSize { size: i32 },
    /// The frame ends inside its request header (offsets into the frame).
    #[error("request header truncated at byte {position}")]
    HeaderTruncated { position: usize },
    /// An API key this crate does not know. The listener answers or closes.
    #[error("unknown API key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    /// A known API that es does not decode (not in the API table).
    #[error("API {api_key:?} is not served (correlation id {correlation_id})")]
    UnsupportedApi { api_key: ApiKey, correlation_id: i32 },
    /// A version outside es's table for that API (KIP-511 for ApiVersions).
    #[error("{api_key:?} v{version} is not supported (correlation id {correlation_id})")]
    UnsupportedVersion { api_key: ApiKey, version: i16, correlation_id: i32 },
    /// A version es advertises for old clients' sake but refuses (Produce v0-2).
    #[error("{api_key:?} v{version} is refused: {reason} (correlation id {correlation_id})")]
    RefusedVersion { api_key: ApiKey, version: i16, correlation_id: i32, reason: &'static str },
    /// A fixed-size field or a skipped run runs past the end of the body.
    #[error("body truncated at byte {position}: {needed} bytes needed, {remaining} left")]
    Truncated { position: usize, needed: usize, remaining: usize },
    /// A varint longer than five bytes or wider than 32 bits.
    #[error("malformed varint at byte {position}")]
    BadVarint { position: usize },
    /// A negative length or count other than -1 (null).
    #[error("invalid length {length} at byte {position}")]
    BadLength { position: usize, length: i64 },
    /// A string or byte run longer than the bytes left.
    #[error("length {length} at byte {position} exceeds the {remaining} bytes left")]
    LengthTooLarge { position: usize, length: usize, remaining: usize },
    /// An array count whose elements could not fit in the bytes left.
    #[error("array of {count} elements at byte {position} cannot fit in {remaining} bytes")]
    CountTooLarge { position: usize, count: u64, remaining: usize },
    /// A known tagged field sent at a version that does not have it.
    #[error("tag {tag} at byte {position} is not valid at this version")]
    BadTag { position: usize, tag: u32 },
    /// More unknown tagged fields than `limits::UNKNOWN_TAGGED_FIELDS_MAX`.
    #[error("too many unknown tagged fields (at byte {position})")]
    TooManyTaggedFields { position: usize },
    /// kafka-protocol refused a body the pre-scan let through (bad UTF-8, a null where
    /// none is allowed, ...).
    #[error("{api_key:?} v{version} body does not decode: {reason}")]
    Decode { api_key: ApiKey, version: i16, reason: String },
    /// kafka-protocol could not encode a response es built (a field the version lacks).
    #[error("response for {api_key:?} v{version} does not encode: {reason}")]
    Encode { api_key: ApiKey, version: i16, reason: String },
}
