"""kafka-python 3 (pure Python) through a leader kill: an idempotent acks=all
producer (kafka-python's default) writes to partition 0 without stopping while the
test kills the partition's leader, then a consumer reads the partition back from
offset 0. Prints one JSON object: how many records were acknowledged, which
delivery errors reached the application (by exception class; each must be a
timeout of a record in flight at the kill), and which acknowledged records the
consumer did not find, found at another offset, or found twice.

Usage: kafka_python_failover.py BOOTSTRAP TOPIC MARKER
The script creates MARKER.half once HALF records are acknowledged and goes on
until MARKER.killed exists (the test creates it after the kill) and AFTER more
records are acknowledged.
"""

import json
import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

HALF = 200
AFTER = 200
DEADLINE_S = 90.0
# Records in flight at once: the send loop waits for the oldest beyond this.
WINDOW = 50


def main():
    bootstrap, topic, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    acked = {}
    errors = {}

    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","),
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        retry_backoff_ms=100,
        delivery_timeout_ms=60000,
        request_timeout_ms=10000,
        metadata_max_age_ms=1000,
    )
    start = time.monotonic()
    sent = 0
    acked_at_kill = None
    pending = []

    def settle(future, value):
        try:
            acked[value] = future.get(timeout=70).offset
        except Exception as e:  # noqa: BLE001 - every failure is counted by its class
            name = type(e).__name__
            errors[name] = errors.get(name, 0) + 1

    while time.monotonic() - start < DEADLINE_S:
        value = f"v{sent}"
        pending.append((producer.send(topic, value=value.encode(), partition=0), value))
        sent += 1
        while len(pending) > WINDOW:
            settle(*pending.pop(0))
        if len(acked) >= HALF and not os.path.exists(marker + ".half"):
            open(marker + ".half", "w").close()
        if acked_at_kill is None and os.path.exists(marker + ".killed"):
            acked_at_kill = len(acked)
        if acked_at_kill is not None and len(acked) >= acked_at_kill + AFTER:
            break
    producer.flush(60)
    for future, value in pending:
        settle(future, value)
    producer.close(10)

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        enable_auto_commit=False,
        metadata_max_age_ms=1000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen = {}
    duplicates = 0
    left = set(acked)
    read_start = time.monotonic()
    # Until every acknowledged record is found (the partition holds others too).
    while left and time.monotonic() - read_start < 60:
        for msgs in consumer.poll(timeout_ms=500).values():
            for msg in msgs:
                value = msg.value.decode()
                if value in seen:
                    duplicates += 1
                seen[value] = msg.offset
                left.discard(value)
    consumer.close()
    missing = [v for v in acked if v not in seen]
    moved = [v for v, o in acked.items() if v in seen and seen[v] != o]
    print(json.dumps({
        "sent": sent,
        "acked": len(acked),
        "acked_at_kill": acked_at_kill,
        "errors": errors,
        "missing": missing[:20],
        "missing_count": len(missing),
        "moved_count": len(moved),
        "duplicates": duplicates,
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
