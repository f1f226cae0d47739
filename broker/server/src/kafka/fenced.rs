//! A fenced leader sheds its Kafka clients. A node elected leader that has heard
//! from no majority for a lease (`es_raft::Group::fenced`; an isolated node) takes
//! no writes and names no leader, but a client that reaches only this node would
//! ask it again and again: librdkafka and the Java client send metadata requests
//! to a broker they are connected to, and no answer from here can name the leader
//! the majority elected. So a reply that refuses a partition because this node is
//! fenced for it (Metadata's LEADER_NOT_AVAILABLE, Produce's and Fetch's
//! NOT_LEADER_OR_FOLLOWER) is the connection's last: the client then marks this
//! broker down and asks another one, as it would after a request timeout, seconds
//! sooner.

use es_kafka::kafka_protocol::messages::{FetchResponse, MetadataResponse, ProduceResponse};
use uuid::Uuid;

use super::Ctx;
use super::dispatch::Reply;
use super::error::code;

/// Whether this node is fenced for the partition (named, or by id when the name is empty).
fn fenced(ctx: &Ctx, name: &str, id: Uuid, partition: i32) -> bool {
    let Ok(partition) = u32::try_from(partition) else { return false };
    let name = match name.is_empty() {
        false => Some(name.to_owned()),
        true => ctx.service.topic_name_by_id(id.into_bytes()),
    };
    name.and_then(|n| ctx.service.leadership(&n, partition)).is_some_and(|l| l.fenced)
}

pub fn in_metadata(ctx: &Ctx, r: &MetadataResponse) -> bool {
    r.topics.iter().any(|t| {
        let name = t.name.as_ref().map_or("", |n| n.as_str());
        t.partitions.iter().any(|p| {
            p.error_code == code::LEADER_NOT_AVAILABLE && fenced(ctx, name, t.topic_id, p.partition_index)
        })
    })
}

pub fn in_produce(ctx: &Ctx, r: &ProduceResponse) -> bool {
    r.responses.iter().any(|t| {
        t.partition_responses.iter().any(|p| {
            p.error_code == code::NOT_LEADER_OR_FOLLOWER && fenced(ctx, t.name.as_str(), t.topic_id, p.index)
        })
    })
}

pub fn in_fetch(ctx: &Ctx, r: &FetchResponse) -> bool {
    r.responses.iter().any(|t| {
        t.partitions.iter().any(|p| {
            p.error_code == code::NOT_LEADER_OR_FOLLOWER
                && fenced(ctx, t.topic.as_str(), t.topic_id, p.partition_index)
        })
    })
}

/// `reply`, made the connection's last when `shed`.
pub fn last_if(shed: bool, reply: Reply) -> Reply {
    const WHY: &str = "this node lost its Raft quorum for a partition the reply refused; \
                       the client reconnects to another broker";
    match (shed, reply) {
        (true, Reply::Frame(frame)) => Reply::Last(vec![frame], WHY),
        (true, Reply::Chunks(chunks)) => Reply::Last(chunks, WHY),
        (_, reply) => reply,
    }
}
