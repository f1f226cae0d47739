//! Consumer-group routes: the Kafka-style member protocol (join, sync, heartbeat,
//! leave, commit, fetch committed), the simple HTTP session (`members`), and admin
//! (list, describe with lag, reset offsets, delete).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Deserialize;
use utoipa::ToSchema;

use super::groups_api::{GroupDescribed, GroupList, GroupOffsets, GroupSummary, JoinAnswer, SyncAnswer};
use super::{ApiJson, ApiPath, AppState, Caller};
use crate::api::{ErrorBody, Status};
use crate::groups::{CommittedOffset, REBALANCE_TIMEOUT_MS_DEFAULT, ResetTo, SESSION_TIMEOUT_MS_DEFAULT};
use crate::service::error::{BrokerError, Result};
use crate::service::groups::JoinGroup;

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

/// `POST /groups/{g}/join`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"topics": ["st"], "client_id": "app"}))]
pub struct JoinBody {
    /// Absent (or empty) for a new member; a known member rejoins with its id.
    #[serde(default)]
    pub member_id: Option<String>,
    #[serde(default)]
    pub client_id: String,
    /// The topics to read; every member of a group subscribes to the same ones.
    #[schema(min_items = 1)]
    pub topics: Vec<String>,
    /// Default 10000.
    pub session_timeout_ms: Option<u64>,
    /// Default 30000.
    pub rebalance_timeout_ms: Option<u64>,
}

/// `POST /groups/{g}/sync`, `heartbeat` and `leave`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberBody {
    pub member_id: String,
    #[serde(default)]
    pub generation: i32,
}

/// `POST /groups/{g}/offsets`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"offsets": [{"topic": "st", "partition": 0, "offset": 0}]}))]
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

/// `POST /groups/{g}/reset-offsets`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"topic": "st", "to": "earliest"}))]
pub struct ResetBody {
    pub topic: String,
    /// Default: every partition of the topic.
    pub partitions: Option<Vec<u32>>,
    /// `earliest`, `latest`, `timestamp` (with `timestamp`) or `offset` (with `offset`).
    #[schema(pattern = "^(earliest|latest|timestamp|offset)$")]
    pub to: String,
    pub timestamp: Option<i64>,
    pub offset: Option<u64>,
}

#[utoipa::path(post, path = "/groups/{group}/join", tag = "groups",
    params(("group" = String, Path, description = "Group id (1 to 249 characters)")),
    request_body = JoinBody,
    responses(
        (status = 200, description = "Joined (or rejoined) the current generation", body = JoinAnswer),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody),
        (status = 409, description = "unknown_member, inconsistent_subscription", body = ErrorBody)))]
pub async fn join(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<JoinBody>,
) -> Result<Json<JoinAnswer>> {
    let join = JoinGroup {
        group,
        member_id: b.member_id,
        client_id: b.client_id,
        topics: b.topics,
        session_timeout_ms: b.session_timeout_ms.unwrap_or(SESSION_TIMEOUT_MS_DEFAULT),
        rebalance_timeout_ms: b.rebalance_timeout_ms.unwrap_or(REBALANCE_TIMEOUT_MS_DEFAULT),
    };
    Ok(Json(state.service.join_group(&who, join)?.into()))
}

#[utoipa::path(post, path = "/groups/{group}/sync", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    request_body = MemberBody,
    responses(
        (status = 200, description = "The member's assignment for the generation", body = SyncAnswer),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 409, description = "unknown_member, illegal_generation, rebalance_in_progress", body = ErrorBody)))]
pub async fn sync(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<Json<SyncAnswer>> {
    Ok(Json(state.service.sync_group(&who, &group, &b.member_id, b.generation)?.into()))
}

#[utoipa::path(post, path = "/groups/{group}/heartbeat", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    request_body = MemberBody,
    responses(
        (status = 200, description = "`{\"status\": \"ok\"}`", body = Status),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 409, description = "unknown_member, illegal_generation, rebalance_in_progress (rejoin and sync)", body = ErrorBody)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<Json<Status>> {
    state.service.heartbeat(&who, &group, &b.member_id, b.generation)?;
    Ok(Json(Status { status: "ok".into(), long_polls: None }))
}

#[utoipa::path(post, path = "/groups/{group}/leave", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    request_body = MemberBody,
    responses(
        (status = 204, description = "Left; the member's partitions go to the others"),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 409, description = "unknown_member", body = ErrorBody)))]
pub async fn leave(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<MemberBody>,
) -> Result<StatusCode> {
    state.service.leave_group(&who, &group, &b.member_id)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/groups/{group}/offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id (1 to 249 characters)")),
    request_body = CommitBody,
    responses(
        (status = 200, description = "Committed and fsynced: `{\"status\": \"ok\"}`", body = Status),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 409, description = "unknown_member, illegal_generation, rebalance_in_progress", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn commit(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<CommitBody>,
) -> Result<Json<Status>> {
    state.service.commit_offsets(&who, &group, &b.member_id, b.generation, b.offsets).await?;
    Ok(Json(Status { status: "ok".into(), long_polls: None }))
}

#[utoipa::path(get, path = "/groups/{group}/offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    responses(
        (status = 200, description = "The committed offsets (none for an unknown group)", body = GroupOffsets),
        (status = 400, description = "invalid_request", body = ErrorBody)))]
pub async fn fetch_offsets(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupOffsets>> {
    let offsets = state.service.fetch_offsets(&who, &group)?;
    Ok(Json(GroupOffsets { group, offsets }))
}

#[utoipa::path(get, path = "/groups", tag = "groups",
    responses((status = 200, description = "Groups with members or committed offsets", body = GroupList)))]
pub async fn list(State(state): State<AppState>, Caller(who): Caller) -> Result<Json<GroupList>> {
    let groups = state.service.list_groups(&who)?.into_iter();
    let groups =
        groups.map(|g| GroupSummary { group: g.group, state: g.state, kind: g.kind.as_str().to_owned() });
    Ok(Json(GroupList { groups: groups.collect() }))
}

#[utoipa::path(get, path = "/groups/{group}", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    responses(
        (status = 200, body = GroupDescribed),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "group_not_found", body = ErrorBody)))]
pub async fn describe(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<GroupDescribed>> {
    let (group, partitions) = state.service.describe_group(&who, &group).await?;
    Ok(Json(GroupDescribed::new(group, partitions)))
}

#[utoipa::path(post, path = "/groups/{group}/reset-offsets", tag = "groups",
    params(("group" = String, Path, description = "Group id (1 to 249 characters)")),
    request_body = ResetBody,
    responses(
        (status = 200, description = "The topic's committed offsets after the reset (fsynced)", body = GroupOffsets),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found", body = ErrorBody),
        (status = 409, description = "group_not_empty: the group has members", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn reset(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<ResetBody>,
) -> Result<Json<GroupOffsets>> {
    let to = match (b.to.as_str(), b.timestamp, b.offset) {
        ("earliest", None, None) => ResetTo::Earliest,
        ("latest", None, None) => ResetTo::Latest,
        ("timestamp", Some(ts), None) if ts >= 0 => ResetTo::Timestamp(ts),
        ("offset", None, Some(o)) => ResetTo::Offset(o),
        _ => {
            return Err(BrokerError::InvalidRequest(
                "to is earliest, latest, timestamp (with a timestamp >= 0) or offset (with an offset)".into(),
            ));
        }
    };
    let offsets = state.service.reset_group_offsets(&who, &group, &b.topic, b.partitions, to).await?;
    Ok(Json(GroupOffsets { group, offsets }))
}

#[utoipa::path(delete, path = "/groups/{group}", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    responses(
        (status = 204, description = "Deleted with its committed offsets (tombstones, fsynced)"),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "group_not_found", body = ErrorBody),
        (status = 409, description = "group_not_empty: the group has members", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
) -> Result<StatusCode> {
    state.service.delete_group(&who, &group).await?;
    Ok(StatusCode::NO_CONTENT)
}
