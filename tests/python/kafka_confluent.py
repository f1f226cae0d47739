"""confluent-kafka (librdkafka) against a Kafka listener: admin, byte-identical
round trips with every codec and an idempotent producer, offsets by timestamp,
oversized records. Prints one JSON object per line: what the client observed, so
the same script can run against es and against Apache Kafka (the differential).

Usage: kafka_confluent.py BOOTSTRAP SCENARIO [TOPIC_PREFIX]
Scenarios: admin, roundtrip, oversized, refused TOPIC
"""

import json
import sys
import time
import warnings

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

TIMEOUT = 30.0


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def wait_all(futures):
    out = {}
    for key, f in futures.items():
        try:
            f.result(timeout=TIMEOUT)
            out[str(key)] = None
        except KafkaException as e:
            out[str(key)] = e.args[0].name()
    return out


def admin(bootstrap, prefix):
    a = AdminClient({"bootstrap.servers": bootstrap})
    t = prefix + "admin"
    created = wait_all(a.create_topics([NewTopic(t, 3, 1, config={"retention.ms": "3600000"})]))
    again = wait_all(a.create_topics([NewTopic(t, 3, 1)]))
    md = a.list_topics(timeout=TIMEOUT)
    partitions = len(md.topics[t].partitions)
    grown = wait_all(a.create_partitions([NewPartitions(t, 5)]))
    time.sleep(0)  # metadata is answered from the registry: no propagation delay
    partitions_after = len(a.list_topics(topic=t, timeout=TIMEOUT).topics[t].partitions)
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    described = a.describe_configs([res])[res].result(timeout=TIMEOUT)
    retention = described["retention.ms"].value
    cleanup = described["cleanup.policy"].value
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    res2 = ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    altered = wait_all(a.incremental_alter_configs([res2]))
    retention_after = a.describe_configs([res])[res].result(timeout=TIMEOUT)["retention.ms"].value
    # AlterConfigs (not incremental) replaces the whole config: what is not given
    # returns to its default.
    whole = ConfigResource(ConfigResource.Type.TOPIC, t, set_config={"cleanup.policy": "compact"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated, still sent by users
        replaced = list(wait_all(a.alter_configs([whole])).values())
    after_replace = a.describe_configs([res])[res].result(timeout=TIMEOUT)
    replaced_to = [after_replace["cleanup.policy"].value, after_replace["retention.ms"].is_default]
    from confluent_kafka import TopicCollection
    described_topic = a.describe_topics(TopicCollection([t]), include_authorized_operations=True)[t].result(timeout=TIMEOUT)
    topic_ops = sorted(op.name for op in (described_topic.authorized_operations or []))
    unknown = wait_all(a.create_topics([NewTopic(prefix + "bad", 1, 1, config={"no.such.setting": "1"})]))
    deleted = wait_all(a.delete_topics([t]))
    gone = t not in a.list_topics(timeout=TIMEOUT).topics
    missing = wait_all(a.delete_topics([prefix + "never"]))
    cluster = a.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT)
    cluster_ops = sorted(op.name for op in (cluster.authorized_operations or []))
    emit(scenario="admin", nodes=len(cluster.nodes), controller=cluster.controller.id, created=created, again=again, partitions=partitions, grown=grown,
         partitions_after=partitions_after, retention=retention, cleanup=cleanup, altered=altered,
         retention_after=retention_after, replaced=replaced, replaced_to=replaced_to, topic_ops=topic_ops,
         cluster_ops=cluster_ops, unknown=unknown, deleted=deleted, gone=gone, missing=missing)


# Binary keys, invalid UTF-8, null vs empty value, duplicate header keys.
RECORDS = [
    (b"\x00\xff\xfe key", b"\xc3\x28 invalid utf-8 \xff", [("h", b"1"), ("h", b"2"), ("empty", b"")]),
    (b"k2", None, [("only", None)]),
    (b"k3", b"", []),
    (None, b"no key", [("h", b"\x00\x01")]),
]


def produce_all(bootstrap, topic, codec):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "compression.type": codec, "linger.ms": 5})
    reports = []

    def on_delivery(err, msg):
        reports.append((err.name() if err else None, msg.partition(), msg.offset()))

    for key, value, headers in RECORDS:
        p.produce(topic, key=key, value=value, headers=headers, partition=0, on_delivery=on_delivery)
    left = p.flush(TIMEOUT)
    return reports, left


def consume_all(bootstrap, topic, count):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic,
                  "enable.auto.commit": False, "enable.auto.offset.store": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + TIMEOUT
    while len(got) < count and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        got.append(m)
    c.close()
    return got


def roundtrip(bootstrap, prefix):
    a = AdminClient({"bootstrap.servers": bootstrap})
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        topic = prefix + "rt-" + codec
        wait_all(a.create_topics([NewTopic(topic, 1, 1)]))
        before = int(time.time() * 1000) - 1
        reports, left = produce_all(bootstrap, topic, codec)
        got = consume_all(bootstrap, topic, len(RECORDS))
        same = [(m.key(), m.value(), m.headers() or []) for m in got] == [
            (k, v, h) for k, v, h in RECORDS]
        detail = [[repr(m.key()), repr(m.value()), repr(m.headers())] for m in got]
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-ts-" + topic})
        by_time = c.offsets_for_times([TopicPartition(topic, 0, before)], timeout=TIMEOUT)[0].offset
        future = c.offsets_for_times([TopicPartition(topic, 0, before + 3600_000)], timeout=TIMEOUT)[0].offset
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        c.close()
        emit(scenario="roundtrip", codec=codec, reports=reports, left=left, same=same,
             offsets=[m.offset() for m in got], detail=detail, by_time=by_time, future=future,
             low=low, high=high, ts_types=sorted({m.timestamp()[0] for m in got}))


def oversized(bootstrap, prefix):
    a = AdminClient({"bootstrap.servers": bootstrap})
    topic = prefix + "small"
    wait_all(a.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})]))
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 20000})
    errors = []
    p.produce(topic, value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err.name() if err else None))
    started = time.time()
    p.flush(TIMEOUT)
    emit(scenario="oversized", errors=errors, seconds=round(time.time() - started, 1))


def refused(bootstrap, topic):
    # The topic is bound (by the test) to a validator that refuses records without a key.
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "message.timeout.ms": 20000})
    errors = []
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(
        [err.name(), err.str()] if err else None))
    started = time.time()
    p.flush(TIMEOUT)
    emit(scenario="refused", errors=errors, seconds=round(time.time() - started, 1))


if __name__ == "__main__":
    bootstrap, scenario = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else "t-"
    {"admin": admin, "roundtrip": roundtrip, "oversized": oversized, "refused": refused}[scenario](bootstrap, arg)
