//! FindCoordinator (0-5): this node coordinates every group. Transactional ids are
//! refused until transactions exist. v4+ batches keys; v0-3 carry one.

use es_kafka::kafka_protocol::messages::find_coordinator_response::Coordinator;
use es_kafka::kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use es_kafka::kafka_protocol::protocol::StrBytes;

use super::error::code;
use super::{Ctx, sb};

/// Kafka's key types.
const KEY_TYPE_GROUP: i8 = 0;

/// The coordinator of `key`, or the refusal: (error code, message).
fn lookup(key_type: i8) -> Result<(), (i16, String)> {
    if key_type == KEY_TYPE_GROUP {
        Ok(())
    } else {
        Err((
            code::INVALID_REQUEST,
            format!(
                "es has no transaction coordinator (key type {key_type}); transactions are not supported yet"
            ),
        ))
    }
}

pub fn find_coordinator(ctx: &Ctx, version: i16, req: FindCoordinatorRequest) -> FindCoordinatorResponse {
    let node = &ctx.node;
    if version >= 4 {
        let coordinators =
            req.coordinator_keys.into_iter().map(|key| coordinator(ctx, key, req.key_type)).collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    match lookup(req.key_type) {
        Ok(()) => FindCoordinatorResponse::default()
            .with_node_id(BrokerId(node.node_id))
            .with_host(sb(node.host.clone()))
            .with_port(node.port),
        Err((error, message)) => FindCoordinatorResponse::default()
            .with_error_code(error)
            .with_error_message(Some(sb(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

fn coordinator(ctx: &Ctx, key: StrBytes, key_type: i8) -> Coordinator {
    let node = &ctx.node;
    match lookup(key_type) {
        Ok(()) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(node.node_id))
            .with_host(sb(node.host.clone()))
            .with_port(node.port),
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
        assert!(lookup(KEY_TYPE_GROUP).is_ok());
        assert_eq!(lookup(1).unwrap_err().0, code::INVALID_REQUEST);
    }
}
