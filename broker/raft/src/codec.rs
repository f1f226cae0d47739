//! The wire form of a group's Raft RPCs over es-peer (docs/cluster.md, "Raft
//! groups"). An append-entries request is a small JSON head (vote, previous log id,
//! leader commit) followed by the entries, each `term u32, index u64, len u32,
//! batch bytes`: the stored batches go raw, never through JSON. A snapshot request
//! is a JSON head (vote, metadata) then the snapshot bytes. Everything else (votes,
//! responses) is small and goes as JSON. Every decoder checks lengths before it
//! slices and answers a typed error, never a panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::entry::EsEntry;
use crate::types::{CommittedLeaderId, LogId, Term, TypeConfig, Vote};

type AppendRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
pub(crate) type SnapshotMeta =
    openraft::storage::SnapshotMeta<CommittedLeaderId, u64, openraft::impls::BasicNode>;

/// Why a payload could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("payload ends early: {0}")]
    Short(&'static str),
    #[error("bad JSON in {what}: {reason}")]
    Json { what: &'static str, reason: String },
}

#[derive(Serialize, serde::Deserialize)]
struct AppendHead {
    vote: Vote,
    prev_log_id: Option<LogId>,
    leader_commit: Option<LogId>,
    entries: u32,
}

#[derive(Serialize, serde::Deserialize)]
struct SnapshotHead {
    vote: Vote,
    meta: SnapshotMeta,
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("Raft messages serialize"))
}

pub(crate) fn from_json<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, CodecError> {
    serde_json::from_slice(bytes).map_err(|e| CodecError::Json { what, reason: e.to_string() })
}

/// `len u32` then the JSON of `head`.
fn put_head<T: Serialize>(out: &mut BytesMut, head: &T) {
    let json = serde_json::to_vec(head).expect("Raft messages serialize");
    out.put_u32(json.len() as u32);
    out.put_slice(&json);
}

fn take(buf: &mut Bytes, n: usize, what: &'static str) -> Result<Bytes, CodecError> {
    if buf.remaining() < n {
        return Err(CodecError::Short(what));
    }
    Ok(buf.split_to(n))
}

fn take_u32(buf: &mut Bytes, what: &'static str) -> Result<u32, CodecError> {
    Ok(take(buf, 4, what)?.get_u32())
}

fn take_head<T: DeserializeOwned>(buf: &mut Bytes, what: &'static str) -> Result<T, CodecError> {
    let len = take_u32(buf, what)? as usize;
    from_json(what, &take(buf, len, what)?)
}

pub(crate) fn encode_append(req: &AppendRequest) -> Bytes {
    let size: usize = req.entries.iter().map(|e| e.batch().len() + 16).sum();
    let mut out = BytesMut::with_capacity(size + 256);
    let head = AppendHead {
        vote: req.vote,
        prev_log_id: req.prev_log_id,
        leader_commit: req.leader_commit,
        entries: req.entries.len() as u32,
    };
    put_head(&mut out, &head);
    for e in &req.entries {
        let (leader, index) = openraft::entry::RaftEntry::log_id_parts(e);
        out.put_u32(leader.term.as_u32());
        out.put_u64(index);
        out.put_u32(e.batch().len() as u32);
        out.put_slice(e.batch());
    }
    out.freeze()
}

pub(crate) fn decode_append(mut buf: Bytes) -> Result<AppendRequest, CodecError> {
    let head: AppendHead = take_head(&mut buf, "append-entries head")?;
    // Each entry takes at least 16 bytes: a count beyond that is a lie, not an allocation.
    let count = (head.entries as usize).min(buf.remaining() / 16);
    let mut entries = Vec::with_capacity(count);
    for _ in 0..head.entries {
        let term = take_u32(&mut buf, "entry term")?;
        let index = take(&mut buf, 8, "entry index")?.get_u64();
        let len = take_u32(&mut buf, "entry length")? as usize;
        let batch = take(&mut buf, len, "entry batch")?;
        let leader = CommittedLeaderId::new(Term::from(u64::from(term)));
        entries.push(EsEntry::stored(leader, index, batch));
    }
    if buf.has_remaining() {
        return Err(CodecError::Short("bytes after the last entry"));
    }
    let req = AppendRequest {
        vote: head.vote,
        prev_log_id: head.prev_log_id,
        entries,
        leader_commit: head.leader_commit,
    };
    Ok(req)
}

pub(crate) fn encode_snapshot(vote: Vote, meta: &SnapshotMeta, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 256);
    put_head(&mut out, &SnapshotHead { vote, meta: meta.clone() });
    out.put_slice(data);
    out.freeze()
}

pub(crate) fn decode_snapshot(mut buf: Bytes) -> Result<(Vote, SnapshotMeta, Vec<u8>), CodecError> {
    let head: SnapshotHead = take_head(&mut buf, "snapshot head")?;
    Ok((head.vote, head.meta, buf.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::entry::RaftEntry;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(Term::from(term)), index)
    }

    fn request() -> AppendRequest {
        let batch = es_core::batch::encode(
            &[es_core::Record::from_value("v".to_owned())],
            1_000,
            es_core::ProducerInfo::NONE,
        )
        .unwrap();
        let entries = vec![
            EsEntry::new_blank(log_id(2, 5)),
            EsEntry::new_normal(log_id(2, 6), crate::types::BatchData(Bytes::from(batch))),
        ];
        AppendRequest {
            vote: Vote::new_committed(Term::from(2), 1),
            prev_log_id: Some(log_id(1, 4)),
            entries,
            leader_commit: Some(log_id(1, 3)),
        }
    }

    #[test]
    fn an_append_request_round_trips_with_raw_batches() {
        let req = request();
        let wire = encode_append(&req);
        // The batch bytes are in the payload as they are, not as JSON numbers.
        let raw = req.entries[1].batch();
        assert!(wire.windows(raw.len()).any(|w| w == &raw[..]));
        let back = decode_append(wire).unwrap();
        assert_eq!(back.vote, req.vote);
        assert_eq!((back.prev_log_id, back.leader_commit), (req.prev_log_id, req.leader_commit));
        assert_eq!(back.entries, req.entries);
        assert_eq!(back.entries[1].log_id(), log_id(2, 6));
    }

    #[test]
    fn every_truncation_and_garbage_is_a_typed_error() {
        let wire = encode_append(&request());
        for cut in 0..wire.len() {
            assert!(decode_append(wire.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut longer = BytesMut::from(&wire[..]);
        longer.put_u8(0);
        assert!(decode_append(longer.freeze()).is_err());
        assert!(decode_append(Bytes::from_static(&[0, 0, 0, 2, b'{', b'}'])).is_err());
        assert!(decode_snapshot(Bytes::from_static(b"\xff\xff\xff\xff")).is_err());
        // A huge entry count with no entries allocates nothing and fails.
        let mut lie = BytesMut::new();
        let head = AppendHead {
            vote: Vote::new_committed(Term::from(1), 1),
            prev_log_id: None,
            leader_commit: None,
            entries: u32::MAX,
        };
        put_head(&mut lie, &head);
        assert!(matches!(decode_append(lie.freeze()), Err(CodecError::Short(_))));
    }

    #[test]
    fn a_snapshot_round_trips() {
        let meta = SnapshotMeta { last_log_id: Some(log_id(3, 9)), ..SnapshotMeta::default() };
        let vote = Vote::new_committed(Term::from(3), 2);
        let wire = encode_snapshot(vote, &meta, b"{\"next_offset\":4}");
        let (v, m, data) = decode_snapshot(wire).unwrap();
        assert_eq!(
            (v, m.last_log_id, data.as_slice()),
            (vote, meta.last_log_id, &b"{\"next_offset\":4}"[..])
        );
    }
}
