"""confluent-kafka (librdkafka) consumer group member across a coordinator fault:
one run consumes COUNT records of partition 0 as a member of GROUP, committing
each one synchronously (a commit answered is committed on a majority), then
closes. The tests fault the coordinator (the leader of __es_offsets) before or
during a run: a second run must start exactly at the first run's last commit,
and a run that spans the fault keeps its membership (the new coordinator loads
the group's record): one assignment, no revocation, the same member id.

Usage: kafka_group_failover.py BOOTSTRAP TOPIC GROUP COUNT
Prints one JSON object: the offsets seen in order, the last committed offset,
how often partitions were assigned, revoked and lost, the member ids at the
first assignment and at the end, and the errors the client reported (all must
be retriable).
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

DEADLINE_S = 150.0


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    errors = {}
    calls = {"assigned": 0, "revoked": 0, "lost": 0}
    members = {}

    def on_error(err):
        errors[err.name()] = errors.get(err.name(), 0) + 1

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
        "error_cb": on_error,
    })

    def on_assign(c, partitions):
        calls["assigned"] += 1
        members.setdefault("first", c.memberid())

    def on_revoke(c, partitions):
        calls["revoked"] += 1

    def on_lost(c, partitions):
        calls["lost"] += 1

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    seen = []
    committed = None
    start = time.monotonic()
    while len(seen) < count and time.monotonic() - start < DEADLINE_S:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            on_error(msg.error())
            continue
        seen.append(msg.offset())
        next_offset = msg.offset() + 1
        # A commit may meet a coordinator that moved or is loading: retry it.
        while time.monotonic() - start < DEADLINE_S:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, next_offset)], asynchronous=False)
                committed = next_offset
                break
            except KafkaException as e:
                on_error(e.args[0])
                time.sleep(0.2)
    members["last"] = consumer.memberid()
    # Counted before close: closing revokes the assignment.
    result = {"seen": seen, "committed": committed, "errors": errors, "members": members, **calls}
    consumer.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KafkaException as e:
        err = e.args[0]
        print(json.dumps({"fatal": err.name() if isinstance(err, KafkaError) else str(err)}), flush=True)
        sys.exit(1)
