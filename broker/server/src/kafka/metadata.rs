//! Metadata and DescribeCluster: one node (the advertised address) leads every
//! partition; topics carry their ids and leader epoch; internal topics are flagged
//! and appear only when asked for by name. Topics are never auto-created: an unknown
//! topic is UNKNOWN_TOPIC_OR_PARTITION whatever `allow_auto_topic_creation` says.
//! With auth on, a listing shows only the topics the caller may describe; a topic
//! named and refused is TOPIC_AUTHORIZATION_FAILED whether it exists or not (as in
//! Kafka), and a refused topic id answers UNKNOWN_TOPIC_ID, without its name.

use es_kafka::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use es_kafka::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use es_kafka::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
};
use uuid::Uuid;

use super::error::{code, kafka_code};
use super::{Ctx, acl_ops, sb, topic_name};
use crate::auth::Auth;
use crate::service::admin::TopicDescription;
use crate::service::error::BrokerError;
use crate::service::{Principal, Result};

/// Which topics a request names: all of them, or a list (by name, or by id).
enum Wanted {
    All,
    Named(Vec<(Option<String>, Uuid)>),
}

fn wanted(version: i16, req: &MetadataRequest) -> Wanted {
    match &req.topics {
        None => Wanted::All,
        // v0 has no null: an empty list means every topic.
        Some(list) if list.is_empty() && version == 0 => Wanted::All,
        Some(list) => Wanted::Named(
            list.iter().map(|t| (t.name.as_ref().map(|n| n.as_str().to_owned()), t.topic_id)).collect(),
        ),
    }
}

pub fn metadata(ctx: &Ctx, who: &Principal, version: i16, req: MetadataRequest) -> MetadataResponse {
    let topics: Vec<MetadataResponseTopic> = match wanted(version, &req) {
        Wanted::All => match ctx.service.list_topics(who) {
            Ok(list) => list.into_iter().map(|t| topic(ctx, who, Some(t.name), Uuid::nil())).collect(),
            Err(e) => {
                return MetadataResponse::default()
                    .with_error_code(kafka_code(&e))
                    .with_brokers(brokers(ctx));
            }
        },
        Wanted::Named(list) => list.into_iter().map(|(name, id)| topic(ctx, who, name, id)).collect(),
    };
    let auth = ctx.service.registry().auth();
    let topics = match req.include_topic_authorized_operations {
        false => topics,
        true => topics.into_iter().map(|t| with_topic_operations(auth, who, t)).collect(),
    };
    let cluster_operations = match req.include_cluster_authorized_operations {
        false => acl_ops::OMITTED,
        true => acl_ops::cluster(auth, who),
    };
    MetadataResponse::default()
        .with_brokers(brokers(ctx))
        .with_cluster_id(Some(sb(ctx.node.cluster_id.clone())))
        .with_controller_id(controller(ctx))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

/// A described topic's authorized operations (a topic answered with an error keeps
/// Kafka's "omitted").
fn with_topic_operations(auth: &Auth, who: &Principal, t: MetadataResponseTopic) -> MetadataResponseTopic {
    match (&t.name, t.error_code) {
        (Some(name), code::NONE) => {
            let bits = acl_ops::topic(auth, who, name.as_str());
            t.with_topic_authorized_operations(bits)
        }
        _ => t,
    }
}

/// This node, or in a cluster every node whose address is known (each node
/// advertises its own; the peers exchange them).
fn brokers(ctx: &Ctx) -> Vec<MetadataResponseBroker> {
    nodes(ctx)
        .into_iter()
        .map(|n| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n.id))
                .with_host(sb(n.host))
                .with_port(n.port)
                .with_rack(n.rack.map(sb))
        })
        .collect()
}

/// A node clients can be sent to, as it advertises itself.
struct Node {
    id: i32,
    host: String,
    port: i32,
    /// `cluster.rack` (Kafka's `broker.rack`).
    rack: Option<String>,
}

fn nodes(ctx: &Ctx) -> Vec<Node> {
    match ctx.service.cluster_nodes() {
        None => {
            vec![Node { id: ctx.node.node_id, host: ctx.node.host.clone(), port: ctx.node.port, rack: None }]
        }
        Some(nodes) => nodes
            .into_iter()
            .map(|(id, a)| Node {
                id: node_id(id),
                host: a.kafka_host,
                port: i32::from(a.kafka_port),
                rack: a.rack,
            })
            .collect(),
    }
}

/// A cluster node id as Kafka's broker id (ids are small; the flag bounds them).
pub(crate) fn node_id(id: u64) -> i32 {
    i32::try_from(id).unwrap_or(i32::MAX)
}

/// The controller: in a cluster the metadata group's leader (-1 mid-election).
fn controller(ctx: &Ctx) -> BrokerId {
    match ctx.service.cluster_controller() {
        None => BrokerId(ctx.node.node_id),
        Some(leader) => BrokerId(leader.map_or(-1, node_id)),
    }
}

/// One topic's answer, by name or (when the name is absent) by id.
fn topic(ctx: &Ctx, who: &Principal, name: Option<String>, id: Uuid) -> MetadataResponseTopic {
    let unknown_id =
        || MetadataResponseTopic::default().with_topic_id(id).with_error_code(code::UNKNOWN_TOPIC_ID);
    let (name, by_id) = match name.filter(|n| !n.is_empty()) {
        Some(n) => (n, false),
        None => match ctx.service.topic_name_by_id(id.into_bytes()) {
            Some(n) => (n, true),
            None => return unknown_id(),
        },
    };
    let described: Result<TopicDescription> = ctx.service.describe_topic(who, &name);
    match described {
        Ok(d) => described_topic(ctx, d),
        // Asked by id and refused: the name must not come back, and the id answers
        // as one that does not exist.
        Err(BrokerError::Denied(_)) if by_id => unknown_id(),
        Err(e) => MetadataResponseTopic::default()
            .with_name(Some(topic_name(name)))
            .with_topic_id(id)
            .with_error_code(kafka_code(&e)),
    }
}

fn described_topic(ctx: &Ctx, d: TopicDescription) -> MetadataResponseTopic {
    let node = BrokerId(ctx.node.node_id);
    let epoch = ctx.service.leader_epoch().0;
    let partitions = (0..d.partitions.len() as u32)
        .map(|p| {
            let answer = MetadataResponsePartition::default().with_partition_index(p as i32);
            let Some(l) = ctx.service.leadership(&d.name, p) else {
                return answer
                    .with_leader_id(node)
                    .with_leader_epoch(epoch)
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node]);
            };
            let ids = |v: Vec<u64>| v.into_iter().map(|n| BrokerId(node_id(n))).collect::<Vec<_>>();
            // Mid-election: LEADER_NOT_AVAILABLE, which clients retry.
            let error = if l.leader.is_none() { code::LEADER_NOT_AVAILABLE } else { code::NONE };
            answer
                .with_error_code(error)
                .with_leader_id(BrokerId(l.leader.map_or(-1, node_id)))
                .with_leader_epoch(l.epoch.0)
                .with_replica_nodes(ids(l.replicas))
                .with_isr_nodes(ids(l.in_sync))
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(d.name)))
        .with_topic_id(Uuid::from_bytes(d.id))
        .with_is_internal(d.internal)
        .with_partitions(partitions)
}

pub fn describe_cluster(
    ctx: &Ctx,
    who: &Principal,
    _version: i16,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let brokers = nodes(ctx)
        .into_iter()
        .map(|n| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(n.id))
                .with_host(sb(n.host))
                .with_port(n.port)
                .with_rack(n.rack.map(sb))
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(sb(ctx.node.cluster_id.clone()))
        .with_controller_id(controller(ctx))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(match req.include_cluster_authorized_operations {
            false => acl_ops::OMITTED,
            true => acl_ops::cluster(ctx.service.registry().auth(), who),
        })
}
