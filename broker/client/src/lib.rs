//! The es Rust client, over the binary protocol.
//!
//! - [`Connection`]: one TCP (or TLS: [`ClientTls`]) connection with pipelining: many requests in flight,
//!   matched to responses by request id, bounded by the broker's in-flight window.
//! - [`Client`]: a small pool of connections plus typed calls (produce, fetch, list
//!   offsets, topic admin, producer ids), with retries and backoff.
//! - [`Producer`]: batches records per partition with linger and size limits,
//!   optional compression and idempotence.
//! - [`Consumer`]: a fetch loop over chosen partitions.
//! - Consumer groups: `join_group`, `sync_group`, `heartbeat`, `leave_group`,
//!   `commit_offsets`, `fetch_offsets` on [`Client`].

mod client;
mod connection;
mod consumer;
mod error;
mod groups;
mod producer;
mod tls;

pub use client::{Client, ClientOptions, Produced};
pub use connection::Connection;
pub use consumer::{Consumed, Consumer};
pub use error::{ClientError, Result};
pub use es_core::Compression;
pub use es_protocol::{DeadLetterPlace, ProduceFinding};
pub use groups::{GroupAssignment, GroupMember};
pub use producer::{Producer, ProducerOptions, RecordMetadata};
pub use tls::ClientTls;
