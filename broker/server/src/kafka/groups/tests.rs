//! The group handlers driven with kafka-protocol request values over a real service
//! (temporary data directory, 100 ms initial rebalance delay), and every response
//! encoded at the version it answers.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use es_groups::GroupKind;
use es_groups::classic::ClassicConfig;
use es_kafka::kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use es_kafka::kafka_protocol::messages::leave_group_request::MemberIdentity;
use es_kafka::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use es_kafka::kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use es_kafka::kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use es_kafka::kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use es_kafka::kafka_protocol::protocol::Encodable;

use super::*;
use crate::registry::{BrokerOptions, Registry};
use es_kafka::kafka_protocol::ResponseError as E;

const WHO: &Principal = &Principal::ANONYMOUS;

async fn service(dir: &std::path::Path) -> Service {
    let mut options = BrokerOptions::new(dir);
    options.kafka_groups = ClassicConfig {
        initial_rebalance_delay_ms: 100,
        min_session_timeout_ms: 1,
        max_session_timeout_ms: 600_000,
    };
    let svc = Service::new(Registry::open(options).unwrap().0);
    svc.create_topic(WHO, "t".into(), 2, BTreeMap::new()).await.unwrap();
    svc
}

fn encodes<T: Encodable>(msg: &T, version: i16) {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
}

fn string(out: &mut Vec<u8>, v: &str) {
    out.extend((v.len() as i16).to_be_bytes());
    out.extend(v.as_bytes());
}

/// ConsumerProtocolSubscription v1 for topic "t".
fn subscription() -> Vec<u8> {
    let mut out = 1i16.to_be_bytes().to_vec();
    out.extend(1i32.to_be_bytes());
    string(&mut out, "t");
    out.extend((-1i32).to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out
}

/// ConsumerProtocolAssignment v1: the given partitions of "t".
fn assignment(partitions: &[i32]) -> Vec<u8> {
    let mut out = 1i16.to_be_bytes().to_vec();
    out.extend(1i32.to_be_bytes());
    string(&mut out, "t");
    out.extend((partitions.len() as i32).to_be_bytes());
    for p in partitions {
        out.extend(p.to_be_bytes());
    }
    out.extend((-1i32).to_be_bytes());
    out
}

fn join_req(group: &str, member: &str) -> JoinGroupRequest {
    let protocol =
        JoinGroupRequestProtocol::default().with_name(s("range")).with_metadata(Bytes::from(subscription()));
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![protocol])
}

fn sync_req(member: &str, generation: i32, assignments: Vec<(String, Vec<u8>)>) -> SyncGroupRequest {
    let assignments = assignments.into_iter().map(|(m, a)| {
        SyncGroupRequestAssignment::default().with_member_id(s(m)).with_assignment(Bytes::from(a))
    });
    SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(assignments.collect())
}

fn commit_req(group: &str, member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    let partition = OffsetCommitRequestPartition::default()
        .with_partition_index(1)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(0);
    let bad = OffsetCommitRequestPartition::default().with_partition_index(7).with_committed_offset(1);
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(s("t")))
        .with_partitions(vec![partition, bad]);
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![topic])
}

/// Two v5 members through MEMBER_ID_REQUIRED, the barrier and the leader's sync:
/// (leader, follower, generation).
async fn stable_pair(svc: &Service) -> (String, String, i32) {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = join_group_as(svc, WHO, "app", "/127.0.0.1", 5, join_req("g", "")).await;
        assert_eq!(r.error_code, E::MemberIdRequired.code());
        assert!(r.member_id.starts_with("app-"), "{:?}", r.member_id);
        encodes(&r, 5);
        ids.push(r.member_id.to_string());
    }
    let (ra, rb) = tokio::join!(
        join_group_as(svc, WHO, "app", "/127.0.0.1", 5, join_req("g", &ids[0])),
        join_group_as(svc, WHO, "app", "/127.0.0.1", 5, join_req("g", &ids[1])),
    );
    assert_eq!((ra.error_code, rb.error_code), (0, 0));
    assert_eq!(ra.generation_id, rb.generation_id);
    assert_eq!(ra.leader, rb.leader);
    let (leader, follower) = if ra.leader == ra.member_id { (ra, rb) } else { (rb, ra) };
    assert_eq!(leader.members.len(), 2, "the leader gets every member's metadata");
    assert!(leader.members.iter().all(|m| m.metadata == subscription()));
    assert!(follower.members.is_empty());
    assert_eq!(leader.protocol_name.as_deref(), Some("range"));
    encodes(&leader, 5);
    let (l, f, generation) =
        (leader.member_id.to_string(), follower.member_id.to_string(), leader.generation_id);
    let plan = vec![(l.clone(), assignment(&[0])), (f.clone(), assignment(&[1]))];
    let (fs, ls) = tokio::join!(sync_group(svc, WHO, 3, sync_req(&f, generation, vec![])), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        sync_group(svc, WHO, 3, sync_req(&l, generation, plan)).await
    });
    assert_eq!((fs.error_code, ls.error_code), (0, 0));
    assert_eq!(fs.assignment, Bytes::from(assignment(&[1])), "the leader's assignment reached the follower");
    assert_eq!(ls.assignment, Bytes::from(assignment(&[0])));
    encodes(&fs, 3);
    (l, f, generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_share_the_group_and_commits_show_in_es_group_describe() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    let (l, f, generation) = stable_pair(&svc).await;
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(&f))
        .with_generation_id(generation);
    assert_eq!(heartbeat(&svc, WHO, 4, hb.clone()).await.error_code, 0);
    let stale = hb.clone().with_generation_id(generation - 1);
    assert_eq!(heartbeat(&svc, WHO, 0, stale).await.error_code, E::IllegalGeneration.code());

    let r = offset_commit(&svc, WHO, 8, commit_req("g", &f, generation, 42)).await;
    let codes: Vec<i16> = r.topics[0].partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(codes, vec![0, E::UnknownTopicOrPartition.code()]);
    encodes(&r, 8);
    let stale = offset_commit(&svc, WHO, 2, commit_req("g", &f, generation + 1, 1)).await;
    assert_eq!(stale.topics[0].partitions[0].error_code, E::IllegalGeneration.code());
    encodes(&stale, 2);

    let (described, lags) = svc.describe_group(WHO, "g").await.unwrap();
    assert_eq!(described.kind, GroupKind::Kafka);
    assert_eq!(format!("{:?}", described.state), "Stable");
    assert_eq!(described.topics, vec!["t".to_owned()]);
    let owned: Vec<(String, Vec<u32>)> = described
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.assignment.iter().map(|tp| tp.partition).collect()))
        .collect();
    assert!(owned.contains(&(l.clone(), vec![0])) && owned.contains(&(f.clone(), vec![1])), "{owned:?}");
    let p1 = lags.iter().find(|p| p.partition == 1).unwrap();
    assert_eq!((p1.committed, p1.owner.as_deref()), (Some(42), Some(f.as_str())));
    let listed = svc.registry().groups().list();
    assert_eq!(listed, vec![("g".to_owned(), "Stable".to_owned(), GroupKind::Kafka)]);

    // OffsetFetch: v1 listed partitions, v8 all of several groups.
    let topic =
        OffsetFetchRequestTopic::default().with_name(TopicName(s("t"))).with_partition_indexes(vec![0, 1]);
    let v1 = offset_fetch(
        &svc,
        WHO,
        1,
        OffsetFetchRequest::default().with_group_id(GroupId(s("g"))).with_topics(Some(vec![topic])),
    )
    .await;
    let got: Vec<(i32, i64)> =
        v1.topics[0].partitions.iter().map(|p| (p.partition_index, p.committed_offset)).collect();
    assert_eq!(got, vec![(0, -1), (1, 42)]);
    encodes(&v1, 1);
    let groups = ["g", "none"]
        .map(|g| OffsetFetchRequestGroup::default().with_group_id(GroupId(s(g))).with_topics(None));
    let v8 = offset_fetch(&svc, WHO, 8, OffsetFetchRequest::default().with_groups(groups.to_vec())).await;
    assert_eq!(v8.groups[0].topics[0].partitions[0].committed_offset, 42);
    assert_eq!(v8.groups[0].topics[0].partitions[0].committed_leader_epoch, 0);
    assert!(v8.groups[1].topics.is_empty());
    encodes(&v8, 8);

    // Describe and list as Kafka tools see them.
    let d = describe_groups(
        &svc,
        WHO,
        5,
        DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g")), GroupId(s("x"))]),
    )
    .await;
    assert_eq!((d.groups[0].group_state.as_str(), d.groups[0].protocol_data.as_str()), ("Stable", "range"));
    assert_eq!(d.groups[0].members.len(), 2);
    assert_eq!(d.groups[0].members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(d.groups[1].group_state.as_str(), "Dead");
    for v in 0..=5 {
        encodes(&d, v);
    }
    let stable_only = ListGroupsRequest::default().with_states_filter(vec![s("Empty")]);
    assert!(list_groups(&svc, WHO, 4, stable_only.clone()).await.groups.is_empty());
    let all = list_groups(&svc, WHO, 3, stable_only).await;
    assert_eq!((all.groups.len(), all.groups[0].protocol_type.as_str()), (1, "consumer"));
    encodes(&all, 3);

    // Offsets of a subscribed topic stay; a live group is not deleted.
    let del = OffsetDeleteRequest::default().with_group_id(GroupId(s("g"))).with_topics(vec![
        OffsetDeleteRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(1)]),
    ]);
    let r = offset_delete(&svc, WHO, 0, del.clone()).await;
    assert_eq!(r.topics[0].partitions[0].error_code, E::GroupSubscribedToTopic.code());
    let names = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g")), GroupId(s("nope"))]);
    let r = delete_groups(&svc, WHO, 2, names.clone()).await;
    let codes: Vec<i16> = r.results.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, vec![E::NonEmptyGroup.code(), E::GroupIdNotFound.code()]);
    encodes(&r, 2);

    // Both leave in one v3+ request (plus a stranger); then the group empties.
    let members =
        [&l, &f, &"ghost".to_owned()].map(|m| MemberIdentity::default().with_member_id(s(m.as_str())));
    let leave = LeaveGroupRequest::default().with_group_id(GroupId(s("g"))).with_members(members.to_vec());
    let r = leave_group(&svc, WHO, 4, leave).await;
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![0, 0, E::UnknownMemberId.code()]);
    encodes(&r, 4);
    assert_eq!(offset_delete(&svc, WHO, 0, del).await.topics[0].partitions[0].error_code, 0);
    assert!(svc.describe_group(WHO, "g").await.unwrap().1.iter().all(|p| p.committed.is_none()));
    let r = delete_groups(&svc, WHO, 0, names).await;
    assert_eq!(r.results[0].error_code, 0);
    let d =
        describe_groups(&svc, WHO, 0, DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]))
            .await;
    assert_eq!(d.groups[0].group_state.as_str(), "Dead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_versions_join_without_member_id_required_and_get_their_error_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    // v0-3: no KIP-394 round trip; the join waits out the initial delay and leads.
    let r = join_group_as(&svc, WHO, "old", "/127.0.0.1", 0, join_req("g", "")).await;
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    assert_eq!(r.leader, r.member_id);
    encodes(&r, 0);
    let unknown = join_group(&svc, WHO, 1, join_req("g", "made-up")).await;
    assert_eq!(unknown.error_code, E::UnknownMemberId.code());
    assert_eq!(unknown.protocol_name.as_deref(), Some(""), "v0-6 protocol names are not nullable");
    encodes(&unknown, 1);
    let r7 = join_group(&svc, WHO, 7, join_req("g", "made-up")).await;
    assert_eq!(r7.protocol_name, None);
    encodes(&r7, 9);
    let bad = join_group(&svc, WHO, 9, join_req("g", "").with_session_timeout_ms(0)).await;
    assert_eq!(bad.error_code, E::InvalidSessionTimeout.code());
    let empty_id = join_group(&svc, WHO, 9, join_req("", "")).await;
    assert_eq!(empty_id.error_code, E::InvalidGroupId.code());
    let hb = HeartbeatRequest::default().with_group_id(GroupId(s("nope"))).with_member_id(s("m"));
    for v in 0..=4 {
        let r = heartbeat(&svc, WHO, v, hb.clone()).await;
        assert_eq!(r.error_code, E::UnknownMemberId.code());
        encodes(&r, v);
    }
    let leave =
        LeaveGroupRequest::default().with_group_id(GroupId(s("g"))).with_member_id(r.member_id.clone());
    let left = leave_group(&svc, WHO, 0, leave).await;
    assert_eq!(left.error_code, 0);
    encodes(&left, 0);
    let sync = sync_group(&svc, WHO, 0, sync_req(&r.member_id, 1, vec![])).await;
    assert_eq!(sync.error_code, E::UnknownMemberId.code());
    encodes(&sync, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_id_is_one_kind_or_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path()).await;
    // A simple commit (generation -1, no member) makes "k" a Kafka group.
    let r = offset_commit(&svc, WHO, 9, commit_req("k", "", -1, 5)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    let es_join = crate::service::groups::JoinGroup {
        group: "k".into(),
        member_id: None,
        client_id: "es".into(),
        topics: vec!["t".into()],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
    };
    let e = svc.join_group(WHO, es_join.clone()).err().unwrap();
    assert_eq!(e.code(), "group_kind_mismatch", "{e}");
    assert_eq!(svc.describe_group(WHO, "k").await.unwrap().0.kind, GroupKind::Kafka);
    // And an es-native group refuses Kafka members and commits.
    svc.join_group(WHO, crate::service::groups::JoinGroup { group: "e".into(), ..es_join }).unwrap();
    let r = join_group(&svc, WHO, 9, join_req("e", "m")).await;
    assert_eq!(r.error_code, E::InconsistentGroupProtocol.code());
    let r = offset_commit(&svc, WHO, 9, commit_req("e", "", -1, 5)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, E::InconsistentGroupProtocol.code());
    let kinds: Vec<(String, GroupKind)> =
        svc.registry().groups().list().into_iter().map(|(g, _, k)| (g, k)).collect();
    assert_eq!(kinds, vec![("e".to_owned(), GroupKind::Es), ("k".to_owned(), GroupKind::Kafka)]);
    let listed = list_groups(&svc, WHO, 5, ListGroupsRequest::default()).await;
    let names: Vec<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(names, vec!["k"], "Kafka clients list only Kafka groups");
    assert_eq!(listed.groups[0].group_state.as_str(), "Empty");
    encodes(&listed, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_groups_kind_and_offsets_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let svc = service(dir.path()).await;
        let r = offset_commit(&svc, WHO, 9, commit_req("k", "", -1, 7)).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        svc.registry().shutdown().unwrap();
    }
    let mut options = BrokerOptions::new(dir.path());
    options.kafka_groups.initial_rebalance_delay_ms = 100;
    let svc = Service::new(Registry::open(options).unwrap().0);
    let (d, lags) = svc.describe_group(WHO, "k").await.unwrap();
    assert_eq!((d.kind, format!("{:?}", d.state)), (GroupKind::Kafka, "Empty".to_owned()));
    assert_eq!(lags.iter().find(|p| p.partition == 1).unwrap().committed, Some(7));
    let es_join = crate::service::groups::JoinGroup {
        group: "k".into(),
        member_id: None,
        client_id: "es".into(),
        topics: vec!["t".into()],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
    };
    assert_eq!(svc.join_group(WHO, es_join).err().unwrap().code(), "group_kind_mismatch");
    let listed = list_groups(&svc, WHO, 4, ListGroupsRequest::default()).await;
    assert_eq!((listed.groups[0].group_id.as_str(), listed.groups[0].group_state.as_str()), ("k", "Empty"));
    let topic =
        OffsetFetchRequestTopic::default().with_name(TopicName(s("t"))).with_partition_indexes(vec![1]);
    let fetched = offset_fetch(
        &svc,
        WHO,
        7,
        OffsetFetchRequest::default().with_group_id(GroupId(s("k"))).with_topics(Some(vec![topic])),
    )
    .await;
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, 7);
    encodes(&fetched, 7);
}
