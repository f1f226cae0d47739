//! `GET /cluster`: the cluster as the answering node sees it (`es cluster status`);
//! `POST /cluster/partitions/{topic}/{partition}/leader`: hand a partition's
//! leadership to another node (`es cluster transfer-leader`);
//! `POST /cluster/partitions/{topic}/{partition}/replicas`: move a partition's
//! replicas (`es cluster move`);
//! `POST /cluster/nodes`, `DELETE /cluster/nodes/{node}`: add a node to the
//! cluster or remove one (`es cluster add-node`, `remove-node`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiJson, ApiPath, AppState, Caller};
use crate::api::ErrorBody;
use crate::service::admin::Leadership;
use crate::service::error::Result;

/// How long a transfer may take before the answer says it did not finish: an
/// in-sync target wins its election within one round trip; a lagging one first
/// catches up.
const TRANSFER_WAIT: Duration = Duration::from_secs(10);

/// The cluster as the answering node sees it. On a single node `cluster` is false
/// and the lists are empty.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterStatus {
    pub cluster: bool,
    /// The answering node's id.
    pub node_id: Option<u64>,
    /// The metadata group's leader (Kafka's controller); null mid-election.
    pub controller: Option<u64>,
    /// The leader of `__es_offsets`, which coordinates the consumer groups.
    pub coordinator: Option<u64>,
    /// The nodes whose client addresses this node has learnt (over the peer links).
    pub nodes: Vec<ClusterNode>,
    /// The cluster's members with their peer addresses, as this node applied the
    /// metadata log: every partition's replicas are brought to them.
    pub members: Vec<ClusterMember>,
    /// Every data partition's leadership, by topic then partition.
    pub partitions: Vec<PartitionLeadership>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterNode {
    pub id: u64,
    /// The HTTP API's base URL.
    pub http: String,
    /// The binary protocol's `host:port`.
    pub binary: String,
    /// The Kafka listener's advertised `host:port`.
    pub kafka: String,
    /// Its `cluster.rack` (Kafka's `broker.rack`); null when it has none.
    pub rack: Option<String>,
    /// Data partitions this node leads, as the answering node knows.
    pub leads: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterMember {
    pub id: u64,
    /// Its peer listener's `host:port`.
    pub peer: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PartitionLeadership {
    pub topic: String,
    pub partition: u32,
    /// Null mid-election, and while this node is `fenced`.
    pub leader: Option<u64>,
    /// The Raft term, which is the Kafka leader epoch.
    pub epoch: i32,
    pub replicas: Vec<u64>,
    /// Where the partition is placed, its preferred leader first: `replicas` are
    /// brought to these (they differ while `es cluster move`, add-node or
    /// remove-node is under way).
    pub assigned: Vec<u64>,
    /// The replicas that have every committed entry (Kafka's ISR), as the leader
    /// knows; a follower answering lists every replica.
    pub in_sync: Vec<u64>,
    /// This node was elected leader but has heard from no majority for a lease
    /// (its Raft election timeout): it takes no writes and names no leader until a
    /// majority answers it again or it learns of a newer leader.
    pub fenced: bool,
    /// The partition's Raft group is quiet on this node: idle, it neither ticks nor
    /// heartbeats until the next write; a ping per node pair stands in for its
    /// heartbeats (docs/cluster.md, "Idle groups").
    pub quiesced: bool,
}

#[utoipa::path(get, path = "/cluster", tag = "meta",
    responses(
        (status = 200, description = "The cluster as this node sees it: nodes, controller, coordinator and \
            every partition's leader, epoch, replicas and in-sync replicas; `cluster: false` on a single node",
            body = ClusterStatus),
        (status = 403, description = "unauthorized: needs cluster describe", body = ErrorBody)))]
pub async fn status(State(state): State<AppState>, Caller(who): Caller) -> Result<Json<ClusterStatus>> {
    let Some(view) = state.service.cluster_status(&who)? else {
        return Ok(Json(ClusterStatus {
            cluster: false,
            node_id: None,
            controller: None,
            coordinator: None,
            nodes: Vec::new(),
            members: Vec::new(),
            partitions: Vec::new(),
        }));
    };
    let leads = |id: u64| view.partitions.iter().filter(|(_, _, l)| l.leader == Some(id)).count();
    let nodes = view
        .nodes
        .iter()
        .map(|(id, a)| ClusterNode {
            id: *id,
            http: a.http.clone(),
            binary: a.binary.clone(),
            kafka: format!("{}:{}", a.kafka_host, a.kafka_port),
            rack: a.rack.clone(),
            leads: leads(*id),
        })
        .collect();
    let partitions = view
        .partitions
        .iter()
        .map(|(topic, partition, l)| leadership(topic.clone(), *partition, l))
        .collect();
    let members =
        view.members.iter().map(|(id, peer)| ClusterMember { id: *id, peer: peer.clone() }).collect();
    Ok(Json(ClusterStatus {
        cluster: true,
        node_id: Some(view.node_id),
        controller: view.controller,
        coordinator: view.coordinator,
        nodes,
        members,
        partitions,
    }))
}

fn leadership(topic: String, partition: u32, l: &Leadership) -> PartitionLeadership {
    PartitionLeadership {
        topic,
        partition,
        leader: l.leader,
        epoch: l.epoch.0,
        replicas: l.replicas.clone(),
        assigned: l.assigned.clone(),
        in_sync: l.in_sync.clone(),
        fenced: l.fenced,
        quiesced: l.quiesced,
    }
}

/// Which node should lead.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferLeaderBody {
    /// A replica of the partition (a node id).
    pub to: u64,
}

#[utoipa::path(post, path = "/cluster/partitions/{topic}/{partition}/leader", tag = "meta",
    params(
        ("topic" = String, Path, description = "Topic name"),
        ("partition" = u32, Path, description = "Partition number")),
    request_body = TransferLeaderBody,
    responses(
        (status = 200, description = "The partition's leadership once `to` leads it", body = PartitionLeadership),
        (status = 400, description = "invalid_request: a single node, or `to` is not a replica", body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 421, description = "not_leader: ask the leader (its URL is in the es-leader header)",
            body = ErrorBody),
        (status = 504, description = "timeout: `to` did not take the leadership within 10 s", body = ErrorBody)))]
pub async fn transfer_leader(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<TransferLeaderBody>,
) -> Result<Json<PartitionLeadership>> {
    let partition = super::records::parse_partition(&partition)?;
    let l = state.service.transfer_leader(&who, &topic, partition, body.to, TRANSFER_WAIT).await?;
    Ok(Json(leadership(topic, partition, &l)))
}

/// Where a partition's replicas go.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveReplicasBody {
    /// The new replicas (node ids, members of the cluster), the preferred leader
    /// first.
    pub replicas: Vec<u64>,
}

#[utoipa::path(post, path = "/cluster/partitions/{topic}/{partition}/replicas", tag = "meta",
    params(
        ("topic" = String, Path, description = "Topic name"),
        ("partition" = u32, Path, description = "Partition number")),
    request_body = MoveReplicasBody,
    responses(
        (status = 200, description = "The partition as this node sees it once the move is committed; its \
            leader then adds the new replicas as learners, makes them voters once caught up and drops the \
            old ones (watch `GET /cluster`)", body = PartitionLeadership),
        (status = 400, description = "invalid_request: a single node, no replicas, a node named twice or \
            not a member, or a topic created before placement", body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody)))]
pub async fn move_replicas(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath((topic, partition)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<MoveReplicasBody>,
) -> Result<Json<PartitionLeadership>> {
    let partition = super::records::parse_partition(&partition)?;
    state.service.move_replicas(&who, &topic, partition, body.replicas).await?;
    let l = state.service.leadership(&topic, partition).ok_or_else(|| {
        crate::service::error::BrokerError::Internal("the moved partition has no leadership view".into())
    })?;
    Ok(Json(leadership(topic, partition, &l)))
}

/// The node to add.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddNodeBody {
    /// The new node's id (its `--node-id`): never one the cluster used before.
    pub id: u64,
    /// Its peer listener's `host:port` (its own `--cluster-peers` entry).
    pub peer: String,
}

#[utoipa::path(post, path = "/cluster/nodes", tag = "meta",
    request_body = AddNodeBody,
    responses(
        (status = 200, description = "The members once the addition is committed; each partition's leader \
            then adds the node as a learner and makes it a replica once it caught up", body = ClusterStatus),
        (status = 400, description = "invalid_request: a single node, a bad address, or an id removed before",
            body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody)))]
pub async fn add_node(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<AddNodeBody>,
) -> Result<Json<ClusterStatus>> {
    state.service.add_node(&who, body.id, body.peer).await?;
    status(State(state), Caller(who)).await
}

#[utoipa::path(delete, path = "/cluster/nodes/{node}", tag = "meta",
    params(("node" = u64, Path, description = "The node id to remove")),
    responses(
        (status = 200, description = "The members once the removal is committed; the leaders then drop the \
            node from every partition's replicas", body = ClusterStatus),
        (status = 400, description = "invalid_request: a single node, not a member, or the last member",
            body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody)))]
pub async fn remove_node(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(node): ApiPath<String>,
) -> Result<Json<ClusterStatus>> {
    let id: u64 = node.parse().map_err(|_| {
        crate::service::error::BrokerError::InvalidRequest(format!("{node:?} is not a node id (a number)"))
    })?;
    state.service.remove_node(&who, id).await?;
    status(State(state), Caller(who)).await
}
