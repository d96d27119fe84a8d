package rokka.interop.rmq;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java client's roles in interop/matrix (protocol of interop/matrix/_role.py): the first stdin line
 * is the parameters; a producer then answers {"op":"produce","seq":n,"jobs":[...]} lines with
 * {"event":"produced","seq":n,"results":[{"acked":k,"error":...}]} until EOF; a consumer prints one
 * {"event":"msg",...} per message and {"event":"done"} once every job's count is in (plus linger_s).
 */
final class Matrix {
    private Matrix() {
    }

    static void emit(String event, Map<String, Object> fields) {
        Map<String, Object> o = new LinkedHashMap<>();
        o.put("event", event);
        o.putAll(fields);
        Main.emit(o);
    }

    static int run(String role) {
        try {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String first = in.readLine();
            if (first == null) {
                emit("error", Map.of("error", "no parameters on stdin"));
                return 2;
            }
            JSONObject p = JSON.parseObject(first);
            if (role.equals("producer")) {
                producer(p, in);
            } else {
                consumer(p);
            }
            emit("done", Map.of("at", System.currentTimeMillis() / 1000.0));
            return 0;
        } catch (Throwable e) {
            emit("error", Map.of("error", Scenarios.describe(e)));
            return 1;
        }
    }

    static Message toMessage(String topic, JSONObject spec) {
        Message m = new Message(topic, spec.getString("value").getBytes(StandardCharsets.UTF_8));
        if (spec.getString("tag") != null) {
            m.setTags(spec.getString("tag"));
        }
        if (spec.getString("key") != null) {
            m.setKeys(spec.getString("key"));
        }
        for (Object h : spec.getJSONArray("headers")) {
            JSONArray kv = (JSONArray) h;
            m.putUserProperty(kv.getString(0), kv.getString(1));
        }
        int delay = spec.getIntValue("delay");
        if (delay > 0) {
            m.setDelayTimeLevel(delay);
        }
        return m;
    }

    static void producer(JSONObject p, BufferedReader in) throws Exception {
        TransactionMQProducer prod = new TransactionMQProducer(p.getString("group"));
        prod.setNamesrvAddr(p.getString("namesrv"));
        prod.setInstanceName("matrix-" + ProcessHandle.current().pid());
        prod.setSendMsgTimeout(10000);
        prod.setRetryTimesWhenSendFailed(4);
        prod.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "commit".equals(arg) ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.ROLLBACK_MESSAGE;     // every decision was given at once
            }
        });
        prod.start();
        emit("started", Map.of());
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JSONObject cmd = JSON.parseObject(line);
            List<Object> results = new ArrayList<>();
            for (Object j : cmd.getJSONArray("jobs")) {
                results.add(produceJob(prod, (JSONObject) j));
            }
            emit("produced", Map.of("seq", cmd.get("seq"), "results", results));
        }
        prod.shutdown();
    }

    static Map<String, Object> produceJob(TransactionMQProducer prod, JSONObject job) {
        String txn = job.getString("txn");
        int acked = 0;
        String err = null;
        for (Object s : job.getJSONArray("messages")) {
            try {
                Message m = toMessage(job.getString("topic"), (JSONObject) s);
                SendResult r = txn != null && !txn.isEmpty() ? prod.sendMessageInTransaction(m, txn) : prod.send(m);
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    acked++;
                } else if (err == null) {
                    err = r.getSendStatus().name();
                }
            } catch (Exception e) {
                if (err == null) {
                    err = Scenarios.describe(e);
                }
            }
        }
        Map<String, Object> o = new LinkedHashMap<>();
        o.put("acked", acked);
        o.put("error", err);
        return o;
    }

    static void consumer(JSONObject p) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(p.getString("group"));
        c.setNamesrvAddr(p.getString("namesrv"));
        c.setInstanceName("matrix-" + ProcessHandle.current().pid());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        Map<String, Integer> want = new LinkedHashMap<>();
        Map<String, AtomicInteger> have = new ConcurrentHashMap<>();
        List<String> props = new ArrayList<>();
        for (Object o : p.getJSONArray("jobs")) {
            JSONObject job = (JSONObject) o;
            String read = job.getString("read");
            want.merge(read, job.getIntValue("expect"), Integer::sum);
            have.put(read, new AtomicInteger());
            String expr = job.getString("expression");
            c.subscribe(read, expr == null || expr.isEmpty() ? "*" : expr);
            JSONArray ps = job.getJSONArray("props");
            if (ps != null) {
                for (Object k : ps) {
                    if (!props.contains(k.toString())) {
                        props.add(k.toString());
                    }
                }
            }
        }
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("read", m.getTopic());
                e.put("value", new String(m.getBody(), StandardCharsets.UTF_8));
                e.put("key", m.getKeys());
                e.put("tags", m.getTags());
                Map<String, Object> pv = new LinkedHashMap<>();
                for (String k : props) {
                    pv.put(k, m.getProperty(k));
                }
                e.put("props", pv);
                e.put("born_ts", m.getBornTimestamp());
                e.put("store_ts", m.getStoreTimestamp());
                e.put("queue_id", m.getQueueId());
                e.put("offset", m.getQueueOffset());
                emit("msg", e);
                have.computeIfAbsent(m.getTopic(), t -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long deadline = System.currentTimeMillis() + (long) (p.getDoubleValue("timeout_s") * 1000);
        long lingerMs = (long) (p.getDoubleValue("linger_s") * 1000);
        long fullAt = -1;
        while (System.currentTimeMillis() < deadline) {
            boolean full = true;
            for (Map.Entry<String, Integer> w : want.entrySet()) {
                full &= have.get(w.getKey()).get() >= w.getValue();
            }
            if (full) {
                fullAt = fullAt < 0 ? System.currentTimeMillis() : fullAt;
                if (System.currentTimeMillis() - fullAt >= lingerMs) {
                    break;
                }
            }
            Thread.sleep(50);
        }
        c.shutdown();       // persists the consumed offsets on the broker
    }
}
