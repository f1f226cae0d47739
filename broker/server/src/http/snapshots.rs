//! `POST /snapshots`, `POST /snapshots/{snapshot}/lease`, `DELETE /snapshots/{snapshot}`:
//! the online snapshots `es-tools dump --online` archives (docs/operations.md,
//! "Online dump"). Cluster admin only.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiJson, ApiPath, AppState, Caller};
use crate::api::ErrorBody;
use crate::registry::snapshot::SnapshotView;
use crate::service::error::Result;

/// How long the broker holds the snapshot unless it is renewed or released.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    /// Milliseconds, 1000 to 86400000 [default: 60000].
    #[serde(default)]
    #[schema(minimum = 1000, maximum = 86400000)]
    pub lease_ms: Option<u64>,
}

/// A renewed lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaseView {
    pub id: String,
    /// The lease runs this long from the renewal.
    pub lease_ms: u64,
}

#[utoipa::path(post, path = "/snapshots", tag = "meta", request_body = LeaseBody,
    responses(
        (status = 201, description = "Taken: every partition cut at its log end, sealed, synced and linked \
            into the snapshot's directory under the data directory, with a copy of the metadata", body = SnapshotView),
        (status = 400, description = "invalid_request: a lease out of range, too many snapshots held, or a \
            cluster node; bad_json", body = ErrorBody),
        (status = 401, description = "unauthenticated", body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn take(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<LeaseBody>,
) -> Result<(StatusCode, Json<SnapshotView>)> {
    let view = state.service.take_snapshot(&who, body.lease_ms).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(post, path = "/snapshots/{snapshot}/lease", tag = "meta", request_body = LeaseBody,
    params(("snapshot" = String, Path, description = "The snapshot's id")),
    responses(
        (status = 200, description = "The lease now runs `lease_ms` from now", body = LeaseView),
        (status = 400, description = "invalid_request: a lease out of range; bad_json", body = ErrorBody),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody),
        (status = 404, description = "snapshot_not_found: released, expired, or taken before a restart",
            body = ErrorBody)))]
pub async fn renew(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<LeaseBody>,
) -> Result<Json<LeaseView>> {
    let lease_ms = state.service.renew_snapshot(&who, &id, body.lease_ms)?;
    Ok(Json(LeaseView { id, lease_ms }))
}

#[utoipa::path(delete, path = "/snapshots/{snapshot}", tag = "meta",
    params(("snapshot" = String, Path, description = "The snapshot's id")),
    responses(
        (status = 204, description = "Released: its directory is removed"),
        (status = 403, description = "unauthorized: needs cluster admin", body = ErrorBody),
        (status = 404, description = "snapshot_not_found: released, expired, or taken before a restart",
            body = ErrorBody)))]
pub async fn release(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode> {
    state.service.release_snapshot(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
