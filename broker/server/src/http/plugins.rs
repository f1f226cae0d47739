//! Plugin management (upload, list, describe, remove) and the validators bound to
//! a topic.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiJson, ApiPath, ApiQuery, AppState, blocking};
use crate::api::ErrorBody;
use crate::plugins::binding::ValidatorBinding;
use crate::plugins::{Manifest, Upload};
use crate::service::error::{BrokerError, Result};

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

/// One bound validator with what it has done since the broker started.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BoundValidator {
    #[serde(flatten)]
    pub binding: ValidatorBinding,
    /// The plugin version (sha256) this binding runs.
    pub sha256: String,
    /// Why the binding could not be loaded; produce fails until it is rebound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    pub batches: u64,
    pub rejected: u64,
    pub dead_lettered: u64,
    pub warned: u64,
    pub plugin_failures: u64,
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
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<BTreeMap<String, String>>,
    body: Bytes,
) -> Result<(StatusCode, Json<PluginDescription>)> {
    let upload = parse_upload(name, &query, body)?;
    let registry = state.registry.clone();
    let (manifest, created) = blocking(move || registry.add_plugin(upload)).await?;
    let bound_to = state.registry.plugin_users(&manifest.name);
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(PluginDescription { manifest, bound_to })))
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
pub async fn list(State(state): State<AppState>) -> Result<Json<PluginList>> {
    let registry = state.registry.clone();
    let manifests = blocking(move || registry.plugins().list()).await?;
    let plugins = manifests
        .into_iter()
        .map(|manifest| {
            let bound_to = state.registry.plugin_users(&manifest.name);
            PluginDescription { manifest, bound_to }
        })
        .collect();
    Ok(Json(PluginList { plugins }))
}

#[utoipa::path(get, path = "/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, body = PluginDescription),
        (status = 404, description = "plugin_not_found", body = ErrorBody)))]
pub async fn describe(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PluginDescription>> {
    let registry = state.registry.clone();
    let manifest = blocking(move || registry.plugins().get(&name)).await?;
    let bound_to = state.registry.plugin_users(&manifest.name);
    Ok(Json(PluginDescription { manifest, bound_to }))
}

#[utoipa::path(delete, path = "/plugins/{name}", tag = "plugins",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 204, description = "Removed durably"),
        (status = 400, description = "invalid_request (a built-in plugin)", body = ErrorBody),
        (status = 404, description = "plugin_not_found", body = ErrorBody),
        (status = 409, description = "plugin_in_use", body = ErrorBody)))]
pub async fn remove(State(state): State<AppState>, ApiPath(name): ApiPath<String>) -> Result<StatusCode> {
    let registry = state.registry.clone();
    blocking(move || registry.remove_plugin(&name)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/topics/{topic}/validators", tag = "plugins",
    params(("topic" = String, Path, description = "Topic name")),
    responses(
        (status = 200, body = ValidatorsResponse),
        (status = 404, description = "topic_not_found", body = ErrorBody)))]
pub async fn get_validators(
    State(state): State<AppState>,
    ApiPath(topic): ApiPath<String>,
) -> Result<Json<ValidatorsResponse>> {
    let topic = state.registry.topic(&topic)?;
    Ok(Json(describe_validators(&topic)))
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
    ApiPath(name): ApiPath<String>,
    ApiJson(req): ApiJson<ValidatorsRequest>,
) -> Result<Json<ValidatorsResponse>> {
    let registry = state.registry.clone();
    let topic_name = name.clone();
    blocking(move || registry.set_validators(&topic_name, req.validators)).await?;
    let topic = state.registry.topic(&name)?;
    Ok(Json(describe_validators(&topic)))
}

fn describe_validators(topic: &crate::registry::Topic) -> ValidatorsResponse {
    let chain = topic.validators();
    let validators = chain
        .links
        .iter()
        .map(|link| {
            let c = &link.counters;
            BoundValidator {
                binding: link.spec.clone(),
                sha256: link.sha256.clone(),
                load_error: link.load_error().map(str::to_owned),
                batches: c.batches.load(Ordering::Relaxed),
                rejected: c.rejected.load(Ordering::Relaxed),
                dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
                warned: c.warned.load(Ordering::Relaxed),
                plugin_failures: c.plugin_failures.load(Ordering::Relaxed),
            }
        })
        .collect();
    ValidatorsResponse { topic: topic.name(), validators }
}
