//! A schema-driven walk over a request body that checks every length and count against
//! the bytes remaining, before kafka-protocol's decoder sees the body.
//!
//! Why: the crate's decoders call `Vec::with_capacity(n)` and `vec![0; n]` with `n` read
//! from the wire (kafka-protocol issues #156/#161), so one frame claiming 2^31 elements
//! aborts the process on allocation failure. This walk follows exactly the layout the
//! decoders follow (`schema_gen.rs`, generated from them and checked against the crate's
//! encoders in tests), allocates nothing, and refuses a body in which any array of `n`
//! elements could not fit in the bytes left: `n * min_bytes(element) <= remaining`.
//! Where the walk accepts, the decoder reads the same counts at the same positions, so
//! each of its allocations is bounded by a constant times the frame size.
//!
//! The walk may be stricter than the decoder (it refuses over-long varints), never
//! looser: a body it refuses is one es would not serve anyway.

use crate::error::KafkaWireError;
use crate::limits::UNKNOWN_TAGGED_FIELDS_MAX;

/// A field's wire type, as kafka-protocol's `types::*` encoders name them.
#[derive(Debug)]
pub(crate) enum Ty {
    Int8,
    Int16,
    Int32,
    Int64,
    Boolean,
    Uuid,
    String,
    CompactString,
    Bytes,
    CompactBytes,
    Array(&'static Ty),
    CompactArray(&'static Ty),
    Struct(&'static Struct),
}

/// One field in declaration order, present on the wire for `versions` (inclusive).
#[derive(Debug)]
pub(crate) struct Field {
    #[allow(dead_code)] // Read in tests and by a human checking the table.
    pub name: &'static str,
    pub versions: (i16, i16),
    pub ty: Ty,
}

/// A tagged field the decoder knows: it decodes `ty` in place and ignores the size.
#[derive(Debug)]
pub(crate) struct Tag {
    pub tag: u32,
    #[allow(dead_code)]
    pub name: &'static str,
    pub versions: (i16, i16),
    pub ty: Ty,
}

/// A message or nested struct: its fields, and from which version it ends with a
/// tagged-field section.
#[derive(Debug)]
pub(crate) struct Struct {
    #[allow(dead_code)]
    pub name: &'static str,
    #[allow(dead_code)]
    pub versions: (i16, i16),
    pub flexible_from: i16,
    pub fields: &'static [Field],
    pub tags: &'static [Tag],
}

fn within(v: i16, (lo, hi): (i16, i16)) -> bool {
    lo <= v && v <= hi
}

/// A read position in the body being checked.
struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
    unknown_tags: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn skip(&mut self, n: usize) -> Result<(), KafkaWireError> {
        if n > self.remaining() {
            return Err(KafkaWireError::Truncated {
                position: self.position,
                needed: n,
                remaining: self.remaining(),
            });
        }
        self.position += n;
        Ok(())
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], KafkaWireError> {
        let start = self.position;
        self.skip(N)?;
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[start..start + N]);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, KafkaWireError> {
        Ok(i16::from_be_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32, KafkaWireError> {
        Ok(i32::from_be_bytes(self.take()?))
    }

    /// An unsigned varint of at most five bytes whose value fits in 32 bits. The crate
    /// reads five bytes and silently drops the overflow; refusing is the stricter choice.
    fn uvarint(&mut self) -> Result<u32, KafkaWireError> {
        let start = self.position;
        let mut value: u64 = 0;
        for i in 0..5 {
            let [b] = self.take::<1>()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return u32::try_from(value).map_err(|_| KafkaWireError::BadVarint { position: start });
            }
        }
        Err(KafkaWireError::BadVarint { position: start })
    }
}

/// Checks `body` against `schema` at `version`: every length and count fits.
pub(crate) fn check(schema: &Struct, version: i16, body: &[u8]) -> Result<usize, KafkaWireError> {
    let mut cursor = Cursor { bytes: body, position: 0, unknown_tags: 0 };
    walk_struct(schema, version, &mut cursor)?;
    Ok(cursor.position)
}

fn walk_struct(s: &Struct, version: i16, c: &mut Cursor<'_>) -> Result<(), KafkaWireError> {
    for field in s.fields.iter().filter(|f| within(version, f.versions)) {
        walk(&field.ty, version, c)?;
    }
    if version >= s.flexible_from {
        walk_tags(s, version, c)?;
    }
    Ok(())
}

fn walk_tags(s: &Struct, version: i16, c: &mut Cursor<'_>) -> Result<(), KafkaWireError> {
    // Each tag costs at least two bytes, so this loop ends when the body does.
    let count = c.uvarint()?;
    for _ in 0..count {
        let position = c.position;
        let tag = c.uvarint()?;
        let size = c.uvarint()?;
        match s.tags.iter().find(|t| t.tag == tag) {
            Some(known) if within(version, known.versions) => walk(&known.ty, version, c)?,
            // The decoder refuses a known tag outside its versions; so does the walk.
            Some(_) => return Err(KafkaWireError::BadTag { position, tag }),
            None => {
                c.unknown_tags += 1;
                if c.unknown_tags > UNKNOWN_TAGGED_FIELDS_MAX {
                    return Err(KafkaWireError::TooManyTaggedFields { position });
                }
                c.skip(size as usize)?
            }
        }
    }
    Ok(())
}

fn walk(ty: &Ty, version: i16, c: &mut Cursor<'_>) -> Result<(), KafkaWireError> {
    match ty {
        Ty::Int8 | Ty::Boolean => c.skip(1),
        Ty::Int16 => c.skip(2),
        Ty::Int32 => c.skip(4),
        Ty::Int64 => c.skip(8),
        Ty::Uuid => c.skip(16),
        Ty::String => {
            let position = c.position;
            let n = c.i16()?;
            sized(i64::from(n), position, c)
        }
        Ty::Bytes => {
            let position = c.position;
            let n = c.i32()?;
            sized(i64::from(n), position, c)
        }
        Ty::CompactString | Ty::CompactBytes => {
            let position = c.position;
            let n = c.uvarint()?;
            sized(i64::from(n) - 1, position, c)
        }
        Ty::Array(element) => {
            let position = c.position;
            let n = c.i32()?;
            walk_array(element, i64::from(n), position, version, c)
        }
        Ty::CompactArray(element) => {
            let position = c.position;
            let n = c.uvarint()?;
            walk_array(element, i64::from(n) - 1, position, version, c)
        }
        Ty::Struct(s) => walk_struct(s, version, c),
    }
}

/// A string or byte run of `n` bytes; -1 is null (the decoder refuses a null where the
/// field is not nullable).
fn sized(n: i64, position: usize, c: &mut Cursor<'_>) -> Result<(), KafkaWireError> {
    if n == -1 {
        return Ok(());
    }
    let n = usize::try_from(n).map_err(|_| KafkaWireError::BadLength { position, length: n })?;
    if n > c.remaining() {
        return Err(KafkaWireError::LengthTooLarge { position, length: n, remaining: c.remaining() });
    }
    c.skip(n)
}

fn walk_array(
    element: &Ty,
    n: i64,
    position: usize,
    version: i16,
    c: &mut Cursor<'_>,
) -> Result<(), KafkaWireError> {
    if n == -1 {
        return Ok(());
    }
    let count = u64::try_from(n).map_err(|_| KafkaWireError::BadLength { position, length: n })?;
    // An element never costs less than one byte here, so a body of b bytes holds at
    // most b elements of anything and the walk's own loop is bounded by the body.
    let each = min_bytes(element, version).max(1) as u64;
    if count.saturating_mul(each) > c.remaining() as u64 {
        return Err(KafkaWireError::CountTooLarge { position, count, remaining: c.remaining() });
    }
    for _ in 0..count {
        walk(element, version, c)?;
    }
    Ok(())
}

/// The fewest bytes an encoding of `ty` at `version` can take.
pub(crate) fn min_bytes(ty: &Ty, version: i16) -> usize {
    match ty {
        Ty::Int8 | Ty::Boolean | Ty::CompactString | Ty::CompactBytes | Ty::CompactArray(_) => 1,
        Ty::Int16 => 2,
        Ty::Int32 | Ty::Bytes | Ty::Array(_) => 4,
        Ty::String => 2,
        Ty::Int64 => 8,
        Ty::Uuid => 16,
        Ty::Struct(s) => {
            let fields: usize = s
                .fields
                .iter()
                .filter(|f| within(version, f.versions))
                .map(|f| min_bytes(&f.ty, version))
                .sum();
            fields + usize::from(version >= s.flexible_from)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ONE_INT: Struct = Struct {
        name: "OneInt",
        versions: (0, 1),
        flexible_from: 1,
        fields: &[Field { name: "a", versions: (0, 1), ty: Ty::Int32 }],
        tags: &[],
    };
    static ARRAY_OF_STRUCTS: Struct = Struct {
        name: "Outer",
        versions: (0, 1),
        flexible_from: 1,
        fields: &[
            Field { name: "items", versions: (0, 0), ty: Ty::Array(&Ty::Struct(&ONE_INT)) },
            Field { name: "items", versions: (1, 1), ty: Ty::CompactArray(&Ty::Struct(&ONE_INT)) },
        ],
        tags: &[],
    };

    #[test]
    fn a_count_larger_than_the_body_fails_before_any_element() {
        let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1];
        let err = check(&ARRAY_OF_STRUCTS, 0, &body).unwrap_err();
        assert!(matches!(err, KafkaWireError::CountTooLarge { position: 0, count: 2147483647, .. }));
    }

    #[test]
    fn a_count_is_checked_against_the_element_size_not_one_byte() {
        // Two elements claimed, five bytes left: one element takes four.
        let body = [0, 0, 0, 2, 0, 0, 0, 1, 9];
        assert!(matches!(
            check(&ARRAY_OF_STRUCTS, 0, &body),
            Err(KafkaWireError::CountTooLarge { count: 2, remaining: 5, .. })
        ));
        let body = [0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(check(&ARRAY_OF_STRUCTS, 0, &body).unwrap(), 12);
    }

    #[test]
    fn flexible_versions_use_compact_counts_and_tag_sections() {
        // Compact count 2 (= 1 element), the element (int + empty tags), outer tags.
        let body = [2, 0, 0, 0, 7, 0, 0];
        assert_eq!(check(&ARRAY_OF_STRUCTS, 1, &body).unwrap(), 7);
        // An unknown tag whose size runs past the end.
        let body = [1, 1, 5, 200, 1];
        assert!(matches!(check(&ARRAY_OF_STRUCTS, 1, &body), Err(KafkaWireError::Truncated { .. })));
    }

    #[test]
    fn over_long_varints_are_refused() {
        let body = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(check(&ARRAY_OF_STRUCTS, 1, &body), Err(KafkaWireError::BadVarint { position: 0 })));
        let body = [0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(matches!(check(&ARRAY_OF_STRUCTS, 1, &body), Err(KafkaWireError::BadVarint { position: 0 })));
    }

    #[test]
    fn negative_counts_other_than_null_are_refused() {
        let body = [0xff, 0xff, 0xff, 0xfe];
        assert!(matches!(
            check(&ARRAY_OF_STRUCTS, 0, &body),
            Err(KafkaWireError::BadLength { length: -2, .. })
        ));
        assert_eq!(check(&ARRAY_OF_STRUCTS, 0, &[0xff; 4]).unwrap(), 4);
    }
}
