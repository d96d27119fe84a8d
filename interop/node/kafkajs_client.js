'use strict';
// kafkajs 2.2.x roles for rokka's interop tests (driven by interop/harness.py).
//
// Protocol: the first stdin line is a JSON object {action, brokers, sasl?, ssl?, ...} (sasl: kafkajs's own
// {mechanism, username, password}; ssl: {ca, cert?, key?} PEM file paths -> TLS); the script prints one JSON
// object per stdout line ({event: ...}); long-running roles (member) shut down cleanly when stdin
// closes.  kafkajs's own log goes to stderr so stdout stays machine-readable.
//
// Actions:
//   create      {topic, partitions}                  -> created {partitions}
//   produce     {topic, messages:[{key?, value, headers?, partition?, timestamp?}], compression?,
//                idempotent?}                         -> sent {results:[{partition, baseOffset}]}
//   member      {topic, groupId, fromBeginning?, name}-> ready, batch {member, values, partition,
//                committed}, stopped (commits offsets itself after every batch)
//   by_time     {topic, timestamp}                   -> offsets {offsets:[{partition, offset}]}
//   watermarks  {topic}                              -> offsets {offsets:[{partition, low, high}]}
//   delete_groups {groupIds}                         -> deleted {results:[{groupId, errorCode}]} or
//                                                       refused {groups:[{groupId, errorCode, type}]}
//   committed   {groupId, topic}                     -> offsets {offsets:[{partition, offset, metadata}]}
//   alter_configs {topic, configs:[{name, value}]}   -> altered {resources} or refused {type, message}
//   describe_configs {topic}                         -> configs {configs:[{name, value, isDefault, readOnly}]}
//   create_acls {acls:[kafkajs ACL entries]}         -> created_acls {count} or refused {type, message}
//   describe_acls {filter: kafkajs ACL filter}       -> acls {resources} or refused {type, message}

const fs = require('fs');
const readline = require('readline');
const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require('kafkajs');

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields || {})) + '\n');
}

const toStderr = () => ({ namespace, label, log }) => {
  process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n');
};

function client(p) {
  return new Kafka({
    clientId: p.name || 'rokka-interop',
    brokers: [].concat(p.brokers).flatMap((b) => String(b).split(",")),   // "H:P,H:P" as bootstrap.servers
    logLevel: logLevel.INFO,
    logCreator: toStderr,
    connectionTimeout: 10000,
    requestTimeout: 20000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 3000 },
    sasl: p.sasl || undefined,
    ssl: p.ssl ? tlsOptions(p.ssl) : undefined,
  });
}

function tlsOptions(t) {
  const out = { ca: [fs.readFileSync(t.ca, 'utf-8')], rejectUnauthorized: true };
  if (t.cert) out.cert = fs.readFileSync(t.cert, 'utf-8');
  if (t.key) out.key = fs.readFileSync(t.key, 'utf-8');
  return out;
}

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };

function toHeaders(h) {
  if (!h) return undefined;
  const out = {};
  for (const [k, v] of h) {
    out[k] = out[k] === undefined ? v : [].concat(out[k], v);
  }
  return out;
}

function fromHeaders(h) {
  const out = [];
  for (const [k, v] of Object.entries(h || {})) {
    for (const one of [].concat(v)) out.push([k, Buffer.isBuffer(one) ? one.toString() : String(one)]);
  }
  return out;
}

async function create(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: p.topic, numPartitions: p.partitions }] });
    const md = await admin.fetchTopicMetadata({ topics: [p.topic] });
    emit('created', { partitions: md.topics[0].partitions.map((x) => x.partitionId).sort() });
  } finally {
    await admin.disconnect();
  }
}

async function produce(p) {
  const producer = client(p).producer({ idempotent: !!p.idempotent, maxInFlightRequests: p.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false });
  await producer.connect();
  try {
    const results = [];
    const chunk = p.chunk || p.messages.length;
    for (let i = 0; i < p.messages.length; i += chunk) {
      const messages = p.messages.slice(i, i + chunk).map((m) => ({
        key: m.key === undefined || m.key === null ? null : m.key,
        value: m.value,
        headers: toHeaders(m.headers),
        partition: m.partition,
        timestamp: m.timestamp === undefined ? undefined : String(m.timestamp),
      }));
      const r = await producer.send({ topic: p.topic, messages, acks: -1,
        compression: CODECS[p.compression || 'none'] });
      results.push(...r.map((x) => ({ partition: x.partition, baseOffset: Number(x.baseOffset) })));
    }
    emit('sent', { results });
  } finally {
    await producer.disconnect();
  }
}

async function member(p, stdinClosed) {
  const consumer = client(p).consumer({ groupId: p.groupId, sessionTimeout: 10000, heartbeatInterval: 1000,
    rebalanceTimeout: 20000, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: p.topic, fromBeginning: p.fromBeginning !== false });
  consumer.on(consumer.events.GROUP_JOIN, (e) => emit('joined', { member: p.name,
    assignment: e.payload.memberAssignment }));
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: true,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      const last = batch.messages[batch.messages.length - 1];
      let committed = true;
      try {
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition,
          offset: String(Number(last.offset) + 1) }]);
      } catch (err) {
        committed = false;
      }
      emit('batch', { member: p.name, partition: batch.partition, committed,
        values: batch.messages.map((m) => m.value.toString()),
        keys: batch.messages.map((m) => (m.key === null ? null : m.key.toString())),
        headers: batch.messages.map((m) => fromHeaders(m.headers)),
        offsets: batch.messages.map((m) => Number(m.offset)),
        timestamps: batch.messages.map((m) => Number(m.timestamp)) });
    },
  });
  emit('ready', { member: p.name });
  await stdinClosed;
  await consumer.disconnect();
  emit('stopped', { member: p.name });
}

async function byTime(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsetsByTimestamp(p.topic, p.timestamp);
    emit('offsets', { offsets: offsets.map((o) => ({ partition: o.partition, offset: Number(o.offset) })) });
  } finally {
    await admin.disconnect();
  }
}

async function watermarks(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(p.topic);
    emit('offsets', { offsets: offsets.map((o) => ({ partition: o.partition, low: Number(o.low),
      high: Number(o.high) })) });
  } finally {
    await admin.disconnect();
  }
}

async function deleteGroups(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const results = await admin.deleteGroups(p.groupIds);
    emit('deleted', { results: results.map((r) => ({ groupId: r.groupId, errorCode: r.errorCode })) });
  } catch (e) {
    if (!e.groups) throw e;
    emit('refused', { groups: e.groups.map((g) => ({ groupId: g.groupId, errorCode: g.errorCode,
      type: g.error && g.error.type })) });
  } finally {
    await admin.disconnect();
  }
}

async function committed(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const topics = await admin.fetchOffsets({ groupId: p.groupId, topics: [p.topic] });
    emit('offsets', { offsets: topics[0].partitions.map((o) => ({ partition: o.partition,
      offset: Number(o.offset), metadata: o.metadata })) });
  } finally {
    await admin.disconnect();
  }
}

async function alterConfigs(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const res = await admin.alterConfigs({ validateOnly: false, resources: [
      { type: ConfigResourceTypes.TOPIC, name: p.topic, configEntries: p.configs }] });
    emit('altered', { resources: res.resources.map((r) => ({ name: r.resourceName, errorCode: r.errorCode })) });
  } catch (e) {
    emit('refused', { type: e.type || null, message: String(e.message) });
  } finally {
    await admin.disconnect();
  }
}

async function describeConfigs(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const res = await admin.describeConfigs({ includeSynonyms: false, resources: [
      { type: ConfigResourceTypes.TOPIC, name: p.topic }] });
    emit('configs', { configs: res.resources[0].configEntries.map((c) => ({ name: c.configName,
      value: c.configValue, isDefault: c.isDefault, readOnly: c.readOnly })) });
  } finally {
    await admin.disconnect();
  }
}

async function createAcls(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    await admin.createAcls({ acl: p.acls });
    emit('created_acls', { count: p.acls.length });
  } catch (e) {
    emit('refused', { type: e.type || null, message: String(e.message) });
  } finally {
    await admin.disconnect();
  }
}

async function describeAcls(p) {
  const admin = client(p).admin();
  await admin.connect();
  try {
    const res = await admin.describeAcls(p.filter);
    emit('acls', { resources: res.resources.map((r) => ({ resourceType: r.resourceType,
      resourceName: r.resourceName, patternType: r.resourcePatternType, acls: r.acls })) });
  } catch (e) {
    emit('refused', { type: e.type || null, message: String(e.message) });
  } finally {
    await admin.disconnect();
  }
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin });
  const stdinClosed = new Promise((resolve) => rl.on('close', resolve));
  const lines = rl[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('no parameters on stdin');
  const p = JSON.parse(first.value);
  const actions = { create, produce, member: (q) => member(q, stdinClosed), by_time: byTime, watermarks,
    delete_groups: deleteGroups, committed, alter_configs: alterConfigs, describe_configs: describeConfigs,
    create_acls: createAcls, describe_acls: describeAcls };
  if (!actions[p.action]) throw new Error(`unknown action ${p.action}`);
  await actions[p.action](p);
  rl.close();
}

const lifetime = setTimeout(() => { emit('error', { error: 'max lifetime reached' }); process.exit(3); }, 300000);
lifetime.unref();
main().then(() => process.exit(0), (err) => {
  emit('error', { error: String(err && err.stack || err) });
  process.exit(1);
});
