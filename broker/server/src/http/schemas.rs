//! Confluent Schema Registry's REST API under `/registry` (docs/schema-registry.md):
//! subjects, versions, ids, references, compatibility tests, config and mode. Bodies
//! are accepted whatever their content type (`application/vnd.schemaregistry.v1+json`,
//! `application/vnd.schemaregistry+json`, `application/json`); answers are
//! `application/vnd.schemaregistry.v1+json`; errors are exactly
//! `{"error_code": N, "message": "..."}` with Confluent's codes.

use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use es_schema_registry::types::RegisterRequest;
use es_schema_registry::{CompatLevel, Mode, RegistryError, SchemaType, VersionSpec};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::AppState;
use super::schemas_api::{
    CompatibilityAnswer, ConfigUpdate, ModeUpdate, RegisterAnswer, RegistryConfig, RegistryConfigSet,
    RegistryErrorBody, RegistryMode, SchemaRequest, SchemaText, SchemaTypeName, SchemaVersion,
    ServerClusterId, ServerVersion, SubjectVersionPair, TagSchemaBody, VersionParam,
};

pub(super) const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// The request content types Confluent's clients send (documented in the OpenAPI document).
pub(super) const REQUEST_CONTENT_TYPES: [&str; 3] =
    [CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json"];

/// Also read as JSON, as Confluent reads it (and a request without a content
/// type counts as this); anything else is 415.
const GENERIC_REQUEST_TYPE: &str = "application/octet-stream";

/// The registry's routes, nested under `/registry` by the router.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(root).post(root_post))
        .route("/subjects", get(list_subjects))
        .route("/subjects/", get(list_subjects_slash))
        .route("/schemas", get(list_schemas))
        .route("/schemas/", get(list_schemas_slash))
        .route("/v1/metadata/id", get(metadata_id))
        .route("/v1/metadata/version", get(metadata_version))
        .route("/subjects/{subject}/metadata", get(subject_metadata))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(list_versions).post(register))
        .route("/subjects/{subject}/versions/{version}", get(get_version).delete(delete_version))
        .route("/subjects/{subject}/versions/{version}/schema", get(get_version_schema))
        .route("/subjects/{subject}/versions/{version}/referencedby", get(referenced_by))
        .route("/subjects/{subject}/versions/{version}/tags", post(modify_tags))
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
        .route("/contexts/{context}", axum::routing::delete(delete_context))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// Rewrites Confluent's context-prefixed paths (`/registry/contexts/{ctx}/...`)
/// to the paths they stand for: a subject becomes `:{ctx}:{subject}`, the
/// context's subject list is `/subjects?subjectPrefix=:{ctx}:`, its own config
/// and mode are those of `:{ctx}:`, and ids (global in es) are read as they are.
/// The default context `.` qualifies nothing. Anything else is left alone.
pub(super) async fn context_paths(mut req: Request) -> Request {
    let Some(rest) = req.uri().path().strip_prefix("/registry/contexts/") else { return req };
    let Some((ctx, rest)) = rest.split_once('/') else { return req };
    let qualifier = if ctx == "." { String::new() } else { format!(":{ctx}:") };
    let mut query = req.uri().query().map(str::to_owned);
    let path = match rest.split_once('/').unwrap_or((rest, "")) {
        ("subjects", "") => {
            let prefix = format!("subjectPrefix={qualifier}");
            query = Some(query.map_or(prefix.clone(), |q| format!("{q}&{prefix}")));
            "/registry/subjects".to_owned()
        }
        ("config" | "mode", "") if qualifier.is_empty() => format!("/registry/{rest}"),
        (kind @ ("config" | "mode"), "") => format!("/registry/{kind}/{qualifier}"),
        (kind @ ("subjects" | "config" | "mode"), tail) => format!("/registry/{kind}/{qualifier}{tail}"),
        ("compatibility", tail) => match tail.strip_prefix("subjects/") {
            Some(tail) => format!("/registry/compatibility/subjects/{qualifier}{tail}"),
            None => return req,
        },
        ("schemas", _) => format!("/registry/{rest}"),
        _ => return req,
    };
    let target = match query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    if let Ok(uri) = target.parse() {
        *req.uri_mut() = uri;
    }
    req
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

/// A JSON body, read as Confluent reads one: the content type is one of the
/// registry's, JSON or none (415 otherwise); no body or `null` is 422; text that
/// is not JSON, or JSON that is not an object, is 400; an object of the wrong
/// shape is 422.
pub(super) struct SrJson<T>(T);

impl<T: DeserializeOwned> FromRequest<AppState> for SrJson<T> {
    type Rejection = SrError;

    async fn from_request(req: Request, state: &AppState) -> SrResult<Self> {
        refuse_media_type(req.headers())?;
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            RegistryError::BadRequest(format!("could not read the request body: {}", e.body_text()))
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(RegistryError::BadRequest("Request body is missing".into()).into());
        }
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| RegistryError::MalformedBody(format!("Unrecognized JSON: {e}")))?;
        match value {
            serde_json::Value::Null => Err(RegistryError::BadRequest("Request body is null".into()).into()),
            serde_json::Value::Object(_) => serde_json::from_value(value).map(SrJson).map_err(|e| {
                SrError(RegistryError::BadRequest(format!("the request body is not valid: {e}")))
            }),
            other => Err(RegistryError::MalformedBody(format!(
                "the request body must be a JSON object, not {}",
                json_kind(&other)
            ))
            .into()),
        }
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Null | serde_json::Value::Object(_) => "that",
    }
}

/// 415 for a content type the registry does not read (parameters such as
/// `charset` do not matter).
fn refuse_media_type(headers: &axum::http::HeaderMap) -> Result<(), RegistryError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return Ok(()) };
    let essence = value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if REQUEST_CONTENT_TYPES.contains(&essence.as_str()) || essence == GENERIC_REQUEST_TYPE {
        return Ok(());
    }
    Err(RegistryError::UnsupportedMediaType)
}

/// Query parameters; booleans are `true` in any case, anything else is false (as
/// Confluent's server reads them).
/// In order, repeated names kept (`?key=a&value=1&key=b&value=2`).
pub(super) struct Params(Vec<(String, String)>);

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
        self.text(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// The last value of `name`.
    fn text(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    fn all(&self, name: &str) -> Vec<String> {
        self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
    }

    /// A non-negative number, `default` when absent or unreadable (as Confluent's
    /// integer parameters with defaults read).
    fn number(&self, name: &str, default: i64) -> i64 {
        self.text(name).and_then(|v| v.parse().ok()).unwrap_or(default)
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

/// An id path parameter: not a number is no route at all (Confluent's path
/// parameter is an integer), a number without a schema is 40403.
fn parse_id(id: &str) -> Result<i32, RegistryError> {
    id.parse::<i32>().map_err(|_| RegistryError::NoRoute)
}

#[utoipa::path(get, path = "/registry/", tag = "registry",
    responses((status = 200, description = "`{}`, for clients that probe the base URL", body = Object)))]
pub(super) async fn root() -> Reply {
    ok(json!({}))
}

#[utoipa::path(get, path = "/registry/contexts", tag = "registry",
    responses((status = 200, description = "The contexts that hold a subject (`:.ctx:name` is in `.ctx`), \
        `.` (the default context) first. A path `/contexts/{context}/...` is the same route with its \
        subject qualified (`/contexts/.ctx/subjects/s/versions` is `/subjects/:.ctx:s/versions`, \
        `/contexts/.ctx/subjects` lists that context's subjects, `/contexts/.ctx/config` is the \
        context's own config)", body = Vec<String>)))]
pub(super) async fn contexts(State(s): State<AppState>) -> SrResult {
    Ok(ok(s.registry.schemas().read(|st| Ok(st.contexts()))?))
}

#[utoipa::path(delete, path = "/registry/contexts/{context}", tag = "registry",
    params(("context" = String, Path, description = "A context (`.ctx`, or `:.ctx:`)", example = ".ctx")),
    responses(
        (status = 204, description = "The context holds no subject, soft-deleted ones included (Confluent 8.1's \
            route): nothing is kept of it, so nothing is written"),
        (status = 422, description = "42211 the context holds a subject", body = RegistryErrorBody)))]
pub(super) async fn delete_context(
    State(s): State<AppState>,
    SrPath(context): SrPath<String>,
) -> Result<StatusCode, SrError> {
    let ctx = context.strip_prefix(':').and_then(|c| c.strip_suffix(':')).unwrap_or(&context).to_owned();
    s.registry.schemas().read(move |st| st.check_context_empty(&ctx))?;
    // No body and so no content type, as Confluent's `Response.status(204)`.
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/registry/", tag = "registry",
    request_body(content = Object, description = "Any JSON object; ignored"),
    responses(
        (status = 200, description = "`{}`, as Confluent's root answers a POST", body = Object),
        (status = 400, description = "400: not a JSON object", body = RegistryErrorBody),
        (status = 415, description = "415: a content type the registry does not read", body = RegistryErrorBody),
        (status = 422, description = "422: no body, or not an object of strings", body = RegistryErrorBody)))]
pub(super) async fn root_post(SrJson(_): SrJson<std::collections::BTreeMap<String, String>>) -> Reply {
    ok(json!({}))
}

#[utoipa::path(get, path = "/registry/v1/metadata/id", tag = "registry",
    responses((status = 200, description = "The registry's cluster identity, in Confluent's shape", body = ServerClusterId)))]
pub(super) async fn metadata_id() -> Reply {
    ok(ServerClusterId::of_this_broker())
}

#[utoipa::path(get, path = "/registry/v1/metadata/version", tag = "registry",
    responses((status = 200, description = "The broker's version, in Confluent's shape", body = ServerVersion)))]
pub(super) async fn metadata_version() -> Reply {
    ok(ServerVersion::of_this_broker())
}

#[utoipa::path(get, path = "/registry/subjects/", tag = "registry",
    params(
        ("deleted" = Option<bool>, Query, description = "Also list soft-deleted subjects"),
        ("deletedOnly" = Option<bool>, Query, description = "List only soft-deleted subjects"),
        ("subjectPrefix" = Option<String>, Query, description = "Only subjects starting with this")),
    responses(
        (status = 200, description = "As `/subjects`", body = Vec<String>),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn list_subjects_slash(s: State<AppState>, q: Params) -> SrResult {
    list_subjects(s, q).await
}

#[utoipa::path(get, path = "/registry/schemas", tag = "registry",
    params(
        ("subjectPrefix" = Option<String>, Query, description = "Only the subjects starting with this"),
        ("deleted" = Option<bool>, Query, description = "Include soft-deleted versions"),
        ("latestOnly" = Option<bool>, Query, description = "Only each subject's latest version"),
        ("offset" = Option<i32>, Query, description = "Skip this many (0 when absent or negative)"),
        ("limit" = Option<i32>, Query, description = "At most this many (all when absent or not positive)")),
    responses(
        (status = 200, description = "Schema versions, by subject then version", body = Vec<SchemaVersion>),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn list_schemas(State(s): State<AppState>, q: Params) -> SrResult {
    let prefix = q.text("subjectPrefix").unwrap_or("").to_owned();
    let offset = usize::try_from(q.number("offset", 0)).unwrap_or(0);
    let limit = usize::try_from(q.number("limit", -1)).ok().filter(|l| *l > 0);
    let versions = s
        .registry
        .schemas()
        .read(|st| Ok(st.all_schemas(&prefix, q.flag("deleted"), q.flag("latestOnly"), offset, limit)))?;
    Ok(ok(versions.into_iter().map(SchemaVersion::from).collect::<Vec<_>>()))
}

#[utoipa::path(get, path = "/registry/schemas/", tag = "registry",
    params(
        ("subjectPrefix" = Option<String>, Query, description = "Only the subjects starting with this"),
        ("deleted" = Option<bool>, Query, description = "Include soft-deleted versions"),
        ("latestOnly" = Option<bool>, Query, description = "Only each subject's latest version"),
        ("offset" = Option<i32>, Query, description = "Skip this many"),
        ("limit" = Option<i32>, Query, description = "At most this many")),
    responses(
        (status = 200, description = "As `/schemas`", body = Vec<SchemaVersion>),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn list_schemas_slash(s: State<AppState>, q: Params) -> SrResult {
    list_schemas(s, q).await
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/metadata", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("key" = Option<Vec<String>>, Query, description = "A metadata property name (repeated with `value`)"),
        ("value" = Option<Vec<String>>, Query, description = "The value the property must have")),
    responses(
        (status = 200, description = "The latest live version whose metadata has every key/value pair", body = SchemaVersion),
        (status = 404, description = "40401 subject not found, 40403 no version has that metadata", body = RegistryErrorBody),
        (status = 422, description = "422: a malformed query string", body = RegistryErrorBody)))]
pub(super) async fn subject_metadata(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
) -> SrResult {
    let wanted: Vec<(String, String)> = q.all("key").into_iter().zip(q.all("value")).collect();
    let v = s.registry.schemas().read(|st| st.version_by_metadata(&st.resolve_alias(&subject), &wanted))?;
    Ok(ok(SchemaVersion::from(v)))
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
    Ok(ok(s.registry.schemas().read(|st| st.versions(&st.resolve_alias(&subject), q.flag("deleted")))?))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions/{version}", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path),
        ("deleted" = Option<bool>, Query, description = "A soft-deleted version may be returned"),
        ("format" = Option<String>, Query, description = "`serialized`: a PROTOBUF schema as base64 of its \
            FileDescriptorProto; `ignore_extensions`: a PROTOBUF schema without custom options and extensions; \
            `resolved`: an AVRO schema with its references inlined; any other value: the text as stored")),
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
    let deleted = q.flag("deleted");
    let format = q.text("format").map(str::to_owned);
    let v = s
        .registry
        .schemas()
        .read_checked(move |st, checkers| {
            let mut v = st.version(&st.resolve_alias(&subject), spec, deleted)?;
            if let Some(format) = format {
                v.schema = st.formatted(checkers, v.schema_type, v.schema, &v.references, &format)?;
            }
            Ok(v)
        })
        .await?;
    Ok(ok(SchemaVersion::from(v)))
}

#[utoipa::path(get, path = "/registry/subjects/{subject}/versions/{version}/schema", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path),
        ("deleted" = Option<bool>, Query, description = "A soft-deleted version may be returned"),
        ("format" = Option<String>, Query, description = "`serialized`: a PROTOBUF schema as base64 of its \
            FileDescriptorProto; `ignore_extensions`: a PROTOBUF schema without custom options and extensions; \
            `resolved`: an AVRO schema with its references inlined; any other value: the text as stored")),
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
    let deleted = q.flag("deleted");
    let format = q.text("format").map(str::to_owned);
    let schema = s
        .registry
        .schemas()
        .read_checked(move |st, checkers| {
            let v = st.version(&st.resolve_alias(&subject), spec, deleted)?;
            match format {
                Some(format) => st.formatted(checkers, v.schema_type, v.schema, &v.references, &format),
                None => Ok(v.schema),
            }
        })
        .await?;
    Ok(text(schema))
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
    let ids = s.registry.schemas().read(|st| {
        let subject = st.resolve_alias(&subject);
        Ok(st.referenced_by(&subject, st.resolve(&subject, spec, true)?))
    })?;
    Ok(ok(ids))
}

#[utoipa::path(post, path = "/registry/subjects/{subject}/versions", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("normalize" = Option<bool>, Query, description = "Store the checker's canonical form")),
    request_body = SchemaRequest,
    responses(
        (status = 200, description = "Registered (fsynced), or the existing version holding the same schema: \
            `{\"id\"}` alone, or the whole schema when the registry filled in its text, metadata or rules", body = RegisterAnswer),
        (status = 409, description = "409 incompatible with earlier versions; the message lists every incompatibility", body = RegistryErrorBody),
        (status = 422, description = "42201 invalid schema, unknown type, type without a checker, missing reference, \
            Empty schema, a version that is not the next; 42205 not permitted (read-only mode, an id outside IMPORT, \
            no id in IMPORT, overwriting an id or version); 42208 invalid subject name; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log or a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn register(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    q: Params,
    SrJson(req): SrJson<SchemaRequest>,
) -> SrResult {
    let normalize = q.flag("normalize");
    let req = RegisterRequest::from(req);
    let r = s
        .registry
        .schemas()
        .write(move |st, c| st.plan_register(c, &st.resolve_alias(&subject), &req, normalize))
        .await?;
    Ok(ok(RegisterAnswer::new(r.id, r.filled_in.then_some(r.version))))
}

#[utoipa::path(post, path = "/registry/subjects/{subject}/versions/{version}/tags", tag = "registry",
    params(
        ("subject" = String, Path, description = "Subject name", example = "st-value"),
        ("version" = VersionParam, Path)),
    request_body = TagSchemaBody,
    responses(
        (status = 200, description = "The version's schema with the tags edited (`confluent:tags` on the \
            record or field), registered as a new version (fsynced), or the existing version holding that schema: \
            the whole schema, as Confluent answers", body = RegisterAnswer),
        (status = 404, description = "40401 subject not found, 40402 version not found", body = RegistryErrorBody),
        (status = 409, description = "409 incompatible with earlier versions", body = RegistryErrorBody),
        (status = 422, description = "42201 no such record or field, a PROTOBUF schema, `ruleSet` with \
            `rulesToMerge` or `rulesToRemove`, a version that is not the next; 42202 invalid version; \
            42205 not permitted; 42208 invalid subject name; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log or a checker failed; 50002 a checker timed out", body = RegistryErrorBody)))]
pub(super) async fn modify_tags(
    State(s): State<AppState>,
    SrPath((subject, version)): SrPath<(String, String)>,
    SrJson(body): SrJson<TagSchemaBody>,
) -> SrResult {
    let spec = VersionSpec::parse(&version)?;
    let req = es_schema_registry::tags::TagSchemaRequest::from(body);
    let r = s.registry.schemas().write(move |st, c| st.plan_tags(c, &subject, spec, &req)).await?;
    Ok(ok(RegisterAnswer::new(r.id, Some(r.version))))
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
        .read_checked(move |st, c| st.lookup(c, &st.resolve_alias(&subject), &req, normalize, deleted))
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
    // Confluent's order.
    let installed = s.registry.schemas().checkers().types();
    let types: Vec<SchemaTypeName> = [SchemaType::Json, SchemaType::Protobuf, SchemaType::Avro]
        .into_iter()
        .filter(|t| installed.contains(t))
        .map(SchemaTypeName::from)
        .collect();
    ok(types)
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("subject" = Option<String>, Query, description = "Accepted and ignored"),
        ("format" = Option<String>, Query, description = "`serialized`: a PROTOBUF schema as base64 of its \
            FileDescriptorProto; `ignore_extensions`: a PROTOBUF schema without custom options and extensions; \
            `resolved`: an AVRO schema with its references inlined; any other value: the text as stored")),
    responses(
        (status = 200, description = "Soft-deleted schemas stay readable by id", body = SchemaText),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody)))]
pub(super) async fn schema_by_id(
    State(s): State<AppState>,
    SrPath(id): SrPath<String>,
    q: Params,
) -> SrResult {
    let id = parse_id(&id)?;
    Ok(ok(SchemaText::from(by_id_formatted(&s, id, &q).await?)))
}

/// The schema with `id`, its text in the `format` the query asks for.
async fn by_id_formatted(
    s: &AppState,
    id: i32,
    q: &Params,
) -> SrResult<es_schema_registry::types::SchemaById> {
    let format = q.text("format").map(str::to_owned);
    let found = s
        .registry
        .schemas()
        .read_checked(move |st, checkers| {
            let mut found = st.schema_by_id(id)?;
            if let Some(format) = format {
                found.schema =
                    st.formatted(checkers, found.schema_type, found.schema, &found.references, &format)?;
            }
            Ok(found)
        })
        .await?;
    Ok(found)
}

#[utoipa::path(get, path = "/registry/schemas/ids/{id}/schema", tag = "registry",
    params(
        ("id" = i32, Path, description = "Schema id"),
        ("subject" = Option<String>, Query, description = "Accepted and ignored"),
        ("format" = Option<String>, Query, description = "`serialized`: a PROTOBUF schema as base64 of its \
            FileDescriptorProto; `ignore_extensions`: a PROTOBUF schema without custom options and extensions; \
            `resolved`: an AVRO schema with its references inlined; any other value: the text as stored")),
    responses(
        (status = 200, description = "The schema text itself, as registered: JSON for AVRO and JSON \
            schemas, `.proto` text or base64 for PROTOBUF", body = Value),
        (status = 404, description = "40403 schema not found", body = RegistryErrorBody)))]
pub(super) async fn schema_text_by_id(
    State(s): State<AppState>,
    SrPath(id): SrPath<String>,
    q: Params,
) -> SrResult {
    let id = parse_id(&id)?;
    Ok(text(by_id_formatted(&s, id, &q).await?.schema))
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
        .read_checked(move |st, c| {
            st.check_compatibility(c, &st.resolve_alias(&subject), version, &req, normalize)
        })
        .await?;
    let messages = q.flag("verbose").then_some(r.messages);
    Ok(ok(CompatibilityAnswer { is_compatible: r.is_compatible, messages }))
}

#[utoipa::path(get, path = "/registry/config", tag = "registry",
    responses((status = 200, description = "The global compatibility level", body = RegistryConfig)))]
pub(super) async fn get_global_config(State(s): State<AppState>) -> SrResult {
    let mut c = s.registry.schemas().read(|st| st.config(None, true))?;
    // A global config set without a level still has the default one.
    c.compatibility_level.get_or_insert_default();
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
        (status = 422, description = "42203 invalid compatibility level; 42205 the subject is read-only; \
            42208 invalid subject name; 422 not the route's JSON shape", body = RegistryErrorBody),
        (status = 500, description = "50001 the registry's log failed", body = RegistryErrorBody)))]
pub(super) async fn put_config(
    State(s): State<AppState>,
    SrPath(subject): SrPath<String>,
    SrJson(update): SrJson<ConfigUpdate>,
) -> SrResult {
    set_config(s, Some(subject), update).await
}

async fn set_config(s: AppState, subject: Option<String>, update: ConfigUpdate) -> SrResult {
    let level =
        update.compatibility.or(update.compatibility_level).map(|l| CompatLevel::parse(&l)).transpose()?;
    let value = update.rest.into_config(level);
    let c = s.registry.schemas().write(move |st, _| st.plan_set_config(subject.as_deref(), value)).await?;
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
