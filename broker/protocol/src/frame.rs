//! Frames: the unit on the wire.
//!
//! ```text
//! length     u32  bytes after this field (>= 6, <= FRAME_BYTES_MAX)
//! request_id u32  chosen by the client; the response carries the same id
//! op         u8   see `Op`
//! flags      u8   bit 0: response; other bits 0
//! body            length - 6 bytes
//! ```
//!
//! Decoding follows mini-redis's split: first check that a whole frame is buffered
//! (and that its length is sane), then split it off without copying.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::wire::WireError;

pub const FRAME_HEADER_LEN: usize = 6;
/// Largest frame either side accepts: a 64 MiB batch plus headroom.
pub const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024 + 64 * 1024;
pub const FLAG_RESPONSE: u8 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub request_id: u32,
    pub op: u8,
    pub flags: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    pub body: Bytes,
}

/// Splits one whole frame off the front of `buf`, or returns `None` if more bytes
/// are needed. An oversized or undersized length is an error before any of the
/// body is buffered, so a hostile peer cannot make the reader allocate.
pub fn decode_frame(buf: &mut BytesMut, max_len: usize) -> Result<Option<Frame>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
    if length > max_len {
        return Err(WireError::FrameTooLarge { length: length as u64, max: max_len });
    }
    if length < FRAME_HEADER_LEN {
        return Err(WireError::FrameTooShort { length: length as u64 });
    }
    if buf.len() < 4 + length {
        buf.reserve(4 + length - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    let mut frame = buf.split_to(length).freeze();
    let request_id = frame.get_u32();
    let op = frame.get_u8();
    let flags = frame.get_u8();
    if flags & !FLAG_RESPONSE != 0 {
        return Err(WireError::Invalid { position: 5, field: "flags", reason: "unknown flag bits" });
    }
    Ok(Some(Frame { header: FrameHeader { request_id, op, flags }, body: frame }))
}

/// Appends one frame to `out`; `body` writes the body after the header.
pub fn encode_frame(out: &mut Vec<u8>, header: FrameHeader, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.put_u32(0);
    out.put_u32(header.request_id);
    out.put_u8(header.op);
    out.put_u8(header.flags);
    body(out);
    let length = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&length.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_frame_bytes() {
        let mut out = Vec::new();
        encode_frame(&mut out, FrameHeader { request_id: 7, op: 2, flags: 1 }, |b| {
            b.extend_from_slice(b"xy")
        });
        assert_eq!(out, [0, 0, 0, 8, 0, 0, 0, 7, 2, 1, b'x', b'y']);
    }

    #[test]
    fn partial_frames_wait_and_bad_lengths_fail_early() {
        let mut out = Vec::new();
        encode_frame(&mut out, FrameHeader { request_id: 1, op: 0, flags: 0 }, |b| {
            b.extend_from_slice(b"abc")
        });
        for cut in 0..out.len() {
            let mut buf = BytesMut::from(&out[..cut]);
            assert_eq!(decode_frame(&mut buf, 1024).unwrap(), None);
        }
        let mut buf = BytesMut::from(&out[..]);
        let f = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!((f.header.request_id, &f.body[..]), (1, &b"abc"[..]));
        assert!(buf.is_empty());
        let mut huge = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(decode_frame(&mut huge, 1024), Err(WireError::FrameTooLarge { .. })));
        let mut tiny = BytesMut::from(&[0, 0, 0, 2, 0, 0][..]);
        assert!(matches!(decode_frame(&mut tiny, 1024), Err(WireError::FrameTooShort { .. })));
    }
}
