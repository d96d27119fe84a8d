'use strict';
// kafkajs 2.2.x roles of rokka's interop matrix (protocol: interop/matrix/_role.py).
//
// argv: kafkajs_role.js <producer|consumer>; first stdin line = params.
//   producer {brokers, txnId}: long-lived; each further line {op:'produce', seq, jobs:[{topic, txn?, messages}]}
//            -> {event:'produced', seq, results:[{acked, error}]}; txn jobs use producer.transaction().
//   consumer {brokers, group, jobs, timeout_s, linger_s, commit}: one group subscribed to every job's
//            `read` topic from the beginning; commits after each batch; msg events, then done.
// kafkajs is loaded from interop/node/node_modules (installed by interop/install.sh).

const path = require('path');
const readline = require('readline');
const { Kafka, logLevel } = require(path.join(__dirname, '..', 'node', 'node_modules', 'kafkajs'));

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields || {})) + '\n');
}

function client(p) {
  return new Kafka({
    clientId: 'rokka-matrix', brokers: [].concat(p.brokers), connectionTimeout: 10000, requestTimeout: 20000,
    retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 2000 }, logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, label, log }) => {
      process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n');
    },
  });
}

function toMessages(specs) {
  return specs.map((s) => {
    const headers = {};
    const add = (k, v) => { headers[k] = headers[k] === undefined ? v : [].concat(headers[k], v); };
    for (const [k, v] of s.headers) add(k, v);
    if (s.tag) add('rocketmq.TAGS', s.tag);
    if (s.delay) add('rocketmq.DELAY', String(s.delay));
    return { key: s.key === null || s.key === undefined ? null : s.key, value: s.value, headers };
  });
}

async function producer(p, lines) {
  const kafka = client(p);
  const plain = kafka.producer({ allowAutoTopicCreation: false });
  await plain.connect();
  let txp = null;
  emit('started');
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    const results = [];
    for (const job of cmd.jobs) {
      const messages = toMessages(job.messages);
      try {
        if (job.txn) {
          if (!txp) {
            txp = kafka.producer({ transactionalId: p.txnId, idempotent: true, maxInFlightRequests: 1,
              allowAutoTopicCreation: false });
            await txp.connect();
          }
          const tx = await txp.transaction();
          await tx.send({ topic: job.topic, messages, acks: -1 });
          if (job.txn === 'commit') await tx.commit(); else await tx.abort();
        } else {
          await plain.send({ topic: job.topic, messages, acks: -1 });
        }
        results.push({ acked: messages.length, error: null });
      } catch (err) {
        results.push({ acked: 0, error: String(err && err.message || err) });
      }
    }
    emit('produced', { seq: cmd.seq, results });
  }
  await plain.disconnect();
  if (txp) await txp.disconnect();
}

function headerList(h) {
  const out = [];
  for (const [k, v] of Object.entries(h || {})) {
    for (const one of [].concat(v)) out.push([k, one === null || one === undefined ? '' : one.toString()]);
  }
  return out;
}

async function consumer(p) {
  const c = client(p).consumer({ groupId: p.group, sessionTimeout: 10000, heartbeatInterval: 1000,
    rebalanceTimeout: 20000, maxWaitTimeInMs: 300, readUncommitted: false });
  await c.connect();
  const reads = [...new Set(p.jobs.map((j) => j.read))];
  await c.subscribe({ topics: reads, fromBeginning: true });
  const want = {}; const have = {};
  for (const j of p.jobs) { want[j.read] = j.expect; have[j.read] = 0; }
  await c.run({
    autoCommit: false,
    eachBatchAutoResolve: true,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      for (const m of batch.messages) {
        have[batch.topic] += 1;
        emit('msg', { read: batch.topic, value: m.value.toString(), key: m.key === null ? null : m.key.toString(),
          headers: headerList(m.headers), partition: batch.partition, offset: Number(m.offset) });
      }
      if (p.commit) {
        const last = batch.messages[batch.messages.length - 1];
        await c.commitOffsets([{ topic: batch.topic, partition: batch.partition,
          offset: String(Number(last.offset) + 1) }]);
      }
    },
  });
  const deadline = Date.now() + p.timeout_s * 1000;
  let fullAt = null;
  for (;;) {
    const now = Date.now();
    if (now > deadline) break;
    if (Object.keys(want).every((r) => have[r] >= want[r])) {
      if (fullAt === null) fullAt = now;
      if (now - fullAt >= p.linger_s * 1000) break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await c.disconnect();
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin });
  const lines = rl[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('no parameters on stdin');
  const p = JSON.parse(first.value);
  const role = process.argv[2];
  if (role === 'producer') await producer(p, lines);
  else if (role === 'consumer') await consumer(p);
  else throw new Error(`unknown role ${role}`);
  emit('done');
}

const lifetime = setTimeout(() => { emit('error', { error: 'max lifetime reached' }); process.exit(3); }, 300000);
lifetime.unref();
main().then(() => process.exit(0), (err) => {
  emit('error', { error: String(err && err.stack || err) });
  process.exit(1);
});
