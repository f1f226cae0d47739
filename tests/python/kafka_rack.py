"""confluent-kafka (librdkafka) follower fetching (KIP-392): a consumer that names
its rack (client.rack) reads partition 0 of TOPIC from offset 0 until COUNT
records came. Prints one JSON object: how many it read and whether their offsets
were 0, 1, 2, ... The test checks which broker served them.

Usage: kafka_rack.py BOOTSTRAP TOPIC RACK COUNT
"""

import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

DEADLINE_S = 60.0


def main():
    bootstrap, topic, rack, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "rack-reader",
        "client.rack": rack,
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    offsets, errors = [], []
    deadline = time.monotonic() + DEADLINE_S
    while len(offsets) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            errors.append(msg.error().name())
            continue
        offsets.append(msg.offset())
    consumer.close()
    print(json.dumps({
        "consumed": len(offsets),
        "offsets_dense": offsets == list(range(len(offsets))),
        "errors": errors,
    }))


if __name__ == "__main__":
    main()
