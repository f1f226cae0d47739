//! The HTTP/JSON listener: routes, extractors that turn every rejection into the
//! JSON error shape, and [`serve`], which runs until the shutdown future resolves
//! and then drains in-flight requests.

mod accept;
mod cluster_api;
mod conn_watch;
mod error;
pub(crate) mod forward;
pub(crate) mod group_sessions;
mod groups;
mod groups_api;
mod keys;
mod metrics;
mod openapi;
mod plugins;
mod records;
pub(crate) mod routes;
mod schemas;
mod schemas_api;
mod snapshots;
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
use axum::routing::{get, post, put};
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
    /// The simple consumer sessions (`/groups/{g}/members`): HTTP's own state.
    pub sessions: group_sessions::Sessions,
}

/// The API's routes over `registry`.
pub fn router(registry: Arc<Registry>, shutdown: watch::Receiver<bool>) -> Router {
    let body_max = registry.options().request_bytes_max;
    let in_flight = Arc::new(Semaphore::new(registry.options().in_flight_requests_max));
    let service = Service::new(registry.clone()).with_protocol(crate::metrics::Protocol::Http);
    let sessions = group_sessions::Sessions::default();
    let state = AppState { registry, service, shutdown, in_flight, sessions };
    // Probes and the document stay outside the in-flight limit, so an overloaded
    // broker still reports itself alive.
    let app = Router::new()
        .route("/healthz", get(topics::healthz))
        .route("/readyz", get(topics::readyz))
        .route("/openapi.json", get(openapi::openapi_json))
        .merge(api_routes(state.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_max))
        .with_state(state);
    // The registry's context-prefixed paths are rewritten before routing, so they
    // are routed and authorized as the qualified-subject paths they stand for.
    Router::new()
        .fallback_service(app)
        .layer(middleware::map_request(schemas::context_paths))
        .layer(middleware::from_fn(mark_serving))
}

/// Every request, probes and refusals included: the head is in, so the
/// connection's between-requests timeouts (`conn_watch.rs`) stop until the answer.
async fn mark_serving(req: Request, next: Next) -> Response {
    let conn = req.extensions().get::<axum::extract::ConnectInfo<accept::HttpPeer>>();
    let _serving = conn.map(|c| c.0.watch.serving());
    next.run(req).await
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
        .nest(
            "/registry",
            schemas::routes()
                .layer(middleware::from_fn_with_state(state.clone(), forward::registry_writes))
                .layer(middleware::from_fn_with_state(state.clone(), metrics::count_registry)),
        )
        // The base URL with a slash, as clients given `.../registry/` ask for it; the
        // nested router serves `/registry` itself and everything below it.
        .route(
            "/registry/",
            get(schemas::root).post(schemas::root_post).fallback(schemas::method_not_allowed),
        )
        .route("/keys", get(keys::list).post(keys::create))
        .route("/keys/{key}", get(keys::describe).delete(keys::revoke))
        .route("/keys/{key}/rotate", post(keys::rotate))
        .route("/keys/{key}/grants", post(keys::grant))
        .route("/keys/{key}/quota", put(keys::set_quota))
        .route("/metrics", get(metrics::scrape))
        .route("/cluster", get(cluster_api::status))
        .route("/cluster/partitions/{topic}/{partition}/leader", post(cluster_api::transfer_leader))
        .route("/cluster/partitions/{topic}/{partition}/replicas", post(cluster_api::move_replicas))
        .route("/cluster/nodes", post(cluster_api::add_node))
        .route("/cluster/nodes/{node}", axum::routing::delete(cluster_api::remove_node))
        .route("/snapshots", post(snapshots::take))
        .route("/snapshots/{snapshot}/lease", post(snapshots::renew))
        .route("/snapshots/{snapshot}", axum::routing::delete(snapshots::release))
        .route_layer(middleware::from_fn_with_state(state.clone(), limit_in_flight))
        .route_layer(middleware::from_fn_with_state(state, authorize_route))
}

/// A boolean query parameter, in any case (`true`, `True`, `FALSE`).
pub fn parse_bool(name: &str, text: &str) -> Result<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(BrokerError::InvalidRequest(format!("{name} must be true or false; got {text:?}"))),
    }
}

/// Authenticates the request (`Authorization: Bearer <key>`) and authorizes its
/// route with its row in `routes::ROUTES`, before the handler looks anything up.
/// The principal then rides in the request's extensions ([`Caller`]) into every
/// service call, which authorizes its own resource again; routes that do not go
/// through the service (groups, plugins, the schema registry, keys) are covered
/// here, through the same table.
async fn authorize_route(State(state): State<AppState>, req: Request, next: Next) -> Response {
    // A refusal leaves the body unread, so the connection cannot carry another
    // request: say so, or a keep-alive client would reuse a closing socket.
    let has_body = req.headers().contains_key(axum::http::header::CONTENT_LENGTH)
        || req.headers().contains_key(axum::http::header::TRANSFER_ENCODING);
    let mut response = authenticate_and_authorize(state, req, next).await;
    let refused = response.status().is_client_error() && response.extensions().get::<Served>().is_none();
    if has_body && refused {
        let close = axum::http::HeaderValue::from_static("close");
        response.headers_mut().insert(axum::http::header::CONNECTION, close);
    }
    response
}

/// Marks a response the handler produced (as opposed to a refusal at the edge).
#[derive(Debug, Clone, Copy)]
struct Served;

async fn authenticate_and_authorize(state: AppState, mut req: Request, next: Next) -> Response {
    let auth = state.registry.auth().clone();
    let conn = req.extensions().get::<axum::extract::ConnectInfo<accept::HttpPeer>>().map(|c| c.0.clone());
    let peer = conn.map(|c| c.peer);
    let from = peer.as_ref().map_or(std::net::IpAddr::from([0, 0, 0, 0]), |p| p.addr.ip());
    let tls_key = peer.and_then(|p| p.tls_key);
    let who = match authenticate(&auth, req.headers(), from, tls_key) {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    if let Some(refusal) = over_request_rate(&auth, from, &who).await {
        return refusal;
    }
    let method = req.method().as_str().to_ascii_lowercase();
    if let Some((call, params)) = routes::call_for(&method, req.uri().path()) {
        let public = call.access() == crate::service::Access::Public;
        if auth.enabled() && !public && who.key.is_none() {
            return BrokerError::Unauthenticated.into_response();
        }
        if let Err(response) = authorize_edge(&auth, &who, call, &params).await {
            return response;
        }
    }
    req.extensions_mut().insert(Caller(who));
    let mut response = next.run(req).await;
    response.extensions_mut().insert(Served);
    response
}

/// A 429 for a caller over its request rate, sent after a short delay (at most
/// [`limits::HTTP_THROTTLE_DELAY_MS_MAX`]) so a client that retries at once is
/// slowed even if it ignores `Retry-After`. A request under it is charged here.
async fn over_request_rate(
    auth: &crate::auth::Auth,
    from: std::net::IpAddr,
    who: &crate::service::Principal,
) -> Option<Response> {
    let ms = auth.request_throttle_ms(from, who.key.as_ref());
    if ms == 0 {
        auth.charge_request(from, who.key.as_ref());
        return None;
    }
    tokio::time::sleep(Duration::from_millis(ms.min(limits::HTTP_THROTTLE_DELAY_MS_MAX))).await;
    Some(BrokerError::Throttled { ms }.into_response())
}

/// The bearer key of a request, if it sends one, else the key its client
/// certificate maps to (mTLS), while that key is active. A bad key is refused even
/// when auth is off, so a typo shows at once rather than after auth is turned on.
fn authenticate(
    auth: &crate::auth::Auth,
    headers: &axum::http::HeaderMap,
    from: std::net::IpAddr,
    tls_key: Option<es_auth::KeyId>,
) -> Result<crate::service::Principal> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        let active = tls_key.filter(|k| auth.state().active_key(k).is_some());
        return Ok(active.map_or(crate::service::Principal::ANONYMOUS, crate::service::Principal::key));
    };
    let text = value.to_str().unwrap_or("");
    let key = text.strip_prefix("Bearer ").or_else(|| text.strip_prefix("bearer ")).unwrap_or("");
    match auth.authenticate(key, from) {
        Ok(id) => Ok(crate::service::Principal::key(id)),
        Err(crate::auth::AuthFailure::Invalid) => Err(BrokerError::Unauthenticated),
        Err(crate::auth::AuthFailure::Throttled { ms }) => Err(BrokerError::Throttled { ms }),
    }
}

/// One route's row, answered against its path's resource. `POST /topics` names
/// its topic in the body: the service authorizes that one when it has read it.
async fn authorize_edge(
    auth: &Arc<crate::auth::Auth>,
    who: &crate::service::Principal,
    call: crate::service::Call,
    params: &std::collections::BTreeMap<String, String>,
) -> std::result::Result<(), Response> {
    use crate::service::{Call, Resource};
    if call == Call::CreateTopic {
        return Ok(());
    }
    let resource = match (params.get("topic"), params.get("group"), params.get("subject")) {
        (Some(topic), _, _) => Resource::Topic(topic.clone()),
        (None, Some(group), _) => Resource::Group(group.clone()),
        (None, None, Some(subject)) => Resource::Subject(subject.clone()),
        (None, None, None) => Resource::Cluster,
    };
    let op = crate::service::authz::Operation { call, resource };
    if let Err(denied) = crate::service::authz::check(auth, who, &op) {
        return Err(match (&denied.resource, call) {
            (Resource::Subject(s), _) => schemas::denied(Some(s)),
            (Resource::Cluster, Call::SchemaRead | Call::SchemaWrite) => schemas::denied(None),
            (r, _) => crate::service::authz::denied(r).into_response(),
        });
    }
    let (auth, who) = (auth.clone(), who.clone());
    blocking(move || crate::service::authz::claim(&auth, &who, &op))
        .await
        .map_err(IntoResponse::into_response)
}

/// The authenticated principal of a request (anonymous when auth is off and no
/// key was sent), set by the authorization middleware.
#[derive(Debug, Clone)]
pub struct Caller(pub crate::service::Principal);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> std::result::Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<Caller>().cloned().unwrap_or(Caller(crate::service::Principal::ANONYMOUS)))
    }
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

/// Serves the API on `listener` (over TLS when `tls` is set) until `shutdown`
/// resolves, then stops accepting, wakes long polls, and waits (bounded) for
/// in-flight requests to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<crate::tls::ServerTls>,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = registry.options().listeners;
    let listener = accept::HttpListener::new(
        listener,
        tls,
        limits.http,
        limits.http_header_read_timeout_ms,
        registry.metrics().clone(),
    )?;
    let (tx, rx) = watch::channel(false);
    let mut stopping = rx.clone();
    let app = router(registry.clone(), rx);
    let signal = async move {
        shutdown.await;
        registry.begin_shutdown();
        let _ = tx.send(true);
    };
    let app = app.into_make_service_with_connect_info::<accept::HttpPeer>();
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
