//! Consumer-group messages of the binary protocol (ops 9 to 14): join, sync,
//! heartbeat, leave, offset commit and offset fetch. Their layouts are in
//! `docs/protocol.md`; `Request::Group` and `Response::Group` carry them.

use bytes::BufMut;

use crate::message::Op;
use crate::wire::{Reader, WireError, Writer};

/// One committed offset: `offset` is the next offset to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub metadata: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRequest {
    /// `member_id` empty for a new member.
    Join {
        group: String,
        member_id: String,
        client_id: String,
        topics: Vec<String>,
        session_timeout_ms: u32,
        rebalance_timeout_ms: u32,
    },
    Sync {
        group: String,
        member_id: String,
        generation: i32,
    },
    Heartbeat {
        group: String,
        member_id: String,
        generation: i32,
    },
    Leave {
        group: String,
        member_id: String,
    },
    /// `member_id` empty and generation -1 for a standalone commit to an empty group.
    OffsetCommit {
        group: String,
        member_id: String,
        generation: i32,
        offsets: Vec<GroupOffset>,
    },
    OffsetFetch {
        group: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupResponse {
    Join {
        member_id: String,
        generation: i32,
        leader: String,
        members: Vec<String>,
    },
    /// Partitions as (topic, partition).
    Sync {
        generation: i32,
        assignment: Vec<(String, u32)>,
        revoking: Vec<(String, u32)>,
    },
    Heartbeat,
    Leave,
    OffsetCommit,
    OffsetFetch {
        offsets: Vec<GroupOffset>,
    },
}

impl GroupRequest {
    pub fn op(&self) -> Op {
        match self {
            GroupRequest::Join { .. } => Op::JoinGroup,
            GroupRequest::Sync { .. } => Op::SyncGroup,
            GroupRequest::Heartbeat { .. } => Op::Heartbeat,
            GroupRequest::Leave { .. } => Op::LeaveGroup,
            GroupRequest::OffsetCommit { .. } => Op::OffsetCommit,
            GroupRequest::OffsetFetch { .. } => Op::OffsetFetch,
        }
    }

    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        match self {
            GroupRequest::Join {
                group,
                member_id,
                client_id,
                topics,
                session_timeout_ms,
                rebalance_timeout_ms,
            } => {
                b.string(group);
                b.string(member_id);
                b.string(client_id);
                put_strings(b, topics);
                b.put_u32(*session_timeout_ms);
                b.put_u32(*rebalance_timeout_ms);
            }
            GroupRequest::Sync { group, member_id, generation }
            | GroupRequest::Heartbeat { group, member_id, generation } => {
                b.string(group);
                b.string(member_id);
                b.put_i32(*generation);
            }
            GroupRequest::Leave { group, member_id } => {
                b.string(group);
                b.string(member_id);
            }
            GroupRequest::OffsetCommit { group, member_id, generation, offsets } => {
                b.string(group);
                b.string(member_id);
                b.put_i32(*generation);
                put_offsets(b, offsets);
            }
            GroupRequest::OffsetFetch { group } => b.string(group),
        }
    }

    pub(crate) fn decode(op: Op, r: &mut Reader) -> Result<GroupRequest, WireError> {
        Ok(match op {
            Op::JoinGroup => GroupRequest::Join {
                group: r.string("group")?,
                member_id: r.string("member_id")?,
                client_id: r.string("client_id")?,
                topics: get_strings(r, "topics")?,
                session_timeout_ms: r.u32("session_timeout_ms")?,
                rebalance_timeout_ms: r.u32("rebalance_timeout_ms")?,
            },
            Op::SyncGroup => GroupRequest::Sync {
                group: r.string("group")?,
                member_id: r.string("member_id")?,
                generation: r.i32("generation")?,
            },
            Op::Heartbeat => GroupRequest::Heartbeat {
                group: r.string("group")?,
                member_id: r.string("member_id")?,
                generation: r.i32("generation")?,
            },
            Op::LeaveGroup => {
                GroupRequest::Leave { group: r.string("group")?, member_id: r.string("member_id")? }
            }
            Op::OffsetCommit => GroupRequest::OffsetCommit {
                group: r.string("group")?,
                member_id: r.string("member_id")?,
                generation: r.i32("generation")?,
                offsets: get_offsets(r)?,
            },
            _ => GroupRequest::OffsetFetch { group: r.string("group")? },
        })
    }
}

impl GroupResponse {
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        match self {
            GroupResponse::Join { member_id, generation, leader, members } => {
                b.string(member_id);
                b.put_i32(*generation);
                b.string(leader);
                put_strings(b, members);
            }
            GroupResponse::Sync { generation, assignment, revoking } => {
                b.put_i32(*generation);
                put_partitions(b, assignment);
                put_partitions(b, revoking);
            }
            GroupResponse::Heartbeat | GroupResponse::Leave | GroupResponse::OffsetCommit => {}
            GroupResponse::OffsetFetch { offsets } => put_offsets(b, offsets),
        }
    }

    pub(crate) fn decode(op: Op, r: &mut Reader) -> Result<GroupResponse, WireError> {
        Ok(match op {
            Op::JoinGroup => GroupResponse::Join {
                member_id: r.string("member_id")?,
                generation: r.i32("generation")?,
                leader: r.string("leader")?,
                members: get_strings(r, "members")?,
            },
            Op::SyncGroup => GroupResponse::Sync {
                generation: r.i32("generation")?,
                assignment: get_partitions(r)?,
                revoking: get_partitions(r)?,
            },
            Op::Heartbeat => GroupResponse::Heartbeat,
            Op::LeaveGroup => GroupResponse::Leave,
            Op::OffsetCommit => GroupResponse::OffsetCommit,
            _ => GroupResponse::OffsetFetch { offsets: get_offsets(r)? },
        })
    }
}

fn put_strings(b: &mut Vec<u8>, items: &[String]) {
    b.put_u32(items.len() as u32);
    for s in items {
        b.string(s);
    }
}

fn get_strings(r: &mut Reader, field: &'static str) -> Result<Vec<String>, WireError> {
    let n = r.count(field, 2)?;
    (0..n).map(|_| r.string(field)).collect()
}

fn put_partitions(b: &mut Vec<u8>, items: &[(String, u32)]) {
    b.put_u32(items.len() as u32);
    for (t, p) in items {
        b.string(t);
        b.put_u32(*p);
    }
}

fn get_partitions(r: &mut Reader) -> Result<Vec<(String, u32)>, WireError> {
    let n = r.count("partitions", 6)?;
    (0..n).map(|_| Ok((r.string("topic")?, r.u32("partition")?))).collect()
}

fn put_offsets(b: &mut Vec<u8>, offsets: &[GroupOffset]) {
    b.put_u32(offsets.len() as u32);
    for o in offsets {
        b.string(&o.topic);
        b.put_u32(o.partition);
        b.put_u64(o.offset);
        b.string(&o.metadata);
    }
}

fn get_offsets(r: &mut Reader) -> Result<Vec<GroupOffset>, WireError> {
    let n = r.count("offsets", 2 + 4 + 8 + 2)?;
    (0..n)
        .map(|_| {
            Ok(GroupOffset {
                topic: r.string("topic")?,
                partition: r.u32("partition")?,
                offset: r.u64("offset")?,
                metadata: r.string("metadata")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::decode_frame;
    use crate::message::{Request, Response};
    use bytes::BytesMut;

    fn offsets() -> Vec<GroupOffset> {
        vec![GroupOffset { topic: "t".into(), partition: 2, offset: 40, metadata: "m".into() }]
    }

    #[test]
    fn group_requests_round_trip() {
        let all = vec![
            GroupRequest::Join {
                group: "g".into(),
                member_id: String::new(),
                client_id: "c".into(),
                topics: vec!["a".into(), "b".into()],
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
            },
            GroupRequest::Sync { group: "g".into(), member_id: "m".into(), generation: 3 },
            GroupRequest::Heartbeat { group: "g".into(), member_id: "m".into(), generation: -1 },
            GroupRequest::Leave { group: "g".into(), member_id: "m".into() },
            GroupRequest::OffsetCommit {
                group: "g".into(),
                member_id: "m".into(),
                generation: 3,
                offsets: offsets(),
            },
            GroupRequest::OffsetFetch { group: "g".into() },
        ];
        for (i, g) in all.into_iter().enumerate() {
            let req = Request::Group(g);
            let mut out = Vec::new();
            req.encode(i as u32, &mut out);
            assert_eq!(out[8], 9 + i as u8, "ops 9.. in order");
            let frame = decode_frame(&mut BytesMut::from(&out[..]), usize::MAX).unwrap().unwrap();
            assert_eq!(Request::decode(&frame).unwrap(), req);
        }
    }

    #[test]
    fn group_responses_round_trip() {
        let all = vec![
            (
                Op::JoinGroup,
                GroupResponse::Join {
                    member_id: "m".into(),
                    generation: 1,
                    leader: "m".into(),
                    members: vec!["m".into()],
                },
            ),
            (
                Op::SyncGroup,
                GroupResponse::Sync {
                    generation: 2,
                    assignment: vec![("t".into(), 0)],
                    revoking: vec![("t".into(), 1)],
                },
            ),
            (Op::Heartbeat, GroupResponse::Heartbeat),
            (Op::LeaveGroup, GroupResponse::Leave),
            (Op::OffsetCommit, GroupResponse::OffsetCommit),
            (Op::OffsetFetch, GroupResponse::OffsetFetch { offsets: offsets() }),
        ];
        for (op, g) in all {
            let resp = Response::Group(g);
            let mut out = Vec::new();
            resp.encode(7, op, &mut out);
            let frame = decode_frame(&mut BytesMut::from(&out[..]), usize::MAX).unwrap().unwrap();
            assert_eq!(Response::decode(&frame).unwrap(), resp);
        }
    }

    #[test]
    fn golden_heartbeat_request() {
        let mut out = Vec::new();
        Request::Group(GroupRequest::Heartbeat { group: "g".into(), member_id: "m".into(), generation: 2 })
            .encode(1, &mut out);
        assert_eq!(out, [0, 0, 0, 16, 0, 0, 0, 1, 11, 0, 0, 1, b'g', 0, 1, b'm', 0, 0, 0, 2]);
    }
}
