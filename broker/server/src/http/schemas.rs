//! Confluent Schema Registry's REST API under `/registry` (docs/schema-registry.md):
//! subjects, versions, ids, references, compatibility tests, config and mode. Bodies
//! are accepted whatever their content type (`application/vnd.schemaregistry.v1+json`,
//! `application/vnd.schemaregistry+json`, `application/json`); answers are
//! `application/vnd.schemaregistry.v1+json`; errors are exactly
//! `{"error_code": N, "message": "..."}` with Confluent's codes.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use es_schema_registry::record::ConfigValue;
use es_schema_registry::types::{RegisterRequest, SubjectVersion};
use es_schema_registry::{CompatLevel, Mode, RegistryError, VersionSpec};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// The registry's routes, nested under `/registry` by the router.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(root))
        .route("/subjects", get(list_subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(list_versions).post(register))
        .route("/subjects/{subject}/versions/{version}", get(get_version).delete(delete_version))
        .route("/subjects/{subject}/versions/{version}/schema", get(get_version_schema))
        .route("/subjects/{subject}/versions/{version}/referencedby", get(referenced_by))
        .route("/schemas/types", get(schema_types))
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(schema_text_by_id))
        .route("/schemas/ids/{id}/versions", get(id_versions))
        .route("/schemas/ids/{id}/subjects", get(id_subjects))
        .route("/compatibility/subjects/{subject}/versions", post(compatibility_all))
        .route("/compatibility/subjects/{subject}/versions/{version}", post(compatibility_version))
        .route("/config", get(get_global_config).put(put_global_config).delete(delete_global_config))
        .route("/config/{subject}", get(get_config).put(put_config).delete(delete_config))
        .route("/mode", get(get_global_mode).put(put_global_mode).delete(delete_global_mode))
        .route("/mode/{subject}", get(get_mode).put(put_mode).delete(delete_mode))
        .route("/contexts", get(contexts))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// A registry answer: JSON in Confluent's content type.
pub(super) struct Reply(StatusCode, Vec<u8>);

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        (self.0, [(header::CONTENT_TYPE, CONTENT_TYPE)], self.1).into_response()
    }
}

fn ok(v: impl serde::Serialize) -> Reply {
    Reply(StatusCode::OK, serde_json::to_vec(&v).expect("plain types serialize"))
}

/// A raw schema text (the `/schema` routes answer the schema itself).
fn text(s: String) -> Reply {
    Reply(StatusCode::OK, s.into_bytes())
}

/// A refusal as `{"error_code", "message"}`.
#[derive(Debug)]
pub struct SrError(RegistryError);

impl From<RegistryError> for SrError {
    fn from(e: RegistryError) -> Self {
        SrError(e)
    }
}

impl IntoResponse for SrError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(code = self.0.error_code(), error = %self.0, "registry request failed");
        }
        error_reply(status, self.0.error_code(), &self.0.to_string())
    }
}

fn error_reply(status: StatusCode, code: u32, message: &str) -> Response {
    let body = json!({"error_code": code, "message": message});
    Reply(status, body.to_string().into_bytes()).into_response()
}

type SrResult<T = Reply> = Result<T, SrError>;

async fn not_found() -> Response {
    error_reply(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found")
}

pub(super) async fn method_not_allowed() -> Response {
    error_reply(StatusCode::METHOD_NOT_ALLOWED, 405, "HTTP 405 Method Not Allowed")
}

/// A JSON body of any content type; a bad one is 422.
struct SrJson<T>(T);

impl<T: DeserializeOwned> FromRequest<AppState> for SrJson<T> {
    type Rejection = SrError;

    async fn from_request(req: Request, state: &AppState) -> SrResult<Self> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            RegistryError::BadRequest(format!("could not read the request body: {}", e.body_text()))
        })?;
        serde_json::from_slice(&bytes)
            .map(SrJson)
            .map_err(|e| SrError(RegistryError::BadRequest(format!("the request body is not valid: {e}"))))
    }
}

/// Query parameters; booleans are `true` in any case, anything else is false (as
/// Confluent's server reads them).
struct Params(HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = SrError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> SrResult<Self> {
        Query::try_from_uri(&parts.uri)
            .map(|Query(q)| Params(q))
            .map_err(|e| SrError(RegistryError::BadRequest(format!("bad query string: {}", e.body_text()))))
    }
}

impl Params {
    fn flag(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Path parameters; axum percent-decodes them.
struct SrPath<T>(T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for SrPath<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        Path::<T>::from_request_parts(parts, state).await.map(|Path(p)| SrPath(p)).map_err(|e| {
            error_reply(StatusCode::NOT_FOUND, 404, &format!("HTTP 404 Not Found: {}", e.body_text()))
        })
    }
}

fn parse_id(id: &str) -> Result<i32, RegistryError> {
    id.parse::<i32>().map_err(|_| RegistryError::SchemaNotFound(format!("Schema {id} not found")))
}

pub(super) async fn root() -> Reply {
    ok(json!({}))
}

async fn contexts() -> Reply {
    ok(["."])
}

async fn list_subjects(State(s): State<AppState>, q: Params) -> SrResult {
    let prefix = q.text("subjectPrefix").unwrap_or("").to_owned();
    let subjects =
        s.registry.schemas().read(|st| Ok(st.subjects(q.flag("deleted"), q.flag("deletedOnly"), &prefix)))?;
    Ok(ok(subjects))
}

async fn list_versions(State(s): State<AppState>, SrPath(subject): SrPath<String>, q: Params) -> SrResult {
    Ok(ok(s.registry.schemas().read(|st| st.versions(&subject, q.flag("deleted")))?))
}

async fn get_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    Ok(ok(s.registry.schemas().read(|st| st.version(&subject, spec, q.flag("deleted")))?))
}

async fn get_version_schema(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let v = s.registry.schemas().read(|st| st.version(&subject, spec, q.flag("deleted")))?;
    Ok(text(v.schema))
}

async fn referenced_by(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let ids =
        s.registry.schemas().read(|st| Ok(st.referenced_by(&subject, st.resolve(&subject, spec, true)?)))?;
    Ok(ok(ids))
}

async fn register(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<RegisterRequest>,
) -> SrResult {
    let normalize = q.flag("normalize");
    let r = s.registry.schemas().write(move |st, c| st.plan_register(c, &subject, &req, normalize)).await?;
    Ok(ok(registered_body(&r.version)))
}

/// `{"id": N}` as Confluent answers, plus the version's fields newer clients read.
fn registered_body(v: &SubjectVersion) -> Value {
    let mut body = serde_json::to_value(v).expect("plain types serialize");
    body["id"] = json!(v.id);
    body
}

async fn lookup(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<RegisterRequest>,
) -> SrResult {
    let (normalize, deleted) = (q.flag("normalize"), q.flag("deleted"));
    let v = s
        .registry
        .schemas()
        .read_checked(move |st, c| st.lookup(c, &subject, &req, normalize, deleted))
        .await?;
    Ok(ok(v))
}

async fn delete_subject(State(s): State<AppState>, SrPath(subject): SrPath<String>, q: Params) -> SrResult {
    let permanent = q.flag("permanent");
    Ok(ok(s.registry.schemas().write(move |st, _| st.plan_delete_subject(&subject, permanent)).await?))
}

async fn delete_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let permanent = q.flag("permanent");
    Ok(ok(s.registry.schemas().write(move |st, _| st.plan_delete_version(&subject, spec, permanent)).await?))
}

async fn schema_types(State(s): State<AppState>) -> Reply {
    let types: Vec<&str> = s.registry.schemas().checkers().types().iter().map(|t| t.as_str()).collect();
    ok(types)
}

async fn schema_by_id(State(s): State<AppState>, SrPath(id): SrPath<String>) -> SrResult {
    let id = parse_id(&id)?;
    Ok(ok(s.registry.schemas().read(|st| st.schema_by_id(id))?))
}

async fn schema_text_by_id(State(s): State<AppState>, SrPath(id): SrPath<String>) -> SrResult {
    let id = parse_id(&id)?;
    Ok(text(s.registry.schemas().read(|st| st.schema_by_id(id))?.schema))
}

async fn id_versions(State(s): State<AppState>, SrPath(id): SrPath<String>, q: Params) -> SrResult {
    let id = parse_id(&id)?;
    let pairs = s.registry.schemas().read(|st| st.id_versions(id, q.flag("deleted")))?;
    let out: Vec<Value> =
        pairs.into_iter().map(|(subject, version)| json!({"subject": subject, "version": version})).collect();
    Ok(ok(out))
}

async fn id_subjects(State(s): State<AppState>, SrPath(id): SrPath<String>, q: Params) -> SrResult {
    let id = parse_id(&id)?;
    let mut subjects: Vec<String> = s
        .registry
        .schemas()
        .read(|st| st.id_versions(id, q.flag("deleted")))?
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    subjects.dedup();
    Ok(ok(subjects))
}

async fn compatibility_all(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<RegisterRequest>,
) -> SrResult {
    compatibility(s, subject, None, q, req).await
}

async fn compatibility_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
    SrJson(req): SrJson<RegisterRequest>,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    compatibility(s, subject, Some(spec), q, req).await
}

async fn compatibility(
    s: AppState,
    subject: String,
    version: Option<VersionSpec>,
    q: Params,
    req: RegisterRequest,
) -> SrResult {
    let normalize = q.flag("normalize");
    let r = s
        .registry
        .schemas()
        .read_checked(move |st, c| st.check_compatibility(c, &subject, version, &req, normalize))
        .await?;
    Ok(ok(if q.flag("verbose") {
        json!({"is_compatible": r.is_compatible, "messages": r.messages})
    } else {
        json!({"is_compatible": r.is_compatible})
    }))
}

/// `PUT /config` bodies: `compatibility` (Confluent's) or `compatibilityLevel`, and `normalize`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigUpdate {
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    compatibility_level: Option<String>,
    #[serde(default)]
    normalize: Option<bool>,
}

fn config_body(c: &ConfigValue, key: &str) -> Value {
    let mut body = json!({ key: c.compatibility_level.as_str() });
    if let Some(n) = c.normalize {
        body["normalize"] = json!(n);
    }
    body
}

async fn get_global_config(State(s): State<AppState>) -> SrResult {
    let c = s.registry.schemas().read(|st| st.config(None, true))?;
    Ok(ok(config_body(&c, "compatibilityLevel")))
}

async fn get_config(State(s): State<AppState>, SrPath(subject): SrPath<String>, q: Params) -> SrResult {
    let c = s.registry.schemas().read(|st| st.config(Some(&subject), q.flag("defaultToGlobal")))?;
    Ok(ok(config_body(&c, "compatibilityLevel")))
}

async fn put_global_config(State(s): State<AppState>, SrJson(update): SrJson<ConfigUpdate>) -> SrResult {
    set_config(s, None, update).await
}

async fn put_config(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    SrJson(update): SrJson<ConfigUpdate>,
) -> SrResult {
    set_config(s, Some(subject), update).await
}

async fn set_config(s: AppState, subject: Option<String>, update: ConfigUpdate) -> SrResult {
    let level = match update.compatibility.or(update.compatibility_level) {
        Some(l) => Some(CompatLevel::parse(&l)?),
        None if update.normalize.is_some() => None,
        None => return Err(RegistryError::InvalidCompatLevel(String::new()).into()),
    };
    let c = s
        .registry
        .schemas()
        .write(move |st, _| {
            let current = st.config(subject.as_deref(), true)?;
            let value = ConfigValue {
                compatibility_level: level.unwrap_or(current.compatibility_level),
                normalize: update.normalize.or(current.normalize),
            };
            Ok(st.plan_set_config(subject.as_deref(), value))
        })
        .await?;
    Ok(ok(config_body(&c, "compatibility")))
}

async fn delete_global_config(State(s): State<AppState>) -> SrResult {
    let c = s.registry.schemas().write(|st, _| st.plan_delete_config(None)).await?;
    Ok(ok(config_body(&c, "compatibilityLevel")))
}

async fn delete_config(State(s): State<AppState>, SrPath(subject): SrPath<String>) -> SrResult {
    let c = s.registry.schemas().write(move |st, _| st.plan_delete_config(Some(&subject))).await?;
    Ok(ok(config_body(&c, "compatibilityLevel")))
}

#[derive(Debug, Deserialize)]
struct ModeUpdate {
    mode: String,
}

async fn get_global_mode(State(s): State<AppState>) -> SrResult {
    Ok(ok(json!({"mode": s.registry.schemas().read(|st| st.mode(None, true))?.as_str()})))
}

async fn get_mode(State(s): State<AppState>, SrPath(subject): SrPath<String>, q: Params) -> SrResult {
    let mode = s.registry.schemas().read(|st| st.mode(Some(&subject), q.flag("defaultToGlobal")))?;
    Ok(ok(json!({"mode": mode.as_str()})))
}

async fn put_global_mode(
    State(s): State<AppState>,
    q: Params,
    SrJson(update): SrJson<ModeUpdate>,
) -> SrResult {
    set_mode(s, None, q.flag("force"), update).await
}

async fn put_mode(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(update): SrJson<ModeUpdate>,
) -> SrResult {
    set_mode(s, Some(subject), q.flag("force"), update).await
}

async fn set_mode(s: AppState, subject: Option<String>, force: bool, update: ModeUpdate) -> SrResult {
    let mode = Mode::parse(&update.mode)?;
    let mode =
        s.registry.schemas().write(move |st, _| st.plan_set_mode(subject.as_deref(), mode, force)).await?;
    Ok(ok(json!({"mode": mode.as_str()})))
}

async fn delete_global_mode(State(s): State<AppState>) -> SrResult {
    let mode = s.registry.schemas().write(|st, _| st.plan_delete_mode(None)).await?;
    Ok(ok(json!({"mode": mode.as_str()})))
}

async fn delete_mode(State(s): State<AppState>, SrPath(subject): SrPath<String>) -> SrResult {
    let mode = s.registry.schemas().write(move |st, _| st.plan_delete_mode(Some(&subject))).await?;
    Ok(ok(json!({"mode": mode.as_str()})))
}
