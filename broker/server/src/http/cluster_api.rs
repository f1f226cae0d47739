//! `GET /cluster`: the cluster as the answering node sees it (`es cluster status`).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::{AppState, Caller};
use crate::api::ErrorBody;
use crate::service::error::Result;

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
    /// Data partitions this node leads, as the answering node knows.
    pub leads: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PartitionLeadership {
    pub topic: String,
    pub partition: u32,
    /// Null mid-election.
    pub leader: Option<u64>,
    /// The Raft term, which is the Kafka leader epoch.
    pub epoch: i32,
    pub replicas: Vec<u64>,
    /// The replicas that have every committed entry (Kafka's ISR), as the leader
    /// knows; a follower answering lists every replica.
    pub in_sync: Vec<u64>,
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
            leads: leads(*id),
        })
        .collect();
    let partitions = view
        .partitions
        .iter()
        .map(|(topic, partition, l)| PartitionLeadership {
            topic: topic.clone(),
            partition: *partition,
            leader: l.leader,
            epoch: l.epoch.0,
            replicas: l.replicas.clone(),
            in_sync: l.in_sync.clone(),
        })
        .collect();
    Ok(Json(ClusterStatus {
        cluster: true,
        node_id: Some(view.node_id),
        controller: view.controller,
        coordinator: view.coordinator,
        nodes,
        partitions,
    }))
}
