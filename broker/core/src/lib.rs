//! Domain types shared by every es crate: records, the record-batch codec, limits and
//! the clock. This crate performs no I/O and has no async code, so codecs and the log
//! can be tested byte for byte.

pub mod batch;
pub mod clock;
pub mod compression;
pub mod epoch;
pub mod histogram;
pub mod limits;
pub mod partitioner;
pub mod record;
mod varint;

pub use batch::{BatchHeader, BatchView, CodecError, RecordView, TimestampType};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compression::{Compression, CompressionError};
pub use epoch::LeaderEpoch;
pub use record::{Header, ProducerInfo, Record, add_sequence};
