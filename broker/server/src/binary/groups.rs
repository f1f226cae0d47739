//! Binary-protocol consumer-group ops: decoded requests in, the service's group
//! calls applied, typed responses out (refusals map in `error.rs`).

use es_protocol::{GroupOffset, GroupRequest, GroupResponse};

use crate::groups::CommittedOffset;
use crate::service::error::Result;
use crate::service::groups::JoinGroup;
use crate::service::{Principal, Service};

pub async fn apply(service: &Service, who: &Principal, req: GroupRequest) -> Result<GroupResponse> {
    Ok(match req {
        GroupRequest::Join {
            group,
            member_id,
            client_id,
            topics,
            session_timeout_ms,
            rebalance_timeout_ms,
        } => {
            let join = JoinGroup {
                group,
                member_id: (!member_id.is_empty()).then_some(member_id),
                client_id,
                topics,
                session_timeout_ms: u64::from(session_timeout_ms),
                rebalance_timeout_ms: u64::from(rebalance_timeout_ms),
            };
            let j = service.join_group(who, join)?;
            GroupResponse::Join {
                member_id: j.member_id,
                generation: j.generation,
                leader: j.leader,
                members: j.members,
            }
        }
        GroupRequest::Sync { group, member_id, generation } => {
            let s = service.sync_group(who, &group, &member_id, generation)?;
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
            service.heartbeat(who, &group, &member_id, generation)?;
            GroupResponse::Heartbeat
        }
        GroupRequest::Leave { group, member_id } => {
            service.leave_group(who, &group, &member_id)?;
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
            service.commit_offsets(who, &group, &member_id, generation, offsets).await?;
            GroupResponse::OffsetCommit
        }
        GroupRequest::OffsetFetch { group } => {
            let offsets = service
                .fetch_offsets(who, &group)?
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
