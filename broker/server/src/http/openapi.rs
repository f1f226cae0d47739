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
        super::records::init_producer,
        super::plugins::upload,
        super::plugins::list,
        super::plugins::describe,
        super::plugins::remove,
        super::plugins::get_validators,
        super::plugins::set_validators,
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
        api::ProducerFields,
        api::ProducerIdResponse,
        api::ConsumedRecord,
        api::ConsumeResponse,
        api::PartitionOffsets,
        api::OffsetsResponse,
        api::Status,
        TopicConfig,
        super::plugins::PluginDescription,
        super::plugins::PluginList,
        super::plugins::ValidatorsRequest,
        super::plugins::BoundValidator,
        super::plugins::ValidatorsResponse,
        crate::plugins::Manifest,
        crate::plugins::LimitsSpec,
        crate::plugins::binding::ValidatorBinding,
        crate::plugins::binding::FailurePolicy,
        crate::plugins::binding::Finding,
        crate::plugins::binding::Outcome,
    ))
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "This document")))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits;

    /// The documented bounds are the enforced ones.
    #[test]
    fn consume_parameter_bounds_match_the_limits() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let params = doc["paths"]["/topics/{topic}/partitions/{partition}/records"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .clone();
        let max = |name: &str| {
            params
                .iter()
                .find(|p| p["name"] == name)
                .and_then(|p| p["schema"]["maximum"].as_u64())
                .unwrap_or_else(|| panic!("{name} has no maximum"))
        };
        assert_eq!(max("max_records"), limits::CONSUME_RECORDS_MAX as u64);
        assert_eq!(max("max_bytes"), limits::CONSUME_BYTES_MAX as u64);
        assert_eq!(max("wait_ms"), limits::WAIT_MS_MAX);
        let create = &doc["components"]["schemas"]["CreateTopicRequest"]["properties"];
        assert_eq!(create["partitions"]["maximum"].as_u64(), Some(u64::from(limits::PARTITIONS_MAX)));
    }
}
