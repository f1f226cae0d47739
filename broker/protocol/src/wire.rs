//! Primitive encoding: big-endian integers, length-prefixed strings and byte
//! strings, counted arrays. Every read is bounds-checked and reports where it failed.

use bytes::{BufMut, Bytes};

/// A malformed message: what was wrong and at which byte of the frame body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame of {length} bytes exceeds the limit of {max}")]
    FrameTooLarge { length: u64, max: usize },
    #[error("frame length {length} is shorter than a frame header")]
    FrameTooShort { length: u64 },
    #[error("message truncated at byte {position}: {field} needs {needed} more bytes")]
    Truncated { position: usize, field: &'static str, needed: usize },
    #[error("invalid {field} at byte {position}: {reason}")]
    Invalid { position: usize, field: &'static str, reason: &'static str },
    #[error("unknown op {op:#04x}")]
    UnknownOp { op: u8 },
    #[error("{extra} unexpected bytes after the message")]
    TrailingBytes { extra: usize },
}

/// Reads primitives from a frame body.
#[derive(Debug)]
pub(crate) struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<Bytes, WireError> {
        let available = self.buf.len() - self.pos;
        if n > available {
            return Err(WireError::Truncated { position: self.pos, field, needed: n - available });
        }
        let out = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let b = self.take(N, field)?;
        Ok(b[..].try_into().expect("exact length"))
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    pub fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    pub fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    pub fn i16(&mut self, field: &'static str) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    pub fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Invalid { position: self.pos - 1, field, reason: "boolean must be 0 or 1" }),
        }
    }

    /// u16 length + UTF-8.
    pub fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = usize::from(self.u16(field)?);
        let at = self.pos;
        let b = self.take(len, field)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::Invalid {
            position: at,
            field,
            reason: "not UTF-8",
        })
    }

    /// u32 length + bytes, zero-copy.
    pub fn bytes(&mut self, field: &'static str) -> Result<Bytes, WireError> {
        let len = self.u32(field)? as usize;
        self.take(len, field)
    }

    /// u32 count, bounded by what the remaining bytes could possibly hold.
    pub fn count(&mut self, field: &'static str, min_item_bytes: usize) -> Result<usize, WireError> {
        let at = self.pos;
        let n = self.u32(field)? as usize;
        let remaining = self.buf.len() - self.pos;
        if n.saturating_mul(min_item_bytes.max(1)) > remaining {
            return Err(WireError::Invalid { position: at, field, reason: "count larger than the message" });
        }
        Ok(n)
    }

    pub fn finish(self) -> Result<(), WireError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            extra => Err(WireError::TrailingBytes { extra }),
        }
    }
}

/// Writes primitives into a frame body.
pub(crate) trait Writer {
    fn string(&mut self, s: &str);
    fn bytes(&mut self, b: &[u8]);
}

impl Writer for Vec<u8> {
    fn string(&mut self, s: &str) {
        // Strings are names and messages; longer ones are cut at a char boundary.
        let mut end = s.len().min(usize::from(u16::MAX));
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.put_u16(end as u16);
        self.put_slice(&s.as_bytes()[..end]);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.put_u32(b.len() as u32);
        self.put_slice(b);
    }
}
