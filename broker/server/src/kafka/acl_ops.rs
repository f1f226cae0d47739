//! Kafka's "authorized operations" bit fields (Metadata v8+, DescribeCluster,
//! DescribeGroups v3+), answered from es's one authorization table.
//!
//! Kafka sets bit `code` for every operation of the resource type the caller may
//! do (`AclOperation` codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
//! DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
//! IDEMPOTENT_WRITE 12), over the operations that resource type supports; with no
//! authorizer that is all of them. Here each Kafka operation is the es [`Call`] a
//! request doing it makes, and the bit is set when [`authz::may`] allows that call,
//! so the field says exactly what the caller's requests would be allowed. With auth
//! off every bit of the type is set, as on Kafka without an authorizer.
//!
//! A field not asked for is `i32::MIN`, Kafka's "omitted".

use crate::auth::Auth;
use crate::service::Principal;
use crate::service::authz::{self, Call, Resource};

const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

/// A topic's operations (Kafka's `AclEntry.supportedOperations(TOPIC)`).
const TOPIC: [(u8, Call); 8] = [
    (READ, Call::Fetch),
    (WRITE, Call::Produce),
    (CREATE, Call::CreateTopic),
    (DELETE, Call::DeleteTopic),
    (ALTER, Call::AddPartitions),
    (DESCRIBE, Call::DescribeTopic),
    (DESCRIBE_CONFIGS, Call::DescribeTopicConfig),
    (ALTER_CONFIGS, Call::AlterTopicConfig),
];

/// A group's operations. es keeps no group configs: their bits follow the group's
/// describe and admin, which is what a group-config request would need.
const GROUP: [(u8, Call); 5] = [
    (READ, Call::GroupJoin),
    (DELETE, Call::DeleteGroup),
    (DESCRIBE, Call::DescribeGroup),
    (DESCRIBE_CONFIGS, Call::DescribeGroup),
    (ALTER_CONFIGS, Call::DeleteGroup),
];

/// The cluster's operations: describing it is cluster describe; creating,
/// altering, configuring and acting as a broker are cluster admin; an idempotent
/// producer id is any active key's.
const CLUSTER: [(u8, Call); 7] = [
    (CREATE, Call::UploadPlugin),
    (ALTER, Call::TransferLeader),
    (DESCRIBE, Call::DescribeBroker),
    (CLUSTER_ACTION, Call::UploadPlugin),
    (DESCRIBE_CONFIGS, Call::DescribeBroker),
    (ALTER_CONFIGS, Call::UploadPlugin),
    (IDEMPOTENT_WRITE, Call::InitProducerId),
];

/// Kafka's value for a field the request did not ask for.
pub const OMITTED: i32 = i32::MIN;

fn field(auth: &Auth, who: &Principal, ops: &[(u8, Call)], resource: impl Fn() -> Resource) -> i32 {
    ops.iter()
        .filter(|(_, call)| authz::may(auth, who, *call, resource()))
        .fold(0i32, |bits, (code, _)| bits | (1 << code))
}

pub fn topic(auth: &Auth, who: &Principal, name: &str) -> i32 {
    field(auth, who, &TOPIC, || Resource::Topic(name.to_owned()))
}

pub fn group(auth: &Auth, who: &Principal, name: &str) -> i32 {
    field(auth, who, &GROUP, || Resource::Group(name.to_owned()))
}

pub fn cluster(auth: &Auth, who: &Principal) -> i32 {
    field(auth, who, &CLUSTER, || Resource::Cluster)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::auth::AuthOptions;

    fn open(dir: &std::path::Path, enabled: bool) -> Auth {
        let bootstrap_key = enabled.then(|| es_auth::ApiKey::random(&mut rand::rng()).reveal());
        let options = AuthOptions { enabled, bootstrap_key, ..Default::default() };
        Auth::open(dir, &options, Arc::new(es_core::SystemClock)).unwrap()
    }

    /// Apache Kafka 4.4.0 without an authorizer answers these
    /// (tests/kafka-clients/observed/kafka-4.4.0-java-admin.json).
    #[test]
    fn with_auth_off_every_supported_operation_is_set_as_on_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let auth = open(dir.path(), false);
        let who = Principal::ANONYMOUS;
        assert_eq!(topic(&auth, &who, "t"), 3576);
        assert_eq!(group(&auth, &who, "g"), 3400);
        assert_eq!(cluster(&auth, &who), 8096);
    }

    #[test]
    fn with_auth_on_the_bits_are_what_the_key_may_do() {
        let dir = tempfile::tempdir().unwrap();
        let auth = open(dir.path(), true);
        let grants = ["topic:prefixed:a.:read".into(), "group:literal:g:read".into()];
        let made = auth.create_key("reader", &grants, Default::default()).unwrap();
        let who = Principal::key(es_auth::KeyId::parse(&made.view.id).unwrap());
        let bits = |codes: &[u8]| codes.iter().fold(0, |b, c| b | (1 << c));
        // read implies describe (and so describe-configs); nothing else.
        assert_eq!(topic(&auth, &who, "a.x"), bits(&[READ, DESCRIBE, DESCRIBE_CONFIGS]));
        assert_eq!(topic(&auth, &who, "b.x"), 0);
        assert_eq!(group(&auth, &who, "g"), bits(&[READ, DESCRIBE, DESCRIBE_CONFIGS]));
        assert_eq!(cluster(&auth, &who), bits(&[IDEMPOTENT_WRITE]));
        assert_eq!(topic(&auth, &Principal::ANONYMOUS, "a.x"), 0);
    }
}
