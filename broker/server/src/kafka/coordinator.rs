//! FindCoordinator (0-5): a single node coordinates every group; in a cluster the
//! leader of `__es_offsets`' Raft group does (Kafka's design: the coordinator is
//! the leader of the group's offsets partition; docs/cluster.md). Transactional ids
//! are refused until transactions exist. v4+ batches keys; v0-3 carry one.

use es_kafka::kafka_protocol::messages::find_coordinator_response::Coordinator;
use es_kafka::kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use es_kafka::kafka_protocol::protocol::StrBytes;

use super::error::code;
use super::{Ctx, sb};

/// Kafka's key types.
const KEY_TYPE_GROUP: i8 = 0;

/// Groups have a coordinator; transactional ids are refused: (error code, message).
fn check_key_type(key_type: i8) -> Result<(), (i16, String)> {
    if key_type == KEY_TYPE_GROUP {
        return Ok(());
    }
    Err((
        code::INVALID_REQUEST,
        format!(
            "es has no transaction coordinator (key type {key_type}); transactions are not supported yet"
        ),
    ))
}

/// The coordinator (node id, host, port), or the refusal: (error code, message).
fn lookup(ctx: &Ctx, key_type: i8) -> Result<(i32, String, i32), (i16, String)> {
    check_key_type(key_type)?;
    let node = &ctx.node;
    let Some(coordinator) = ctx.service.cluster_coordinator() else {
        return Ok((node.node_id, node.host.clone(), node.port));
    };
    let not_available = || (code::COORDINATOR_NOT_AVAILABLE, "no group coordinator yet; retry".to_owned());
    let leader = coordinator.ok_or_else(not_available)?;
    let nodes = ctx.service.cluster_nodes().unwrap_or_default();
    let a = nodes.get(&leader).ok_or_else(not_available)?;
    Ok((super::metadata::node_id(leader), a.kafka_host.clone(), i32::from(a.kafka_port)))
}

pub fn find_coordinator(ctx: &Ctx, version: i16, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators =
            req.coordinator_keys.into_iter().map(|key| coordinator(ctx, key, req.key_type)).collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match lookup(ctx, req.key_type) {
        Ok((id, host, port)) => {
            FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(sb(host)).with_port(port)
        }
        Err((error, message)) => FindCoordinatorResponse::default()
            .with_error_code(error)
            .with_error_message(Some(sb(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

fn coordinator(ctx: &Ctx, key: StrBytes, key_type: i8) -> Coordinator {
    match lookup(ctx, key_type) {
        Ok((id, host, port)) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(id))
            .with_host(sb(host))
            .with_port(port),
        Err((error, message)) => Coordinator::default()
            .with_key(key)
            .with_error_code(error)
            .with_error_message(Some(sb(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_coordinated_here_and_transactions_refused() {
        assert!(check_key_type(KEY_TYPE_GROUP).is_ok());
        assert_eq!(check_key_type(1).unwrap_err().0, code::INVALID_REQUEST);
    }
}
