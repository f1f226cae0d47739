//! Plugin management (upload, list, describe, remove) and the validators bound to
//! a topic: the HTTP shapes over the service calls of `service/plugins.rs`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiJson, ApiPath, ApiQuery, AppState, Caller};
use crate::api::ErrorBody;
use crate::plugins::binding::ValidatorBinding;
use crate::plugins::{Manifest, Upload};
use crate::service::error::{BrokerError, Result};
pub use crate::service::plugins::BoundValidator;
use crate::service::plugins::PluginInfo;

/// A plugin and the topics bound to it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PluginDescription {
    #[serde(flatten)]
    pub manifest: Manifest,
    /// Topics whose validators use this plugin.
    pub bound_to: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PluginList {
    pub plugins: Vec<PluginDescription>,
}

/// The validators of a topic, in the order they run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidatorsRequest {
    pub validators: Vec<ValidatorBinding>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ValidatorsResponse {
    pub topic: String,
    pub validators: Vec<BoundValidator>,
}

/// Upload options. Configuration defaults come as `config.KEY=VALUE` parameters.
/// This type documents the parameters for OpenAPI; `parse_upload` reads the raw
/// query so that the open-ended `config.KEY` names are accepted too.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    /// Replace an existing plugin of this name; its bindings move to the new version.
    #[serde(default)]
    pub replace: Option<bool>,
    pub call_deadline_ms: Option<u64>,
    pub memory_bytes_max: Option<usize>,
    pub batch_bytes_max: Option<usize>,
    pub warm_instances_max: Option<usize>,
}

#[utoipa::path(post, path = "/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name"), UploadQuery,
        ("config.KEY" = Option<String>, Query,
         description = "A default configuration value for key KEY (repeat with other keys), e.g. `config.key.required=true`")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The component (.wasm)"),
    responses(
        (status = 201, description = "Stored (component and manifest on disk)", body = PluginDescription),
        (status = 200, description = "Identical to the stored plugin, or replaced it", body = PluginDescription),
        (status = 400, description = "invalid_plugin, invalid_config (the plugin refused its config.KEY=VALUE), invalid_request", body = ErrorBody),
        (status = 409, description = "plugin_already_exists", body = ErrorBody),
        (status = 413, description = "request_too_large", body = ErrorBody)))]
pub async fn upload(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<BTreeMap<String, String>>,
    body: Bytes,
) -> Result<(StatusCode, Json<PluginDescription>)> {
    let upload = parse_upload(name, &query, body)?;
    let (info, created) = state.service.upload_plugin(&who, upload).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(info.into())))
}

fn parse_upload(name: String, query: &BTreeMap<String, String>, body: Bytes) -> Result<Upload> {
    let mut upload = Upload { name, wasm: body.to_vec(), ..Upload::default() };
    let number = |key: &str, text: &str| -> Result<u64> {
        text.parse().map_err(|_| {
            BrokerError::InvalidRequest(format!("{key} must be a non-negative integer; got {text:?}"))
        })
    };
    for (key, value) in query {
        match key.as_str() {
            "replace" => upload.replace = super::parse_bool("replace", value)?,
            "call_deadline_ms" => upload.limits.call_deadline_ms = Some(number(key, value)?),
            "memory_bytes_max" => upload.limits.memory_bytes_max = Some(number(key, value)? as usize),
            "batch_bytes_max" => upload.limits.batch_bytes_max = Some(number(key, value)? as usize),
            "warm_instances_max" => upload.limits.warm_instances_max = Some(number(key, value)? as usize),
            other => match other.strip_prefix("config.") {
                Some(k) if !k.is_empty() => {
                    upload.default_config.insert(k.to_owned(), value.clone());
                }
                _ => {
                    return Err(BrokerError::InvalidRequest(format!(
                        "unknown parameter {other:?}; use replace, call_deadline_ms, memory_bytes_max, \
                         batch_bytes_max, warm_instances_max or config.KEY"
                    )));
                }
            },
        }
    }
    Ok(upload)
}

#[utoipa::path(get, path = "/plugins", tag = "plugins",
    responses((status = 200, body = PluginList)))]
pub async fn list(State(state): State<AppState>, Caller(who): Caller) -> Result<Json<PluginList>> {
    let plugins = state.service.list_plugins(&who).await?;
    Ok(Json(PluginList { plugins: plugins.into_iter().map(PluginDescription::from).collect() }))
}

#[utoipa::path(get, path = "/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, body = PluginDescription),
        (status = 404, description = "plugin_not_found", body = ErrorBody)))]
pub async fn describe(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PluginDescription>> {
    Ok(Json(state.service.describe_plugin(&who, name).await?.into()))
}

#[utoipa::path(delete, path = "/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 204, description = "Removed durably"),
        (status = 400, description = "invalid_request (a built-in plugin)", body = ErrorBody),
        (status = 404, description = "plugin_not_found", body = ErrorBody),
        (status = 409, description = "plugin_in_use", body = ErrorBody)))]
pub async fn remove(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode> {
    state.service.remove_plugin(&who, name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/topics/{topic}/validators", tag = "plugins",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 200, body = ValidatorsResponse),
        (status = 404, description = "topic_not_found", body = ErrorBody)))]
pub async fn get_validators(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<ValidatorsResponse>> {
    let validators = state.service.validators(&who, &topic)?;
    Ok(Json(ValidatorsResponse { topic, validators }))
}

#[utoipa::path(put, path = "/topics/{topic}/validators", tag = "plugins",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = ValidatorsRequest,
    responses(
        (status = 200, description = "Bound (durable); new produces run the new chain", body = ValidatorsResponse),
        (status = 400, description = "invalid_plugin, invalid_config (a validator refused its config), invalid_request, bad_json", body = ErrorBody),
        (status = 404, description = "topic_not_found, plugin_not_found", body = ErrorBody)))]
pub async fn set_validators(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(topic): ApiPath<String>,
    ApiJson(req): ApiJson<ValidatorsRequest>,
) -> Result<Json<ValidatorsResponse>> {
    let validators = state.service.bind_validators(&who, &topic, req.validators).await?;
    Ok(Json(ValidatorsResponse { topic, validators }))
}

impl From<PluginInfo> for PluginDescription {
    fn from(p: PluginInfo) -> Self {
        PluginDescription { manifest: p.manifest, bound_to: p.bound_to }
    }
}
