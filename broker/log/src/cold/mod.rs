//! The cold tier: sealed segments that retention expired, kept in an object store
//! (a directory or an S3-compatible bucket) instead of being deleted, and read back
//! transparently below the local start offset.

mod cache;
mod dir;
pub(crate) mod manifest;
mod s3;
mod store;
pub(crate) mod tier;

pub use dir::DirStore;
pub use s3::{S3Config, S3Store};
pub use store::{ColdStore, Expect, Listed};
pub use tier::{ColdOptions, ColdStatus};

pub(crate) use tier::ColdPartition;
