package rokka.interop.rmq;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The scenarios: each sends through the real client API, reads back through the real consumer
 * API, and returns what it observed (pytest asserts).  Topics and groups carry the run's prefix.
 */
final class Scenarios {
    private Scenarios() {
    }

    static Map<String, Object> run(String name, Ctx c) {
        Map<String, Object> out = new LinkedHashMap<>();
        long t0 = System.currentTimeMillis();
        try {
            switch (name) {
                case "send": send(c, out); break;
                case "filter": filter(c, out); break;
                case "delay": delay(c, out); break;
                case "transaction": transaction(c, out); break;
                case "clustering": clustering(c, out); break;
                case "orderly": orderly(c, out); break;
                case "broadcast": broadcast(c, out); break;
                case "litepull": litepull(c, out); break;
                case "request": request(c, out); break;
                case "acl": acl(c, out); break;
                case "trace": trace(c, out); break;
                case "seed": seed(c, out); break;
                default: out.put("error", "unknown scenario " + name);
            }
        } catch (Throwable e) {
            out.put("error", describe(e));
        }
        out.put("elapsed_ms", System.currentTimeMillis() - t0);
        return out;
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null && sb.length() < 2000; t = t.getCause()) {
            sb.append(sb.length() == 0 ? "" : " <- caused by ").append(t);
        }
        return sb.toString();
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    static Message msg(String topic, String tags, String keys, String body) {
        return new Message(topic, tags, keys, body.getBytes(StandardCharsets.UTF_8));
    }

    static Map<String, Object> obs(MessageExt m) {
        Map<String, Object> o = new LinkedHashMap<>();
        o.put("body", body(m));
        o.put("tags", m.getTags());
        o.put("keys", m.getKeys());
        o.put("queue", m.getQueueId());
        o.put("offset", m.getQueueOffset());
        o.put("msg_id", m.getMsgId());
        o.put("born_ts", m.getBornTimestamp());
        o.put("store_ts", m.getStoreTimestamp());
        o.put("reconsume", m.getReconsumeTimes());
        Map<String, String> props = new LinkedHashMap<>(m.getProperties());
        o.put("props", props);
        return o;
    }

    static Map<String, Object> sent(SendResult r) {
        Map<String, Object> o = new LinkedHashMap<>();
        o.put("status", r.getSendStatus().name());
        o.put("queue", r.getMessageQueue().getQueueId());
        o.put("offset", r.getQueueOffset());
        o.put("msg_id", r.getMsgId());
        o.put("offset_msg_id", r.getOffsetMsgId());
        return o;
    }

    /** Polls an assigned/subscribed lite pull consumer until {@code want} messages (or the deadline). */
    static List<MessageExt> pollUntil(DefaultLitePullConsumer lc, int want, long timeoutMs) {
        List<MessageExt> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            got.addAll(lc.poll(500));
        }
        return got;
    }

    /** Every message of {@code topic} from offset 0 of each queue, through an assigning lite pull consumer. */
    static List<MessageExt> readAll(Ctx c, String topic, String group, int want) throws Exception {
        DefaultLitePullConsumer lc = c.lite(group);
        lc.setAutoCommit(false);
        lc.start();
        List<MessageQueue> mqs = new ArrayList<>(lc.fetchMessageQueues(topic));
        // A fresh group and CONSUME_FROM_FIRST_OFFSET: assign alone reads from 0. No seek(mq, 0) after it:
        // seek interrupts the pull task assign just started, and the client can then deliver that task's
        // in-flight batch as well (duplicates), or, on 5.x, fail the requests pending on the channel.
        lc.assign(mqs);
        List<MessageExt> got = pollUntil(lc, want, 30000);
        lc.shutdown();
        return got;
    }

    static List<Map<String, Object>> obsList(List<MessageExt> ms) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (MessageExt m : ms) {
            out.add(obs(m));
        }
        return out;
    }

    // ------------------------------------------------------------ producer send modes

    static void send(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Send");
        c.createTopic(topic, 4);
        DefaultMQProducer p = c.producer("send");
        List<Map<String, Object>> sync = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Message m = msg(topic, "sync", "k-sync-" + i, "sync-" + i);
            m.putUserProperty("idx", Integer.toString(i));
            sync.add(sent(p.send(m)));
        }
        out.put("sync", sync);

        List<Object> async = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch done = new CountDownLatch(5);
        for (int i = 0; i < 5; i++) {
            p.send(msg(topic, "async", "k-async-" + i, "async-" + i), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    async.add(sent(r));
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    async.add(Map.of("error", describe(e)));
                    done.countDown();
                }
            });
        }
        out.put("async_all_called_back", done.await(30, TimeUnit.SECONDS));
        out.put("async", async);

        for (int i = 0; i < 5; i++) {
            p.sendOneway(msg(topic, "oneway", "k-oneway-" + i, "oneway-" + i));
        }

        List<Map<String, Object>> orderly = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            int order = i % 3;
            SendResult r = p.send(msg(topic, "orderly", "order-" + order, "orderly-" + order + "-" + (i / 3)),
                (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), order);
            orderly.add(sent(r));
        }
        out.put("orderly", orderly);

        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            batch.add(msg(topic, "batch", "k-batch-" + i, "batch-" + i));
        }
        SendResult br = p.send(batch);
        Map<String, Object> b = sent(br);
        out.put("batch", b);
        out.put("batch_ids", br.getMsgId() == null ? 0 : br.getMsgId().split(",").length);

        out.put("received", obsList(readAll(c, topic, "CG_send_read", 37)));
    }

    // ------------------------------------------------------------ tags and SQL92

    static DefaultMQPushConsumer collector(Ctx c, String group, String topic, MessageSelector sel,
                                           List<Map<String, Object>> sink) throws Exception {
        DefaultMQPushConsumer pc = c.push(group);
        pc.subscribe(topic, sel);
        pc.setConsumeThreadMin(1);
        pc.setConsumeThreadMax(1);
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                sink.add(obs(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        return pc;
    }

    static boolean hasBody(List<Map<String, Object>> sink, String b) {
        for (Map<String, Object> o : sink) {
            if (b.equals(o.get("body"))) {
                return true;
            }
        }
        return false;
    }

    static void filter(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Filter");
        c.createTopic(topic, 1);
        DefaultMQProducer p = c.producer("filter");
        String[] tags = {"TagA", "TagB", "TagC"};
        for (int i = 0; i < 12; i++) {
            Message m = msg(topic, tags[i % 3], "f-" + i, "f-" + i);
            m.putUserProperty("a", Integer.toString(i));
            m.putUserProperty("color", i % 2 == 0 ? "red" : "blue");
            p.send(m);
        }
        Message end = msg(topic, "TagA", "end", "end");
        end.putUserProperty("a", "100");
        end.putUserProperty("color", "red");
        p.send(end);
        List<Map<String, Object>> byTag = new CopyOnWriteArrayList<>();
        List<Map<String, Object>> bySql = new CopyOnWriteArrayList<>();
        List<Map<String, Object>> bySqlTags = new CopyOnWriteArrayList<>();
        collector(c, "CG_filter_tag", topic, MessageSelector.byTag("TagA || TagB"), byTag);
        collector(c, "CG_filter_sql", topic, MessageSelector.bySql("a >= 5 AND color = 'red'"), bySql);
        collector(c, "CG_filter_sqltags", topic,
            MessageSelector.bySql("TAGS IN ('TagB', 'TagA') AND a BETWEEN 3 AND 100"), bySqlTags);
        Ctx.waitUntil(() -> hasBody(byTag, "end") && hasBody(bySql, "end") && hasBody(bySqlTags, "end"),
            40000, "the end marker through every filter");
        out.put("tag", byTag);
        out.put("sql", bySql);
        out.put("sql_tags", bySqlTags);
    }

    // ------------------------------------------------------------ delay levels

    static void delay(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Delay");
        c.createTopic(topic, 1);
        DefaultMQProducer p = c.producer("delay");
        List<Map<String, Object>> got = new CopyOnWriteArrayList<>();
        Map<String, Long> arrived = new ConcurrentHashMap<>();
        DefaultMQPushConsumer pc = c.push("CG_delay");
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                Map<String, Object> o = obs(m);
                o.put("arrived_ms", now);
                got.add(o);
                arrived.put(body(m), now);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        Map<String, Long> sentAt = new LinkedHashMap<>();
        for (int level : new int[] {0, 1, 2}) {
            Message m = msg(topic, "d", "delay-" + level, "delay-" + level);
            if (level > 0) {
                m.setDelayTimeLevel(level);
            }
            sentAt.put("delay-" + level, System.currentTimeMillis());
            p.send(m);
        }
        Ctx.waitUntil(() -> arrived.size() >= 3, 40000, "the three delayed messages");
        Map<String, Object> waited = new LinkedHashMap<>();
        for (Map.Entry<String, Long> e : sentAt.entrySet()) {
            waited.put(e.getKey(), arrived.get(e.getKey()) - e.getValue());
        }
        out.put("waited_ms", waited);
        out.put("received", got);
    }

    // ------------------------------------------------------------ transactions

    static void transaction(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Txn");
        c.createTopic(topic, 1);
        List<String> checks = new CopyOnWriteArrayList<>();
        List<String> executed = new CopyOnWriteArrayList<>();
        TransactionMQProducer tp = c.txnProducer("txn");
        tp.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String b = new String(m.getBody(), StandardCharsets.UTF_8);
                executed.add(b);
                if (b.startsWith("commit")) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                if (b.startsWith("rollback")) {
                    return LocalTransactionState.ROLLBACK_MESSAGE;
                }
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String b = body(m);
                checks.add(b);
                return b.equals("unknown-then-commit") ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        tp.start();
        List<Object> results = new ArrayList<>();
        for (String b : new String[] {"commit", "rollback", "unknown-then-commit", "unknown-then-rollback"}) {
            TransactionSendResult r = tp.sendMessageInTransaction(msg(topic, "t", b, b), null);
            Map<String, Object> o = sent(r);
            o.put("body", b);
            o.put("local_state", r.getLocalTransactionState().name());
            results.add(o);
        }
        out.put("sent", results);
        Ctx.waitUntil(() -> checks.contains("unknown-then-commit") && checks.contains("unknown-then-rollback"),
            40000, "the broker's check-back of both unknown transactions");
        // END_TRANSACTION of a check answer is one-way on the same connection: a sync send after it
        // is stored behind it, so "end" read back means every commit before it is visible.
        tp.send(msg(topic, "t", "end", "end"));
        List<Map<String, Object>> got = new CopyOnWriteArrayList<>();
        collector(c, "CG_txn", topic, MessageSelector.byTag("*"), got);
        Ctx.waitUntil(() -> hasBody(got, "end"), 30000, "the end marker");
        out.put("checks", checks);
        out.put("executed", executed);
        out.put("received", got);
    }

    // ------------------------------------------------------------ push consumers

    static void clustering(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Cluster");
        c.createTopic(topic, 6);
        Map<String, List<String>> byConsumer = new ConcurrentHashMap<>();
        List<DefaultMQPushConsumer> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            String me = "c" + i;
            byConsumer.put(me, new CopyOnWriteArrayList<>());
            DefaultMQPushConsumer pc = c.push("CG_cluster");
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    byConsumer.get(me).add(body(m));
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            pc.start();
            members.add(pc);
        }
        Ctx.waitUntil(() -> {
            try {
                return Compat.consumerConnections(c.admin(), c.name("CG_cluster")) == 3;
            } catch (Exception e) {
                return false;
            }
        }, 20000, "three members of the group");
        DefaultMQProducer p = c.producer("cluster");
        for (int i = 0; i < 60; i++) {
            p.send(msg(topic, "x", null, "a-" + i));
        }
        // 60 s: on a loaded 2-core machine a rebalance under way (three members joining) can hold a queue's
        // first pull for a while; the detail says which bodies were missing and who owned which queue.
        Ctx.waitUntil(() -> distinct(byConsumer) >= 60, 60000, "60 messages over the group",
            () -> clusterDetail(c, "a-", 60, byConsumer, members));
        out.put("round1", copy(byConsumer));
        members.get(2).shutdown();
        Ctx.waitUntil(() -> {
            try {
                return Compat.consumerConnections(c.admin(), c.name("CG_cluster")) == 2;
            } catch (Exception e) {
                return false;
            }
        }, 20000, "the group down to two members");
        for (int i = 0; i < 30; i++) {
            p.send(msg(topic, "x", null, "b-" + i));
        }
        Ctx.waitUntil(() -> distinct(byConsumer) >= 90, 60000, "30 more messages over the two left",
            () -> clusterDetail(c, "b-", 30, byConsumer, members.subList(0, 2)));
        out.put("all", copy(byConsumer));
    }

    /** Which of prefix0..prefix(n-1) no member got, each member's count and queues, and the group's offsets. */
    static String clusterDetail(Ctx c, String prefix, int n, Map<String, List<String>> byConsumer,
                                List<DefaultMQPushConsumer> members) {
        StringBuilder sb = new StringBuilder("; missing:");
        java.util.Set<String> seen = new java.util.HashSet<>();
        byConsumer.values().forEach(seen::addAll);
        for (int i = 0; i < n; i++) {
            if (!seen.contains(prefix + i)) {
                sb.append(' ').append(prefix).append(i);
            }
        }
        for (Map.Entry<String, List<String>> e : new java.util.TreeMap<>(byConsumer).entrySet()) {
            sb.append("; ").append(e.getKey()).append(" got ").append(e.getValue().size());
        }
        for (int i = 0; i < members.size(); i++) {
            java.util.List<Integer> queues = new ArrayList<>();
            try {
                members.get(i).getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable()
                    .forEach((mq, pq) -> {
                        if (!pq.isDropped()) {
                            queues.add(mq.getQueueId());
                        }
                    });
            } catch (RuntimeException e) {
                sb.append("; c").append(i).append(" queues: ").append(e);
                continue;
            }
            java.util.Collections.sort(queues);
            sb.append("; c").append(i).append(" queues ").append(queues);
        }
        try {
            sb.append("; group offsets ").append(c.admin().examineConsumeStats(c.name("CG_cluster")).getOffsetTable());
        } catch (Exception e) {
            sb.append("; group offsets: ").append(e);
        }
        return sb.toString();
    }

    static int distinct(Map<String, List<String>> m) {
        java.util.Set<String> s = new java.util.HashSet<>();
        for (List<String> l : m.values()) {
            s.addAll(l);
        }
        return s.size();
    }

    static Map<String, Object> copy(Map<String, List<String>> m) {
        Map<String, Object> o = new java.util.TreeMap<>();
        for (Map.Entry<String, List<String>> e : m.entrySet()) {
            o.put(e.getKey(), new ArrayList<>(e.getValue()));
        }
        return o;
    }

    static void orderly(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Orderly");
        c.createTopic(topic, 4);
        Map<String, List<String>> byConsumer = new ConcurrentHashMap<>();
        for (int i = 0; i < 2; i++) {
            String me = "c" + i;
            byConsumer.put(me, new CopyOnWriteArrayList<>());
            DefaultMQPushConsumer pc = c.push("CG_orderly");
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    byConsumer.get(me).add(body(m));
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            pc.start();
        }
        DefaultMQProducer p = c.producer("orderly");
        for (int i = 0; i < 40; i++) {
            int key = i % 4;
            p.send(msg(topic, "o", "key-" + key, key + ":" + (i / 4)), (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), key);
        }
        Ctx.waitUntil(() -> distinct(byConsumer) >= 40, 40000, "40 orderly messages");
        out.put("by_consumer", copy(byConsumer));
    }

    static void broadcast(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Bcast");
        c.createTopic(topic, 2);
        Map<String, List<String>> byConsumer = new ConcurrentHashMap<>();
        for (int i = 0; i < 2; i++) {
            String me = "c" + i;
            byConsumer.put(me, new CopyOnWriteArrayList<>());
            DefaultMQPushConsumer pc = c.push("CG_bcast");
            Compat.broadcasting(pc);
            pc.subscribe(topic, "*");
            pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    byConsumer.get(me).add(body(m));
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            pc.start();
        }
        DefaultMQProducer p = c.producer("bcast");
        for (int i = 0; i < 10; i++) {
            p.send(msg(topic, "b", null, "bc-" + i));
        }
        // 60 s: a broadcasting 5.x consumer may take a rebalance round (up to 20 s) on a loaded machine.
        Ctx.waitUntil(() -> byConsumer.get("c0").size() >= 10 && byConsumer.get("c1").size() >= 10, 60000,
            "every message at both broadcast consumers");
        out.put("by_consumer", copy(byConsumer));
    }

    // ------------------------------------------------------------ lite pull consumer

    static void litepull(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Lite");
        c.createTopic(topic, 2);
        DefaultMQProducer p = c.producer("lite");
        for (int i = 0; i < 15; i++) {
            int q = i < 10 ? 0 : 1;
            p.send(msg(topic, i % 2 == 0 ? "even" : "odd", null, "l-" + i), (mqs, m, arg) -> mqs.get((Integer) arg), q);
        }
        DefaultLitePullConsumer a = c.lite("CG_lite_assign");
        a.setAutoCommit(false);
        a.start();
        MessageQueue q0 = null;
        for (MessageQueue mq : a.fetchMessageQueues(topic)) {
            if (mq.getQueueId() == 0) {
                q0 = mq;
            }
        }
        a.assign(Collections.singletonList(q0));
        // Seek on an active assignment: a seek issued before the assignment's first pull races with
        // it in the 5.x client (that pull, from the group's start offset, can land after the seek).
        pollUntil(a, 1, 20000);
        a.seek(q0, 4);
        out.put("after_seek_4", offsets(pollUntil(a, 6, 20000)));
        // A seek takes effect when the client's pull in flight returns; at the end of the queue that pull
        // is held by the broker for the client's brokerSuspendMaxTimeMillis (20 s in the lite pull
        // consumer), so the wait after such a seek must be longer than that (Apache's broker holds it too).
        a.seek(q0, 1);
        out.put("after_seek_1", offsets(pollUntil(a, 9, 45000)));
        a.seekToEnd(q0);
        out.put("after_seek_end", offsets(a.poll(300)));
        a.seekToBegin(q0);
        out.put("after_seek_begin", offsets(pollUntil(a, 10, 45000)));
        a.shutdown();

        DefaultLitePullConsumer s = c.lite("CG_lite_sub");
        s.setAutoCommit(false);
        s.subscribe(topic, "even");
        s.start();
        List<MessageExt> got = pollUntil(s, 8, 20000);
        List<String> bodies = new ArrayList<>();
        for (MessageExt m : got) {
            bodies.add(body(m));
        }
        out.put("subscribed_even", bodies);
        s.commitSync();
        Map<String, Object> committed = new java.util.TreeMap<>();
        for (MessageQueue mq : s.fetchMessageQueues(topic)) {
            committed.put(Integer.toString(mq.getQueueId()), s.committed(mq));
        }
        out.put("committed", committed);
        s.shutdown();
        // a new member of the same group resumes after the committed offsets: nothing left to read
        DefaultLitePullConsumer s2 = c.lite("CG_lite_sub");
        s2.subscribe(topic, "even");
        s2.start();
        p.send(msg(topic, "even", null, "l-after"), (mqs, m, arg) -> mqs.get(0), null);
        List<String> resumed = new ArrayList<>();
        for (MessageExt m : pollUntil(s2, 1, 20000)) {
            resumed.add(body(m));
        }
        out.put("resumed", resumed);
        s2.shutdown();
    }

    static List<Long> offsets(List<MessageExt> ms) {
        List<Long> o = new ArrayList<>();
        for (MessageExt m : ms) {
            o.add(m.getQueueOffset());
        }
        return o;
    }

    // ------------------------------------------------------------ request-reply

    static void request(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Request");
        c.createTopic(topic, 1);
        DefaultMQProducer replier = c.producer("replier");
        List<String> errors = new CopyOnWriteArrayList<>();
        List<String> served = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer pc = c.push("CG_request");
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                served.add(body(m));
                try {
                    Message reply = org.apache.rocketmq.client.utils.MessageUtil.createReplyMessage(m,
                        ("re:" + body(m)).getBytes(StandardCharsets.UTF_8));
                    SendResult r = replier.send(reply, 5000);
                    if (r.getSendStatus() != org.apache.rocketmq.client.producer.SendStatus.SEND_OK) {
                        errors.add("reply status " + r.getSendStatus());
                    }
                } catch (Exception e) {
                    errors.add("reply: " + describe(e));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer requester = c.producer("requester");
        try {
            Message r = requester.request(msg(topic, "req", "req-sync", "ping-sync"), 8000);
            out.put("sync_reply", new String(r.getBody(), StandardCharsets.UTF_8));
        } catch (Exception e) {
            out.put("sync_error", describe(e));
        }
        List<String> asyncReplies = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(1);
        requester.request(msg(topic, "req", "req-async", "ping-async"), new org.apache.rocketmq.client.producer.RequestCallback() {
            @Override
            public void onSuccess(Message m) {
                asyncReplies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                done.countDown();
            }

            @Override
            public void onException(Throwable e) {
                asyncReplies.add("ERROR " + describe(e));
                done.countDown();
            }
        }, 8000);
        done.await(20, TimeUnit.SECONDS);
        out.put("async_replies", asyncReplies);
        out.put("replier_errors", errors);
        out.put("served", served);
    }

    // ------------------------------------------------------------ ACL

    static void acl(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.opts.getOrDefault("acl-topic", "AclTopic");
        DefaultMQProducer p = c.producer("acl_good", c.hook);
        List<Object> sent = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            sent.add(sent(p.send(msg(topic, "a", null, "acl-" + i))));
        }
        out.put("sent", sent);
        DefaultLitePullConsumer lc = c.lite("CG_acl", c.hook);
        lc.subscribe(topic, "*");
        lc.start();
        List<String> bodies = new ArrayList<>();
        for (MessageExt m : pollUntil(lc, 3, 20000)) {
            bodies.add(body(m));
        }
        out.put("pulled", bodies);
        lc.shutdown();
        Map<String, Object> refused = new LinkedHashMap<>();
        refused.put("wrong_secret", trySend(c, "acl_bad", Ctx.hook(c.opts.get("ak"), "wrong-secret"), topic));
        refused.put("no_credentials", trySend(c, "acl_none", null, topic));
        refused.put("unknown_key", trySend(c, "acl_unknown", Ctx.hook("nobody", "x"), topic));
        refused.put("other_topic", trySend(c, "acl_other", c.hook, c.opts.getOrDefault("denied-topic", "OtherTopic")));
        out.put("refused", refused);
    }

    static String trySend(Ctx c, String what, org.apache.rocketmq.remoting.RPCHook hook, String topic) {
        try {
            DefaultMQProducer p = c.producer(what, hook);
            SendResult r = p.send(msg(topic, "a", null, "refused?"));
            return "SENT " + r.getSendStatus();
        } catch (Exception e) {
            return describe(e);
        }
    }

    // ------------------------------------------------------------ data for the mqadmin tests

    /** Topic {prefix}_Seed (4 queues) with 10 keyed messages, fully consumed by group {prefix}_CG_seed;
     *  an empty topic {prefix}_Doomed. */
    static void seed(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Seed");
        c.createTopic(topic, 4);
        c.createTopic(c.name("Doomed"), 2);     // for mqadmin deleteTopic
        DefaultMQProducer p = c.producer("seed");
        List<Object> sent = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            Map<String, Object> r = sent(p.send(msg(topic, "s", "key-" + i, "seed-" + i)));
            r.put("key", "key-" + i);
            sent.add(r);
        }
        out.put("sent", sent);
        List<String> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer pc = c.push("CG_seed");
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(body(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        Ctx.waitUntil(() -> got.size() >= 10, 30000, "the seed messages");
        pc.shutdown();                  // persists the group's offsets on the broker
        out.put("consumed", got.size());
    }

    // ------------------------------------------------------------ message trace

    static void trace(Ctx c, Map<String, Object> out) throws Exception {
        String topic = c.name("Traced");
        c.createTopic(topic, 1);
        String traceTopic = c.opts.get("trace-topic");     // --trace-topic T: customizedTraceTopic
        DefaultMQProducer p = new DefaultMQProducer(c.name("PG_trace"), true, traceTopic);
        p.setNamesrvAddr(c.namesrv);
        p.setInstanceName(c.name("trace-p"));
        p.start();
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            String key = c.name("tk-" + i);
            keys.add(key);
            p.send(msg(topic, "tr", key, "traced-" + i));
        }
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(c.name("CG_trace"), true, traceTopic);
        pc.setNamesrvAddr(c.namesrv);
        pc.setInstanceName(c.name("trace-c"));
        pc.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.subscribe(topic, "*");
        List<String> consumed = new CopyOnWriteArrayList<>();
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                consumed.add(body(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        Ctx.waitUntil(() -> consumed.size() >= 3, 30000, "the traced messages");
        // Trace records: one message per batch in RMQ_SYS_TRACE_TOPIC, fields split by \u0001,
        // records by \u0002; the first field is the type (Pub, SubBefore, SubAfter).
        Map<String, Object> types = new java.util.TreeMap<>();
        DefaultLitePullConsumer lc = c.lite("CG_trace_read");
        lc.setAutoCommit(false);
        lc.start();
        // The trace topic is created by the first trace batch (auto-create): wait for its route.
        List<MessageQueue> mqs = new ArrayList<>();
        Ctx.waitUntil(() -> {
            try {
                mqs.addAll(lc.fetchMessageQueues(traceTopic != null ? traceTopic : "RMQ_SYS_TRACE_TOPIC"));
                return true;
            } catch (Exception e) {
                return false;
            }
        }, 20000, "the route of RMQ_SYS_TRACE_TOPIC");
        lc.assign(mqs);         // from 0 (a fresh group, CONSUME_FROM_FIRST_OFFSET): no seek, see readAll
        List<String> samples = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 15000;
        while (System.currentTimeMillis() < deadline && !(types.containsKey("Pub") && types.containsKey("SubAfter"))) {
            for (MessageExt m : lc.poll(500)) {
                if (samples.size() < 6) {
                    samples.add(body(m).replace('\u0001', '|').replace('\u0002', '#'));
                }
                for (String rec : body(m).split("\u0002")) {
                    String[] f = rec.split("\u0001");
                    if (f.length > 1 && rec.contains(keys.get(0).substring(0, keys.get(0).length() - 1))) {
                        types.merge(f[0], 1, (x, y) -> (Integer) x + (Integer) y);
                    }
                }
            }
        }
        lc.shutdown();
        pc.shutdown();
        p.shutdown();
        out.put("consumed", consumed);
        out.put("trace_types", types);
        if (!(types.containsKey("Pub") && types.containsKey("SubAfter"))) {
            out.put("trace_samples", samples);
        }
    }
}
