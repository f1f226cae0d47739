//! `GET /metrics`: the Prometheus exposition for the caller's key (its scope is
//! decided by `metrics::Scope` through the one authorization table), and the
//! schema registry's request counter, a layer on `/registry`.

use axum::extract::{OriginalUri, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, Caller, blocking, routes};
use crate::api::ErrorBody;
use crate::metrics::{self, Scope};
use crate::service::Call;
use crate::service::error::{BrokerError, Result};

#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4: only the series the caller's key may \
            describe (topics and groups under its grants, its own key's; broker-wide series need cluster \
            describe); everything with auth off",
            body = String, content_type = "text/plain"),
        (status = 401, description = "unauthenticated: auth is on and no valid key was sent", body = ErrorBody),
        (status = 404, description = "not_found: the broker runs with --metrics=false", body = ErrorBody)))]
pub async fn scrape(State(state): State<AppState>, Caller(who): Caller) -> Result<Response> {
    let registry = state.registry.clone();
    if !registry.metrics().enabled() {
        return Err(BrokerError::NotFound("/metrics (metrics are off: --metrics=false)".into()));
    }
    // Reading /proc and every partition's size is blocking work.
    let text = blocking(move || {
        let scope = Scope::new(registry.auth().clone(), who);
        metrics::render(&registry, scope).map_err(|e| BrokerError::Internal(format!("encoding metrics: {e}")))
    })
    .await?;
    Ok(([(axum::http::header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response())
}

/// Counts each schema-registry request as a read or a write (its row in
/// `routes::ROUTES`) with the status class it got.
pub async fn count_registry(
    State(state): State<AppState>,
    uri: OriginalUri,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().as_str().to_ascii_lowercase();
    let write = routes::call_for(&method, uri.path()).is_some_and(|(call, _)| call == Call::SchemaWrite);
    let response = next.run(req).await;
    state.registry.metrics().schema_request(write, response.status().as_u16());
    response
}
