//! The es broker's serving side: the topic registry with durable metadata, the
//! HTTP/JSON API (axum), the binary and Kafka wire-protocol listeners, the Kafka-compatible partitioner and graceful shutdown.
//!
//! The binary (`es-broker` in es-cli) parses flags, binds the listener and hands it
//! to [`serve`] together with a shutdown future, so tests can drive the same code.

pub mod api;
pub mod auth;
mod binary;
mod classic_groups;
pub mod cluster;
mod config;
pub mod groups;
mod http;
pub mod kafka;
pub mod limits;
pub mod listener;
pub mod metrics;
pub use es_core::partitioner;
pub mod plugins;
mod registry;
pub mod schemas;
pub mod service;
mod store;
pub mod tls;

pub use binary::{BinaryState, serve_binary};
pub use config::TopicConfig;
pub use es_groups::classic::ClassicConfig as KafkaGroupConfig;
pub use http::{router, serve};
pub use kafka::{KafkaNode, serve_kafka};
pub use registry::{BrokerOptions, Registry, StartupReport};
pub use service::{BrokerError, Result, Service};
