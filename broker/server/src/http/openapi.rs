//! The OpenAPI document, generated from the handlers' annotations so it cannot
//! drift from the routes.

use axum::Json;
use utoipa::OpenApi;

use utoipa::openapi::path::Operation;
use utoipa::openapi::{Content, Ref, RefOr, Response};

use super::groups_api as gr;
use super::schemas::{
    CONTENT_TYPE as REGISTRY_CONTENT_TYPE, REQUEST_CONTENT_TYPES as REGISTRY_REQUEST_TYPES,
};
use super::schemas_api as sr;
use crate::api;
use crate::config::TopicConfig;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "es broker HTTP API",
        description = "Topics, produce and consume, consumer groups and plugins over HTTP/JSON; errors are \
            {\"error\": {\"code\", \"message\"}}. The schema registry under /registry speaks Confluent \
            Schema Registry's REST API; its errors are {\"error_code\", \"message\"}."
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
        super::topics::add_partitions,
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
        super::groups::list,
        super::groups::describe,
        super::groups::delete,
        super::groups::join,
        super::groups::sync,
        super::groups::heartbeat,
        super::groups::leave,
        super::groups::fetch_offsets,
        super::groups::commit,
        super::groups::reset,
        super::group_sessions::create,
        super::group_sessions::poll,
        super::group_sessions::commit_now,
        super::group_sessions::remove,
        super::schemas::root,
        super::schemas::root_post,
        super::schemas::metadata_id,
        super::schemas::metadata_version,
        super::schemas::list_subjects_slash,
        super::schemas::list_schemas,
        super::schemas::list_schemas_slash,
        super::schemas::subject_metadata,
        super::schemas::contexts,
        super::schemas::delete_context,
        super::schemas::modify_tags,
        super::schemas::list_subjects,
        super::schemas::lookup,
        super::schemas::delete_subject,
        super::schemas::list_versions,
        super::schemas::register,
        super::schemas::get_version,
        super::schemas::delete_version,
        super::schemas::get_version_schema,
        super::schemas::referenced_by,
        super::schemas::schema_types,
        super::schemas::schema_by_id,
        super::schemas::schema_text_by_id,
        super::schemas::id_versions,
        super::schemas::id_subjects,
        super::schemas::compatibility_all,
        super::schemas::compatibility_version,
        super::schemas::get_global_config,
        super::schemas::put_global_config,
        super::schemas::delete_global_config,
        super::schemas::get_config,
        super::schemas::put_config,
        super::schemas::delete_config,
        super::schemas::get_global_mode,
        super::schemas::put_global_mode,
        super::schemas::delete_global_mode,
        super::schemas::get_mode,
        super::schemas::put_mode,
        super::schemas::delete_mode,
        super::keys::create,
        super::keys::list,
        super::keys::describe,
        super::keys::revoke,
        super::keys::rotate,
        super::keys::grant,
        super::keys::set_quota,
        super::metrics::scrape,
        super::cluster_api::status,
        super::cluster_api::transfer_leader,
        super::cluster_api::move_replicas,
        super::cluster_api::add_node,
        super::cluster_api::remove_node,
        super::snapshots::take,
        super::snapshots::renew,
        super::snapshots::release,
        openapi_json,
    ),
    components(schemas(
        super::cluster_api::ClusterStatus,
        super::cluster_api::ClusterNode,
        super::cluster_api::PartitionLeadership,
        super::cluster_api::TransferLeaderBody,
        super::cluster_api::MoveReplicasBody,
        super::cluster_api::AddNodeBody,
        super::cluster_api::ClusterMember,
        super::snapshots::LeaseBody,
        super::snapshots::LeaseView,
        crate::registry::snapshot::SnapshotView,
        crate::registry::snapshot::SnapshotPartition,
        crate::auth::admin::KeyView,
        crate::auth::admin::IssuedKey,
        crate::auth::admin::CreateKeyBody,
        crate::auth::admin::GrantsBody,
        crate::auth::admin::KeyQuotaBody,
        crate::auth::admin::KeyList,
        api::ErrorBody,
        api::ErrorDetail,
        api::Encoding,
        api::CreateTopicRequest,
        api::AlterConfigRequest,
        api::AddPartitionsRequest,
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
        crate::plugins::binding::BindingMode,
        crate::plugins::binding::FailurePolicy,
        crate::plugins::binding::Finding,
        crate::plugins::binding::Outcome,
        super::groups::JoinBody,
        super::groups::MemberBody,
        super::groups::CommitBody,
        super::groups::ResetBody,
        super::group_sessions::CreateBody,
        crate::groups::CommittedOffset,
        crate::groups::PartitionLag,
        gr::GroupPartition,
        gr::JoinAnswer,
        gr::SyncAnswer,
        gr::GroupStateName,
        gr::GroupMember,
        gr::GroupDescribed,
        gr::GroupSummary,
        gr::GroupList,
        gr::GroupOffsets,
        gr::SessionJoined,
        gr::SessionRecord,
        gr::SessionPoll,
        gr::SessionOffset,
        gr::SessionCommitted,
        sr::RegistryErrorBody,
        sr::VersionParam,
        sr::SchemaTypeName,
        sr::SchemaReference,
        sr::SchemaRequest,
        sr::SchemaVersion,
        sr::SchemaText,
        sr::SubjectVersionPair,
        sr::CompatibilityAnswer,
        sr::CompatibilityLevel,
        sr::RegistryConfig,
        sr::RegistryConfigSet,
        sr::ConfigUpdate,
        sr::ModeName,
        sr::RegistryMode,
        sr::ModeUpdate,
        sr::SchemaMetadata,
        sr::SchemaRuleSet,
        sr::TagSchemaBody,
        sr::SchemaTagsBody,
        sr::SchemaEntity,
        sr::SchemaEntityType,
        sr::RegisterAnswer,
        sr::ConfigExtras,
        sr::ServerClusterId,
        sr::ClusterScope,
        sr::ServerVersion,
    )),
    modifiers(&RegistryMediaTypes),
)]
pub struct ApiDoc;

/// The schema registry's media types: bodies in any of the three JSON types
/// Confluent's clients send, answers in `application/vnd.schemaregistry.v1+json`;
/// and the broker-wide refusals that come before a registry handler runs.
struct RegistryMediaTypes;

impl utoipa::Modify for RegistryMediaTypes {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        for (path, item) in doc.paths.paths.iter_mut() {
            if !path.starts_with("/registry/") {
                continue;
            }
            let operations =
                [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
            for op in operations.into_iter().flatten() {
                registry_media_types(op);
            }
        }
    }
}

fn registry_media_types(op: &mut Operation) {
    if let Some(body) = op.request_body.as_mut()
        && let Some(content) = body.content.remove("application/json")
    {
        for media in REGISTRY_REQUEST_TYPES {
            body.content.insert(media.to_owned(), content.clone());
        }
        // Every route with a body reads it as Confluent does (`SrJson`).
        let refusals = [
            ("400", "400: the body is not JSON, or JSON that is not an object"),
            ("415", "415: a content type the registry does not read"),
        ];
        for (status, description) in refusals {
            let error = Response::builder()
                .description(description)
                .content("application/json", Content::new(Some(Ref::from_schema_name("RegistryErrorBody"))))
                .build();
            op.responses.responses.entry(status.to_owned()).or_insert(RefOr::T(error));
        }
    }
    for response in op.responses.responses.values_mut() {
        if let RefOr::T(response) = response
            && let Some(content) = response.content.shift_remove("application/json")
        {
            response.content.insert(REGISTRY_CONTENT_TYPE.to_owned(), content);
        }
    }
    // Served by the broker before the registry sees the request, in the broker's shape.
    let overloaded = Response::builder()
        .description("overloaded: the broker already serves --max-in-flight-requests requests")
        .content("application/json", Content::new(Some(Ref::from_schema_name("ErrorBody"))))
        .build();
    op.responses.responses.insert("503".to_owned(), RefOr::T(overloaded));
}

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
        let lease = &doc["components"]["schemas"]["LeaseBody"]["properties"]["lease_ms"];
        assert_eq!(lease["minimum"].as_u64(), Some(limits::SNAPSHOT_LEASE_MS_MIN), "{lease}");
        assert_eq!(lease["maximum"].as_u64(), Some(limits::SNAPSHOT_LEASE_MS_MAX), "{lease}");
    }

    /// Every registry and group route is documented, with the registry's media types.
    #[test]
    fn registry_and_group_routes_are_documented() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        let expected: &[(&str, &[&str])] = &[
            ("/registry/", &["get", "post"]),
            ("/registry/subjects/", &["get"]),
            ("/registry/schemas", &["get"]),
            ("/registry/schemas/", &["get"]),
            ("/registry/v1/metadata/id", &["get"]),
            ("/registry/v1/metadata/version", &["get"]),
            ("/registry/subjects/{subject}/metadata", &["get"]),
            ("/registry/contexts", &["get"]),
            ("/registry/subjects", &["get"]),
            ("/registry/subjects/{subject}", &["post", "delete"]),
            ("/registry/subjects/{subject}/versions", &["get", "post"]),
            ("/registry/subjects/{subject}/versions/{version}", &["get", "delete"]),
            ("/registry/subjects/{subject}/versions/{version}/schema", &["get"]),
            ("/registry/subjects/{subject}/versions/{version}/referencedby", &["get"]),
            ("/registry/schemas/types", &["get"]),
            ("/registry/schemas/ids/{id}", &["get"]),
            ("/registry/schemas/ids/{id}/schema", &["get"]),
            ("/registry/schemas/ids/{id}/versions", &["get"]),
            ("/registry/schemas/ids/{id}/subjects", &["get"]),
            ("/registry/compatibility/subjects/{subject}/versions", &["post"]),
            ("/registry/compatibility/subjects/{subject}/versions/{version}", &["post"]),
            ("/registry/config", &["get", "put", "delete"]),
            ("/registry/config/{subject}", &["get", "put", "delete"]),
            ("/registry/mode", &["get", "put", "delete"]),
            ("/registry/mode/{subject}", &["get", "put", "delete"]),
            ("/groups", &["get"]),
            ("/groups/{group}", &["get", "delete"]),
            ("/groups/{group}/join", &["post"]),
            ("/groups/{group}/sync", &["post"]),
            ("/groups/{group}/heartbeat", &["post"]),
            ("/groups/{group}/leave", &["post"]),
            ("/groups/{group}/offsets", &["get", "post"]),
            ("/groups/{group}/reset-offsets", &["post"]),
            ("/groups/{group}/members", &["post"]),
            ("/groups/{group}/members/{member}", &["delete"]),
            ("/groups/{group}/members/{member}/records", &["get"]),
            ("/groups/{group}/members/{member}/commit", &["post"]),
        ];
        for (path, methods) in expected {
            let item = paths.get(*path).unwrap_or_else(|| panic!("{path} is not documented"));
            for method in *methods {
                assert!(item.get(*method).is_some(), "{method} {path} is not documented");
            }
        }
        let registry_ops = paths
            .iter()
            .filter(|(p, _)| p.starts_with("/registry/"))
            .flat_map(|(p, item)| item.as_object().unwrap().iter().map(move |(m, op)| (p, m, op)));
        for (path, method, op) in registry_ops {
            if let Some(body) = op.get("requestBody") {
                let types: Vec<&String> = body["content"].as_object().unwrap().keys().collect();
                assert_eq!(types.len(), REGISTRY_REQUEST_TYPES.len(), "{method} {path}: {types:?}");
            }
            for (status, response) in op["responses"].as_object().unwrap() {
                let Some(content) = response.get("content") else { continue };
                let types: Vec<&String> = content.as_object().unwrap().keys().collect();
                let want = if status == "503" { "application/json" } else { REGISTRY_CONTENT_TYPE };
                assert_eq!(types, [want], "{method} {path} {status}");
                if status != "200" && status != "503" {
                    assert_eq!(
                        content[want]["schema"]["$ref"], "#/components/schemas/RegistryErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
}
