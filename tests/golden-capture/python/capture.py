"""Sends the records of records.tsv to partition 0 of one topic as a single batch with
confluent-kafka (librdkafka), so the broker's segment file holds exactly
the batch that client encoded. (kafka-python 3.0 is not used: it refuses a header
with a null value, which records.tsv has.)

usage: capture.py librdkafka BOOTSTRAP TOPIC CODEC IDEMPOTENT RECORDS_TSV
"""

import sys
import time


def field(s):
    """'-' is None (null), '.' is empty, anything else is hex."""
    if s == "-":
        return None
    if s == ".":
        return b""
    return bytes.fromhex(s)


def read_records(path):
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


def wait_for_leader(producer, topic):
    """Creates the topic (auto-create on metadata) and waits, bounded, until partition 0
    has a leader. Records queued before that were seen sent one per batch."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = producer.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and 0 in meta.partitions and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise SystemExit(f"{topic}: no leader for partition 0 within 30 s")


def send_librdkafka(bootstrap, topic, codec, idempotent, records):
    import confluent_kafka

    conf = {
        "bootstrap.servers": bootstrap,
        "compression.codec": codec,
        "enable.idempotence": idempotent,
        "acks": "all" if idempotent else "1",
        # One batch: nothing leaves before flush(), and the batch has room for all records.
        "linger.ms": 30000,
        "batch.size": 1 << 20,
    }
    producer = confluent_kafka.Producer(conf)
    wait_for_leader(producer, topic)
    failures = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    for ts, key, value, headers in records:
        producer.produce(topic, value=value, key=key, partition=0, timestamp=ts,
                         headers=headers, on_delivery=on_delivery)
    if producer.flush(60) != 0 or failures:
        raise SystemExit(f"{topic}: delivery failed: {failures}")
    return f"librdkafka {confluent_kafka.libversion()[0]}"


def main():
    client, bootstrap, topic, codec, idempotent, path = sys.argv[1:7]
    send = {"librdkafka": send_librdkafka}[client]
    records = read_records(path)
    version = send(bootstrap, topic, codec, idempotent == "true", records)
    print(f"{topic}: {len(records)} records ({version})")


if __name__ == "__main__":
    main()
