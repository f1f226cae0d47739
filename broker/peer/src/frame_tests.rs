//! Frame codec tests: layout, round trips, and every way a frame can fail to verify.

use bytes::{Bytes, BytesMut};

use super::*;

const KEY: [u8; 32] = [7; 32];

fn request(correlation: u64, payload: &'static [u8]) -> Message {
    Message::Request(Envelope { group: 42, kind: 3, correlation }, Bytes::from_static(payload))
}

/// Seals `messages` in order and splits the bytes back into (prefix, frame) pairs.
fn sealed(messages: &[Message]) -> Vec<(u32, Bytes)> {
    let mut sealer = Sealer::new(KEY);
    let mut buf = BytesMut::new();
    for m in messages {
        sealer.seal(m, &mut buf);
    }
    let mut out = Vec::new();
    let mut bytes = buf.freeze();
    while !bytes.is_empty() {
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap());
        let frame = bytes.slice(4..4 + len as usize);
        bytes = bytes.slice(4 + len as usize..);
        out.push((len, frame));
    }
    out
}

#[test]
fn layout_is_prefix_header_payload_tag() {
    let frames = sealed(&[request(9, b"hi")]);
    let (len, frame) = &frames[0];
    assert_eq!(*len as usize, HEADER_BYTES + 2 + FRAME_TAG_BYTES);
    let expected_body = [&[1u8][..], &42u64.to_be_bytes(), &[3], &9u64.to_be_bytes(), b"hi"].concat();
    assert_eq!(&frame[..HEADER_BYTES + 2], &expected_body[..]);
    assert_eq!(request(9, b"hi").frame_bytes(), 4 + *len as usize);
}

#[test]
fn every_message_type_round_trips() {
    let env = Envelope { group: u64::MAX, kind: 255, correlation: 1 };
    let messages = [
        request(0, b""),
        Message::Response(env, Ok(Bytes::from_static(b"payload"))),
        Message::Response(env, Err(RpcError::new(500, "no leader"))),
        Message::Keepalive,
    ];
    let mut opener = Opener::new(KEY);
    for ((len, frame), m) in sealed(&messages).into_iter().zip(&messages) {
        let body = opener.open(len, frame).unwrap();
        assert_eq!(&Message::decode(body).unwrap(), m);
    }
}

#[test]
fn a_replayed_frame_fails_at_its_new_position() {
    let f = sealed(&[request(0, b"a"), request(1, b"b")]);
    let mut opener = Opener::new(KEY);
    opener.open(f[0].0, f[0].1.clone()).unwrap();
    let err = opener.open(f[0].0, f[0].1.clone()).unwrap_err();
    assert!(matches!(err, PeerError::FrameAuth { seq: 1 }), "{err}");
}

#[test]
fn a_reordered_frame_fails() {
    let f = sealed(&[request(0, b"a"), request(1, b"b")]);
    let err = Opener::new(KEY).open(f[1].0, f[1].1.clone()).unwrap_err();
    assert!(matches!(err, PeerError::FrameAuth { seq: 0 }), "{err}");
}

#[test]
fn a_dropped_frame_fails_the_next_one() {
    let f = sealed(&[request(0, b"a"), request(1, b"b"), request(2, b"c")]);
    let mut opener = Opener::new(KEY);
    opener.open(f[0].0, f[0].1.clone()).unwrap();
    let err = opener.open(f[2].0, f[2].1.clone()).unwrap_err();
    assert!(matches!(err, PeerError::FrameAuth { seq: 1 }), "{err}");
}

#[test]
fn any_flipped_bit_fails() {
    let (len, frame) = sealed(&[request(5, b"payload")]).remove(0);
    for at in 0..frame.len() {
        let mut bad = frame.to_vec();
        bad[at] ^= 0x01;
        let err = Opener::new(KEY).open(len, Bytes::from(bad)).unwrap_err();
        assert!(matches!(err, PeerError::FrameAuth { seq: 0 }), "byte {at}: {err}");
    }
    // The prefix is covered too: a frame re-cut to another length does not verify.
    let err = Opener::new(KEY).open(len - 1, frame.slice(..frame.len() - 1)).unwrap_err();
    assert!(matches!(err, PeerError::FrameAuth { seq: 0 }), "{err}");
}

#[test]
fn the_other_directions_key_does_not_verify() {
    let (len, frame) = sealed(&[request(0, b"x")]).remove(0);
    let err = Opener::new([8; 32]).open(len, frame).unwrap_err();
    assert!(matches!(err, PeerError::FrameAuth { seq: 0 }), "{err}");
}

#[test]
fn lengths_outside_the_cap_are_refused_before_reading() {
    for len in [0, FRAME_BYTES_MIN as u32 - 1, FRAME_BYTES_MAX as u32 + 1, u32::MAX] {
        assert!(matches!(Opener::check_len(len), Err(PeerError::FrameSize { .. })), "{len}");
    }
    assert_eq!(Opener::check_len(FRAME_BYTES_MIN as u32).unwrap(), FRAME_BYTES_MIN);
}

#[test]
fn malformed_bodies_are_typed_errors() {
    assert!(matches!(Message::decode(Bytes::from_static(&[1, 2, 3])), Err(PeerError::Malformed(_))));
    let mut unknown = vec![9u8];
    unknown.extend_from_slice(&[0; HEADER_BYTES - 1]);
    assert!(matches!(Message::decode(Bytes::from(unknown)), Err(PeerError::Malformed(_))));
    let mut short_failure = vec![3u8];
    short_failure.extend_from_slice(&[0; HEADER_BYTES]);
    assert!(matches!(Message::decode(Bytes::from(short_failure)), Err(PeerError::Malformed(_))));
}

#[tokio::test]
async fn read_opens_coalesced_frames_in_order() {
    let mut sealer = Sealer::new(KEY);
    let mut buf = BytesMut::new();
    for i in 0..100 {
        sealer.seal(&request(i, b"hb"), &mut buf);
    }
    let mut reader = &buf[..];
    let mut opener = Opener::new(KEY);
    for i in 0..100 {
        let (body, wire) = opener.read(&mut reader).await.unwrap();
        assert_eq!(wire, request(i, b"hb").frame_bytes());
        assert_eq!(Message::decode(body).unwrap(), request(i, b"hb"));
    }
    assert!(reader.is_empty());
}

proptest::proptest! {
    #[test]
    fn decode_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
        let _ = Message::decode(Bytes::from(body));
    }

    #[test]
    fn sealed_requests_open_and_any_flip_fails(
        group in proptest::num::u64::ANY,
        kind in proptest::num::u8::ANY,
        correlation in proptest::num::u64::ANY,
        payload in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
        flip in proptest::num::usize::ANY,
    ) {
        let m = Message::Request(Envelope { group, kind, correlation }, Bytes::from(payload));
        let mut buf = BytesMut::new();
        Sealer::new(KEY).seal(&m, &mut buf);
        let len = u32::from_be_bytes(buf[..4].try_into().unwrap());
        let frame = buf.freeze().slice(4..);
        let body = Opener::new(KEY).open(len, frame.clone()).unwrap();
        proptest::prop_assert_eq!(Message::decode(body).unwrap(), m);
        let mut bad = frame.to_vec();
        let at = flip % bad.len();
        bad[at] ^= 0x80;
        proptest::prop_assert!(Opener::new(KEY).open(len, Bytes::from(bad)).is_err());
    }
}
