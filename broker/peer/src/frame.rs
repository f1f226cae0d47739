//! Link frames: a length prefix, a message, and an HMAC-SHA256 tag (its first 16
//! bytes) over the direction's implicit sequence number, the prefix and the message.
//!
//! ```text
//! frame    = len:u32be  body  tag(16)          len = |body| + 16, checked before reading
//! tag      = HMAC-SHA256(direction key, seq:u64be || len:u32be || body)[..16]
//! body     = type:u8 group:u64be kind:u8 correlation:u64be rest
//! type 1 request   rest = payload
//! type 2 response  rest = payload
//! type 3 failure   rest = code:u16be message(utf-8)
//! type 4 keepalive rest = empty (group, kind and correlation are 0)
//! ```
//!
//! The sequence number is never sent: each side counts the frames of a direction
//! from 0, so a replayed, reordered or dropped frame verifies under the wrong number
//! and kills the link, as a tampered one does.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::{PeerError, RpcError};
use crate::limits::{FRAME_BYTES_MAX, FRAME_TAG_BYTES};

/// Bytes of a message's fixed header.
pub const HEADER_BYTES: usize = 1 + 8 + 1 + 8;
/// Smallest value of a frame's length prefix (an empty payload).
pub const FRAME_BYTES_MIN: usize = HEADER_BYTES + FRAME_TAG_BYTES;

const TYPE_REQUEST: u8 = 1;
const TYPE_RESPONSE: u8 = 2;
const TYPE_FAILURE: u8 = 3;
const TYPE_KEEPALIVE: u8 = 4;

/// What an RPC is about: the Raft group, the RPC kind (both opaque to the link) and
/// the correlation id that pairs a response with its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub group: u64,
    pub kind: u8,
    pub correlation: u64,
}

/// One message of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Request(Envelope, Bytes),
    Response(Envelope, Result<Bytes, RpcError>),
    /// Sent by an idle link so the peer knows it is alive.
    Keepalive,
}

impl Message {
    fn encode_body(&self, out: &mut BytesMut) {
        const NONE: Envelope = Envelope { group: 0, kind: 0, correlation: 0 };
        let (ty, env) = match self {
            Self::Request(env, _) => (TYPE_REQUEST, env),
            Self::Response(env, Ok(_)) => (TYPE_RESPONSE, env),
            Self::Response(env, Err(_)) => (TYPE_FAILURE, env),
            Self::Keepalive => (TYPE_KEEPALIVE, &NONE),
        };
        out.put_u8(ty);
        out.put_u64(env.group);
        out.put_u8(env.kind);
        out.put_u64(env.correlation);
        match self {
            Self::Request(_, payload) | Self::Response(_, Ok(payload)) => out.put_slice(payload),
            Self::Response(_, Err(e)) => {
                out.put_u16(e.code);
                out.put_slice(e.message.as_bytes());
            }
            Self::Keepalive => {}
        }
    }

    /// Bytes this message takes on the wire as one frame.
    pub fn frame_bytes(&self) -> usize {
        let rest = match self {
            Self::Request(_, payload) | Self::Response(_, Ok(payload)) => payload.len(),
            Self::Response(_, Err(e)) => 2 + e.message.len(),
            Self::Keepalive => 0,
        };
        4 + HEADER_BYTES + rest + FRAME_TAG_BYTES
    }

    /// Decodes an authenticated body; the payload is a slice of it (no copy).
    pub fn decode(mut body: Bytes) -> Result<Self, PeerError> {
        if body.len() < HEADER_BYTES {
            return Err(PeerError::Malformed("short message header"));
        }
        let ty = body.get_u8();
        let env = Envelope { group: body.get_u64(), kind: body.get_u8(), correlation: body.get_u64() };
        match ty {
            TYPE_REQUEST => Ok(Self::Request(env, body)),
            TYPE_RESPONSE => Ok(Self::Response(env, Ok(body))),
            TYPE_FAILURE => {
                if body.len() < 2 {
                    return Err(PeerError::Malformed("short failure"));
                }
                let code = body.get_u16();
                let message = String::from_utf8_lossy(&body).into_owned();
                Ok(Self::Response(env, Err(RpcError { code, message })))
            }
            TYPE_KEEPALIVE if body.is_empty() => Ok(Self::Keepalive),
            TYPE_KEEPALIVE => Err(PeerError::Malformed("keepalive with a payload")),
            _ => Err(PeerError::Malformed("unknown message type")),
        }
    }
}

fn tag(mac: &Hmac<Sha256>, seq: u64, len: u32, body: &[u8]) -> [u8; FRAME_TAG_BYTES] {
    let mut mac = mac.clone();
    mac.update(&seq.to_be_bytes());
    mac.update(&len.to_be_bytes());
    mac.update(body);
    let full = mac.finalize().into_bytes();
    full[..FRAME_TAG_BYTES].try_into().expect("tag length is below 32")
}

/// The sending half of a direction: seals messages in order.
#[derive(Clone)]
pub struct Sealer {
    mac: Hmac<Sha256>,
    seq: u64,
}

/// The receiving half of a direction: opens frames in order.
#[derive(Clone)]
pub struct Opener {
    mac: Hmac<Sha256>,
    seq: u64,
}

// Keyed MAC state stays out of logs.
impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("seq", &self.seq).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("seq", &self.seq).finish_non_exhaustive()
    }
}

impl Sealer {
    pub fn new(key: [u8; 32]) -> Self {
        Self { mac: Hmac::new_from_slice(&key).expect("HMAC takes any key length"), seq: 0 }
    }

    /// Appends `message` as one frame to `out`. A message over the frame cap is the
    /// caller's bug (the link checks sizes before queueing).
    pub fn seal(&mut self, message: &Message, out: &mut BytesMut) {
        let start = out.len();
        out.put_u32(0);
        message.encode_body(out);
        let len = out.len() - start - 4 + FRAME_TAG_BYTES;
        assert!(len <= FRAME_BYTES_MAX, "frame of {len} bytes over the cap");
        let len = len as u32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
        let t = tag(&self.mac, self.seq, len, &out[start + 4..]);
        out.put_slice(&t);
        self.seq += 1;
    }
}

impl Opener {
    pub fn new(key: [u8; 32]) -> Self {
        Self { mac: Hmac::new_from_slice(&key).expect("HMAC takes any key length"), seq: 0 }
    }

    /// Checks a frame's prefix before its bytes are read.
    pub fn check_len(len: u32) -> Result<usize, PeerError> {
        let len = len as usize;
        if (FRAME_BYTES_MIN..=FRAME_BYTES_MAX).contains(&len) {
            Ok(len)
        } else {
            Err(PeerError::FrameSize { len, max: FRAME_BYTES_MAX })
        }
    }

    /// Verifies `frame` (everything after the prefix) as the next frame of this
    /// direction and returns its body.
    pub fn open(&mut self, len: u32, mut frame: Bytes) -> Result<Bytes, PeerError> {
        let body_len =
            frame.len().checked_sub(FRAME_TAG_BYTES).ok_or(PeerError::FrameAuth { seq: self.seq })?;
        let expected = tag(&self.mac, self.seq, len, &frame[..body_len]);
        if !bool::from(expected.ct_eq(&frame[body_len..])) {
            return Err(PeerError::FrameAuth { seq: self.seq });
        }
        self.seq += 1;
        frame.truncate(body_len);
        Ok(frame)
    }

    /// Reads, checks and opens the next frame from `reader`; returns its body and its
    /// size on the wire.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, reader: &mut R) -> Result<(Bytes, usize), PeerError> {
        let len = reader.read_u32().await?;
        let n = Self::check_len(len)?;
        let mut frame = BytesMut::zeroed(n);
        reader.read_exact(&mut frame).await?;
        Ok((self.open(len, frame.freeze())?, 4 + n))
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
