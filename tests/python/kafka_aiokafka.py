"""aiokafka through the produce / group-consume scenario of
tests/tests/kafka_clients_more.rs: an idempotent producer (acks=all) writes records
kFROM..; a consumer group member reads COUNT records, commits them and leaves, so the
next member of the group resumes after them. Prints one JSON line. Every wait is
bounded.

Usage: kafka_aiokafka.py produce BOOTSTRAP TOPIC FROM COUNT
       kafka_aiokafka.py consume BOOTSTRAP TOPIC GROUP COUNT
"""

import asyncio
import json
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

LIMIT_S = 90


async def produce(bootstrap, topic, start, count):
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await p.start()
    try:
        offsets = []
        for i in range(start, start + count):
            meta = await p.send_and_wait(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
            offsets.append(meta.offset)
    finally:
        await p.stop()
    return {"produced": count, "idempotent": True, "offsets": offsets}


async def consume(bootstrap, topic, group, count):
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    values = []
    try:
        while len(values) < count:
            batches = await c.getmany(timeout_ms=500, max_records=count - len(values))
            for records in batches.values():
                values.extend(r.value.decode() for r in records)
        # Commits the positions: the offset after every record returned.
        await c.commit()
    finally:
        await c.stop()
    return {"values": values}


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
