//! The OpenAPI document, generated from the handlers' annotations so it cannot
//! drift from the routes.

use axum::Json;
use utoipa::OpenApi;

use crate::api;
use crate::config::TopicConfig;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "es broker HTTP API",
        description = "Topics, produce and consume over HTTP/JSON. Errors are {\"error\": {\"code\", \"message\"}}."
    ),
    paths(
        super::topics::healthz,
        super::topics::readyz,
        super::topics::list,
        super::topics::create,
        super::topics::describe,
        super::topics::delete,
        super::topics::get_config,
        super::topics::alter_config,
        super::records::produce,
        super::records::consume,
        super::records::offsets,
        openapi_json,
    ),
    components(schemas(
        api::ErrorBody,
        api::ErrorDetail,
        api::Encoding,
        api::CreateTopicRequest,
        api::AlterConfigRequest,
        api::TopicSummary,
        api::TopicList,
        api::PartitionDescription,
        api::TopicDescription,
        api::ConfigResponse,
        api::WireHeader,
        api::ProduceRequest,
        api::ProduceRecord,
        api::RecordOffset,
        api::ProduceResponse,
        api::ConsumedRecord,
        api::ConsumeResponse,
        api::PartitionOffsets,
        api::OffsetsResponse,
        api::Status,
        TopicConfig,
    ))
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "This document")))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
