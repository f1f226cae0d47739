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
use es_schema_registry::types::RegisterRequest;
use es_schema_registry::{CompatLevel, Mode, RegistryError, VersionSpec};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::AppState;
use super::schemas_api::{
    CompatibilityAnswer, ConfigUpdate, ModeUpdate, RegistryConfig, RegistryConfigSet, RegistryErrorBody,
    RegistryMode, SchemaRequest, SchemaText, SchemaTypeName, SchemaVersion, SubjectVersionPair, VersionParam,
};

pub(super) const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// The request content types Confluent's clients send; the body is read as JSON whatever it says.
pub(super) const REQUEST_CONTENT_TYPES: [&str; 3] =
    [CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json"];

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

impl Reply {
    fn with_status(self, status: StatusCode) -> Reply {
        Reply(status, self.1)
    }
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

/// A refusal under `/registry`, in the registry's shape: a subject the caller
/// may not use is a subject that does not exist (40401); a registry-wide call
/// without the cluster grant is Confluent's 40301.
pub(super) fn denied(subject: Option<&str>) -> Response {
    match subject {
        Some(s) => SrError(RegistryError::SubjectNotFound(s.to_owned())).into_response(),
        None => error_reply(StatusCode::FORBIDDEN, 40301, "not authorized for this registry call"),
    }
}

fn error_reply(status: StatusCode, code: u32, message: &str) -> Response {
    ok(RegistryErrorBody { error_code: code, message: message.to_owned() })
        .with_status(status)
        .into_response()
}

pub(super) type SrResult<T = Reply> = Result<T, SrError>;

async fn not_found() -> Response {
    error_reply(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found")
}

pub(super) async fn method_not_allowed() -> Response {
    error_reply(StatusCode::METHOD_NOT_ALLOWED, 405, "HTTP 405 Method Not Allowed")
}

/// A JSON body of any content type; a bad one is 422.
pub(super) struct SrJson<T>(T);

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
pub(super) struct Params(HashMap<String, String>);

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
pub(super) struct SrPath<T>(T);

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

#[utoipa::path(get, path = "/registry/", tag = "registry",
    responses((status = 200, description = "`{}`, for clients that probe the base URL", body = Object)))]
pub(super) async fn root() -> Reply {
    ok(json!({}))
}

#[utoipa::path(get, path = "/registry/contexts", tag = "registry",
    responses((status = 200, description = "The one context, `.`", body = Vec<String>)))]
pub(super) async fn contexts() -> Reply {
    ok(["."])
}

#[utoipa::path(get, path = "/registry/subjects", tag = "registry",
    params(
        ("deleted" = Option<bool>, Query, description = "Also list soft-deleted subjects"),
        ("deletedOnly" = Option<bool>, Query, description = "List only soft-deleted subjects"),
        ("subjectPrefix" = Option<String>, Query, description = "Only subjects starting with this")),
    responses(
        (status = 200, description = "Subject names, sorted", body = Vec<String>),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn list_subjects(State(s): State<AppState>, q: Params) -> SrResult {
    let prefix = q.text("subjectPrefix").unwrap_or("").to_owned();
    let subjects =
        s.registry.schemas().read(|st| Ok(st.subjects(q.flag("deleted"), q.flag("deletedOnly"), &prefix)))?;
    Ok(ok(subjects))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("deleted" = Option<bool>, Query, description = "Include soft-deleted versions")),
    responses(
        (status = 200, description = "Version numbers, ascending", body = Vec<i32>),
        (status = 404, description = "40401 subject not found", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn list_versions(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
) -> SrResult {
    Ok(ok(s.registry.schemas().read(|st| st.versions(&subject, q.flag("deleted")))?))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions/{version}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path),
        ("deleted" = Option<bool>, Query, description = "A soft-deleted version may be returned")),
    responses(
        (status = 200, body = SchemaVersion),
        (status = 404, description = "40401 subject not found, 40402 version not found", body = RegistryErrorBody),
        (status = 422, description = "42202 invalid version; 422 a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn get_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let v = s.registry.schemas().read(|st| st.version(&subject, spec, q.flag("deleted")))?;
    Ok(ok(SchemaVersion::from(v)))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions/{version}/schema", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path),
        ("deleted" = Option<bool>, Query, description = "A soft-deleted version may be returned")),
    responses(
        (status = 200, description = "The schema text itself, as registered: JSON for AVRO and JSON \
            schemas, `.proto` text or base64 for PROTOBUF", body = Value),
        (status = 404, description = "40401 subject not found, 40402 version not found", body = RegistryErrorBody),
        (status = 422, description = "42202 invalid version; 422 a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn get_version_schema(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let v = s.registry.schemas().read(|st| st.version(&subject, spec, q.flag("deleted")))?;
    Ok(text(v.schema))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions/{version}/referencedby", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path)),
    responses(
        (status = 200, description = "Ids of the live schemas that reference this version", body = Vec<i32>),
        (status = 404, description = "40401 subject not found, 40402 version not found", body = RegistryErrorBody),
        (status = 422, description = "42202 invalid version", body = RegistryErrorBody)))]
pub(super) async fn referenced_by(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let ids =
        s.registry.schemas().read(|st| Ok(st.referenced_by(&subject, st.resolve(&subject, spec, true)?)))?;
    Ok(ok(ids))
}

#[utoipa::path(post, path = "/registry/subjects/{subject}/versions", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("normalize" = Option<bool>, Query, description = "Store the checker's canonical form")),
    request_body = SchemaRequest,
    responses(
        (status = 200, description = "Registered (fsynced), or the existing version holding the same schema", body = SchemaVersion),
        (status = 409, description = "409 incompatible with earlier versions; the message lists every incompatibility", body = RegistryErrorBody),
        (status = 422, description = "42201 invalid schema, unknown type, type without a checker or missing reference; \
            42205 not permitted (read-only mode, an id outside IMPORT, overwriting an id or version); 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log or a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn register(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<SchemaRequest>,
) -> SrResult {
    let normalize = q.flag("normalize");
    let req = RegisterRequest::from(req);
    let r = s.registry.schemas().write(move |st, c| st.plan_register(c, &subject, &req, normalize)).await?;
    Ok(ok(SchemaVersion::from(r.version)))
}

#[utoipa::path(post, path = "/registry/subjects/{subject}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("normalize" = Option<bool>, Query, description = "Compare canonical forms"),
        ("deleted" = Option<bool>, Query, description = "Soft-deleted versions may match")),
    request_body = SchemaRequest,
    responses(
        (status = 200, description = "The version of the subject holding this schema", body = SchemaVersion),
        (status = 404, description = "40401 subject not found, 40403 schema not found", body = RegistryErrorBody),
        (status = 422, description = "42201 invalid schema, unknown type, type without a checker or missing reference; \
            422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn lookup(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<SchemaRequest>,
) -> SrResult {
    let (normalize, deleted) = (q.flag("normalize"), q.flag("deleted"));
    let req = RegisterRequest::from(req);
    let v = s
        .registry
        .schemas()
        .read_checked(move |st, c| st.lookup(c, &subject, &req, normalize, deleted))
        .await?;
    Ok(ok(SchemaVersion::from(v)))
}

#[utoipa::path(delete, path = "/registry/subjects/{subject}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("permanent" = Option<bool>, Query, description = "Remove soft-deleted versions for good")),
    responses(
        (status = 200, description = "The deleted version numbers (fsynced)", body = Vec<i32>),
        (status = 404, description = "40401 subject not found, 40404 already soft-deleted, 40405 not soft-deleted before a permanent delete", body = RegistryErrorBody),
        (status = 422, description = "42205 read-only mode; 42206 a version is referenced by another schema", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_subject(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
) -> SrResult {
    let permanent = q.flag("permanent");
    Ok(ok(s.registry.schemas().write(move |st, _| st.plan_delete_subject(&subject, permanent)).await?))
}

#[utoipa::path(delete, path = "/registry/subjects/{subject}/versions/{version}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path),
        ("permanent" = Option<bool>, Query, description = "Remove a soft-deleted version for good")),
    responses(
        (status = 200, description = "The deleted version number (fsynced)", body = i32, content_type = "application/json"),
        (status = 404, description = "40401 subject not found, 40402 version not found, 40406 already soft-deleted, \
            40407 not soft-deleted before a permanent delete", body = RegistryErrorBody),
        (status = 422, description = "42202 invalid version; 42205 read-only mode; 42206 referenced by another schema", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let permanent = q.flag("permanent");
    Ok(ok(s.registry.schemas().write(move |st, _| st.plan_delete_version(&subject, spec, permanent)).await?))
}

#[utoipa::path(get, path = "/registry/schemas/types", tag = "registry",
    responses((status = 200, description = "Schema types with an installed checker", body = Vec<SchemaTypeName>)))]
pub(super) async fn schema_types(State(s): State<AppState>) -> Reply {
    let types: Vec<SchemaTypeName> =
        s.registry.schemas().checkers().types().into_iter().map(SchemaTypeName::from).collect();
    ok(types)
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("subject" = Option<String>, Query, description = "Accepted and ignored"),
        ("format" = Option<String>, Query, description = "Accepted and ignored (e.g. `serialized`)")),
    responses(
        (status = 200, description = "Soft-deleted schemas stay readable by id", body = SchemaText),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody)))]
pub(super) async fn schema_by_id(State(s): State<AppState>, SrPath(id): SrPath<String>) -> SrResult {
    let id = parse_id(&id)?;
    Ok(ok(SchemaText::from(s.registry.schemas().read(|st| st.schema_by_id(id))?)))
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}/schema", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("subject" = Option<String>, Query, description = "Accepted and ignored"),
        ("format" = Option<String>, Query, description = "Accepted and ignored (e.g. `serialized`)")),
    responses(
        (status = 200, description = "The schema text itself, as registered: JSON for AVRO and JSON \
            schemas, `.proto` text or base64 for PROTOBUF", body = Value),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody)))]
pub(super) async fn schema_text_by_id(State(s): State<AppState>, SrPath(id): SrPath<String>) -> SrResult {
    let id = parse_id(&id)?;
    Ok(text(s.registry.schemas().read(|st| st.schema_by_id(id))?.schema))
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}/versions", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("deleted" = Option<bool>, Query, description = "Include soft-deleted versions")),
    responses(
        (status = 200, description = "Every subject version holding the id", body = Vec<SubjectVersionPair>),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn id_versions(
    State(s): State<AppState>,
    SrPath(id): SrPath<String>,
    q: Params,
) -> SrResult {
    let id = parse_id(&id)?;
    let pairs = s.registry.schemas().read(|st| st.id_versions(id, q.flag("deleted")))?;
    let out: Vec<SubjectVersionPair> =
        pairs.into_iter().map(|(subject, version)| SubjectVersionPair { subject, version }).collect();
    Ok(ok(out))
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}/subjects", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("deleted" = Option<bool>, Query, description = "Include soft-deleted versions")),
    responses(
        (status = 200, description = "Subjects holding the id", body = Vec<String>),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn id_subjects(
    State(s): State<AppState>,
    SrPath(id): SrPath<String>,
    q: Params,
) -> SrResult {
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

#[utoipa::path(post, path = "/registry/compatibility/subjects/{subject}/versions", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("normalize" = Option<bool>, Query, description = "Check the canonical form"),
        ("verbose" = Option<bool>, Query, description = "Add `messages`: every incompatibility")),
    request_body = SchemaRequest,
    responses(
        (status = 200, description = "Tested against the versions the subject's level selects (compatible when it has none)", body = CompatibilityAnswer),
        (status = 422, description = "42201 invalid schema, unknown type, type without a checker or missing reference; \
            422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn compatibility_all(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<SchemaRequest>,
) -> SrResult {
    compatibility(s, subject, None, q, req.into()).await
}

#[utoipa::path(post, path = "/registry/compatibility/subjects/{subject}/versions/{version}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path, description = "A version number; `latest` or `-1` tests against \
            the versions the subject's level selects"),
        ("normalize" = Option<bool>, Query, description = "Check the canonical form"),
        ("verbose" = Option<bool>, Query, description = "Add `messages`: every incompatibility")),
    request_body = SchemaRequest,
    responses(
        (status = 200, body = CompatibilityAnswer),
        (status = 404, description = "40401 subject not found, 40402 version not found", body = RegistryErrorBody),
        (status = 422, description = "42201 invalid schema, unknown type, type without a checker or missing reference; \
            42202 invalid version; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn compatibility_version(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    q: Params,
    SrJson(req): SrJson<SchemaRequest>,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    compatibility(s, subject, Some(spec), q, req.into()).await
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
    let messages = q.flag("verbose").then_some(r.messages);
    Ok(ok(CompatibilityAnswer { is_compatible: r.is_compatible, messages }))
}

#[utoipa::path(get, path = "/registry/config", tag = "registry",
    responses((status = 200, description = "The global compatibility level", body = RegistryConfig)))]
pub(super) async fn get_global_config(State(s): State<AppState>) -> SrResult {
    let c = s.registry.schemas().read(|st| st.config(None, true))?;
    Ok(ok(RegistryConfig::from(c)))
}

#[utoipa::path(get, path = "/registry/config/{subject}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("defaultToGlobal" = Option<bool>, Query, description = "Answer the global level when the subject has none")),
    responses(
        (status = 200, body = RegistryConfig),
        (status = 404, description = "40408 the subject has no level of its own", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn get_config(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
) -> SrResult {
    let c = s.registry.schemas().read(|st| st.config(Some(&subject), q.flag("defaultToGlobal")))?;
    Ok(ok(RegistryConfig::from(c)))
}

#[utoipa::path(put, path = "/registry/config", tag = "registry",
    request_body = ConfigUpdate,
    responses(
        (status = 200, description = "The global config after the change (fsynced)", body = RegistryConfigSet),
        (status = 422, description = "42203 invalid compatibility level; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn put_global_config(
    State(s): State<AppState>,
    SrJson(update): SrJson<ConfigUpdate>,
) -> SrResult {
    set_config(s, None, update).await
}

#[utoipa::path(put, path = "/registry/config/{subject}", tag = "registry",
    params(("subject" = String, Path, description = "Subject name", example = "st-value")),
    request_body = ConfigUpdate,
    responses(
        (status = 200, description = "The subject's config after the change (fsynced)", body = RegistryConfigSet),
        (status = 422, description = "42203 invalid compatibility level; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn put_config(
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
    Ok(ok(RegistryConfigSet::from(c)))
}

#[utoipa::path(delete, path = "/registry/config", tag = "registry",
    responses(
        (status = 200, description = "The removed global config; the level is BACKWARD again", body = RegistryConfig),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_global_config(State(s): State<AppState>) -> SrResult {
    let c = s.registry.schemas().write(|st, _| st.plan_delete_config(None)).await?;
    Ok(ok(RegistryConfig::from(c)))
}

#[utoipa::path(delete, path = "/registry/config/{subject}", tag = "registry",
    params(("subject" = String, Path, description = "Subject name", example = "st-value")),
    responses(
        (status = 200, description = "The removed config", body = RegistryConfig),
        (status = 404, description = "40401 subject not found, 40408 the subject has no level of its own", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_config(State(s): State<AppState>, SrPath(subject): SrPath<String>) -> SrResult {
    let c = s.registry.schemas().write(move |st, _| st.plan_delete_config(Some(&subject))).await?;
    Ok(ok(RegistryConfig::from(c)))
}

#[utoipa::path(get, path = "/registry/mode", tag = "registry",
    responses((status = 200, description = "The global mode", body = RegistryMode)))]
pub(super) async fn get_global_mode(State(s): State<AppState>) -> SrResult {
    Ok(ok(RegistryMode::from(s.registry.schemas().read(|st| st.mode(None, true))?)))
}

#[utoipa::path(get, path = "/registry/mode/{subject}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("defaultToGlobal" = Option<bool>, Query, description = "Answer the global mode when the subject has none")),
    responses(
        (status = 200, body = RegistryMode),
        (status = 404, description = "40409 the subject has no mode of its own", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn get_mode(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
) -> SrResult {
    let mode = s.registry.schemas().read(|st| st.mode(Some(&subject), q.flag("defaultToGlobal")))?;
    Ok(ok(RegistryMode::from(mode)))
}

#[utoipa::path(put, path = "/registry/mode", tag = "registry",
    params(("force" = Option<bool>, Query, description = "IMPORT even though the registry is not empty")),
    request_body = ModeUpdate,
    responses(
        (status = 200, description = "The global mode after the change (fsynced)", body = RegistryMode),
        (status = 422, description = "42204 invalid mode; 42205 IMPORT on a non-empty registry without force; \
            422 not the route's JSON shape or a malformed query string", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn put_global_mode(
    State(s): State<AppState>,
    q: Params,
    SrJson(update): SrJson<ModeUpdate>,
) -> SrResult {
    set_mode(s, None, q.flag("force"), update).await
}

#[utoipa::path(put, path = "/registry/mode/{subject}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("force" = Option<bool>, Query, description = "IMPORT even though the subject has versions")),
    request_body = ModeUpdate,
    responses(
        (status = 200, description = "The subject's mode after the change (fsynced)", body = RegistryMode),
        (status = 422, description = "42204 invalid mode; 42205 IMPORT on a non-empty subject without force; \
            422 not the route's JSON shape or a malformed query string", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn put_mode(
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
    Ok(ok(RegistryMode::from(mode)))
}

#[utoipa::path(delete, path = "/registry/mode", tag = "registry",
    responses(
        (status = 200, description = "The removed global mode; the mode is READWRITE again", body = RegistryMode),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_global_mode(State(s): State<AppState>) -> SrResult {
    let mode = s.registry.schemas().write(|st, _| st.plan_delete_mode(None)).await?;
    Ok(ok(RegistryMode::from(mode)))
}

#[utoipa::path(delete, path = "/registry/mode/{subject}", tag = "registry",
    params(("subject" = String, Path, description = "Subject name", example = "st-value")),
    responses(
        (status = 200, description = "The removed mode", body = RegistryMode),
        (status = 404, description = "40401 subject not found, 40409 the subject has no mode of its own", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn delete_mode(State(s): State<AppState>, SrPath(subject): SrPath<String>) -> SrResult {
    let mode = s.registry.schemas().write(move |st, _| st.plan_delete_mode(Some(&subject))).await?;
    Ok(ok(RegistryMode::from(mode)))
}
