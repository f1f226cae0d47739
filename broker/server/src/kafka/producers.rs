//! InitProducerId (0-5): idempotent producers only, ids from the same durable blocks
//! as HTTP and binary. A transactional id is refused until transactions exist. A
//! producer re-initialising with its id and epoch (KIP-360) gets a fresh id, which
//! starts a fresh sequence. DescribeProducers is not served yet (not advertised).

use es_kafka::kafka_protocol::messages::describe_producers_response::{PartitionResponse, TopicResponse};
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
    _ctx: &Ctx,
    _who: &Principal,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let parts = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    PartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(code::INVALID_REQUEST)
                        .with_error_message(Some(sb("DescribeProducers is not supported yet")))
                })
                .collect();
            TopicResponse::default().with_name(t.name).with_partitions(parts)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
