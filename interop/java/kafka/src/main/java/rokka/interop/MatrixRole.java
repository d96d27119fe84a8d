package rokka.interop;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Future;

/**
 * The Java client as a producer and a consumer of the cross-protocol matrix, speaking the role protocol of
 * interop/matrix/_role.py: the first stdin line is the parameters; a producer answers every
 * {@code {"op": "produce", "seq": n, "jobs": [...]}} with {@code {"event": "produced", "seq": n, "results": [...]}}
 * until EOF; a consumer reads every job's topic with one group (read_committed) until each job's {@code expect}
 * count (or {@code timeout_s}), lingers {@code linger_s}, commits when asked and prints {@code msg} events and
 * {@code done}.
 */
final class MatrixRole {
    private MatrixRole() {}

    private static Map<String, Object> ev(String name) {
        return Main.event(name);
    }

    @SuppressWarnings("unchecked")
    static void run(String role) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) {
            Map<String, Object> e = ev("error");
            e.put("error", "no parameters on stdin");
            Main.emit(e);
            System.exit(2);
        }
        Map<String, Object> p = Main.JSON.readValue(first, Map.class);
        try {
            if (role.equals("producer")) producer(p, in); else consumer(p);
        } catch (Exception e) {
            Map<String, Object> x = ev("error");
            x.put("error", Main.describe(e));
            Main.emit(x);
            System.exit(1);
        }
        Map<String, Object> done = ev("done");
        done.put("at", System.currentTimeMillis() / 1000.0);
        Main.emit(done);
    }

    @SuppressWarnings("unchecked")
    private static ProducerRecord<byte[], byte[]> record(String topic, Map<String, Object> m) {
        Map<String, Object> r = new HashMap<>(m);
        List<Object> hs = new ArrayList<>((List<Object>) m.getOrDefault("headers", List.of()));
        if (m.get("tag") != null) hs.add(List.of("rocketmq.TAGS", m.get("tag")));
        if (m.get("delay") != null && ((Number) m.get("delay")).intValue() != 0) {
            hs.add(List.of("rocketmq.DELAY", String.valueOf(m.get("delay"))));
        }
        r.put("headers", hs);
        r.remove("partition");
        r.remove("timestamp");
        return Ops.record(topic, r);
    }

    @SuppressWarnings("unchecked")
    private static void producer(Map<String, Object> p, BufferedReader in) throws Exception {
        KafkaProducer<byte[], byte[]> plain = Ops.producer(p, Map.of("retries", "20"));
        KafkaProducer<byte[], byte[]> txp = null;
        Main.emit(ev("started"));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> cmd = Main.JSON.readValue(line, Map.class);
            List<Map<String, Object>> results = new ArrayList<>();
            for (Object o : (List<Object>) cmd.get("jobs")) {
                Map<String, Object> job = (Map<String, Object>) o;
                Map<String, Object> res = new LinkedHashMap<>();
                String txn = (String) job.get("txn");
                List<Map<String, Object>> msgs = (List<Map<String, Object>>) job.get("messages");
                try {
                    if (txn != null && txp == null) {
                        txp = Ops.producer(p, Map.of("transactional.id", p.get("txn_id"), "enable.idempotence", "true"));
                        txp.initTransactions();
                    }
                    KafkaProducer<byte[], byte[]> prod = txn != null ? txp : plain;
                    if (txn != null) prod.beginTransaction();
                    List<Future<RecordMetadata>> futs = new ArrayList<>();
                    for (Map<String, Object> m : msgs) futs.add(prod.send(record((String) job.get("topic"), m)));
                    if ("commit".equals(txn)) prod.commitTransaction();
                    else if ("abort".equals(txn)) prod.abortTransaction();
                    else prod.flush();
                    int acked = 0;
                    String err = null;
                    for (Future<RecordMetadata> f : futs) {
                        try {
                            f.get();
                            acked++;
                        } catch (Exception e) {
                            if (err == null) err = Main.describe(e.getCause());
                        }
                    }
                    res.put("acked", "abort".equals(txn) ? msgs.size() : acked);
                    res.put("error", "abort".equals(txn) ? null : err);
                } catch (Exception e) {
                    res.put("acked", 0);
                    res.put("error", Main.describe(e));
                }
                results.add(res);
            }
            Map<String, Object> out = ev("produced");
            out.put("seq", cmd.get("seq"));
            out.put("results", results);
            Main.emit(out);
        }
        plain.close(Duration.ofSeconds(10));
        if (txp != null) txp.close(Duration.ofSeconds(10));
    }

    @SuppressWarnings("unchecked")
    private static void consumer(Map<String, Object> p) {
        List<Map<String, Object>> jobs = (List<Map<String, Object>>) p.get("jobs");
        Map<String, Integer> want = new HashMap<>();
        Map<String, Integer> have = new HashMap<>();
        for (Map<String, Object> j : jobs) want.put((String) j.get("read"), ((Number) j.get("expect")).intValue());
        long deadline = System.currentTimeMillis() + (long) (((Number) p.get("timeout_s")).doubleValue() * 1000);
        long linger = (long) (((Number) p.get("linger_s")).doubleValue() * 1000);
        long fullAt = -1;
        try (KafkaConsumer<byte[], byte[]> c = Ops.consumer(p, Map.of("group.id", p.get("group"),
                "isolation.level", "read_committed", "fetch.max.wait.ms", "200"))) {
            c.subscribe(new ArrayList<>(new TreeSet<>(want.keySet())));
            while (true) {
                long now = System.currentTimeMillis();
                if (now > deadline) break;
                boolean full = want.entrySet().stream().allMatch(e -> have.getOrDefault(e.getKey(), 0) >= e.getValue());
                if (full) {
                    if (fullAt < 0) fullAt = now;
                    if (now - fullAt >= linger) break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    have.merge(r.topic(), 1, Integer::sum);
                    Map<String, Object> m = ev("msg");
                    m.put("read", r.topic());
                    m.put("value", Ops.text(r.value()));
                    m.put("key", Ops.text(r.key()));
                    List<List<String>> hs = new ArrayList<>();
                    for (Header h : r.headers()) {
                        String v = Ops.text(h.value());
                        hs.add(java.util.Arrays.asList(h.key(), v == null ? "" : v));
                    }
                    m.put("headers", hs);
                    m.put("partition", r.partition());
                    m.put("offset", r.offset());
                    Main.emit(m);
                }
            }
            if (Boolean.TRUE.equals(p.get("commit"))) c.commitSync();
        }
    }
}
