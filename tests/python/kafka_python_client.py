"""kafka-python 3 against a Kafka listener: admin create/delete, an idempotent
producer (its default) with no codec and gzip, byte-identical consume by assignment,
offsets by timestamp. Prints one JSON object per line: what the client observed.

Usage: kafka_python_client.py BOOTSTRAP
"""

import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

RECORDS = [
    (b"\x00\xff binary", b"\xc3\x28 invalid utf-8", [("h", b"1"), ("h", b"2")]),
    (b"null-value", None, []),
    (b"empty-value", b"", [("e", b"")]),
]


def main(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    for codec in [None, "gzip"]:
        topic = "kp-" + (codec or "none")
        admin.create_topics([NewTopic(topic, 1, 1)])
        before = int(time.time() * 1000) - 1
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=codec)
        offsets = [p.send(topic, key=k, value=v, headers=h, partition=0).get(timeout=30).offset
                   for k, v, h in RECORDS]
        p.close()
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.time() + 30
        while len(got) < len(RECORDS) and time.time() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                got.extend(msgs)
        same = [(m.key, m.value, list(m.headers)) for m in got] == [(k, v, h) for k, v, h in RECORDS]
        by_time = c.offsets_for_times({tp: before})[tp].offset
        end = c.end_offsets([tp])[tp]
        c.close()
        emit = {"codec": codec or "none", "offsets": offsets, "same": same, "by_time": by_time, "end": end,
                "detail": [[repr(m.key), repr(m.value), repr(m.headers)] for m in got]}
        print(json.dumps(emit, sort_keys=True), flush=True)
    admin.delete_topics(["kp-none"])
    print(json.dumps({"deleted": "kp-none" not in admin.list_topics()}), flush=True)
    admin.close()


if __name__ == "__main__":
    main(sys.argv[1])
