"""aiokafka through the produce / group-consume scenario of
tests/tests/kafka_clients_more.rs: an idempotent producer (acks=all) writes records
kFROM.. (value vFROM.., header seq=FROM..) and reports where each landed; a consumer
group member reads COUNT records, commits them and leaves, so the next member of the
group resumes after them, and reports each record it read and the group's committed
offsets as the consumer fetches them after the commit. Prints one JSON line. Every
wait is bounded.

Usage: kafka_aiokafka.py produce BOOTSTRAP TOPIC FROM COUNT
       kafka_aiokafka.py consume BOOTSTRAP TOPIC GROUP COUNT
"""

import asyncio
import json
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

LIMIT_S = 90


async def produce(bootstrap, topic, start, count):
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await p.start()
    try:
        records = []
        for i in range(start, start + count):
            meta = await p.send_and_wait(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                                         headers=[("seq", str(i).encode())])
            records.append({"key": f"k{i}", "partition": meta.partition, "offset": meta.offset})
    finally:
        await p.stop()
    return {"produced": count, "idempotent": True, "records": records}


def text(b):
    return None if b is None else b.decode()


TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def observed(r):
    return {"partition": r.partition, "offset": r.offset, "key": text(r.key), "value": text(r.value),
            "headers": [[k, text(v)] for k, v in r.headers], "timestamp": r.timestamp,
            "timestamp_type": TIMESTAMP_TYPES.get(r.timestamp_type, f"unknown {r.timestamp_type}")}


async def consume(bootstrap, topic, group, count):
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    values, read, committed = [], [], []
    try:
        while len(values) < count:
            batches = await c.getmany(timeout_ms=500, max_records=count - len(values))
            for records in batches.values():
                values.extend(r.value.decode() for r in records)
                read.extend(observed(r) for r in records)
        # Commits the positions: the offset after every record returned.
        await c.commit()
        # What OffsetFetch now answers for each of the topic's partitions (-1: none).
        for p in sorted(c.partitions_for_topic(topic)):
            offset = await c.committed(TopicPartition(topic, p))
            committed.append({"partition": p, "offset": -1 if offset is None else offset})
    finally:
        await c.stop()
    return {"values": values, "records": read, "committed": committed}


async def main(scenario, bootstrap, topic, a, b):
    if scenario == "produce":
        work = produce(bootstrap, topic, int(a), int(b))
    elif scenario == "consume":
        work = consume(bootstrap, topic, a, int(b))
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    print(json.dumps(await asyncio.wait_for(work, LIMIT_S)))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
