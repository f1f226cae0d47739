//! Kafka's group APIs over the service: JoinGroup 0-9, SyncGroup 0-5, Heartbeat
//! 0-4, LeaveGroup 0-5, OffsetCommit 2-9, OffsetFetch 1-9 (v8+ many groups),
//! OffsetDelete 0, DescribeGroups 0-5, ListGroups 0-5, DeleteGroups 0-2. Each
//! handler maps a kafka-protocol request onto one service call and its answer (or
//! refusal, as Kafka's error code) onto the response, setting only the fields the
//! version has (kafka-protocol refuses to encode a field a version lacks).

use bytes::Bytes;
use es_groups::GroupError;
use es_groups::classic::{ClassicDescription, JoinGroup, MemberRef, Protocol, SyncGroup};
use es_kafka::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use es_kafka::kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use es_kafka::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use es_kafka::kafka_protocol::messages::leave_group_response::MemberResponse;
use es_kafka::kafka_protocol::messages::list_groups_response::ListedGroup;
use es_kafka::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use es_kafka::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use es_kafka::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use es_kafka::kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use es_kafka::kafka_protocol::protocol::StrBytes;

use super::acl_ops;
use super::error::code;
use crate::service::kafka_groups::{KafkaCommit, KafkaPartition};
use crate::service::{BrokerError, Principal, Service, authz};

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn opt(v: Option<StrBytes>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// Kafka's error code for a refusal of a group call.
pub fn error_code(e: &BrokerError) -> i16 {
    super::error::coordinator_code(e)
}

fn code_of(r: &Result<(), BrokerError>) -> i16 {
    r.as_ref().err().map_or(0, error_code)
}

/// JoinGroup without the connection's client id and host (see [`join_group_as`]).
pub async fn join_group(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    join_group_as(svc, who, "", "", version, req).await
}

/// JoinGroup 0-9, with the request header's client id and the peer's address, which
/// DescribeGroups shows. Waits at the barrier.
pub async fn join_group_as(
    svc: &Service,
    who: &Principal,
    client_id: &str,
    client_host: &str,
    version: i16,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    // v0 has no rebalance timeout: Kafka uses the session timeout.
    let rebalance = if version >= 1 { req.rebalance_timeout_ms } else { req.session_timeout_ms };
    let join = JoinGroup {
        group: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: opt(req.group_instance_id).filter(|_| version >= 5),
        client_id: client_id.to_owned(),
        client_host: client_host.to_owned(),
        session_timeout_ms: u64::try_from(req.session_timeout_ms).unwrap_or(0),
        rebalance_timeout_ms: u64::try_from(rebalance).unwrap_or(0),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| Protocol { name: p.name.to_string(), metadata: p.metadata.to_vec() })
            .collect(),
        require_known_member_id: version >= 4,
    };
    let empty_name = if version >= 7 { None } else { Some(s("")) };
    let base = JoinGroupResponse::default().with_protocol_name(empty_name.clone());
    match svc.kafka_join_group(who, join).await {
        Ok(j) => base
            .with_generation_id(j.generation)
            .with_protocol_type((version >= 7).then(|| s(j.protocol_type)))
            .with_protocol_name(Some(s(j.protocol_name)))
            .with_leader(s(j.leader))
            .with_skip_assignment(j.skip_assignment && version >= 9)
            .with_member_id(s(j.member_id))
            .with_members(
                j.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(s(m.member_id))
                            .with_group_instance_id(m.instance_id.filter(|_| version >= 5).map(s))
                            .with_metadata(Bytes::from(m.metadata))
                    })
                    .collect(),
            ),
        Err(e) => {
            // KIP-394: the refusal carries the id to join with.
            let mut member = String::new();
            if let BrokerError::Group(GroupError::MemberIdRequired { member_id, .. }) = &e {
                member.clone_from(member_id);
            }
            base.with_error_code(error_code(&e)).with_generation_id(-1).with_member_id(s(member))
        }
    }
}

/// SyncGroup 0-5: the leader's assignments in; each member's out. A follower's waits.
pub async fn sync_group(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    let sync = SyncGroup {
        group: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: opt(req.group_instance_id).filter(|_| version >= 3),
        generation: req.generation_id,
        protocol_type: opt(req.protocol_type).filter(|_| version >= 5),
        protocol_name: opt(req.protocol_name).filter(|_| version >= 5),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    match svc.kafka_sync_group(who, sync).await {
        Ok(done) => SyncGroupResponse::default()
            .with_protocol_type((version >= 5).then(|| s(done.protocol_type)))
            .with_protocol_name((version >= 5).then(|| s(done.protocol_name)))
            .with_assignment(Bytes::from(done.assignment)),
        Err(e) => SyncGroupResponse::default().with_error_code(error_code(&e)),
    }
}

/// Heartbeat 0-4.
pub async fn heartbeat(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    let instance = opt(req.group_instance_id).filter(|_| version >= 3);
    let r = svc.kafka_heartbeat(who, &req.group_id, &req.member_id, instance.as_deref(), req.generation_id);
    HeartbeatResponse::default().with_error_code(code_of(&r))
}

/// LeaveGroup 0-5: v0-2 name one member; v3+ a batch, answered per member.
pub async fn leave_group(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let members: Vec<MemberRef> = if version >= 3 {
        let refs = req.members.iter();
        refs.map(|m| MemberRef {
            member_id: m.member_id.to_string(),
            instance_id: opt(m.group_instance_id.clone()),
        })
        .collect()
    } else {
        vec![MemberRef { member_id: req.member_id.to_string(), instance_id: None }]
    };
    let answers = match svc.kafka_leave_group(who, &req.group_id, &members) {
        Ok(a) => a,
        Err(e) => return LeaveGroupResponse::default().with_error_code(error_code(&e)),
    };
    if version < 3 {
        return LeaveGroupResponse::default().with_error_code(answers.first().map_or(0, code_of));
    }
    let responses = members
        .into_iter()
        .zip(&answers)
        .map(|(m, r)| {
            MemberResponse::default()
                .with_member_id(s(m.member_id))
                .with_group_instance_id(m.instance_id.map(s))
                .with_error_code(code_of(r))
        })
        .collect();
    LeaveGroupResponse::default().with_members(responses)
}

/// OffsetCommit 2-9. A group-level refusal is every partition's error.
pub async fn offset_commit(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let mut shape = Vec::new();
    let mut commits = Vec::new();
    for t in &req.topics {
        let partitions: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
        shape.push((t.name.clone(), partitions));
        for p in &t.partitions {
            commits.push(KafkaCommit {
                topic: t.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                metadata: opt(p.committed_metadata.clone()),
            });
        }
    }
    let instance = opt(req.group_instance_id).filter(|_| version >= 7);
    let answer = svc
        .kafka_commit_offsets(
            who,
            &req.group_id,
            &req.member_id,
            instance.as_deref(),
            req.generation_id_or_member_epoch,
            commits,
        )
        .await;
    let codes: Vec<i16> = match &answer {
        Ok(each) => each.iter().map(code_of).collect(),
        Err(e) => vec![error_code(e); shape.iter().map(|(_, p)| p.len()).sum()],
    };
    let mut codes = codes.into_iter();
    let topics = shape
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions.into_iter().map(|p| {
                let code = codes.next().unwrap_or(0);
                OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(code)
            });
            OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions.collect())
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// The committed offsets of one group, grouped by topic, in the request's order
/// (all of them when `wanted` is `None`); a partition without a commit is -1.
/// Per topic: (partition, offset, leader epoch, metadata, error code).
type FetchedTopics = Vec<(String, Vec<(i32, i64, i32, String, i16)>)>;

fn fetched(
    svc: &Service,
    who: &Principal,
    group: &str,
    wanted: Option<Vec<KafkaPartition>>,
) -> Result<FetchedTopics, BrokerError> {
    let named = wanted.is_some();
    let rows = svc.kafka_fetch_offsets(who, group, wanted)?;
    let auth = svc.registry().auth();
    let mut topics: FetchedTopics = Vec::new();
    for ((topic, p), c) in rows {
        // As Kafka: a topic the caller may not describe is refused when named and
        // left out of an "all topics" answer, so a group never reveals another
        // key's topic or its offsets.
        let row = match c {
            _ if !authz::may_describe_topic(auth, who, &topic) && !named => continue,
            _ if !authz::may_describe_topic(auth, who, &topic) => {
                (p, -1, -1, String::new(), code::TOPIC_AUTHORIZATION_FAILED)
            }
            Some(c) => (p, c.offset as i64, c.leader_epoch.unwrap_or(-1), c.metadata, code::NONE),
            None => (p, -1, -1, String::new(), code::NONE),
        };
        match topics.last_mut() {
            Some((t, rows)) if *t == topic => rows.push(row),
            _other => topics.push((topic, vec![row])),
        }
    }
    Ok(topics)
}

/// OffsetFetch 1-9: one group (v1-7) or many (v8+); null topics = all (v2+).
pub async fn offset_fetch(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req.groups.into_iter().map(|g| {
            let wanted = g.topics.map(|ts| {
                let each = ts.into_iter().flat_map(|t| {
                    let name = t.name.to_string();
                    t.partition_indexes.into_iter().map(move |p| (name.clone(), p))
                });
                each.collect()
            });
            fetched_group(svc, who, g.group_id, wanted)
        });
        return OffsetFetchResponse::default().with_groups(groups.collect());
    }
    let wanted = req.topics.map(|ts| {
        let each = ts.into_iter().flat_map(|t| {
            let name = t.name.to_string();
            t.partition_indexes.into_iter().map(move |p| (name.clone(), p))
        });
        each.collect()
    });
    match fetched(svc, who, &req.group_id, wanted) {
        Ok(topics) => {
            let topics = topics.into_iter().map(|(name, rows)| {
                let partitions = rows.into_iter().map(|(p, offset, epoch, metadata, error)| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(error)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
                        .with_metadata(Some(s(metadata)))
                });
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_partitions(partitions.collect())
            });
            OffsetFetchResponse::default().with_topics(topics.collect())
        }
        // v1 has no top-level error code: the refusal goes nowhere but an empty answer.
        Err(e) if version >= 2 => OffsetFetchResponse::default().with_error_code(error_code(&e)),
        Err(_) => OffsetFetchResponse::default(),
    }
}

fn fetched_group(
    svc: &Service,
    who: &Principal,
    group: GroupId,
    wanted: Option<Vec<KafkaPartition>>,
) -> OffsetFetchResponseGroup {
    match fetched(svc, who, &group, wanted) {
        Ok(topics) => {
            let topics = topics.into_iter().map(|(name, rows)| {
                let partitions = rows.into_iter().map(|(p, offset, epoch, metadata, error)| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(p)
                        .with_error_code(error)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(s(metadata)))
                });
                OffsetFetchResponseTopics::default()
                    .with_name(TopicName(s(name)))
                    .with_partitions(partitions.collect())
            });
            OffsetFetchResponseGroup::default().with_group_id(group).with_topics(topics.collect())
        }
        Err(e) => OffsetFetchResponseGroup::default().with_group_id(group).with_error_code(error_code(&e)),
    }
}

/// OffsetDelete 0.
pub async fn offset_delete(
    svc: &Service,
    who: &Principal,
    _version: i16,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let shape: Vec<(TopicName, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect()))
        .collect();
    let wanted: Vec<KafkaPartition> =
        shape.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.to_string(), *p))).collect();
    let answers = match svc.kafka_delete_offsets(who, &req.group_id, wanted).await {
        Ok(a) => a,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(error_code(&e)),
    };
    let mut codes = answers.iter().map(code_of);
    let topics = shape.into_iter().map(|(name, ps)| {
        let partitions = ps.into_iter().map(|p| {
            OffsetDeleteResponsePartition::default()
                .with_partition_index(p)
                .with_error_code(codes.next().unwrap_or(0))
        });
        OffsetDeleteResponseTopic::default().with_name(name).with_partitions(partitions.collect())
    });
    OffsetDeleteResponse::default().with_topics(topics.collect())
}

/// DescribeGroups 0-5; a group that does not exist is "Dead", as Kafka answers.
pub async fn describe_groups(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let include = req.include_authorized_operations;
    let auth = svc.registry().auth();
    let groups = req.groups.into_iter().map(|g| match svc.kafka_describe_group(who, &g) {
        Ok(Some(d)) => {
            let operations = match include {
                false => acl_ops::OMITTED,
                true => acl_ops::group(auth, who, g.as_str()),
            };
            described(version, g, d).with_authorized_operations(operations)
        }
        Ok(None) => DescribedGroup::default().with_group_id(g).with_group_state(s("Dead")),
        Err(e) => DescribedGroup::default().with_group_id(g).with_error_code(error_code(&e)),
    });
    DescribeGroupsResponse::default().with_groups(groups.collect())
}

fn described(version: i16, group: GroupId, d: ClassicDescription) -> DescribedGroup {
    let members = d.members.into_iter().map(|m| {
        DescribedGroupMember::default()
            .with_member_id(s(m.member_id))
            .with_group_instance_id(m.instance_id.filter(|_| version >= 4).map(s))
            .with_client_id(s(m.client_id))
            .with_client_host(s(m.client_host))
            .with_member_metadata(Bytes::from(m.metadata))
            .with_member_assignment(Bytes::from(m.assignment))
    });
    DescribedGroup::default()
        .with_group_id(group)
        .with_group_state(s(d.state.as_str()))
        .with_protocol_type(s(d.protocol_type))
        .with_protocol_data(s(d.protocol))
        .with_members(members.collect())
}

/// ListGroups 0-5: v4+ filters by state; v5+ by type (only "classic" groups here).
pub async fn list_groups(
    svc: &Service,
    who: &Principal,
    version: i16,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let groups = match svc.kafka_list_groups(who) {
        Ok(g) => g,
        Err(e) => return ListGroupsResponse::default().with_error_code(error_code(&e)),
    };
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let listed = groups
        .into_iter()
        .filter(|g| version < 4 || states.is_empty() || states.contains(&g.state.as_str().to_lowercase()))
        .filter(|_| version < 5 || types.is_empty() || types.iter().any(|t| t == "classic"))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(s(g.group)))
                .with_protocol_type(s(g.protocol_type))
                .with_group_state(if version >= 4 { s(g.state.as_str()) } else { s("") })
                .with_group_type(if version >= 5 { s("classic") } else { s("") })
        });
    ListGroupsResponse::default().with_groups(listed.collect())
}

/// DeleteGroups 0-2: only empty groups (NON_EMPTY_GROUP otherwise), with their offsets.
pub async fn delete_groups(
    svc: &Service,
    who: &Principal,
    _version: i16,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let names: Vec<String> = req.groups_names.iter().map(|g| g.to_string()).collect();
    let answers = svc.kafka_delete_groups(who, &names).await;
    let results = req
        .groups_names
        .into_iter()
        .zip(&answers)
        .map(|(g, r)| DeletableGroupResult::default().with_group_id(g).with_error_code(code_of(r)));
    DeleteGroupsResponse::default().with_results(results.collect())
}

#[cfg(test)]
mod tests;
