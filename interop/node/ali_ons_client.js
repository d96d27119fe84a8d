'use strict';
// ali-ons 3.12 roles for rokka's interop tests (driven by interop/harness.py).
//
// Protocol: the first stdin line is a JSON object {action, nameSrv, group, ...}; one JSON object per
// stdout line ({event: ...}); the consumer shuts down cleanly when stdin closes.
//
// Actions:
//   produce  {messages:[{topic, body, tags?, keys?:[..], props?:{}}]} -> sent {i, status, msgId,
//            queueId, queueOffset}, done
//   consume  {topic, expression?, broadcast?, instance?, props?:[names]} -> ready, msg {...}, stopped
//
// ali-ons requires an `httpclient` option, used only to look up name servers over HTTP (onsAddr);
// with `nameSrv` given it is never called, so a stub that fails loudly is passed.  No access keys
// are set, so requests are not signed.

const readline = require('readline');
const { Producer, Consumer, Message } = require('ali-ons');

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields || {})) + '\n');
}

const logger = {
  info() {},
  debug() {},
  warn: (...a) => console.error('[ali-ons warn]', ...a),
  error: (...a) => console.error('[ali-ons error]', ...a),
};

const httpclient = {
  async request(url) { throw new Error(`unexpected HTTP name-server lookup: ${url}`); },
};

function common(p) {
  return { httpclient, logger, nameSrv: [].concat(p.nameSrv), instanceName: p.instance || `p${process.pid}` };
}

async function produce(p) {
  const producer = new Producer({ ...common(p), producerGroup: p.group });
  producer.on('error', (err) => console.error('[producer error]', err));
  await producer.ready();
  try {
    for (const [i, m] of p.messages.entries()) {
      const msg = new Message(m.topic, m.tags || null, m.body);
      if (m.keys) msg.keys = m.keys;
      for (const [k, v] of Object.entries(m.props || {})) msg.properties[k] = v;
      const r = await producer.send(msg);
      emit('sent', { i, status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue && r.messageQueue.queueId,
        queueOffset: Number(r.queueOffset) });
    }
  } finally {
    await producer.close();
  }
  emit('done');
}

async function consume(p, stdinClosed) {
  const consumer = new Consumer({ ...common(p), consumerGroup: p.group, isBroadcast: !!p.broadcast,
    rebalanceInterval: 2000 });
  consumer.on('error', (err) => console.error('[consumer error]', err));
  const props = p.props || [];
  consumer.subscribe(p.topic, p.expression || '*', async (msg) => {
    emit('msg', { topic: msg.topic, tags: msg.tags || null, keys: msg.keys || null, body: msg.body.toString(),
      msg_id: msg.msgId, queue_id: msg.queueId, queue_offset: Number(msg.queueOffset),
      reconsume_times: msg.reconsumeTimes,
      props: Object.fromEntries(props.map((k) => [k, msg.properties[k] === undefined ? null : msg.properties[k]])) });
  });
  await consumer.ready();
  emit('ready');
  await stdinClosed;
  await consumer.close();
  emit('stopped');
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin });
  const stdinClosed = new Promise((resolve) => rl.on('close', resolve));
  const first = await rl[Symbol.asyncIterator]().next();
  if (first.done) throw new Error('no parameters on stdin');
  const p = JSON.parse(first.value);
  if (p.action === 'produce') await produce(p);
  else if (p.action === 'consume') await consume(p, stdinClosed);
  else throw new Error(`unknown action ${p.action}`);
  rl.close();
}

const lifetime = setTimeout(() => { emit('error', { error: 'max lifetime reached' }); process.exit(3); }, 300000);
lifetime.unref();
main().then(() => process.exit(0), (err) => {
  emit('error', { error: String(err && err.stack || err) });
  process.exit(1);
});
