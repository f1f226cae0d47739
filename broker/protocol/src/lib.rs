//! The es binary protocol, as a pure codec: length-prefixed frames that carry a
//! request id (so many requests are in flight on one connection and responses may
//! come back in any order), typed requests and responses, and a fixed table of
//! error codes. No I/O: the listener and the client own the sockets.
//!
//! The byte layouts are in `docs/protocol.md`; the golden tests here pin them.

mod codes;
mod frame;
mod groups;
mod message;
mod wire;

pub use codes::ErrorCode;
pub use frame::{
    FLAG_RESPONSE, FRAME_BYTES_MAX, FRAME_HEADER_LEN, Frame, FrameHeader, decode_frame, encode_frame,
};
pub use groups::{GroupOffset, GroupRequest, GroupResponse};
pub use message::{
    Credential, DeadLetterPlace, FetchPartition, FetchResult, ListedTopic, OffsetSpec, Op, PROTOCOL_VERSION,
    PartitionDescription, ProduceFinding, Request, Response, TopicDescription,
};
pub use wire::WireError;
