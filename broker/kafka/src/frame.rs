//! Framing: a 4-byte big-endian size, then that many bytes. The cap is checked on the
//! prefix alone, before any buffer grows for the body.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::KafkaWireError;
use crate::limits::{FRAME_BYTES_MAX, FRAME_PREFIX_BYTES, PRE_AUTH_FRAME_BYTES_MAX};

/// How large a frame a connection accepts; the listener switches from `pre_auth` to
/// `authenticated` once SASL succeeds (or starts there when SASL is off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    pub frame_bytes_max: usize,
}

impl FrameLimits {
    pub const fn pre_auth() -> Self {
        FrameLimits { frame_bytes_max: PRE_AUTH_FRAME_BYTES_MAX }
    }

    pub const fn authenticated() -> Self {
        FrameLimits { frame_bytes_max: FRAME_BYTES_MAX }
    }
}

/// The body size a prefix announces, refused if over the cap. `Ok(None)`: fewer than
/// four bytes so far.
pub fn frame_size(buf: &[u8], limits: FrameLimits) -> Result<Option<usize>, KafkaWireError> {
    let Some(prefix) = buf.first_chunk::<FRAME_PREFIX_BYTES>() else {
        return Ok(None);
    };
    let size = i32::from_be_bytes(*prefix);
    let size = usize::try_from(size).map_err(|_| KafkaWireError::NegativeFrameSize { size })?;
    if size > limits.frame_bytes_max {
        return Err(KafkaWireError::FrameTooLarge { size: size as u64, cap: limits.frame_bytes_max });
    }
    Ok(Some(size))
}

/// Splits one whole frame body off `buf` (without its prefix) as a frozen `Bytes`, so
/// decoding can slice it without copying. `Ok(None)`: the frame is not complete yet; the
/// caller reserves at most the announced (capped) size and reads more.
pub fn split_frame(buf: &mut BytesMut, limits: FrameLimits) -> Result<Option<Bytes>, KafkaWireError> {
    let Some(size) = frame_size(buf, limits)? else {
        return Ok(None);
    };
    if buf.len() - FRAME_PREFIX_BYTES < size {
        return Ok(None);
    }
    buf.advance(FRAME_PREFIX_BYTES);
    Ok(Some(buf.split_to(size).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_over_the_cap_fails_on_four_bytes() {
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        let err = split_frame(&mut buf, FrameLimits::authenticated()).unwrap_err();
        assert!(matches!(err, KafkaWireError::FrameTooLarge { size: 2147483647, .. }));
        let mut buf = BytesMut::from(&[0, 0x08, 0, 1][..]);
        assert!(split_frame(&mut buf, FrameLimits::pre_auth()).is_err());
        let mut buf = BytesMut::from(&[0, 0x08, 0, 1][..]);
        assert!(split_frame(&mut buf, FrameLimits::authenticated()).unwrap().is_none());
    }

    #[test]
    fn negative_prefixes_are_refused() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            split_frame(&mut buf, FrameLimits::authenticated()),
            Err(KafkaWireError::NegativeFrameSize { size: -1 })
        ));
    }

    #[test]
    fn frames_split_whole_and_in_order() {
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 7, 8, 0, 0, 0, 1][..]);
        let limits = FrameLimits::authenticated();
        assert_eq!(&split_frame(&mut buf, limits).unwrap().unwrap()[..], &[7, 8]);
        assert!(split_frame(&mut buf, limits).unwrap().is_none());
        buf.extend_from_slice(&[9]);
        assert_eq!(&split_frame(&mut buf, limits).unwrap().unwrap()[..], &[9]);
        assert!(buf.is_empty());
    }
}
