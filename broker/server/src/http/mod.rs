//! The HTTP/JSON listener: routes, extractors that turn every rejection into the
//! JSON error shape, and [`serve`], which runs until the shutdown future resolves
//! and then drains in-flight requests.

mod error;
pub(crate) mod group_sessions;
mod groups;
mod groups_api;
mod openapi;
mod plugins;
mod records;
pub(crate) mod routes;
mod schemas;
mod schemas_api;
mod topics;

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use tokio::sync::{Semaphore, watch};

use crate::limits;
use crate::registry::Registry;
use crate::service::Service;
use crate::service::error::{BrokerError, Result};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub registry: Arc<Registry>,
    /// The protocol-neutral service the data and topic routes call.
    pub service: Service,
    /// Turns true when shutdown begins, so long polls return at once.
    pub shutdown: watch::Receiver<bool>,
    /// One permit per request being served; bounds the work a burst can queue.
    pub in_flight: Arc<Semaphore>,
}

/// The API's routes over `registry`.
pub fn router(registry: Arc<Registry>, shutdown: watch::Receiver<bool>) -> Router {
    let body_max = registry.options().request_bytes_max;
    let in_flight = Arc::new(Semaphore::new(registry.options().in_flight_requests_max));
    let service = Service::new(registry.clone());
    let state = AppState { registry, service, shutdown, in_flight };
    // Probes and the document stay outside the in-flight limit, so an overloaded
    // broker still reports itself alive.
    Router::new()
        .route("/healthz", get(topics::healthz))
        .route("/readyz", get(topics::readyz))
        .route("/openapi.json", get(openapi::openapi_json))
        .merge(api_routes(state.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_max))
        .with_state(state)
}

fn api_routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/topics", get(topics::list).post(topics::create))
        .route("/topics/{topic}", get(topics::describe).delete(topics::delete))
        .route("/topics/{topic}/config", get(topics::get_config).patch(topics::alter_config))
        .route("/topics/{topic}/partitions", post(topics::add_partitions))
        .route("/topics/{topic}/records", post(records::produce))
        .route("/producers", post(records::init_producer))
        .route("/topics/{topic}/offsets", get(records::offsets))
        .route("/topics/{topic}/partitions/{partition}/records", get(records::consume))
        .merge(groups::routes())
        .route("/plugins", get(plugins::list))
        .route(
            "/plugins/{name}",
            get(plugins::describe)
                .delete(plugins::remove)
                .post(plugins::upload)
                .layer(DefaultBodyLimit::max(limits::PLUGIN_BYTES_MAX)),
        )
        .route("/topics/{topic}/validators", get(plugins::get_validators).put(plugins::set_validators))
        .nest("/registry", schemas::routes())
        // The base URL with a slash, as clients given `.../registry/` ask for it; the
        // nested router serves `/registry` itself and everything below it.
        .route("/registry/", get(schemas::root).fallback(schemas::method_not_allowed))
        .route_layer(middleware::from_fn_with_state(state, limit_in_flight))
        .route_layer(middleware::from_fn(authorize_route))
}

/// A boolean query parameter, in any case (`true`, `True`, `FALSE`).
pub fn parse_bool(name: &str, text: &str) -> Result<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(BrokerError::InvalidRequest(format!("{name} must be true or false; got {text:?}"))),
    }
}

/// Authorizes every route at the edge with its row in `routes::ROUTES`, before
/// the handler looks anything up; the service authorizes its own calls again, so
/// routes that do not go through it (plugins, the schema registry) are covered too.
async fn authorize_route(req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_ascii_lowercase();
    if let Some((call, params)) = routes::call_for(&method, req.uri().path()) {
        let resource = match (params.get("topic"), params.get("group")) {
            (Some(topic), _) => crate::service::Resource::Topic(topic.clone()),
            (None, Some(group)) => crate::service::Resource::Group(group.clone()),
            (None, None) => crate::service::Resource::Cluster,
        };
        let op = crate::service::authz::Operation { call, resource };
        if let Err(e) = crate::service::authz::authorize(&crate::service::Principal::ANONYMOUS, &op) {
            return e.into_response();
        }
    }
    next.run(req).await
}

/// Refuses a request at once (503 `overloaded`) when the broker already serves
/// its limit, instead of queueing without bound.
async fn limit_in_flight(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match state.in_flight.clone().try_acquire_owned() {
        Ok(_permit) => next.run(req).await,
        Err(_) => {
            BrokerError::Overloaded { max: state.registry.options().in_flight_requests_max }.into_response()
        }
    }
}

async fn not_found(uri: Uri) -> BrokerError {
    BrokerError::NotFound(uri.path().to_owned())
}

async fn method_not_allowed() -> BrokerError {
    BrokerError::MethodNotAllowed
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting,
/// wakes long polls, and waits (bounded) for in-flight requests to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (tx, rx) = watch::channel(false);
    let mut stopping = rx.clone();
    let app = router(registry.clone(), rx);
    let signal = async move {
        shutdown.await;
        registry.begin_shutdown();
        let _ = tx.send(true);
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal).into_future();
    let drain_deadline = async move {
        if stopping.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(Duration::from_millis(limits::SHUTDOWN_DRAIN_MS)).await;
    };
    tokio::select! {
        r = server => r,
        () = drain_deadline => {
            tracing::warn!("in-flight requests did not finish within {} ms; closing anyway", limits::SHUTDOWN_DRAIN_MS);
            Ok(())
        }
    }
}

/// A JSON body whose every failure (size, syntax, shape) is a typed API error.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = BrokerError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                BrokerError::RequestTooLarge { max: state.registry.options().request_bytes_max }
            } else {
                BrokerError::InvalidRequest(format!("could not read the request body: {}", e.body_text()))
            }
        })?;
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| BrokerError::BadJson(e.to_string()))
    }
}

/// Query parameters whose parse failures are typed API errors.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = BrokerError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self> {
        Query::try_from_uri(&parts.uri)
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| BrokerError::InvalidRequest(format!("bad query string: {}", e.body_text())))
    }
}

/// Path parameters whose parse failures are typed API errors.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = BrokerError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| ApiPath(p))
            .map_err(|e| BrokerError::InvalidRequest(format!("bad path: {}", e.body_text())))
    }
}

/// Runs blocking registry or log work off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BrokerError::Internal(format!("blocking task failed: {e}")))?
}
