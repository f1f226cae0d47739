//! Topic administration routes (create, list, describe, delete, config) and the
//! health probes.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;

use super::{ApiJson, ApiPath, AppState, Caller};
use crate::api::{
    AddPartitionsRequest, AlterConfigRequest, ConfigResponse, CreateTopicRequest, ErrorBody,
    PartitionDescription, Status, TopicDescription, TopicList, TopicSummary,
};
use crate::service::admin;
use crate::service::error::{BrokerError, Result};

#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is alive", body = Status)))]
pub async fn healthz() -> Json<Status> {
    Json(Status { status: "ok".into(), long_polls: None })
}

#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Recovered and serving", body = Status),
        (status = 503, description = "Shutting down", body = ErrorBody)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Status>> {
    // The listener is bound only after recovery, so serving means ready.
    if state.registry.is_shutting_down() {
        return Err(BrokerError::ShuttingDown);
    }
    Ok(Json(Status { status: "ready".into(), long_polls: Some(state.service.parked_polls()) }))
}

#[utoipa::path(get, path = "/topics", tag = "topics",
    responses((status = 200, body = TopicList)))]
pub async fn list(State(state): State<AppState>, Caller(who): Caller) -> Result<Json<TopicList>> {
    let topics = state
        .service
        .list_topics(&who)?
        .into_iter()
        .map(|t| TopicSummary { name: t.name, partition_count: t.partition_count })
        .collect();
    Ok(Json(TopicList { topics }))
}

#[utoipa::path(post, path = "/topics", tag = "topics", request_body = CreateTopicRequest,
    responses(
        (status = 201, description = "Created, metadata on disk", body = TopicDescription),
        (status = 400, description = "invalid_topic_name, invalid_config, invalid_request, bad_json", body = ErrorBody),
        (status = 409, description = "topic_already_exists", body = ErrorBody),
        (status = 413, description = "request_too_large", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(req): ApiJson<CreateTopicRequest>,
) -> Result<(StatusCode, Json<TopicDescription>)> {
    let mut config = req.config;
    if let Some(rf) = req.replication_factor {
        config.insert(crate::registry::REPLICATION_FACTOR.to_owned(), Value::from(rf));
    }
    let topic = state.service.create_topic(&who, req.name, req.partitions, config).await?;
    Ok((StatusCode::CREATED, Json(describe_topic(topic))))
}

#[utoipa::path(get, path = "/topics/{topic}", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 200, body = TopicDescription),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody)))]
pub async fn describe(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<TopicDescription>> {
    Ok(Json(describe_topic(state.service.describe_topic(&who, &name)?)))
}

#[utoipa::path(delete, path = "/topics/{topic}", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode> {
    state.service.delete_topic(&who, name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/topics/{topic}/config", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 200, body = ConfigResponse),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody)))]
pub async fn get_config(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ConfigResponse>> {
    let config = state.service.topic_config(&who, &name)?;
    Ok(Json(ConfigResponse { config }))
}

#[utoipa::path(patch, path = "/topics/{topic}/config", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = AlterConfigRequest,
    responses(
        (status = 200, description = "The whole config after the change", body = ConfigResponse),
        (status = 400, description = "invalid_config, bad_json, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody),
        (status = 413, description = "request_too_large", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn alter_config(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<AlterConfigRequest>,
) -> Result<Json<ConfigResponse>> {
    let config = state.service.alter_topic_config(&who, name, req.config).await?;
    Ok(Json(ConfigResponse { config }))
}

#[utoipa::path(post, path = "/topics/{topic}/partitions", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = AddPartitionsRequest,
    responses(
        (status = 200, description = "The topic after growing, metadata on disk", body = TopicDescription),
        (status = 400, description = "invalid_request (partitions only grow), bad_json, invalid_topic_name", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn add_partitions(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<AddPartitionsRequest>,
) -> Result<Json<TopicDescription>> {
    let topic = state.service.add_partitions(&who, name, req.count).await?;
    Ok(Json(describe_topic(topic)))
}

fn describe_topic(topic: admin::TopicDescription) -> TopicDescription {
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(i, info)| PartitionDescription {
            partition: i as u32,
            log_start_offset: info.log_start_offset,
            high_watermark: info.high_watermark,
            size_bytes: info.size_bytes,
            segment_count: info.segment_count,
            cold_size_bytes: info.cold_size_bytes,
            cold_segment_count: info.cold_segment_count,
        })
        .collect();
    TopicDescription {
        name: topic.name,
        partition_count: topic.partitions.len() as u32,
        config: topic.config,
        partitions,
    }
}
