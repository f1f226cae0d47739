"""One round trip with confluent-kafka (librdkafka), shared by the TLS and SASL
scripts: produce values to partition 0 of a topic, then read them back from
offset 0 with a consumer of the same configuration."""

from confluent_kafka import Consumer, Producer, TopicPartition

TIMEOUT = 30.0


def roundtrip(conf, topic, values, group):
    """Produces `values`, reads as many back; answers (the open consumer, what it read)."""
    p = Producer(dict(conf))
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
    left = p.flush(TIMEOUT)
    if left:
        raise SystemExit(f"{left} records not delivered")
    c = Consumer(dict(conf, **{"group.id": group, "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    read = []
    while len(read) < len(values):
        m = c.poll(TIMEOUT)
        if m is None:
            raise SystemExit(f"no record within {TIMEOUT} s after {read}")
        if m.error():
            raise SystemExit(str(m.error()))
        read.append(m.value().decode())
    return c, read
