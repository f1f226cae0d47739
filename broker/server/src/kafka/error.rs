//! How a [`BrokerError`] looks to a Kafka client: one Kafka error code each. The
//! matches are exhaustive (no catch-all arms), so a new variant does not compile
//! until it says what Kafka clients see. Codes are Kafka's (`org.apache.kafka.common.
//! protocol.Errors`); retriable ones are used only where a retry can succeed.

use es_groups::GroupError;
use es_log::LogError;

use crate::service::error::BrokerError;

/// Kafka's error codes es answers with.
pub mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_CONFIG: i16 = 40;
    pub const INVALID_REQUEST: i16 = 42;
    pub const POLICY_VIOLATION: i16 = 44;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    pub const ILLEGAL_SASL_STATE: i16 = 34;
    pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 76;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const INVALID_RECORD: i16 = 87;
    pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
}

/// The Kafka error code for `e`.
pub fn kafka_code(e: &BrokerError) -> i16 {
    use code::*;
    match e {
        // Kafka answers both alike; its idempotent producers make the resend safe.
        BrokerError::NotLeader { .. } | BrokerError::LeadershipLost { .. } => NOT_LEADER_OR_FOLLOWER,
        BrokerError::LeaderEpoch { asked, current, .. } if asked < current => FENCED_LEADER_EPOCH,
        BrokerError::LeaderEpoch { .. } => UNKNOWN_LEADER_EPOCH,
        BrokerError::Unauthorized { .. } => TOPIC_AUTHORIZATION_FAILED,
        BrokerError::Unauthenticated => SASL_AUTHENTICATION_FAILED,
        BrokerError::Denied(missing) => denied_code(missing),
        BrokerError::Throttled { .. } => THROTTLING_QUOTA_EXCEEDED,
        // Kafka answers a client write to an internal topic this way too.
        BrokerError::InternalTopic(_) | BrokerError::InvalidTopicName { .. } => INVALID_TOPIC_EXCEPTION,
        // INVALID_RECORD, not CORRUPT_MESSAGE: clients retry the latter forever, and
        // a batch that failed its checks fails them again.
        BrokerError::InvalidBatch(_)
        | BrokerError::ValidationFailed { .. }
        | BrokerError::PluginFailed { .. } => INVALID_RECORD,
        BrokerError::TopicNotFound(_) | BrokerError::PartitionNotFound { .. } => UNKNOWN_TOPIC_OR_PARTITION,
        BrokerError::TopicExists(_) => TOPIC_ALREADY_EXISTS,
        BrokerError::InvalidConfig(_) | BrokerError::PluginConfig { .. } => INVALID_CONFIG,
        BrokerError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        BrokerError::BatchTooLarge { .. } | BrokerError::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
        BrokerError::RequestTooLarge { .. } => RECORD_LIST_TOO_LARGE,
        // A broker shutting down is, to a client, a leader going away: refresh and retry.
        BrokerError::ShuttingDown => NOT_LEADER_OR_FOLLOWER,
        // Retriable: a validator's blob still on its way to this node.
        BrokerError::Overloaded { .. } | BrokerError::Timeout(_) | BrokerError::PluginUnavailable { .. } => {
            REQUEST_TIMED_OUT
        }
        BrokerError::OutOfOrderSequence(_) => OUT_OF_ORDER_SEQUENCE_NUMBER,
        BrokerError::ProducerFenced(_) => INVALID_PRODUCER_EPOCH,
        BrokerError::UnknownProducerId(_) => UNKNOWN_PRODUCER_ID,
        BrokerError::TopicInUse { .. } => POLICY_VIOLATION,
        BrokerError::Storage(l) => log_code(l),
        BrokerError::Group(g) => group_code(g),
        BrokerError::InvalidRequest(_)
        | BrokerError::BadJson(_)
        | BrokerError::BadEncoding(_)
        | BrokerError::NotFound(_)
        | BrokerError::MethodNotAllowed
        | BrokerError::PluginNotFound(_)
        | BrokerError::SnapshotNotFound(_)
        | BrokerError::PluginExists(_)
        | BrokerError::PluginInUse { .. }
        | BrokerError::Plugin(_)
        | BrokerError::KeyNotFound(_) => INVALID_REQUEST,
        BrokerError::DataDirInUse(_) | BrokerError::Internal(_) => UNKNOWN_SERVER_ERROR,
    }
}

fn log_code(e: &LogError) -> i16 {
    use code::*;
    match e {
        LogError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        LogError::BatchTooLarge { .. } | LogError::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
        LogError::InvalidBatch(_) | LogError::OffsetMismatch { .. } => INVALID_RECORD,
        LogError::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
        LogError::ProducerFenced { .. } => INVALID_PRODUCER_EPOCH,
        LogError::InvalidConfig(_) => INVALID_CONFIG,
        LogError::ShutDown => NOT_LEADER_OR_FOLLOWER,
        LogError::Io { .. }
        | LogError::Failed(_)
        | LogError::Corrupt { .. }
        | LogError::ColdStore { .. }
        | LogError::ColdConflict { .. }
        | LogError::ColdCorrupt { .. }
        | LogError::ColdManifest(_)
        | LogError::JournalFull { .. } => KAFKA_STORAGE_ERROR,
        LogError::StaleEpoch { .. }
        | LogError::UnknownEpoch { .. }
        | LogError::OldFormat { .. }
        | LogError::NotBatchBoundary { .. }
        | LogError::NotContiguous { .. }
        | LogError::EntryOutOfRange { .. }
        | LogError::EpochMismatch { .. } => UNKNOWN_SERVER_ERROR,
    }
}

/// A topic or group the caller may not use: Kafka's authorization failure, which a
/// Kafka broker answers alike whether the resource exists or not.
fn denied_code(missing: &BrokerError) -> i16 {
    match missing {
        BrokerError::Group(_) => code::GROUP_AUTHORIZATION_FAILED,
        _ => code::TOPIC_AUTHORIZATION_FAILED,
    }
}

/// The code of a refusal of a consumer-group call: the group coordinator's view of
/// the few errors that mean something else there, then [`kafka_code`].
pub fn coordinator_code(e: &BrokerError) -> i16 {
    use code::*;
    match e {
        BrokerError::Unauthorized { .. } => GROUP_AUTHORIZATION_FAILED,
        BrokerError::NotLeader { .. } | BrokerError::LeadershipLost { .. } => NOT_COORDINATOR,
        BrokerError::ShuttingDown | BrokerError::Overloaded { .. } => COORDINATOR_NOT_AVAILABLE,
        BrokerError::InvalidRequest(m) if m.starts_with("commit metadata") => OFFSET_METADATA_TOO_LARGE,
        other => kafka_code(other),
    }
}

fn group_code(e: &GroupError) -> i16 {
    use code::*;
    match e {
        GroupError::UnknownMember { .. } => UNKNOWN_MEMBER_ID,
        GroupError::IllegalGeneration { .. } => ILLEGAL_GENERATION,
        GroupError::RebalanceInProgress(_) => REBALANCE_IN_PROGRESS,
        // A group id of the other kind: Kafka clients see the protocols disagree.
        GroupError::InconsistentSubscription { .. }
        | GroupError::InconsistentGroupProtocol { .. }
        | GroupError::WrongKind { .. } => INCONSISTENT_GROUP_PROTOCOL,
        GroupError::GroupNotFound(_) => GROUP_ID_NOT_FOUND,
        GroupError::GroupNotEmpty(_) => NON_EMPTY_GROUP,
        GroupError::InvalidRequest(_) => INVALID_GROUP_ID,
        GroupError::MemberIdRequired { .. } => MEMBER_ID_REQUIRED,
        GroupError::FencedInstanceId { .. } => FENCED_INSTANCE_ID,
        GroupError::InvalidSessionTimeout { .. } => INVALID_SESSION_TIMEOUT,
        GroupError::GroupFull { .. } => GROUP_MAX_SIZE_REACHED,
        GroupError::SubscribedToTopic { .. } => GROUP_SUBSCRIBED_TO_TOPIC,
        GroupError::NotCoordinator { .. } | GroupError::CoordinatorLost { .. } => NOT_COORDINATOR,
        GroupError::CoordinatorLoading => COORDINATOR_LOAD_IN_PROGRESS,
        GroupError::Storage(l) => log_code(l),
        GroupError::Corrupt { .. } => UNKNOWN_SERVER_ERROR,
    }
}

/// The error code and message of a result, Kafka style: (0, None) on success.
pub fn code_and_message<T>(r: &crate::service::Result<T>) -> (i16, Option<String>) {
    match r {
        Ok(_) => (code::NONE, None),
        Err(e) => (kafka_code(e), Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_kafkas() {
        use es_kafka::kafka_protocol::ResponseError as E;
        let pairs = [
            (code::COORDINATOR_NOT_AVAILABLE, E::CoordinatorNotAvailable),
            (code::NOT_COORDINATOR, E::NotCoordinator),
            (code::COORDINATOR_LOAD_IN_PROGRESS, E::CoordinatorLoadInProgress),
            (code::INVALID_GROUP_ID, E::InvalidGroupId),
            (code::INVALID_SESSION_TIMEOUT, E::InvalidSessionTimeout),
            (code::GROUP_AUTHORIZATION_FAILED, E::GroupAuthorizationFailed),
            (code::SASL_AUTHENTICATION_FAILED, E::SaslAuthenticationFailed),
            (code::UNSUPPORTED_SASL_MECHANISM, E::UnsupportedSaslMechanism),
            (code::ILLEGAL_SASL_STATE, E::IllegalSaslState),
            (code::MEMBER_ID_REQUIRED, E::MemberIdRequired),
            (code::GROUP_MAX_SIZE_REACHED, E::GroupMaxSizeReached),
            (code::FENCED_INSTANCE_ID, E::FencedInstanceId),
            (code::GROUP_SUBSCRIBED_TO_TOPIC, E::GroupSubscribedToTopic),
            (code::OFFSET_METADATA_TOO_LARGE, E::OffsetMetadataTooLarge),
            (code::NON_EMPTY_GROUP, E::NonEmptyGroup),
            (code::INVALID_RECORD, E::InvalidRecord),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs.code(), "{theirs:?}");
        }
    }

    #[test]
    fn the_codes_kafka_clients_act_on() {
        let too_big = BrokerError::RecordTooLarge { index: 0, size: 10, max: 1 };
        assert_eq!(kafka_code(&too_big), code::MESSAGE_TOO_LARGE);
        assert_eq!(kafka_code(&BrokerError::TopicNotFound("t".into())), code::UNKNOWN_TOPIC_OR_PARTITION);
        let refused = BrokerError::ValidationFailed { topic: "t".into(), findings: vec![] };
        assert_eq!(kafka_code(&refused), code::INVALID_RECORD);
        assert_eq!(
            kafka_code(&BrokerError::InternalTopic("__es_offsets".into())),
            code::INVALID_TOPIC_EXCEPTION
        );
        assert_eq!(kafka_code(&BrokerError::UnknownProducerId(7)), code::UNKNOWN_PRODUCER_ID);
        assert_eq!(kafka_code(&BrokerError::ProducerFenced("x".into())), code::INVALID_PRODUCER_EPOCH);
        assert_eq!(
            kafka_code(&BrokerError::OutOfOrderSequence("x".into())),
            code::OUT_OF_ORDER_SEQUENCE_NUMBER
        );
        let oor =
            BrokerError::OffsetOutOfRange { partition: 0, requested: 9, log_start: 0, high_watermark: 1 };
        assert_eq!(kafka_code(&oor), code::OFFSET_OUT_OF_RANGE);
        assert_eq!(kafka_code(&BrokerError::TopicExists("t".into())), code::TOPIC_ALREADY_EXISTS);
        assert_eq!(code_and_message::<()>(&Ok(())), (0, None));
    }
}
