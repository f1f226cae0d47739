//! Checks the generated wire layouts against kafka-protocol itself: bodies written from
//! the layout must decode with the crate and re-encode to the same bytes, at every
//! version the crate knows, and the pre-scan must accept them and consume every byte.
//!
//! Why: the pre-scan is only sound if it walks a body exactly as the decoder does.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;

use crate::apis::API_TABLE;
use crate::prescan::{self, Struct, Ty};
use crate::request::{message_versions, schema};

/// A small deterministic generator (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn text(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(6)).map(|_| b'a' + rng.below(26) as u8).collect()
}

fn write(ty: &Ty, version: i16, rng: &mut Rng, buf: &mut BytesMut) {
    match ty {
        Ty::Int8 => buf.put_i8(rng.next() as i8),
        Ty::Boolean => buf.put_u8(rng.below(2) as u8),
        Ty::Int16 => buf.put_i16(rng.next() as i16),
        Ty::Int32 => buf.put_i32(rng.next() as i32),
        Ty::Int64 => buf.put_i64(rng.next() as i64),
        Ty::Uuid => {
            buf.put_u64(rng.next());
            buf.put_u64(rng.next());
        }
        Ty::String => {
            let t = text(rng);
            buf.put_i16(t.len() as i16);
            buf.put_slice(&t);
        }
        Ty::CompactString | Ty::CompactBytes => {
            let t = text(rng);
            put_uvarint(buf, t.len() as u32 + 1);
            buf.put_slice(&t);
        }
        Ty::Bytes => {
            let t = text(rng);
            buf.put_i32(t.len() as i32);
            buf.put_slice(&t);
        }
        Ty::Array(e) => {
            let n = rng.below(3);
            buf.put_i32(n as i32);
            (0..n).for_each(|_| write(e, version, rng, buf));
        }
        Ty::CompactArray(e) => {
            let n = rng.below(3);
            put_uvarint(buf, n as u32 + 1);
            (0..n).for_each(|_| write(e, version, rng, buf));
        }
        Ty::Struct(s) => write_struct(s, version, rng, buf),
    }
}

fn write_struct(s: &Struct, version: i16, rng: &mut Rng, buf: &mut BytesMut) {
    for f in s.fields.iter().filter(|f| f.versions.0 <= version && version <= f.versions.1) {
        write(&f.ty, version, rng, buf);
    }
    if version < s.flexible_from {
        return;
    }
    let mut tags: Vec<_> = s
        .tags
        .iter()
        .filter(|t| t.versions.0 <= version && version <= t.versions.1 && rng.below(2) == 1)
        .collect();
    tags.sort_by_key(|t| t.tag);
    // Sometimes one unknown tag after the known ones (tags go in ascending order).
    let unknown = rng.below(4) == 0;
    put_uvarint(buf, tags.len() as u32 + u32::from(unknown));
    for t in tags {
        let mut inner = BytesMut::new();
        write(&t.ty, version, rng, &mut inner);
        put_uvarint(buf, t.tag);
        put_uvarint(buf, inner.len() as u32);
        buf.put_slice(&inner);
    }
    if unknown {
        let junk = text(rng);
        put_uvarint(buf, 1000 + rng.below(100) as u32);
        put_uvarint(buf, junk.len() as u32);
        buf.put_slice(&junk);
    }
}

/// Decodes `body` with the crate and re-encodes it, returning the new bytes.
fn crate_round_trip(key: ApiKey, version: i16, body: &Bytes) -> Vec<u8> {
    let mut b = body.clone();
    let decoded = crate::request::decode_body_for_tests(key, &mut b, version)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: crate refused {body:02x?}: {e}"));
    assert!(b.is_empty(), "{key:?} v{version}: crate left {} bytes", b.len());
    let mut again = BytesMut::new();
    decoded.encode_body(&mut again, version).unwrap();
    again.to_vec()
}

#[test]
fn every_layout_matches_the_crate_at_every_version() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for row in API_TABLE {
        let layout = schema(row.key).unwrap();
        let versions = message_versions(row.key).unwrap();
        for version in versions.min..=versions.max {
            for _ in 0..200 {
                let mut buf = BytesMut::new();
                write_struct(layout, version, &mut rng, &mut buf);
                let body = buf.freeze();
                let consumed = prescan::check(layout, version, &body)
                    .unwrap_or_else(|e| panic!("{:?} v{version}: pre-scan refused: {e}", row.key));
                assert_eq!(consumed, body.len(), "{:?} v{version}", row.key);
                let again = crate_round_trip(row.key, version, &body);
                assert_eq!(again, body.to_vec(), "{:?} v{version}", row.key);
            }
        }
    }
}

#[test]
fn every_api_in_the_table_has_a_layout_and_a_decoder() {
    for row in API_TABLE {
        assert!(schema(row.key).is_some(), "{:?}", row.key);
        let v = message_versions(row.key).unwrap();
        assert!(row.advertised_max() <= v.max, "{:?}", row.key);
        assert!(row.decodable_from >= v.min, "{:?} decodes from {}", row.key, v.min);
    }
}
