//! The server's error type. Each variant has a stable wire code and an HTTP status;
//! every error leaves as `{"error": {"code": "...", "message": "..."}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use es_log::LogError;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("topic {0:?} does not exist")]
    TopicNotFound(String),
    #[error("topic {topic:?} has no partition {partition} (it has {count})")]
    PartitionNotFound { topic: String, partition: u64, count: u32 },
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("request body is not valid JSON for this route: {0}")]
    BadJson(String),
    #[error("{0}")]
    BadEncoding(String),
    #[error(
        "offset {requested} is out of range: partition {partition} holds [{log_start}, {high_watermark}]"
    )]
    OffsetOutOfRange { partition: u32, requested: u64, log_start: u64, high_watermark: u64 },
    #[error(
        "the batch for partition {partition} is {size} bytes encoded; the topic's max.message.bytes is {max}"
    )]
    BatchTooLarge { partition: u32, size: usize, max: usize },
    #[error("record {index} is {size} bytes (key + value + headers); the limit is {max}")]
    RecordTooLarge { index: usize, size: usize, max: usize },
    #[error("request body exceeds the broker's limit of {max} bytes; send smaller batches")]
    RequestTooLarge { max: usize },
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("the broker is shutting down; retry against a running broker")]
    ShuttingDown,
    #[error("the broker is already serving its limit of {max} requests; retry with backoff")]
    Overloaded { max: usize },
    #[error("another es-broker is already using the data directory {0}; stop it or pick another --data-dir")]
    DataDirInUse(std::path::PathBuf),
    #[error("{0}")]
    OutOfOrderSequence(String),
    #[error("{0}")]
    ProducerFenced(String),
    #[error("storage error: {0}")]
    Storage(LogError),
    #[error("internal error: {0}")]
    Internal(String),
    /// A consumer-group refusal (unknown member, stale generation, rebalance, ...).
    #[error("{0}")]
    Group(es_groups::GroupError),
    #[error("plugin {0:?} does not exist; `es plugin list` shows the plugins")]
    PluginNotFound(String),
    #[error("a different plugin named {0:?} exists; remove it first or upload with replace=true")]
    PluginExists(String),
    #[error(
        "plugin {name:?} is bound to topic(s) {topics:?}; unbind it first (`es topic alter TOPIC --no-validators`)"
    )]
    PluginInUse { name: String, topics: Vec<String> },
    #[error("topic {topic:?} is the dead-letter topic of {users:?}; rebind those first")]
    TopicInUse { topic: String, users: Vec<String> },
    /// An upload or binding the plugin host refused (not a component, wrong world,
    /// forbidden import, configuration refused, ...).
    #[error("{0}")]
    Plugin(es_plugin_host::PluginError),
    /// Records refused by the topic's validators under `reject`: nothing was written.
    #[error("{}", validation_message(.topic, .findings))]
    ValidationFailed { topic: String, findings: Vec<crate::plugins::binding::Finding> },
    /// A validator failed (trapped, ran past its deadline, ran out of memory) on a
    /// topic whose binding rejects on failure: nothing was written.
    #[error("validator {plugin:?} of topic {topic:?} failed, so the batch was refused: {reason}")]
    PluginFailed { topic: String, plugin: String, reason: String },
}

fn validation_message(topic: &str, findings: &[crate::plugins::binding::Finding]) -> String {
    use crate::plugins::binding::Outcome;
    let rejected: Vec<_> = findings.iter().filter(|f| f.outcome == Outcome::Rejected).collect();
    let first = rejected.first().map_or(String::new(), |f| {
        format!(": record {} refused by {} ({}: {})", f.index, f.plugin, f.code, f.reason)
    });
    format!(
        "{} record(s) failed validation on topic {topic:?}, so nothing was written{first}; `violations` lists each",
        rejected.len()
    )
}

pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl ServerError {
    /// The stable wire code; never reuse a code for a different meaning.
    pub fn code(&self) -> &'static str {
        match self {
            ServerError::TopicNotFound(_) => "topic_not_found",
            ServerError::PartitionNotFound { .. } => "partition_not_found",
            ServerError::TopicExists(_) => "topic_already_exists",
            ServerError::InvalidTopicName { .. } => "invalid_topic_name",
            ServerError::InvalidConfig(_) => "invalid_config",
            ServerError::InvalidRequest(_) => "invalid_request",
            ServerError::BadJson(_) => "bad_json",
            ServerError::BadEncoding(_) => "bad_encoding",
            ServerError::OffsetOutOfRange { .. } => "offset_out_of_range",
            ServerError::BatchTooLarge { .. } => "batch_too_large",
            ServerError::RecordTooLarge { .. } => "record_too_large",
            ServerError::RequestTooLarge { .. } => "request_too_large",
            ServerError::NotFound(_) => "not_found",
            ServerError::MethodNotAllowed => "method_not_allowed",
            ServerError::ShuttingDown => "shutting_down",
            ServerError::Overloaded { .. } => "overloaded",
            ServerError::DataDirInUse(_) => "data_dir_in_use",
            ServerError::OutOfOrderSequence(_) => "out_of_order_sequence",
            ServerError::ProducerFenced(_) => "producer_fenced",
            ServerError::Storage(_) => "storage_error",
            ServerError::Internal(_) => "internal_error",
            ServerError::Group(g) => crate::groups::error_code(g),
            ServerError::PluginNotFound(_) => "plugin_not_found",
            ServerError::PluginExists(_) => "plugin_already_exists",
            ServerError::PluginInUse { .. } => "plugin_in_use",
            ServerError::TopicInUse { .. } => "topic_in_use",
            ServerError::Plugin(_) => "invalid_plugin",
            ServerError::ValidationFailed { .. } => "validation_failed",
            ServerError::PluginFailed { .. } => "plugin_failed",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ServerError::TopicNotFound(_)
            | ServerError::PartitionNotFound { .. }
            | ServerError::NotFound(_) => StatusCode::NOT_FOUND,
            ServerError::TopicExists(_)
            | ServerError::OutOfOrderSequence(_)
            | ServerError::ProducerFenced(_) => StatusCode::CONFLICT,
            ServerError::InvalidTopicName { .. }
            | ServerError::InvalidConfig(_)
            | ServerError::InvalidRequest(_)
            | ServerError::BadJson(_)
            | ServerError::BadEncoding(_) => StatusCode::BAD_REQUEST,
            ServerError::OffsetOutOfRange { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            ServerError::BatchTooLarge { .. }
            | ServerError::RecordTooLarge { .. }
            | ServerError::RequestTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ServerError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ServerError::ShuttingDown | ServerError::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ServerError::DataDirInUse(_) | ServerError::Storage(_) | ServerError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ServerError::Group(g) => crate::groups::error_status(g),
            ServerError::PluginNotFound(_) => StatusCode::NOT_FOUND,
            ServerError::PluginExists(_)
            | ServerError::PluginInUse { .. }
            | ServerError::TopicInUse { .. } => StatusCode::CONFLICT,
            ServerError::Plugin(_) => StatusCode::BAD_REQUEST,
            ServerError::ValidationFailed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ServerError::PluginFailed { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl From<LogError> for ServerError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::InvalidConfig(m) => ServerError::InvalidConfig(m),
            LogError::InvalidBatch(c) => ServerError::InvalidRequest(c.to_string()),
            LogError::ShutDown => ServerError::ShuttingDown,
            e @ LogError::OutOfOrderSequence { .. } => ServerError::OutOfOrderSequence(e.to_string()),
            e @ LogError::ProducerFenced { .. } => ServerError::ProducerFenced(e.to_string()),
            other => ServerError::Storage(other),
        }
    }
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(code = self.code(), error = %self, "request failed");
        }
        let message = self.to_string();
        let code = self.code().to_owned();
        let violations = match self {
            ServerError::ValidationFailed { findings, .. } => findings,
            _ => Vec::new(),
        };
        let body = crate::api::ErrorBody { error: crate::api::ErrorDetail { code, message, violations } };
        (status, axum::Json(body)).into_response()
    }
}
