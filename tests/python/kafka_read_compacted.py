"""Reads partition 0 of a topic from its start to its end offset with two Kafka
clients, librdkafka (confluent-kafka) and kafka-python, as a consumer of a
compacted topic does: a compacted log may hold batches with no records left, which
a client must step over. Prints one JSON object: per client, the records it read as
[offset, key, value] (UTF-8), and whether it reached the end offset in time.

Usage: kafka_read_compacted.py BOOTSTRAP TOPIC
"""

import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition as CTopicPartition
from kafka import KafkaConsumer, TopicPartition

LIMIT = 60.0


def text(b):
    return None if b is None else b.decode("utf-8")


def with_librdkafka(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-compacted", "enable.auto.commit": False})
    _, end = c.get_watermark_offsets(CTopicPartition(topic, 0), timeout=30)
    c.assign([CTopicPartition(topic, 0, 0)])
    got, position = [], 0
    deadline = time.time() + LIMIT
    while position < end and time.time() < deadline:
        for m in c.consume(num_messages=500, timeout=1.0):
            if m.error():
                raise SystemExit(f"librdkafka: {m.error()}")
            got.append([m.offset(), text(m.key()), text(m.value())])
        position = c.position([CTopicPartition(topic, 0)])[0].offset
    c.close()
    return {"records": got, "end": end, "reached": position >= end}


def with_kafka_python(bootstrap, topic):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    end = c.end_offsets([tp])[tp]
    got = []
    deadline = time.time() + LIMIT
    while c.position(tp) < end and time.time() < deadline:
        for msgs in c.poll(timeout_ms=1000).values():
            got.extend([m.offset, text(m.key), text(m.value)] for m in msgs)
    reached = c.position(tp) >= end
    c.close()
    return {"records": got, "end": end, "reached": reached}


def main(bootstrap, topic):
    out = {"librdkafka": with_librdkafka(bootstrap, topic), "kafka-python": with_kafka_python(bootstrap, topic)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
