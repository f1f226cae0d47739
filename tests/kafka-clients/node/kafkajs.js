// KafkaJS through the produce / group-consume scenario of
// tests/tests/kafka_clients_more.rs: an idempotent producer (acks=all) writes
// records kFROM.. (value vFROM.., header seq=FROM..) and reports where each landed; a
// consumer group member reads COUNT records, commits them and leaves, so the next
// member of the group resumes after them, and reports each record it read and the
// group's committed offsets as the admin client then fetches them. Prints one JSON
// line; KafkaJS's own log goes to stderr. Every wait is bounded.
//
//   node kafkajs.js produce BOOTSTRAP TOPIC FROM COUNT
//   node kafkajs.js consume BOOTSTRAP TOPIC GROUP COUNT
'use strict';
// Its v2 default partitioner is the Java client's (murmur2); the notice about it is noise here.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const { Kafka, logLevel } = require('kafkajs');

const LIMIT_MS = 90000;

function client(bootstrap) {
  return new Kafka({
    clientId: 'es-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ level, log }) => process.stderr.write(`${level} ${JSON.stringify(log)}\n`),
  });
}

async function produce(bootstrap, topic, from, count) {
  const producer = client(bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const records = [];
  for (let i = from; i < from + count; i++) {
    const message = { key: `k${i}`, value: `v${i}`, headers: { seq: `${i}` } };
    const [r] = await producer.send({ topic, acks: -1, messages: [message] });
    records.push({ key: message.key, partition: r.partition, offset: Number(r.baseOffset) });
  }
  await producer.disconnect();
  return { produced: count, idempotent: true, records };
}

function text(buffer) {
  return buffer === null || buffer === undefined ? null : buffer.toString();
}

// KafkaJS decodes headers into an object; a repeated key becomes an array.
function headerPairs(headers) {
  const pairs = [];
  for (const [key, value] of Object.entries(headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) pairs.push([key, text(v)]);
  }
  return pairs;
}

// The group's committed offset of each of the topic's partitions (-1: none), as
// OffsetFetch through the admin client answers once the member has left.
async function committed(bootstrap, topic, group) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    return t.partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) }));
  } finally {
    await admin.disconnect();
  }
}

async function consume(bootstrap, topic, group, count) {
  const consumer = client(bootstrap).consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  const records = [];
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (values.length >= count) return;
      values.push(message.value.toString());
      // The batch's timestamp type: KafkaJS keeps it in the record's batchContext.
      const type = message.batchContext && message.batchContext.timestampType;
      records.push({
        partition,
        offset: Number(message.offset),
        key: text(message.key),
        value: text(message.value),
        headers: headerPairs(message.headers),
        timestamp: Number(message.timestamp),
        timestamp_type: type === 1 ? 'LogAppendTime' : type === 0 ? 'CreateTime' : `unknown ${type}`,
      });
      // The offset committed is the next one to read, as every Kafka client commits.
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
      if (values.length >= count) finish();
    },
  });
  await done;
  await consumer.disconnect();
  return { values, records, committed: await committed(bootstrap, topic, group) };
}

async function main() {
  const [scenario, bootstrap, topic, a, b] = process.argv.slice(2);
  const timer = setTimeout(() => {
    process.stderr.write(`${scenario}: no result within ${LIMIT_MS} ms\n`);
    process.exit(1);
  }, LIMIT_MS);
  let out;
  if (scenario === 'produce') out = await produce(bootstrap, topic, Number(a), Number(b));
  else if (scenario === 'consume') out = await consume(bootstrap, topic, a, Number(b));
  else throw new Error(`unknown scenario ${scenario}`);
  clearTimeout(timer);
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((e) => {
  process.stderr.write(`scenario failed: ${e.stack || e}\n`);
  process.exit(1);
});
