//! Kafka's record-batch compression codecs (attributes bits 0-2), decompressed under a
//! byte budget so that a small hostile batch can never make the broker allocate or
//! produce more than the budget.
//!
//! Budget rules, for every codec: a declared size (snappy's length header, xerial block
//! headers, an LZ4 or zstd frame's content size) above the budget is refused before any
//! output is allocated; streams are read through `Read::take(max_out + 1)`, so output
//! grows with what the data really expands to and stops one byte past the budget; zstd's
//! window is capped so a frame header cannot make the decoder reserve a huge window.

use std::fmt;
use std::io::{Read, Write};
use std::str::FromStr;

use crate::limits::{ZSTD_WINDOW_LOG_MAX, ZSTD_WINDOW_LOG_MIN};

/// A batch's compression codec, as Kafka numbers them in the attributes' low 3 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec, in attribute-bit order.
    pub const ALL: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    /// The codec for the value of attributes bits 0-2 (the caller masks them out).
    /// 5, 6 and 7 are unassigned in Kafka, and anything above 7 is not a 3-bit value.
    pub fn from_bits(bits: u8) -> Result<Self, CompressionError> {
        match bits {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            _ => Err(CompressionError::Unknown { bits }),
        }
    }

    /// The value of attributes bits 0-2 for this codec.
    pub fn bits(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (`compression.type`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A codec name that is not one of Kafka's five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compression codec {name:?} (expected none, gzip, snappy, lz4 or zstd)")]
pub struct UnknownCodecName {
    pub name: String,
}

impl FromStr for Compression {
    type Err = UnknownCodecName;

    /// Kafka's names, exactly as `name` spells them (Kafka's are case-sensitive too).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownCodecName { name: s.to_owned() })
    }
}

/// Why a batch's records could not be (de)compressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// The data would decompress to more than `max` bytes.
    #[error("decompressed data exceeds the budget of {max} bytes")]
    TooLarge { max: usize },
    /// The data is not valid for its codec (truncated, garbage, bad checksum, or a
    /// feature Kafka's format does not allow).
    #[error("corrupt {codec} data: {reason}")]
    Corrupt { codec: &'static str, reason: String },
    /// The attributes name a codec Kafka does not define.
    #[error("unknown compression codec bits {bits}")]
    Unknown { bits: u8 },
}

/// Decompresses `input`, refusing with `TooLarge` anything that would exceed `max_out`
/// bytes of output (without allocating it).
pub fn decompress(c: Compression, input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
    // Every compressor writes at least a header, even for empty plaintext.
    if c != Compression::None && input.is_empty() {
        return Err(corrupt(c.name(), "empty input"));
    }
    match c {
        Compression::None => within_budget(input.to_vec(), max_out),
        Compression::Gzip => gzip::decompress(input, max_out),
        Compression::Snappy => snappy::decompress(input, max_out),
        Compression::Lz4 => lz4::decompress(input, max_out),
        Compression::Zstd => zstd_codec::decompress(input, max_out),
    }
}

/// Compresses `input` the way Kafka's Java producer does by default: gzip level 6,
/// snappy in xerial framing with 32 KiB blocks, LZ4 frames of independent 64 KiB
/// blocks, zstd level 3. It fails only if a compressor itself fails.
pub fn compress(c: Compression, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    match c {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => gzip::compress(input),
        Compression::Snappy => snappy::compress(input),
        Compression::Lz4 => lz4::compress(input),
        Compression::Zstd => zstd_codec::compress(input),
    }
}

fn corrupt(codec: &'static str, reason: impl Into<String>) -> CompressionError {
    CompressionError::Corrupt { codec, reason: reason.into() }
}

fn within_budget(out: Vec<u8>, max_out: usize) -> Result<Vec<u8>, CompressionError> {
    if out.len() > max_out {
        return Err(CompressionError::TooLarge { max: max_out });
    }
    Ok(out)
}

/// Reads a decoder to its end, but never more than one byte past the budget: that one
/// byte tells "exactly the budget" from "over it".
fn read_bounded(codec: &'static str, reader: impl Read, max_out: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let limit = u64::try_from(max_out).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(limit).read_to_end(&mut out).map_err(|e| corrupt(codec, e.to_string()))?;
    within_budget(out, max_out)
}

/// Writing into a `Vec` cannot fail, so an error here is the compressor's own.
fn compressor_failed(codec: &'static str, e: impl fmt::Display) -> CompressionError {
    corrupt(codec, format!("compressor failed: {e}"))
}

mod gzip {
    use super::*;
    use flate2::read::MultiGzDecoder;
    use flate2::write::GzEncoder;

    /// Multi-member: some producers concatenate gzip members, and gzip defines the
    /// concatenation as one stream. Trailing bytes that are not a member are corrupt.
    pub(super) fn decompress(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
        read_bounded("gzip", MultiGzDecoder::new(input), max_out)
    }

    pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        encoder.write_all(input).map_err(|e| compressor_failed("gzip", e))?;
        encoder.finish().map_err(|e| compressor_failed("gzip", e))
    }
}

mod snappy {
    use super::*;

    const CODEC: &str = "snappy";
    /// snappy-java's stream header: magic, then BE i32 version and compatible version.
    const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
    const XERIAL_HEADER_LEN: usize = 16;
    const XERIAL_VERSION: i32 = 1;
    /// snappy-java's default block size (plaintext per block), which Kafka keeps.
    const XERIAL_BLOCK: usize = 32 * 1024;
    /// The standard snappy framing format's stream identifier chunk.
    const FRAMED_STREAM_ID: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
    /// A raw snappy element expands at most 64 bytes out of 3 (a copy with a 2-byte
    /// offset), so a block claiming more than 22x its size is corrupt before we allocate.
    const MAX_EXPANSION: usize = 22;

    /// The three framings are told apart by their magic; what has none is a raw block
    /// (franz-go), as Kafka's own clients decide.
    pub(super) fn decompress(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
        if input.starts_with(&XERIAL_MAGIC) {
            xerial(input, max_out)
        } else if input.starts_with(&FRAMED_STREAM_ID) {
            read_bounded(CODEC, snap::read::FrameDecoder::new(input), max_out)
        } else {
            let mut out = Vec::new();
            raw_block(input, &mut out, max_out)?;
            Ok(out)
        }
    }

    /// Header(s), then blocks of BE u32 length + one raw snappy block. snappy-java
    /// accepts a fresh header between blocks (concatenated streams), so we do too.
    fn xerial(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            if rest.starts_with(&XERIAL_MAGIC) {
                rest =
                    rest.get(XERIAL_HEADER_LEN..).ok_or_else(|| corrupt(CODEC, "truncated xerial header"))?;
                continue;
            }
            let (len, tail) = split_be_u32(rest)?;
            let block = tail
                .get(..len)
                .ok_or_else(|| corrupt(CODEC, format!("xerial block of {len} bytes, {} left", tail.len())))?;
            raw_block(block, &mut out, max_out)?;
            rest = &tail[len..];
        }
        Ok(out)
    }

    fn split_be_u32(bytes: &[u8]) -> Result<(usize, &[u8]), CompressionError> {
        let (len, tail) =
            bytes.split_first_chunk::<4>().ok_or_else(|| corrupt(CODEC, "truncated xerial block length"))?;
        let len = usize::try_from(u32::from_be_bytes(*len))
            .map_err(|_| corrupt(CODEC, "xerial block length does not fit in memory"))?;
        Ok((len, tail))
    }

    /// Appends one raw block to `out`, after checking its declared length against
    /// what is left of the budget and against what its size can possibly expand to.
    fn raw_block(block: &[u8], out: &mut Vec<u8>, max_out: usize) -> Result<(), CompressionError> {
        let claimed = snap::raw::decompress_len(block).map_err(|e| corrupt(CODEC, e.to_string()))?;
        if claimed > max_out.saturating_sub(out.len()) {
            return Err(CompressionError::TooLarge { max: max_out });
        }
        if claimed > block.len().saturating_mul(MAX_EXPANSION) {
            return Err(corrupt(CODEC, format!("a {}-byte block claims {claimed} bytes", block.len())));
        }
        let start = out.len();
        out.resize(start + claimed, 0);
        let written = snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(|e| corrupt(CODEC, e.to_string()))?;
        out.truncate(start + written);
        Ok(())
    }

    /// xerial framing: what Kafka's Java consumers read (they also read raw blocks,
    /// but older ones do not).
    pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
        let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + snap::raw::max_compress_len(input.len()));
        out.extend_from_slice(&XERIAL_MAGIC);
        out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
        out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
        let mut encoder = snap::raw::Encoder::new();
        let mut block = vec![0; snap::raw::max_compress_len(XERIAL_BLOCK)];
        for chunk in input.chunks(XERIAL_BLOCK) {
            let len = encoder.compress(chunk, &mut block).map_err(|e| compressor_failed(CODEC, e))?;
            let len32 = u32::try_from(len).map_err(|e| compressor_failed(CODEC, e))?;
            out.extend_from_slice(&len32.to_be_bytes());
            out.extend_from_slice(&block[..len]);
        }
        Ok(out)
    }
}

mod lz4 {
    use super::*;
    use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};

    const CODEC: &str = "lz4";
    const MAGIC: u32 = 0x184D_2204;
    /// FLG bits (LZ4 frame format 1.6.x).
    const FLG_VERSION_MASK: u8 = 0b1100_0000;
    const FLG_VERSION_01: u8 = 0b0100_0000;
    const FLG_BLOCK_INDEPENDENT: u8 = 0b0010_0000;
    const FLG_BLOCK_CHECKSUM: u8 = 0b0001_0000;
    const FLG_CONTENT_SIZE: u8 = 0b0000_1000;
    const FLG_CONTENT_CHECKSUM: u8 = 0b0000_0100;
    const FLG_RESERVED: u8 = 0b0000_0010;
    const FLG_DICT_ID: u8 = 0b0000_0001;
    const BD_RESERVED: u8 = 0b1000_1111;
    const BLOCK_UNCOMPRESSED: u32 = 0x8000_0000;

    /// The frame layout is walked first: it refuses what Kafka's Java reader refuses
    /// (dependent blocks, dictionaries), catches a truncation at a block boundary
    /// (which the streaming decoder would take for a clean end), and refuses a
    /// declared content size above the budget. Then the decoder runs under the budget.
    pub(super) fn decompress(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
        let mut frames = Vec::new();
        let mut rest = input;
        let mut declared: u64 = 0;
        while !rest.is_empty() {
            let (content_size, next) = walk_frame(rest)?;
            declared = declared.saturating_add(content_size.unwrap_or(0));
            if declared > u64::try_from(max_out).unwrap_or(u64::MAX) {
                return Err(CompressionError::TooLarge { max: max_out });
            }
            frames.push(&rest[..rest.len() - next.len()]);
            rest = next;
        }
        // lz4_flex's decoder stops at the end of the first frame, so each frame gets
        // its own, under what is left of the budget.
        let mut out = Vec::new();
        for frame in frames {
            let left = max_out - out.len();
            out.extend(read_bounded(CODEC, FrameDecoder::new(frame), left).map_err(|e| match e {
                CompressionError::TooLarge { .. } => CompressionError::TooLarge { max: max_out },
                other @ (CompressionError::Corrupt { .. } | CompressionError::Unknown { .. }) => other,
            })?);
        }
        Ok(out)
    }

    /// One frame: its declared content size and the bytes after it.
    fn walk_frame(frame: &[u8]) -> Result<(Option<u64>, &[u8]), CompressionError> {
        let mut r = Cursor(frame);
        if r.u32_le()? != MAGIC {
            return Err(corrupt(CODEC, "not an LZ4 frame (bad magic)"));
        }
        let flg = r.u8()?;
        let bd = r.u8()?;
        check_descriptor(flg, bd)?;
        let content_size = if flg & FLG_CONTENT_SIZE != 0 { Some(r.u64_le()?) } else { None };
        r.skip(1)?; // header checksum, verified by the decoder
        let block_max = 1usize << (8 + 2 * usize::from((bd >> 4) & 0x7));
        let block_checksum = if flg & FLG_BLOCK_CHECKSUM != 0 { 4 } else { 0 };
        loop {
            let block = r.u32_le()?;
            if block == 0 {
                break;
            }
            let len = usize::try_from(block & !BLOCK_UNCOMPRESSED).unwrap_or(usize::MAX);
            if len > block_max {
                return Err(corrupt(CODEC, format!("block of {len} bytes above its frame's {block_max}")));
            }
            r.skip(len.saturating_add(block_checksum))?;
        }
        if flg & FLG_CONTENT_CHECKSUM != 0 {
            r.skip(4)?;
        }
        Ok((content_size, r.0))
    }

    fn check_descriptor(flg: u8, bd: u8) -> Result<(), CompressionError> {
        if flg & FLG_VERSION_MASK != FLG_VERSION_01 || flg & FLG_RESERVED != 0 || bd & BD_RESERVED != 0 {
            return Err(corrupt(CODEC, "bad frame descriptor"));
        }
        if flg & FLG_BLOCK_INDEPENDENT == 0 {
            return Err(corrupt(CODEC, "dependent blocks are not in Kafka's LZ4 format"));
        }
        if flg & FLG_DICT_ID != 0 {
            return Err(corrupt(CODEC, "dictionaries are not in Kafka's LZ4 format"));
        }
        if (bd >> 4) & 0x7 < 4 {
            return Err(corrupt(CODEC, "bad block maximum size"));
        }
        Ok(())
    }

    /// A forward-only reader over the frame bytes; running out is a truncation.
    struct Cursor<'a>(&'a [u8]);

    impl<'a> Cursor<'a> {
        fn take<const N: usize>(&mut self) -> Result<[u8; N], CompressionError> {
            let (head, tail) =
                self.0.split_first_chunk::<N>().ok_or_else(|| corrupt(CODEC, "truncated frame"))?;
            self.0 = tail;
            Ok(*head)
        }
        fn u8(&mut self) -> Result<u8, CompressionError> {
            Ok(self.take::<1>()?[0])
        }
        fn u32_le(&mut self) -> Result<u32, CompressionError> {
            Ok(u32::from_le_bytes(self.take()?))
        }
        fn u64_le(&mut self) -> Result<u64, CompressionError> {
            Ok(u64::from_le_bytes(self.take()?))
        }
        fn skip(&mut self, n: usize) -> Result<(), CompressionError> {
            self.0 = self.0.get(n..).ok_or_else(|| corrupt(CODEC, "truncated frame"))?;
            Ok(())
        }
    }

    /// What Kafka's Java producer writes: independent 64 KiB blocks, no checksums but
    /// the header's, no content size.
    pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
        let info = FrameInfo::new().block_size(BlockSize::Max64KB).block_mode(BlockMode::Independent);
        let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
        encoder.write_all(input).map_err(|e| compressor_failed(CODEC, e))?;
        encoder.finish().map_err(|e| compressor_failed(CODEC, e))
    }
}

mod zstd_codec {
    use super::*;

    const CODEC: &str = "zstd";
    /// Kafka's default `compression.zstd.level`.
    const LEVEL: i32 = 3;

    /// A declared content size (single-shot compressors write one) above the budget is
    /// refused up front; the streaming decoder then runs with a capped window.
    pub(super) fn decompress(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
        if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(input)
            && size > u64::try_from(max_out).unwrap_or(u64::MAX)
        {
            return Err(CompressionError::TooLarge { max: max_out });
        }
        let mut decoder =
            zstd::stream::read::Decoder::with_buffer(input).map_err(|e| corrupt(CODEC, e.to_string()))?;
        decoder.window_log_max(window_log_max(max_out)).map_err(|e| corrupt(CODEC, e.to_string()))?;
        read_bounded(CODEC, decoder, max_out)
    }

    /// A back-reference never reaches before the start of the output, so a window
    /// larger than the budget is never needed; but streaming compressors declare their
    /// level's window whatever the input size, so small budgets still accept 8 MiB.
    pub(super) fn window_log_max(max_out: usize) -> u32 {
        let needed = usize::BITS - max_out.saturating_sub(1).leading_zeros();
        needed.clamp(ZSTD_WINDOW_LOG_MIN, ZSTD_WINDOW_LOG_MAX)
    }

    pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
        zstd::bulk::compress(input, LEVEL).map_err(|e| compressor_failed(CODEC, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: usize = 1024 * 1024;
    const CODECS: [Compression; 4] =
        [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    /// Deterministic incompressible bytes (xorshift64), so no rand dependency.
    fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    fn compressible(len: usize) -> Vec<u8> {
        let line = b"key=user-42 action=click page=/checkout latency_ms=17\n";
        line.iter().copied().cycle().take(len).collect()
    }

    fn is_corrupt(r: &Result<Vec<u8>, CompressionError>) -> bool {
        matches!(r, Err(CompressionError::Corrupt { .. }))
    }

    #[test]
    fn bits_names_and_parsing_round_trip() {
        for (i, c) in Compression::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(c.bits()), i);
            assert_eq!(Compression::from_bits(c.bits()), Ok(c));
            assert_eq!(c.name().parse::<Compression>(), Ok(c));
            assert_eq!(c.to_string(), c.name());
        }
        for bits in 5..=u8::MAX {
            assert_eq!(Compression::from_bits(bits), Err(CompressionError::Unknown { bits }));
        }
        assert!("GZIP".parse::<Compression>().is_err());
        assert!("lz4hc".parse::<Compression>().is_err());
    }

    #[test]
    fn every_codec_round_trips() {
        let inputs = [Vec::new(), b"hello, kafka".to_vec(), compressible(MIB), random_bytes(256 * 1024, 7)];
        for c in Compression::ALL {
            for input in &inputs {
                let packed = compress(c, input).unwrap();
                assert!(decompress(c, &packed, input.len()).unwrap() == *input, "{c}");
                if c != Compression::None && input.len() == MIB {
                    assert!(packed.len() < input.len() / 10, "{c} did not compress");
                }
            }
        }
    }

    #[test]
    fn exactly_the_budget_passes_and_one_byte_less_is_too_large() {
        let input = compressible(100_000);
        for c in Compression::ALL {
            let packed = compress(c, &input).unwrap();
            assert_eq!(decompress(c, &packed, input.len()).unwrap().len(), input.len());
            assert_eq!(
                decompress(c, &packed, input.len() - 1).map(|out| out.len()),
                Err(CompressionError::TooLarge { max: input.len() - 1 }),
                "{c}"
            );
        }
    }

    #[test]
    fn empty_and_garbage_inputs_are_corrupt() {
        let garbage = b"this is not compressed at all, it is plain text!".to_vec();
        for c in CODECS {
            assert!(is_corrupt(&decompress(c, &[], MIB)), "{c} empty");
            assert!(is_corrupt(&decompress(c, &garbage, MIB)), "{c} garbage");
        }
    }

    #[test]
    fn truncations_are_corrupt() {
        let input = compressible(200_000);
        for c in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let packed = compress(c, &input).unwrap();
            for cut in (1..packed.len()).step_by(97).chain([packed.len() - 1]) {
                let r = decompress(c, &packed[..cut], MIB);
                assert!(is_corrupt(&r), "{c} cut at {cut}/{}: {r:?}", packed.len());
            }
        }
    }

    /// xerial has no end marker: a cut exactly between blocks looks like a shorter
    /// stream (as in snappy-java). A cut anywhere else is corrupt.
    #[test]
    fn xerial_truncation_inside_a_block_is_corrupt() {
        let packed = compress(Compression::Snappy, &random_bytes(100_000, 3)).unwrap();
        let mut boundaries = vec![16];
        let mut at = 16;
        while at < packed.len() {
            at += 4 + u32::from_be_bytes(packed[at..at + 4].try_into().unwrap()) as usize;
            boundaries.push(at);
        }
        assert!(boundaries.len() > 4, "expected several 32 KiB blocks");
        for cut in (1..packed.len()).step_by(101) {
            let r = decompress(Compression::Snappy, &packed[..cut], MIB);
            if boundaries.contains(&cut) {
                assert!(r.is_ok(), "cut at a block boundary {cut}");
            } else {
                assert!(is_corrupt(&r), "cut at {cut}: {r:?}");
            }
        }
    }

    #[test]
    fn gzip_reads_every_member_and_refuses_trailing_garbage() {
        let mut two = compress(Compression::Gzip, b"first member, ").unwrap();
        two.extend(compress(Compression::Gzip, b"second member").unwrap());
        assert_eq!(decompress(Compression::Gzip, &two, MIB).unwrap(), b"first member, second member");
        two.extend_from_slice(b"junk");
        assert!(is_corrupt(&decompress(Compression::Gzip, &two, MIB)));
    }

    #[test]
    fn snappy_reads_raw_xerial_concatenated_and_framed() {
        let input = compressible(300_000);
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        assert!(decompress(Compression::Snappy, &raw, MIB).unwrap() == input);

        let mut framed = Vec::new();
        snap::write::FrameEncoder::new(&mut framed).write_all(&input).unwrap();
        assert!(decompress(Compression::Snappy, &framed, MIB).unwrap() == input);

        let mut two = compress(Compression::Snappy, b"one ").unwrap();
        two.extend(compress(Compression::Snappy, b"two").unwrap());
        assert_eq!(decompress(Compression::Snappy, &two, MIB).unwrap(), b"one two");
    }

    #[test]
    fn snappy_compresses_in_xerial_framing() {
        let packed = compress(Compression::Snappy, &compressible(70_000)).unwrap();
        assert_eq!(&packed[..16], b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01");
    }

    #[test]
    fn lz4_refuses_what_kafka_refuses() {
        let mut linked = Vec::new();
        let info = lz4_flex::frame::FrameInfo::new().block_mode(lz4_flex::frame::BlockMode::Linked);
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, &mut linked);
        enc.write_all(&compressible(200_000)).unwrap();
        enc.finish().unwrap();
        assert!(is_corrupt(&decompress(Compression::Lz4, &linked, MIB)));

        let mut packed = compress(Compression::Lz4, b"records").unwrap();
        packed.extend_from_slice(b"tail");
        assert!(is_corrupt(&decompress(Compression::Lz4, &packed, MIB)));
    }

    #[test]
    fn lz4_reads_concatenated_frames_with_content_size() {
        let mut two = Vec::new();
        for part in [&b"first "[..], b"second"] {
            let info = lz4_flex::frame::FrameInfo::new().content_size(Some(part.len() as u64));
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(part).unwrap();
            two.extend(enc.finish().unwrap());
        }
        assert_eq!(decompress(Compression::Lz4, &two, 12).unwrap(), b"first second");
        assert_eq!(decompress(Compression::Lz4, &two, 11), Err(CompressionError::TooLarge { max: 11 }));
    }

    #[test]
    fn zstd_window_follows_the_budget_within_bounds() {
        assert_eq!(zstd_codec::window_log_max(0), ZSTD_WINDOW_LOG_MIN);
        assert_eq!(zstd_codec::window_log_max(1024), ZSTD_WINDOW_LOG_MIN);
        assert_eq!(zstd_codec::window_log_max(16 * MIB), 24);
        assert_eq!(zstd_codec::window_log_max(16 * MIB + 1), 25);
        assert_eq!(zstd_codec::window_log_max(usize::MAX), ZSTD_WINDOW_LOG_MAX);
    }

    fn valid_frames() -> Vec<(Compression, Vec<u8>)> {
        let input = compressible(20_000);
        let mut out: Vec<_> = CODECS.iter().map(|&c| (c, compress(c, &input).unwrap())).collect();
        out.push((Compression::Snappy, snap::raw::Encoder::new().compress_vec(&input).unwrap()));
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), bits in 0u8..5) {
            let c = Compression::from_bits(bits).unwrap();
            if let Ok(out) = decompress(c, &bytes, 64 * 1024) {
                prop_assert!(out.len() <= 64 * 1024);
            }
        }

        #[test]
        fn mutated_frames_never_panic(
            which in 0usize..5,
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let (c, mut frame) = valid_frames().swap_remove(which);
            for (at, value) in flips {
                let i = at.index(frame.len());
                frame[i] ^= value;
            }
            if truncate {
                frame.truncate(cut.index(frame.len()));
            }
            if let Ok(out) = decompress(c, &frame, 64 * 1024) {
                prop_assert!(out.len() <= 64 * 1024);
            }
        }
    }
}
