//! InitProducerId (0-5): idempotent producers only, ids from the same durable blocks
//! as HTTP and binary. A transactional id is refused until transactions exist. A
//! producer re-initialising with its id and epoch (KIP-360) gets a fresh id, which
//! starts a fresh sequence. DescribeProducers (0) lists a partition's idempotent
//! producers; without transactions, coordinator epoch and transaction start are -1.

use es_kafka::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use es_kafka::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId,
};

use super::error::{code, kafka_code};
use super::{Ctx, sb};
use crate::service::Principal;

pub async fn init_producer_id(
    ctx: &Ctx,
    who: &Principal,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if req.transactional_id.as_ref().is_some_and(|t| !t.is_empty()) {
        return refused.with_error_code(code::INVALID_REQUEST);
    }
    match ctx.service.init_producer_id(who).await {
        Ok((id, epoch)) => {
            InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(epoch)
        }
        Err(e) => refused.with_error_code(kafka_code(&e)),
    }
}

pub fn describe_producers(
    ctx: &Ctx,
    who: &Principal,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let parts =
                t.partition_indexes.iter().map(|&p| partition(ctx, who, t.name.as_str(), p)).collect();
            TopicResponse::default().with_name(t.name).with_partitions(parts)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn partition(ctx: &Ctx, who: &Principal, topic: &str, index: i32) -> PartitionResponse {
    let base = PartitionResponse::default().with_partition_index(index);
    let Ok(p) = u32::try_from(index) else {
        return base.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    match ctx.service.describe_producers(who, topic, p) {
        Ok(list) => base.with_active_producers(list.into_iter().map(producer).collect()),
        Err(e) => base.with_error_code(kafka_code(&e)).with_error_message(Some(sb(e.to_string()))),
    }
}

fn producer(p: es_log::ProducerSummary) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(-1)
}
