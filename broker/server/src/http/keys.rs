//! API key administration over HTTP (cluster admins only, like every row of
//! these routes in `routes::ROUTES`). A created or rotated key is the only
//! answer that ever carries a secret; it is shown once.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::{ApiJson, ApiPath, AppState, blocking};
use crate::api::ErrorBody;
use crate::auth::admin::{CreateKeyBody, GrantsBody, IssuedKey, KeyList, KeyQuotaBody, KeyView};
use crate::service::error::Result;

#[utoipa::path(post, path = "/keys", tag = "keys", request_body = CreateKeyBody,
    responses(
        (status = 201, description = "Created; `key` is the secret, shown once", body = IssuedKey),
        (status = 400, description = "invalid_request (name, grant or quota), bad_json", body = ErrorBody),
        (status = 401, description = "unauthenticated", body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(b): ApiJson<CreateKeyBody>,
) -> Result<(StatusCode, Json<IssuedKey>)> {
    let auth = state.registry.auth().clone();
    let issued = blocking(move || auth.create_key(&b.name, &b.grants, b.quota)).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

#[utoipa::path(get, path = "/keys", tag = "keys",
    responses((status = 200, description = "Every key, revoked ones included; never a secret", body = KeyList)))]
pub async fn list(State(state): State<AppState>) -> Json<KeyList> {
    Json(state.registry.auth().list_keys())
}

#[utoipa::path(get, path = "/keys/{key}", tag = "keys",
    params(("key" = String, Path, description = "Key id (16 hex digits)")),
    responses(
        (status = 200, body = KeyView),
        (status = 404, description = "key_not_found", body = ErrorBody)))]
pub async fn describe(State(state): State<AppState>, ApiPath(key): ApiPath<String>) -> Result<Json<KeyView>> {
    Ok(Json(state.registry.auth().describe_key(&key)?))
}

#[utoipa::path(delete, path = "/keys/{key}", tag = "keys",
    params(("key" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "Revoked (durable): refused from the next request on", body = KeyView),
        (status = 400, description = "invalid_request: already revoked", body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody)))]
pub async fn revoke(State(state): State<AppState>, ApiPath(key): ApiPath<String>) -> Result<Json<KeyView>> {
    let auth = state.registry.auth().clone();
    Ok(Json(blocking(move || auth.revoke_key(&key)).await?))
}

#[utoipa::path(post, path = "/keys/{key}/rotate", tag = "keys",
    params(("key" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "A new secret for the same id, shown once; the old one stops at once", body = IssuedKey),
        (status = 400, description = "invalid_request: revoked", body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody)))]
pub async fn rotate(State(state): State<AppState>, ApiPath(key): ApiPath<String>) -> Result<Json<IssuedKey>> {
    let auth = state.registry.auth().clone();
    Ok(Json(blocking(move || auth.rotate_key(&key)).await?))
}

#[utoipa::path(post, path = "/keys/{key}/grants", tag = "keys", request_body = GrantsBody,
    params(("key" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "The key with its grants (a grant it held is kept once)", body = KeyView),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody)))]
pub async fn grant(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(b): ApiJson<GrantsBody>,
) -> Result<Json<KeyView>> {
    let auth = state.registry.auth().clone();
    Ok(Json(blocking(move || auth.add_grants(&key, &b.grants)).await?))
}

#[utoipa::path(put, path = "/keys/{key}/quota", tag = "keys", request_body = KeyQuotaBody,
    params(("key" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "The key with its own limits (an empty body returns it to the broker's defaults)", body = KeyView),
        (status = 400, description = "invalid_request: a rate of 0, or a revoked key", body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody)))]
pub async fn set_quota(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(b): ApiJson<KeyQuotaBody>,
) -> Result<Json<KeyView>> {
    let auth = state.registry.auth().clone();
    Ok(Json(blocking(move || auth.set_key_quota(&key, b)).await?))
}
