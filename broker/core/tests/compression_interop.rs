//! Compressed payloads written by other implementations (kafka-clients, kafka-python,
//! python-snappy, cramjam, lz4, zstandard) decompress to the text they were made from.
//! How the files were made: tests/compression/README.md.

use es_core::compression::{Compression, CompressionError, decompress};

/// The plaintext every vector holds (make_vectors.py and KafkaVectors.java build the same).
fn plaintext() -> Vec<u8> {
    (0..1500usize)
        .flat_map(|i| format!("record {i:05} key-{:02} value {}\n", i % 97, "x".repeat(i % 53)).into_bytes())
        .collect()
}

fn vector(name: &str) -> Vec<u8> {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/compression")
    .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const VECTORS: [(Compression, &str); 13] = [
    (Compression::Gzip, "gzip.kafka-clients-3.9.1.bin"),
    (Compression::Gzip, "gzip.kafka-python.bin"),
    (Compression::Gzip, "gzip.two-members.bin"),
    (Compression::Snappy, "snappy.kafka-clients-3.9.1.bin"),
    (Compression::Snappy, "snappy.xerial.kafka-python.bin"),
    (Compression::Snappy, "snappy.raw.python-snappy.bin"),
    (Compression::Snappy, "snappy.framed.cramjam.bin"),
    (Compression::Lz4, "lz4.kafka-clients-3.9.1.bin"),
    (Compression::Lz4, "lz4.kafka-python.bin"),
    (Compression::Lz4, "lz4.size-checksums-256k.bin"),
    (Compression::Zstd, "zstd.kafka-clients-3.9.1.bin"),
    (Compression::Zstd, "zstd.kafka-python.bin"),
    (Compression::Zstd, "zstd.stream-two-frames.bin"),
];

#[test]
fn other_implementations_decompress_to_the_plaintext() {
    let text = plaintext();
    assert_eq!(text.len(), 79_204);
    for (c, name) in VECTORS {
        let packed = vector(name);
        assert!(packed.len() < text.len() / 3, "{name} is not compressed");
        assert!(decompress(c, &packed, text.len()).unwrap() == text, "{name}");
        assert_eq!(
            decompress(c, &packed, text.len() - 1).map(|out| out.len()),
            Err(CompressionError::TooLarge { max: text.len() - 1 }),
            "{name}"
        );
    }
}

/// Kafka's Java reader refuses LZ4 frames with dependent blocks, and so does es.
#[test]
fn lz4_linked_blocks_from_python_are_refused() {
    let r = decompress(Compression::Lz4, &vector("lz4.linked-blocks.bin"), 1 << 20);
    assert!(matches!(r, Err(CompressionError::Corrupt { codec: "lz4", .. })), "{r:?}");
}
