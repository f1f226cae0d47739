"""kafka-python 3 (pure Python) through a leader kill: an idempotent acks=all
producer (kafka-python's default) writes to partition 0 without stopping while the
test kills the partition's leader, and a consumer reads the partition from offset
0 the whole time. Prints one JSON object: how many records were acknowledged,
which delivery errors reached the application (by exception class; each must be a
timeout of a record in flight at the kill), which errors the consumer's poll
raised, and which acknowledged records the consumer did not find, found at
another offset, or found twice.

Usage: kafka_python_failover.py BOOTSTRAP TOPIC MARKER; MARKER: the kill protocol
of kill_phases.py.
"""

import json
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kill_phases import KillPhases

DEADLINE_S = 90.0
# Records in flight at once: the send loop waits for the oldest beyond this.
WINDOW = 50


def consume(bootstrap, topic, state, stop):
    """Reads partition 0 from offset 0 until `stop` is set: every record's offset
    by value in state["seen"], values read twice in state["duplicates"], poll's
    exceptions by class in state["errors"]."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        enable_auto_commit=False,
        metadata_max_age_ms=1000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    while not stop.is_set():
        try:
            batches = consumer.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001 - every failure is counted by its class
            name = type(e).__name__
            state["errors"][name] = state["errors"].get(name, 0) + 1
            continue
        for msgs in batches.values():
            for msg in msgs:
                value = msg.value.decode()
                if value in state["seen"]:
                    state["duplicates"] += 1
                state["seen"][value] = msg.offset
    consumer.close()


def main():
    bootstrap, topic, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    acked = {}
    errors = {}
    state = {"seen": {}, "duplicates": 0, "errors": {}}
    stop = threading.Event()
    reader = threading.Thread(target=consume, args=(bootstrap, topic, state, stop), daemon=True)
    reader.start()

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
    phases = KillPhases(marker)
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
        if phases.done(len(acked)):
            break
    producer.flush(60)
    for future, value in pending:
        settle(future, value)
    producer.close(10)

    read_start = time.monotonic()
    # Until the reader found every acknowledged record (the partition holds others too).
    while any(v not in state["seen"] for v in acked) and time.monotonic() - read_start < 60:
        time.sleep(0.1)
    stop.set()
    reader.join(10)
    seen, duplicates = state["seen"], state["duplicates"]
    missing = [v for v in acked if v not in seen]
    moved = [v for v, o in acked.items() if v in seen and seen[v] != o]
    print(json.dumps({
        "sent": sent,
        "acked": len(acked),
        "acked_at_kill": phases.acked_at_kill,
        "errors": errors,
        "missing": missing[:20],
        "missing_count": len(missing),
        "moved_count": len(moved),
        "duplicates": duplicates,
        "consumer_errors": state["errors"],
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
