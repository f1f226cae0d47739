//! The fixed error-code table of the binary protocol. Codes are stable: never
//! renumbered, never reused. `docs/protocol.md` lists them with their meaning.

/// An error code carried by every response (0 = success).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    None = 0,
    /// The frame or message could not be decoded; the connection is closed.
    Malformed = 1,
    /// No protocol version in common, or a request before the handshake.
    UnsupportedVersion = 2,
    UnknownOp = 3,
    UnknownTopic = 4,
    UnknownPartition = 5,
    OffsetOutOfRange = 6,
    BatchTooLarge = 7,
    RecordTooLarge = 8,
    /// Bad CRC, bad records, bad compression.
    InvalidBatch = 9,
    InvalidConfig = 10,
    TopicExists = 11,
    OutOfOrderSequence = 12,
    ProducerFenced = 13,
    /// The disk failed; the partition refuses writes until the broker restarts.
    StorageError = 14,
    ShuttingDown = 15,
    /// More requests in flight than the connection's window allows.
    TooManyInFlight = 16,
    InvalidRequest = 17,
    Internal = 18,
    /// Consumer groups (reserved for the group coordinator).
    UnknownMember = 19,
    IllegalGeneration = 20,
    RebalanceInProgress = 21,
    Unauthorized = 22,
    /// The topic's validators refused records; nothing was written.
    ValidationFailed = 23,
    /// A validator failed (trap, deadline, memory) under a reject policy.
    PluginFailed = 24,
    /// This broker does not lead the partition; the message names the leader when known.
    NotLeader = 25,
    /// Over the caller's quota; the message says how long to wait.
    Throttled = 26,
    /// A client write to one of the broker's internal topics (`__es_*`).
    InternalTopic = 27,
    /// An idempotent produce with a producer id this broker never issued (Kafka's
    /// UNKNOWN_PRODUCER_ID): get one with `InitProducerId`.
    UnknownProducerId = 28,
    /// No valid API key: send `Authenticate` (after `Hello`) with one. Missing,
    /// malformed, unknown, revoked and wrong keys all get this code.
    Unauthenticated = 29,
    /// The broker did not finish the request in time: a replicated write not
    /// committed by a majority within the proposal timeout (it may still commit),
    /// or a leader transfer the target did not complete. Retry (an idempotent
    /// produce safely: a retry of a batch that did commit answers its offsets).
    Timeout = 30,
}

impl ErrorCode {
    pub fn from_u16(code: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        const ALL: [ErrorCode; 31] = [
            None,
            Malformed,
            UnsupportedVersion,
            UnknownOp,
            UnknownTopic,
            UnknownPartition,
            OffsetOutOfRange,
            BatchTooLarge,
            RecordTooLarge,
            InvalidBatch,
            InvalidConfig,
            TopicExists,
            OutOfOrderSequence,
            ProducerFenced,
            StorageError,
            ShuttingDown,
            TooManyInFlight,
            InvalidRequest,
            Internal,
            UnknownMember,
            IllegalGeneration,
            RebalanceInProgress,
            Unauthorized,
            ValidationFailed,
            PluginFailed,
            NotLeader,
            Throttled,
            InternalTopic,
            UnknownProducerId,
            Unauthenticated,
            Timeout,
        ];
        ALL.get(usize::from(code)).copied()
    }

    /// True for errors a client may retry as they are (after backoff).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ErrorCode::StorageError
                | ErrorCode::TooManyInFlight
                | ErrorCode::RebalanceInProgress
                | ErrorCode::NotLeader
                | ErrorCode::Throttled
                | ErrorCode::Timeout
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_never_move() {
        for code in 0..=30u16 {
            assert_eq!(ErrorCode::from_u16(code).unwrap() as u16, code);
        }
        assert_eq!(ErrorCode::from_u16(31), None);
        assert_eq!(ErrorCode::OffsetOutOfRange as u16, 6);
        assert_eq!(ErrorCode::ProducerFenced as u16, 13);
    }
}
