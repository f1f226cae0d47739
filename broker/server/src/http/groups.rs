//! Consumer-group routes: the Kafka-style member protocol (join, sync, heartbeat,
//! leave, commit, fetch committed), the simple HTTP session (`members`), and admin
//! (list, describe with lag, reset offsets, delete).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use es_groups::{GroupDescription, Joined, SyncResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ApiJson, ApiPath, AppState};
use crate::error::{Result, ServerError};
use crate::groups::{
    CommittedOffset, PartitionLag, REBALANCE_TIMEOUT_MS_DEFAULT, ResetTo, SESSION_TIMEOUT_MS_DEFAULT,
};

/// The group routes, merged into the API router.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/groups", get(list))
        .route("/groups/{group}", get(describe).delete(delete))
        .route("/groups/{group}/join", post(join))
        .route("/groups/{group}/sync", post(sync))
        .route("/groups/{group}/heartbeat", post(heartbeat))
        .route("/groups/{group}/leave", post(leave))
        .route("/groups/{group}/offsets", get(fetch_offsets).post(commit))
        .route("/groups/{group}/reset-offsets", post(reset))
        .merge(super::group_sessions::routes())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// Absent (or empty) for a new member; a known member rejoins with its id.
    #[serde(default)]
    pub member_id: Option<String>,
    #[serde(default)]
    pub client_id: String,
    pub topics: Vec<String>,
    pub session_timeout_ms: Option<u64>,
    pub rebalance_timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberBody {
    pub member_id: String,
    #[serde(default)]
    pub generation: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    /// Empty, with generation -1, for a standalone commit to a group without members.
    #[serde(default)]
    pub member_id: String,
    #[serde(default = "minus_one")]
    pub generation: i32,
    pub offsets: Vec<CommittedOffset>,
}

fn minus_one() -> i32 {
    -1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetBody {
    pub topic: String,
    /// Default: every partition of the topic.
    pub partitions: Option<Vec<u32>>,
    /// `earliest`, `latest`, `timestamp` (with `timestamp`) or `offset` (with `offset`).
    pub to: String,
    pub timestamp: Option<i64>,
    pub offset: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Described {
    #[serde(flatten)]
    pub group: GroupDescription,
    pub partitions: Vec<PartitionLag>,
}

pub async fn join(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<JoinBody>,
) -> Result<Json<Joined>> {
    let joined = state.registry.groups().join(
        &state.registry,
        &group,
        b.member_id,
        &b.client_id,
        &b.topics,
        b.session_timeout_ms.unwrap_or(SESSION_TIMEOUT_MS_DEFAULT),
        b.rebalance_timeout_ms.unwrap_or(REBALANCE_TIMEOUT_MS_DEFAULT),
    )?;
    Ok(Json(joined))
}

pub async fn sync(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<Json<SyncResult>> {
    Ok(Json(state.registry.groups().sync(&group, &b.member_id, b.generation)?))
}

pub async fn heartbeat(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<Json<Value>> {
    state.registry.groups().heartbeat(&group, &b.member_id, b.generation)?;
    Ok(Json(json!({"status": "ok"})))
}

pub async fn leave(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<StatusCode> {
    state.registry.groups().leave(&group, &b.member_id)?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn commit(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<CommitBody>,
) -> Result<Json<Value>> {
    let registry = &state.registry;
    registry.groups().commit(registry, &group, &b.member_id, b.generation, b.offsets).await?;
    Ok(Json(json!({"status": "ok"})))
}

pub async fn fetch_offsets(State(state): State<AppState>, ApiPath(group): ApiPath<String>) -> Json<Value> {
    Json(json!({"group": group, "offsets": state.registry.groups().fetch(&group)}))
}

pub async fn list(State(state): State<AppState>) -> Json<Value> {
    let groups: Vec<Value> =
        state.registry.groups().list().into_iter().map(|(g, s)| json!({"group": g, "state": s})).collect();
    Json(json!({"groups": groups}))
}

pub async fn describe(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<Described>> {
    let (group, partitions) = state.registry.groups().describe(&state.registry, &group)?;
    Ok(Json(Described { group, partitions }))
}

pub async fn reset(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<ResetBody>,
) -> Result<Json<Value>> {
    let to = match (b.to.as_str(), b.timestamp, b.offset) {
        ("earliest", None, None) => ResetTo::Earliest,
        ("latest", None, None) => ResetTo::Latest,
        ("timestamp", Some(ts), None) if ts >= 0 => ResetTo::Timestamp(ts),
        ("offset", None, Some(o)) => ResetTo::Offset(o),
        _ => {
            return Err(ServerError::InvalidRequest(
                "to is earliest, latest, timestamp (with a timestamp >= 0) or offset (with an offset)".into(),
            ));
        }
    };
    let registry = &state.registry;
    let offsets = registry.groups().reset(registry, &group, &b.topic, b.partitions, to).await?;
    Ok(Json(json!({"group": group, "offsets": offsets})))
}

pub async fn delete(State(state): State<AppState>, ApiPath(group): ApiPath<String>) -> Result<StatusCode> {
    state.registry.groups().delete(&group).await?;
    Ok(StatusCode::NO_CONTENT)
}
