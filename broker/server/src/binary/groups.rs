//! Binary-protocol consumer-group ops: decoded requests in, the shared group
//! service applied, typed responses out (refusals carry the reserved group codes).

use es_groups::GroupError;
use es_protocol::{ErrorCode, GroupOffset, GroupRequest, GroupResponse, Response};

use crate::error::ServerError;
use crate::groups::CommittedOffset;
use crate::registry::Registry;

pub async fn handle(registry: &Registry, req: GroupRequest) -> Response {
    match apply(registry, req).await {
        Ok(r) => Response::Group(r),
        Err(e) => Response::Error { code: code(&e), message: e.to_string() },
    }
}

async fn apply(registry: &Registry, req: GroupRequest) -> Result<GroupResponse, ServerError> {
    let groups = registry.groups();
    Ok(match req {
        GroupRequest::Join {
            group,
            member_id,
            client_id,
            topics,
            session_timeout_ms,
            rebalance_timeout_ms,
        } => {
            let member = (!member_id.is_empty()).then_some(member_id);
            let j = groups.join(
                registry,
                &group,
                member,
                &client_id,
                &topics,
                u64::from(session_timeout_ms),
                u64::from(rebalance_timeout_ms),
            )?;
            GroupResponse::Join {
                member_id: j.member_id,
                generation: j.generation,
                leader: j.leader,
                members: j.members,
            }
        }
        GroupRequest::Sync { group, member_id, generation } => {
            let s = groups.sync(&group, &member_id, generation)?;
            let pairs = |v: Vec<es_groups::TopicPartition>| {
                v.into_iter().map(|tp| (tp.topic, tp.partition)).collect()
            };
            GroupResponse::Sync {
                generation: s.generation,
                assignment: pairs(s.assignment),
                revoking: pairs(s.revoking),
            }
        }
        GroupRequest::Heartbeat { group, member_id, generation } => {
            groups.heartbeat(&group, &member_id, generation)?;
            GroupResponse::Heartbeat
        }
        GroupRequest::Leave { group, member_id } => {
            groups.leave(&group, &member_id)?;
            GroupResponse::Leave
        }
        GroupRequest::OffsetCommit { group, member_id, generation, offsets } => {
            let offsets = offsets
                .into_iter()
                .map(|o| CommittedOffset {
                    topic: o.topic,
                    partition: o.partition,
                    offset: o.offset,
                    metadata: o.metadata,
                })
                .collect();
            groups.commit(registry, &group, &member_id, generation, offsets).await?;
            GroupResponse::OffsetCommit
        }
        GroupRequest::OffsetFetch { group } => {
            let offsets = groups
                .fetch(&group)
                .into_iter()
                .map(|c| GroupOffset {
                    topic: c.topic,
                    partition: c.partition,
                    offset: c.offset,
                    metadata: c.metadata,
                })
                .collect();
            GroupResponse::OffsetFetch { offsets }
        }
    })
}

fn code(e: &ServerError) -> ErrorCode {
    match e {
        ServerError::Group(GroupError::UnknownMember { .. }) => ErrorCode::UnknownMember,
        ServerError::Group(GroupError::IllegalGeneration { .. }) => ErrorCode::IllegalGeneration,
        ServerError::Group(GroupError::RebalanceInProgress(_)) => ErrorCode::RebalanceInProgress,
        ServerError::Group(_) | ServerError::InvalidRequest(_) => ErrorCode::InvalidRequest,
        ServerError::TopicNotFound(_) => ErrorCode::UnknownTopic,
        ServerError::PartitionNotFound { .. } => ErrorCode::UnknownPartition,
        ServerError::ShuttingDown => ErrorCode::ShuttingDown,
        ServerError::Storage(_) => ErrorCode::StorageError,
        _ => ErrorCode::Internal,
    }
}
