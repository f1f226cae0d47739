"""confluent-kafka (librdkafka) over TLS: produce records to an existing topic with
security.protocol=ssl and the test CA, then consume them back. Prints one JSON
object: the values it read, in order.

Usage: kafka_tls.py BOOTSTRAP CA_FILE TOPIC COUNT
"""

import json
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 30.0


def main(bootstrap, ca, topic, count):
    ssl = {"bootstrap.servers": bootstrap, "security.protocol": "ssl", "ssl.ca.location": ca}
    p = Producer(dict(ssl))
    for i in range(count):
        p.produce(topic, value=f"tls-{i}".encode(), partition=0)
    left = p.flush(TIMEOUT)
    if left:
        raise SystemExit(f"{left} records not delivered")
    c = Consumer(dict(ssl, **{"group.id": "tls-check", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    values = []
    while len(values) < count:
        m = c.poll(TIMEOUT)
        if m is None:
            raise SystemExit(f"no record within {TIMEOUT} s after {values}")
        if m.error():
            raise SystemExit(str(m.error()))
        values.append(m.value().decode())
    c.close()
    print(json.dumps({"values": values}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
