"""confluent-kafka (librdkafka) through a leader kill: an idempotent acks=all
producer writes to partition 0 without stopping while the test kills the
partition's leader, then a consumer reads the partition back from offset 0.
Prints one JSON object: how many records were acknowledged, which delivery errors
the client reported (each must be retriable, or a timeout of a record in flight at
the kill), and which acknowledged records the consumer did not find.

Usage: kafka_failover.py BOOTSTRAP TOPIC MARKER
MARKER: the kill protocol of kill_phases.py.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kill_phases import KillPhases

DEADLINE_S = 90.0


def main():
    bootstrap, topic, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    acked = {}
    errors = {}
    fatal = []

    def delivered(err, msg):
        if err is None:
            acked[msg.value().decode()] = msg.offset()
            return
        errors[err.name()] = errors.get(err.name(), 0) + 1
        if err.fatal():
            fatal.append(err.name())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    start = time.monotonic()
    sent = 0
    phases = KillPhases(marker)
    while time.monotonic() - start < DEADLINE_S and not fatal:
        producer.produce(topic, value=f"v{sent}".encode(), partition=0, on_delivery=delivered)
        sent += 1
        producer.poll(0.005)
        if phases.done(len(acked)):
            break
    left = producer.flush(60)

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "failover-check",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = {}
    duplicates = 0
    pending = set(acked)
    read_start = time.monotonic()
    # Until every acknowledged record is found (the partition holds others too).
    while pending and time.monotonic() - read_start < 60:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        value = msg.value().decode()
        if value in seen:
            duplicates += 1
        seen[value] = msg.offset()
        pending.discard(value)
    consumer.close()
    missing = [v for v in acked if v not in seen]
    moved = [v for v, o in acked.items() if v in seen and seen[v] != o]
    print(json.dumps({
        "sent": sent,
        "acked": len(acked),
        "acked_at_kill": phases.acked_at_kill,
        "unflushed": left,
        "errors": errors,
        "fatal": fatal,
        "missing": missing[:20],
        "missing_count": len(missing),
        "moved_count": len(moved),
        "duplicates": duplicates,
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
