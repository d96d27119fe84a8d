package rokka.bench;

import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Load roles of the Java RocketMQ client for benchmarks/bench_anchor_rocketmq.py (the same roles as the C++
 * client's benchmarks/lib/rmq_cpp_role.py), one run per JVM, one JSON result line on stdout.
 *
 * <pre>
 *   send --namesrv H:P --topic T --mode sync|batch --threads N --count C [--size 100] [--batch 100]
 *        [--warmup 100] [--max-s 25] [--tags A,B]
 *   pull --namesrv H:P --topic T [--expr *] [--max-s 60]
 * </pre>
 *
 * send: the warm-up sends first (single, sync; topic auto-creation and the route), then N threads sharing
 * one DefaultMQProducer make count calls in total (each timed), a batch call carrying --batch messages;
 * message i has tag tags[i % tags.length].  pull: DefaultMQPullConsumer drains every queue from offset 0,
 * 32 per pull, until NO_NEW_MSG, and counts the messages whose tag the expression does not name.
 */
public final class RmqBench {
    private RmqBench() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("event", "result");
        try {
            if ("send".equals(args[0])) {
                send(o, out);
            } else {
                pull(o, out);
            }
        } catch (Exception e) {
            out.put("event", "error");
            out.put("error", e.toString());
        }
        System.out.println(JSON.toJSONString(out));
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static double pct(List<Long> sorted, double q) {
        return sorted.isEmpty() ? Double.NaN : sorted.get(Math.min(sorted.size() - 1, (int) (q * sorted.size()))) / 1000.0;
    }

    static void send(Map<String, String> o, Map<String, Object> out) throws Exception {
        String topic = o.get("topic");
        boolean batch = "batch".equals(o.getOrDefault("mode", "sync"));
        int threads = Integer.parseInt(o.getOrDefault("threads", "1"));
        int count = Integer.parseInt(o.get("count"));
        int batchSize = Integer.parseInt(o.getOrDefault("batch", "100"));
        int warmup = Integer.parseInt(o.getOrDefault("warmup", "100"));
        long maxMs = (long) (Double.parseDouble(o.getOrDefault("max-s", "25")) * 1000);
        String[] tags = o.getOrDefault("tags", "bench").split(",");
        byte[] body = new byte[Integer.parseInt(o.getOrDefault("size", "100"))];
        Arrays.fill(body, (byte) 'x');
        DefaultMQProducer producer = new DefaultMQProducer("PG_bench_" + System.nanoTime());
        producer.setNamesrvAddr(o.get("namesrv"));
        producer.setSendMsgTimeout(10000);
        producer.setCompressMsgBodyOverHowmuch(1 << 30);
        producer.start();
        long warmDeadline = System.currentTimeMillis() + 30000;
        for (int i = 0; i < warmup; i++) {
            try {
                producer.send(new Message(topic, tags[0], body));
            } catch (Exception e) {  // "No route info" until a new topic is registered
                if (System.currentTimeMillis() > warmDeadline) {
                    throw e;
                }
                Thread.sleep(200);
                i--;
            }
        }
        int perThread = Math.max(1, count / threads);
        long deadline = System.currentTimeMillis() + maxMs;
        List<List<Long>> lats = new ArrayList<>();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger messages = new AtomicInteger();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            List<Long> mine = new ArrayList<>(perThread);
            lats.add(mine);
            final int tid = t;
            ts.add(new Thread(() -> {
                try {
                    for (int i = 0; i < perThread && System.currentTimeMillis() < deadline; i++) {
                        long t0 = System.nanoTime();
                        if (batch) {
                            List<Message> msgs = new ArrayList<>(batchSize);
                            for (int j = 0; j < batchSize; j++) {
                                msgs.add(new Message(topic, tags[j % tags.length], body));
                            }
                            producer.send(msgs);
                            messages.addAndGet(batchSize);
                        } else {
                            producer.send(new Message(topic, tags[(tid + i * threads) % tags.length], body));
                            messages.incrementAndGet();
                        }
                        mine.add((System.nanoTime() - t0) / 1000);
                    }
                } catch (Exception e) {
                    if (errors.size() < 5) {
                        errors.add(e.toString());
                    }
                }
            }));
        }
        long t0 = System.nanoTime();
        ts.forEach(Thread::start);
        for (Thread t : ts) {
            t.join();
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        List<Long> all = new ArrayList<>();
        lats.forEach(all::addAll);
        Collections.sort(all);
        out.put("calls", all.size());
        out.put("messages", messages.get());
        out.put("seconds", seconds);
        out.put("p50_us", pct(all, 0.50) * 1000);
        out.put("p99_us", pct(all, 0.99) * 1000);
        out.put("errors", errors);
        producer.shutdown();
    }

    static void pull(Map<String, String> o, Map<String, Object> out) throws Exception {
        String topic = o.get("topic");
        String expr = o.getOrDefault("expr", "*");
        Set<String> wanted = new HashSet<>(Arrays.asList(expr.replace(" ", "").split("\\|\\|")));
        long deadline = System.currentTimeMillis() + (long) (Double.parseDouble(o.getOrDefault("max-s", "60")) * 1000);
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("CG_bench_" + System.nanoTime());
        consumer.setNamesrvAddr(o.get("namesrv"));
        consumer.start();
        int n = 0;
        int foreign = 0;
        long tFirst = 0;
        long tLast = 0;
        for (MessageQueue mq : consumer.fetchSubscribeMessageQueues(topic)) {
            long offset = 0;
            while (System.currentTimeMillis() < deadline) {
                PullResult r = consumer.pull(mq, expr, offset, 32);
                offset = r.getNextBeginOffset();
                if (r.getPullStatus() == PullStatus.NO_NEW_MSG) {
                    break;
                }
                if (r.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        if (n == 0) {
                            tFirst = System.nanoTime();
                        }
                        n++;
                        if (!wanted.contains("*") && !wanted.contains(m.getTags())) {
                            foreign++;
                        }
                    }
                    tLast = System.nanoTime();
                }
            }
        }
        out.put("messages", n);
        out.put("foreign", foreign);
        out.put("seconds", (tLast - tFirst) / 1e9);
        consumer.shutdown();
    }
}
