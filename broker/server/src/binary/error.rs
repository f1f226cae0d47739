//! How a [`BrokerError`] looks over the binary protocol: one [`ErrorCode`] each.
//! The matches are exhaustive (no catch-all arms), so a new variant does not
//! compile until it is mapped here.

use es_groups::{GroupError, LeaderHint};
use es_log::LogError;
use es_protocol::{ErrorCode, Response};

use crate::service::error::BrokerError;

/// The error answer for `e`. A NotLeader names the leader's binary address last,
/// as ` leader=HOST:PORT`, when it is known (docs/protocol.md): es-client follows it.
pub fn response(e: &BrokerError) -> Response {
    let message = match e {
        BrokerError::NotLeader { leader: Some(LeaderHint { binary: Some(addr), .. }), .. }
        | BrokerError::LeadershipLost { leader: Some(LeaderHint { binary: Some(addr), .. }), .. } => {
            format!("{e} leader={addr}")
        }
        _ => e.to_string(),
    };
    Response::Error { code: code(e), message }
}

pub fn code(e: &BrokerError) -> ErrorCode {
    match e {
        // es-client resends an idempotent producer's batch on either; the message says which.
        BrokerError::NotLeader { .. } | BrokerError::LeadershipLost { .. } => ErrorCode::NotLeader,
        // Only Kafka requests name a leader epoch; never answered here.
        BrokerError::LeaderEpoch { .. } => ErrorCode::NotLeader,
        BrokerError::Unauthorized { .. } => ErrorCode::Unauthorized,
        BrokerError::Throttled { .. } => ErrorCode::Throttled,
        BrokerError::Unauthenticated => ErrorCode::Unauthenticated,
        BrokerError::InternalTopic(_) => ErrorCode::InternalTopic,
        BrokerError::InvalidBatch(_) => ErrorCode::InvalidBatch,
        BrokerError::TopicNotFound(_) => ErrorCode::UnknownTopic,
        BrokerError::PartitionNotFound { .. } => ErrorCode::UnknownPartition,
        BrokerError::TopicExists(_) => ErrorCode::TopicExists,
        BrokerError::InvalidConfig(_) | BrokerError::PluginConfig { .. } => ErrorCode::InvalidConfig,
        BrokerError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        BrokerError::BatchTooLarge { .. } | BrokerError::RequestTooLarge { .. } => ErrorCode::BatchTooLarge,
        BrokerError::RecordTooLarge { .. } => ErrorCode::RecordTooLarge,
        BrokerError::ShuttingDown => ErrorCode::ShuttingDown,
        BrokerError::Overloaded { .. } => ErrorCode::TooManyInFlight,
        BrokerError::OutOfOrderSequence(_) => ErrorCode::OutOfOrderSequence,
        BrokerError::ProducerFenced(_) => ErrorCode::ProducerFenced,
        BrokerError::UnknownProducerId(_) => ErrorCode::UnknownProducerId,
        BrokerError::ValidationFailed { .. } => ErrorCode::ValidationFailed,
        BrokerError::PluginFailed { .. } => ErrorCode::PluginFailed,
        // Retriable: the blob arrives from a peer shortly (the message says so).
        BrokerError::PluginUnavailable { .. } => ErrorCode::Timeout,
        BrokerError::Storage(l) => log_code(l),
        BrokerError::Group(g) => group_code(g),
        BrokerError::Denied(missing) => code(missing),
        BrokerError::InvalidTopicName { .. }
        | BrokerError::InvalidRequest(_)
        | BrokerError::BadJson(_)
        | BrokerError::BadEncoding(_)
        | BrokerError::NotFound(_)
        | BrokerError::MethodNotAllowed
        | BrokerError::PluginNotFound(_)
        | BrokerError::SnapshotNotFound(_)
        | BrokerError::KeyNotFound(_)
        | BrokerError::PluginExists(_)
        | BrokerError::PluginInUse { .. }
        | BrokerError::TopicInUse { .. }
        | BrokerError::Plugin(_) => ErrorCode::InvalidRequest,
        BrokerError::Timeout(_) => ErrorCode::Timeout,
        BrokerError::DataDirInUse(_) | BrokerError::Internal(_) => ErrorCode::Internal,
    }
}

fn log_code(e: &LogError) -> ErrorCode {
    match e {
        LogError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        LogError::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
        LogError::RecordTooLarge { .. } => ErrorCode::RecordTooLarge,
        LogError::InvalidBatch(_) | LogError::OffsetMismatch { .. } => ErrorCode::InvalidBatch,
        LogError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequence,
        LogError::ProducerFenced { .. } => ErrorCode::ProducerFenced,
        LogError::InvalidConfig(_) => ErrorCode::InvalidConfig,
        LogError::ShutDown => ErrorCode::ShuttingDown,
        LogError::Io { .. }
        | LogError::Failed(_)
        | LogError::JournalFull { .. }
        | LogError::Corrupt { .. }
        | LogError::ColdStore { .. }
        | LogError::ColdConflict { .. }
        | LogError::ColdCorrupt { .. }
        | LogError::ColdManifest(_) => ErrorCode::StorageError,
        LogError::StaleEpoch { .. }
        | LogError::UnknownEpoch { .. }
        | LogError::OldFormat { .. }
        | LogError::NotBatchBoundary { .. }
        | LogError::NotContiguous { .. }
        | LogError::EntryOutOfRange { .. }
        | LogError::EpochMismatch { .. } => ErrorCode::Internal,
    }
}

/// Group refusals carry the reserved group codes; the rest are invalid requests.
fn group_code(e: &GroupError) -> ErrorCode {
    match e {
        GroupError::UnknownMember { .. } => ErrorCode::UnknownMember,
        GroupError::IllegalGeneration { .. } => ErrorCode::IllegalGeneration,
        GroupError::RebalanceInProgress(_) => ErrorCode::RebalanceInProgress,
        GroupError::InconsistentSubscription { .. }
        | GroupError::GroupNotFound(_)
        | GroupError::GroupNotEmpty(_)
        | GroupError::WrongKind { .. }
        | GroupError::MemberIdRequired { .. }
        | GroupError::FencedInstanceId { .. }
        | GroupError::InconsistentGroupProtocol { .. }
        | GroupError::InvalidSessionTimeout { .. }
        | GroupError::GroupFull { .. }
        | GroupError::SubscribedToTopic { .. }
        | GroupError::InvalidRequest(_) => ErrorCode::InvalidRequest,
        GroupError::NotCoordinator { .. } | GroupError::CoordinatorLost { .. } => ErrorCode::NotLeader,
        // Retriable, like a shutting-down broker: the coordinator serves shortly.
        GroupError::CoordinatorLoading => ErrorCode::ShuttingDown,
        GroupError::Storage(l) => log_code(l),
        GroupError::Corrupt { .. } => ErrorCode::Internal,
    }
}
