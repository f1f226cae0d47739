//! The Kafka wire protocol as a pure codec: bytes in, typed values out, no I/O.
//!
//! Built on kafka-protocol (messages generated from Kafka 4.1). What this crate adds is
//! what the listener must not get wrong: a frame cap checked on the size prefix, a
//! pre-scan that checks every count and length against the bytes left before the
//! crate's decoder (which pre-allocates from wire counts) sees a body, Produce records
//! kept as zero-copy slices of the frame, the one API table ApiVersions and
//! docs/kafka.md come from, and the one table of what each API needs authorized.

mod apis;
mod authz;
mod error;
mod frame;
#[cfg(test)]
mod layout_tests;
pub mod limits;
mod prescan;
mod request;
mod response;
#[rustfmt::skip]
mod schema_gen;

pub use apis::{API_TABLE, ApiRow, Status, api_row, markdown_table, served};
pub use authz::{ACCESS_TABLE, Access, Operation, Resource, access};
pub use error::KafkaWireError;
pub use frame::{FrameLimits, frame_size, split_frame};
pub use kafka_protocol;
pub use request::{DecodedRequest, Header, KafkaRequest, decode_header, decode_request, message_versions};
pub use response::{api_versions_response, api_versions_response_for, encode_response};
