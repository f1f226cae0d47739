//! Kafka's zig-zag varints (protobuf's sint32/sint64): the integer fields of a v2 record.

/// Most bytes a 32-bit varint takes.
pub(crate) const VARINT_MAX: usize = 5;
/// Most bytes a 64-bit varint takes.
pub(crate) const VARLONG_MAX: usize = 10;

pub(crate) fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

pub(crate) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bytes `v` takes as a varint.
pub(crate) fn len32(v: i32) -> usize {
    unsigned_len(u64::from(zigzag32(v)))
}

/// Bytes `v` takes as a varlong.
pub(crate) fn len64(v: i64) -> usize {
    unsigned_len(zigzag64(v))
}

fn unsigned_len(mut u: u64) -> usize {
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

pub(crate) fn put32(buf: &mut Vec<u8>, v: i32) {
    put_unsigned(buf, u64::from(zigzag32(v)));
}

pub(crate) fn put64(buf: &mut Vec<u8>, v: i64) {
    put_unsigned(buf, zigzag64(v));
}

fn put_unsigned(buf: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        buf.push((u as u8) | 0x80);
        u >>= 7;
    }
    buf.push(u as u8);
}

/// Why a varint did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The bytes ran out before the last byte of the varint.
    Truncated,
    /// More bytes, or more bits, than the type holds.
    Overlong,
}

/// Decodes an unsigned LEB128 of at most `max` bytes holding at most `bits` bits;
/// returns the value and the bytes read.
fn get_unsigned(buf: &[u8], max: usize, bits: u32) -> Result<(u64, usize), VarintError> {
    let mut value = 0u64;
    for i in 0..max {
        let Some(&b) = buf.get(i) else { return Err(VarintError::Truncated) };
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if bits < 64 && value >> bits != 0 {
                return Err(VarintError::Overlong);
            }
            // The 10th byte of a varlong may only carry the top bit of 64.
            if i == VARLONG_MAX - 1 && b > 1 {
                return Err(VarintError::Overlong);
            }
            return Ok((value, i + 1));
        }
    }
    Err(VarintError::Overlong)
}

pub(crate) fn get32(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (u, n) = get_unsigned(buf, VARINT_MAX, 32)?;
    let u = u as u32;
    Ok((((u >> 1) as i32) ^ -((u & 1) as i32), n))
}

pub(crate) fn get64(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (u, n) = get_unsigned(buf, VARLONG_MAX, 64)?;
    Ok((((u >> 1) as i64) ^ -((u & 1) as i64), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc32(v: i32) -> Vec<u8> {
        let mut b = Vec::new();
        put32(&mut b, v);
        b
    }

    #[test]
    fn zigzag_matches_kafka_and_protobuf() {
        // The mapping from the protobuf encoding guide, which Kafka's records use.
        assert_eq!([0, -1, 1, -2, 2].map(zigzag32), [0, 1, 2, 3, 4]);
        assert_eq!(zigzag32(i32::MAX), 0xffff_fffe);
        assert_eq!(zigzag32(i32::MIN), 0xffff_ffff);
        assert_eq!(zigzag64(i64::MIN), u64::MAX);
        assert_eq!(enc32(-1), [0x01]);
        assert_eq!(enc32(64), [0x80, 0x01]);
        assert_eq!(enc32(-65), [0x81, 0x01]);
        assert_eq!(enc32(i32::MIN), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(len32(i32::MIN), VARINT_MAX);
        assert_eq!(len64(i64::MIN), VARLONG_MAX);
    }

    #[test]
    fn truncated_and_overlong_varints_are_refused() {
        assert_eq!(get32(&[]), Err(VarintError::Truncated));
        assert_eq!(get32(&[0x80, 0x80]), Err(VarintError::Truncated));
        assert_eq!(get32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), Err(VarintError::Overlong));
        assert_eq!(get32(&[0x80; 6]), Err(VarintError::Overlong));
        assert_eq!(
            get64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            Err(VarintError::Overlong)
        );
    }

    proptest! {
        #[test]
        fn varints_round_trip(a in any::<i32>(), b in any::<i64>()) {
            let mut buf = Vec::new();
            put32(&mut buf, a);
            prop_assert_eq!(buf.len(), len32(a));
            prop_assert_eq!(get32(&buf), Ok((a, buf.len())));
            buf.clear();
            put64(&mut buf, b);
            prop_assert_eq!(buf.len(), len64(b));
            prop_assert_eq!(get64(&buf), Ok((b, buf.len())));
        }
    }
}
