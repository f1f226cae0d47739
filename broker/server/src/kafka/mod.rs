//! The Kafka wire-protocol listener (`--bind-kafka`, default 127.0.0.1:9092).
//!
//! `es-kafka` frames, pre-scans and decodes; this module maps each request onto the
//! one [`Service`] and encodes the answer, one file per API family. Per connection,
//! requests are read in order and answered strictly in request order (Kafka clients
//! match responses by position, not only by correlation id), while produces' fsync
//! waits overlap: a produce is appended before the next frame is read, and its reply
//! is a task the writer awaits in turn (`connection.rs`). Metadata and
//! FindCoordinator name the same node, the advertised host and port. With
//! `--kafka-tls-cert` the listener speaks SSL (Kafka's `security.protocol=ssl`).

mod acl_ops;
mod admin;
mod configs;
mod connection;
mod coordinator;
mod dispatch;
pub mod error;
mod fenced;
mod fetch;
mod fetch_encode;
pub mod groups;
mod metadata;
mod offsets;
mod produce;
mod producers;
mod sasl;
mod throttle;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::service::Service;

/// The broker as Kafka clients see it: one node, at the advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaNode {
    pub node_id: i32,
    /// Never 0.0.0.0: clients connect to what Metadata says.
    pub host: String,
    pub port: i32,
    /// The cluster id Metadata and DescribeCluster answer.
    pub cluster_id: String,
}

/// Shared state of the Kafka listener.
pub(crate) struct Ctx {
    pub service: Service,
    pub node: KafkaNode,
}

/// Accepts Kafka connections until `shutdown` turns true, then lets open connections
/// finish their in-flight requests (bounded) and returns.
pub async fn serve_kafka(
    listener: TcpListener,
    service: Service,
    node: KafkaNode,
    tls: Option<crate::tls::ServerTls>,
    shutdown: watch::Receiver<bool>,
) {
    let service = service.with_protocol(crate::metrics::Protocol::Kafka);
    let metrics = service.metrics().clone();
    let ctx = Arc::new(Ctx { service, node });
    let limits = ctx.service.registry().options().listeners.kafka;
    crate::listener::accept_until_shutdown(
        listener,
        "kafka",
        limits,
        (metrics, crate::metrics::Protocol::Kafka),
        tls,
        shutdown,
        move |stream, peer, shutdown| connection::run(stream, peer, ctx.clone(), limits, shutdown),
    )
    .await;
}

/// A Kafka string from an owned one.
pub(crate) fn sb(s: impl Into<String>) -> es_kafka::kafka_protocol::protocol::StrBytes {
    es_kafka::kafka_protocol::protocol::StrBytes::from_string(s.into())
}

/// A Kafka topic name from an owned string.
pub(crate) fn topic_name(s: impl Into<String>) -> es_kafka::kafka_protocol::messages::TopicName {
    es_kafka::kafka_protocol::messages::TopicName(sb(s))
}
