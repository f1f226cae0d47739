//! How a [`BrokerError`] looks over HTTP: a stable code and a status, sent as
//! `{"error": {"code": "...", "message": "..."}}`. Both matches are exhaustive (no
//! catch-all arms), so a new variant does not compile until it is mapped here.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use es_log::LogError;

use crate::service::error::BrokerError;

/// The header of a 421 answer that carries the leader's base URL.
pub const LEADER_HEADER: &str = "es-leader";

impl BrokerError {
    /// The stable HTTP code; never reuse a code for a different meaning.
    pub fn code(&self) -> &'static str {
        match self {
            BrokerError::NotLeader { .. } => "not_leader",
            BrokerError::LeadershipLost { .. } => "leadership_lost",
            // Only Kafka requests name a leader epoch; never answered over HTTP.
            BrokerError::LeaderEpoch { .. } => "leader_epoch",
            BrokerError::Unauthorized { .. } => "unauthorized",
            BrokerError::Unauthenticated => "unauthenticated",
            BrokerError::KeyNotFound(_) => "key_not_found",
            BrokerError::Throttled { .. } => "throttled",
            BrokerError::InternalTopic(_) => "internal_topic",
            BrokerError::InvalidBatch(_) => "invalid_request",
            BrokerError::TopicNotFound(_) => "topic_not_found",
            BrokerError::PartitionNotFound { .. } => "partition_not_found",
            BrokerError::TopicExists(_) => "topic_already_exists",
            BrokerError::InvalidTopicName { .. } => "invalid_topic_name",
            BrokerError::InvalidConfig(_) => "invalid_config",
            BrokerError::InvalidRequest(_) => "invalid_request",
            BrokerError::BadJson(_) => "bad_json",
            BrokerError::BadEncoding(_) => "bad_encoding",
            BrokerError::OffsetOutOfRange { .. } => "offset_out_of_range",
            BrokerError::BatchTooLarge { .. } => "batch_too_large",
            BrokerError::RecordTooLarge { .. } => "record_too_large",
            BrokerError::RequestTooLarge { .. } => "request_too_large",
            BrokerError::NotFound(_) => "not_found",
            BrokerError::MethodNotAllowed => "method_not_allowed",
            BrokerError::ShuttingDown => "shutting_down",
            BrokerError::Overloaded { .. } => "overloaded",
            BrokerError::Timeout(_) => "timeout",
            BrokerError::DataDirInUse(_) => "data_dir_in_use",
            BrokerError::OutOfOrderSequence(_) => "out_of_order_sequence",
            BrokerError::ProducerFenced(_) => "producer_fenced",
            BrokerError::UnknownProducerId(_) => "unknown_producer_id",
            BrokerError::Storage(l) => storage_code(l),
            BrokerError::Internal(_) => "internal_error",
            BrokerError::Group(g) => crate::groups::error_code(g),
            BrokerError::Denied(missing) => missing.code(),
            BrokerError::PluginNotFound(_) => "plugin_not_found",
            BrokerError::SnapshotNotFound(_) => "snapshot_not_found",
            BrokerError::PluginExists(_) => "plugin_already_exists",
            BrokerError::PluginInUse { .. } => "plugin_in_use",
            BrokerError::TopicInUse { .. } => "topic_in_use",
            BrokerError::Plugin(_) => "invalid_plugin",
            BrokerError::PluginConfig { .. } => "invalid_config",
            BrokerError::ValidationFailed { .. } => "validation_failed",
            BrokerError::PluginFailed { .. } => "plugin_failed",
            BrokerError::PluginUnavailable { .. } => "plugin_unavailable",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            BrokerError::NotLeader { .. } => StatusCode::MISDIRECTED_REQUEST,
            // Not 421: a 421 promises the request was not acted on, so a client may
            // resend it to the leader as is; this one may have been written.
            BrokerError::LeadershipLost { .. } => StatusCode::SERVICE_UNAVAILABLE,
            BrokerError::Unauthorized { .. } => StatusCode::FORBIDDEN,
            BrokerError::Unauthenticated => StatusCode::UNAUTHORIZED,
            BrokerError::KeyNotFound(_) => StatusCode::NOT_FOUND,
            BrokerError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            BrokerError::InternalTopic(_) => StatusCode::FORBIDDEN,
            BrokerError::TopicNotFound(_)
            | BrokerError::PartitionNotFound { .. }
            | BrokerError::NotFound(_) => StatusCode::NOT_FOUND,
            BrokerError::TopicExists(_)
            | BrokerError::OutOfOrderSequence(_)
            | BrokerError::ProducerFenced(_)
            | BrokerError::UnknownProducerId(_) => StatusCode::CONFLICT,
            BrokerError::InvalidTopicName { .. }
            | BrokerError::InvalidConfig(_)
            | BrokerError::InvalidRequest(_)
            | BrokerError::InvalidBatch(_)
            | BrokerError::BadJson(_)
            | BrokerError::BadEncoding(_) => StatusCode::BAD_REQUEST,
            BrokerError::OffsetOutOfRange { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            BrokerError::BatchTooLarge { .. }
            | BrokerError::RecordTooLarge { .. }
            | BrokerError::RequestTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BrokerError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            BrokerError::ShuttingDown | BrokerError::Overloaded { .. } | BrokerError::LeaderEpoch { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            BrokerError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            BrokerError::Storage(l) => storage_status(l),
            BrokerError::DataDirInUse(_) | BrokerError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            BrokerError::Group(g) => crate::groups::error_status(g),
            BrokerError::Denied(missing) => missing.status(),
            BrokerError::PluginNotFound(_) | BrokerError::SnapshotNotFound(_) => StatusCode::NOT_FOUND,
            BrokerError::PluginExists(_)
            | BrokerError::PluginInUse { .. }
            | BrokerError::TopicInUse { .. } => StatusCode::CONFLICT,
            BrokerError::Plugin(_) | BrokerError::PluginConfig { .. } => StatusCode::BAD_REQUEST,
            BrokerError::ValidationFailed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            BrokerError::PluginFailed { .. } | BrokerError::PluginUnavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }
}

/// A log refusal the service did not turn into a structured variant keeps its
/// meaning: a size limit is 413 (never a 500), a range miss is 416.
fn storage_code(e: &LogError) -> &'static str {
    match e {
        LogError::BatchTooLarge { .. } => "batch_too_large",
        LogError::RecordTooLarge { .. } => "record_too_large",
        LogError::OffsetOutOfRange { .. } => "offset_out_of_range",
        LogError::InvalidBatch(_) | LogError::InvalidConfig(_) => "invalid_request",
        LogError::OutOfOrderSequence { .. } => "out_of_order_sequence",
        LogError::ProducerFenced { .. } => "producer_fenced",
        LogError::ShutDown => "shutting_down",
        LogError::Io { .. }
        | LogError::Corrupt { .. }
        | LogError::ColdStore { .. }
        | LogError::ColdConflict { .. }
        | LogError::ColdCorrupt { .. }
        | LogError::ColdManifest(_)
        | LogError::Failed(_)
        | LogError::JournalFull { .. }
        | LogError::OffsetMismatch { .. }
        | LogError::StaleEpoch { .. }
        | LogError::UnknownEpoch { .. }
        | LogError::OldFormat { .. }
        | LogError::NotBatchBoundary { .. }
        | LogError::NotContiguous { .. }
        | LogError::EntryOutOfRange { .. }
        | LogError::EpochMismatch { .. } => "storage_error",
    }
}

fn storage_status(e: &LogError) -> StatusCode {
    match e {
        LogError::BatchTooLarge { .. } | LogError::RecordTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        LogError::OffsetOutOfRange { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
        LogError::InvalidBatch(_) | LogError::InvalidConfig(_) => StatusCode::BAD_REQUEST,
        LogError::OutOfOrderSequence { .. } | LogError::ProducerFenced { .. } => StatusCode::CONFLICT,
        // The journal's disk is full: retryable, appends resume once space returns.
        LogError::ShutDown | LogError::JournalFull { .. } => StatusCode::SERVICE_UNAVAILABLE,
        LogError::Io { .. }
        | LogError::Corrupt { .. }
        | LogError::ColdStore { .. }
        | LogError::ColdConflict { .. }
        | LogError::ColdCorrupt { .. }
        | LogError::ColdManifest(_)
        | LogError::Failed(_)
        | LogError::OffsetMismatch { .. }
        | LogError::StaleEpoch { .. }
        | LogError::UnknownEpoch { .. }
        | LogError::OldFormat { .. }
        | LogError::NotBatchBoundary { .. }
        | LogError::NotContiguous { .. }
        | LogError::EntryOutOfRange { .. }
        | LogError::EpochMismatch { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for BrokerError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(code = self.code(), error = %self, "request failed");
        }
        let retry_after =
            if let BrokerError::Throttled { ms } = &self { Some(ms.div_ceil(1000).max(1)) } else { None };
        // A 421 names the leader's base URL when it is known, for clients to follow.
        let leader = match &self {
            BrokerError::NotLeader { leader: Some(h), .. } if h.http.starts_with("http") => {
                axum::http::HeaderValue::from_str(&h.http).ok()
            }
            _ => None,
        };
        let message = self.to_string();
        let code = self.code().to_owned();
        let violations =
            if let BrokerError::ValidationFailed { findings, .. } = self { findings } else { Vec::new() };
        let body = crate::api::ErrorBody { error: crate::api::ErrorDetail { code, message, violations } };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(secs) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        if let Some(url) = leader {
            response.headers_mut().insert(LEADER_HEADER, url);
        }
        if status == StatusCode::UNAUTHORIZED {
            let challenge = axum::http::HeaderValue::from_static("Bearer realm=\"es\"");
            response.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_groups::LeaderHint;

    fn hint() -> Option<LeaderHint> {
        Some(LeaderHint { http: "http://127.0.0.1:9".into(), binary: Some("127.0.0.1:10".into()) })
    }

    /// A 421 promises the request was not acted on (clients resend it to the
    /// header's leader); a write that may have landed is a 503 without the header.
    #[test]
    fn only_a_refusal_that_wrote_nothing_is_a_421_naming_the_leader() {
        let refused =
            BrokerError::NotLeader { topic: "t".into(), partition: 0, leader: hint() }.into_response();
        assert_eq!(refused.status(), StatusCode::MISDIRECTED_REQUEST);
        assert_eq!(refused.headers()[LEADER_HEADER], "http://127.0.0.1:9");
        let lost = BrokerError::LeadershipLost { topic: "t".into(), partition: 0, leader: hint() };
        assert_eq!((lost.code(), lost.status()), ("leadership_lost", StatusCode::SERVICE_UNAVAILABLE));
        assert!(lost.to_string().contains("may or may not be written"), "{lost}");
        assert!(lost.into_response().headers().get(LEADER_HEADER).is_none());
    }
}
