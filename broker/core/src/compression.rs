//! Record-section codecs (TEMPORARY: none and gzip only; replaced by branch compress).
//!
//! The API is the one branch `compress` implements for all five Kafka codecs; batch.rs
//! calls only what is here, so swapping this file in needs no other change.

use std::io::{Read, Write};

/// Compression of a batch's records section: attribute bits 0-2 of a v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Why records could not be (de)compressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    #[error("decompressed records exceed {max} bytes")]
    TooLarge { max: usize },
    #[error("bad {codec:?} data: {reason}")]
    Corrupt { codec: Compression, reason: String },
    #[error("unknown compression code {bits}")]
    Unknown { bits: u8 },
}

impl Compression {
    /// The codec of attribute bits 0-2 (`bits` is already masked by the caller or not:
    /// any value outside 0..=4 is unknown).
    pub fn from_bits(bits: u8) -> Result<Self, CompressionError> {
        match bits {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            bits => Err(CompressionError::Unknown { bits }),
        }
    }

    /// Kafka's code for this codec.
    pub fn bits(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Decompresses `input`, refusing (without allocating it) output past `max_out` bytes.
pub fn decompress(c: Compression, input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
    match c {
        Compression::None => {
            if input.len() > max_out {
                return Err(CompressionError::TooLarge { max: max_out });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => gunzip(input, max_out),
        Compression::Snappy | Compression::Lz4 | Compression::Zstd => Err(not_here(c)),
    }
}

/// Compresses `input` with `c`.
pub fn compress(c: Compression, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    match c {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => gzip(input),
        Compression::Snappy | Compression::Lz4 | Compression::Zstd => Err(not_here(c)),
    }
}

fn not_here(codec: Compression) -> CompressionError {
    CompressionError::Corrupt { codec, reason: "codec not built into this temporary module".into() }
}

fn gunzip(input: &[u8], max_out: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let mut decoder = flate2::read::GzDecoder::new(input).take(max_out as u64 + 1);
    decoder
        .read_to_end(&mut out)
        .map_err(|e| CompressionError::Corrupt { codec: Compression::Gzip, reason: e.to_string() })?;
    if out.len() > max_out {
        return Err(CompressionError::TooLarge { max: max_out });
    }
    Ok(out)
}

fn gzip(input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    let corrupt =
        |e: std::io::Error| CompressionError::Corrupt { codec: Compression::Gzip, reason: e.to_string() };
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(input).map_err(corrupt)?;
    encoder.finish().map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        for bits in 0..=4 {
            assert_eq!(Compression::from_bits(bits).unwrap().bits(), bits);
        }
        assert_eq!(Compression::from_bits(5), Err(CompressionError::Unknown { bits: 5 }));
    }

    #[test]
    fn gzip_round_trips_under_a_budget() {
        let data = vec![7u8; 10_000];
        let packed = compress(Compression::Gzip, &data).unwrap();
        assert_eq!(decompress(Compression::Gzip, &packed, 10_000).unwrap(), data);
        assert_eq!(
            decompress(Compression::Gzip, &packed, 9_999),
            Err(CompressionError::TooLarge { max: 9_999 })
        );
        assert!(matches!(decompress(Compression::Gzip, b"nope", 100), Err(CompressionError::Corrupt { .. })));
    }
}
