"""Writes the compression interop vectors in this folder (see README.md).

Run once in a throwaway venv with kafka-python, python-snappy, cramjam, lz4 and
zstandard installed; the output is checked in and the tests never run this.
"""
import gzip
import io
import os

import cramjam
import lz4.frame
import snappy
import zstandard
from kafka import codec

HERE = os.path.dirname(os.path.abspath(__file__))


def plaintext():
    # The same text is rebuilt by tests/compression_interop.rs.
    return b"".join(
        f"record {i:05} key-{i % 97:02} value {'x' * (i % 53)}\n".encode()
        for i in range(1500)
    )


def zstd_stream(p, frames):
    # A streaming compressor does not know the size: no content size in the header.
    out = io.BytesIO()
    step = len(p) // frames + 1
    for start in range(0, len(p), step):
        c = zstandard.ZstdCompressor(level=19, write_content_size=False)
        part = io.BytesIO()
        with c.stream_writer(part, closefd=False) as w:
            for i in range(start, min(start + step, len(p)), 4096):
                w.write(p[i : min(i + 4096, start + step, len(p))])
        out.write(part.getvalue())
    return out.getvalue()


def main():
    p = plaintext()
    half = len(p) // 2
    vectors = {
        "gzip.kafka-python.bin": codec.gzip_encode(p),
        "gzip.two-members.bin": gzip.compress(p[:half]) + gzip.compress(p[half:]),
        "snappy.xerial.kafka-python.bin": codec.snappy_encode(p),
        "snappy.raw.python-snappy.bin": snappy.compress(p),
        "snappy.framed.cramjam.bin": bytes(cramjam.snappy.compress(p)),
        "lz4.kafka-python.bin": codec.lz4_encode(p),
        "lz4.size-checksums-256k.bin": lz4.frame.compress(
            p,
            block_linked=False,
            store_size=True,
            content_checksum=True,
            block_checksum=True,
            block_size=lz4.frame.BLOCKSIZE_MAX256KB,
        ),
        "lz4.linked-blocks.bin": lz4.frame.compress(p, block_linked=True),
        "zstd.kafka-python.bin": codec.zstd_encode(p),
        "zstd.stream-two-frames.bin": zstd_stream(p, 2),
    }
    # Check the vectors against the reference decoders before writing them.
    assert codec.snappy_decode(vectors["snappy.xerial.kafka-python.bin"]) == p
    assert codec.lz4_decode(vectors["lz4.kafka-python.bin"]) == p
    assert codec.zstd_decode(vectors["zstd.stream-two-frames.bin"]) == p
    assert gzip.decompress(vectors["gzip.two-members.bin"]) == p
    for name, data in vectors.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")
    print(f"plaintext: {len(p)} bytes")


if __name__ == "__main__":
    main()
