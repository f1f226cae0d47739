"""Takes the batches the capture clients sent out of Kafka's segment files and writes
them as golden vectors: one NAME.bin per batch (the bytes as Kafka stored them: the
client's batch with baseOffset and partitionLeaderEpoch stamped by the broker, which sit
outside the CRC) and manifest.json describing what each must decode to.

The expected records come from records.tsv (what the clients were asked to send), not
from decoding the bytes, so the Rust test checks es's decoder against the clients.

usage: extract.py KAFKA_DATA_DIR RECORDS_TSV SENT_LOG OUT_DIR
"""

import base64
import json
import os
import re
import struct
import sys

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC = re.compile(r"^(java|librdkafka|franz)-(none|gzip|snappy|lz4|zstd)(-idem)?-0$")
SENT = re.compile(r"^(\S+): (\d+) records \((\S+) (\S+)\)$")
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header, big-endian


def field(s):
    if s == "-":
        return None
    if s == ".":
        return b""
    return bytes.fromhex(s)


def b64(b):
    return None if b is None else base64.b64encode(b).decode("ascii")


def read_spec(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            ts, key, value, headers = line.split("\t")
            pairs = []
            if headers != ".":
                for pair in headers.split(","):
                    name, val = pair.split(":", 1)
                    pairs.append((field(name).decode("utf-8"), field(val)))
            records.append((int(ts), field(key), field(value), pairs))
    return records


def batches(topic_dir):
    """Every batch of a partition directory, in offset order."""
    for name in sorted(n for n in os.listdir(topic_dir) if n.endswith(".log")):
        data = open(os.path.join(topic_dir, name), "rb").read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            yield data[pos:pos + 12 + length]
            pos += 12 + length


class Reader:
    """Varint reader for a plain records section (a cross-check, uncompressed only)."""

    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def varint(self):
        shift = result = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    def nullable(self):
        n = self.varint()
        if n < 0:
            return None
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out


def decode_plain(section, base_ts, count):
    r, out = Reader(section), []
    for _ in range(count):
        end = r.varint() + r.pos
        r.pos += 1  # record attributes
        ts = base_ts + r.varint()
        r.varint()  # offset delta
        key, value = r.nullable(), r.nullable()
        headers = [(r.nullable().decode("utf-8"), r.nullable()) for _ in range(r.varint())]
        assert r.pos == end, "record length does not match its fields"
        out.append((ts, key, value, headers))
    assert r.pos == len(section), "trailing bytes after the records"
    return out


def vector(name, client, version, codec, idem, batch, spec):
    (base_offset, _len, epoch, magic, _crc, attributes, last_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = HEADER.unpack_from(batch)
    assert magic == 2, f"{name}: magic {magic}"
    assert attributes == CODECS[codec], f"{name}: attributes {attributes:#x}, codec {codec}"
    assert count == len(spec) and last_delta == len(spec) - 1, f"{name}: {count} records"
    assert base_ts == spec[0][0] and max_ts == max(r[0] for r in spec), f"{name}: timestamps"
    if idem:
        assert producer_id >= 0 and producer_epoch == 0 and base_sequence == 0, f"{name}: producer"
    else:
        # franz-go writes baseSequence 0, not -1, when it is not idempotent.
        assert (producer_id, producer_epoch) == (-1, -1) and base_sequence in (-1, 0), f"{name}: producer"
    if codec == "none":
        assert decode_plain(batch[61:], base_ts, count) == spec, f"{name}: records differ"
    return {
        "name": name,
        "file": f"{name}.bin",
        "client": client,
        "client_version": version,
        "codec": codec,
        "attributes": attributes,
        "stored_base_offset": base_offset,
        "stored_leader_epoch": epoch,
        "base_timestamp": base_ts,
        "max_timestamp": max_ts,
        "last_offset_delta": last_delta,
        "producer": {"producer_id": producer_id, "producer_epoch": producer_epoch,
                     "base_sequence": base_sequence},
        "record_count": count,
        "records": [
            {"offset_delta": i, "timestamp": ts, "key": b64(k), "value": b64(v),
             "headers": [[hk, b64(hv)] for hk, hv in hs]}
            for i, (ts, k, v, hs) in enumerate(spec)
        ],
    }


def main():
    data_dir, spec_path, sent_path, out = sys.argv[1:5]
    spec = read_spec(spec_path)
    sent = {}
    for line in open(sent_path, encoding="utf-8"):
        m = SENT.match(line.strip())
        if m:
            sent[m.group(1)] = (m.group(3), m.group(4))
    os.makedirs(out, exist_ok=True)
    vectors = []
    for topic_dir in sorted(os.listdir(data_dir)):
        m = TOPIC.match(topic_dir)
        if not m:
            continue
        name = topic_dir[:-2]
        found = list(batches(os.path.join(data_dir, topic_dir)))
        assert len(found) == 1, f"{name}: {len(found)} batches, expected one"
        client, version = sent[name]
        vectors.append(vector(name, client, version, m.group(2), bool(m.group(3)), found[0], spec))
        with open(os.path.join(out, f"{name}.bin"), "wb") as f:
            f.write(found[0])
    manifest = {
        "about": "v2 batches sent by real Kafka clients to Apache Kafka and read back from its "
                 "segment files; see tests/golden-capture/README.md",
        "vectors": vectors,
    }
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(vectors)} vectors in {out}")


if __name__ == "__main__":
    main()
