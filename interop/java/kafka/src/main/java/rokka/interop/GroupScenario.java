package rokka.interop;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;

/**
 * A classic consumer group of three members over a 6-partition topic, each member polling in its own
 * thread and committing synchronously after every poll:
 * m1 alone (owns 6) -> m2 and m3 join (2 each) -> m3 leaves (3 each), 60 records produced per phase.
 * Reported: the assignment at the end of each phase, every delivery with whether its commit succeeded
 * (the Python side checks no loss and no second delivery of a committed record), and member errors.
 * {@link #kip848} is the {@code group.protocol=consumer} probe.
 */
final class GroupScenario {
    private final Map<String, Object> c;
    private final String topic;
    private final String group;
    private final List<Map<String, Object>> deliveries = new CopyOnWriteArrayList<>();
    private final List<String> errors = new CopyOnWriteArrayList<>();
    private final Set<String> seen = ConcurrentHashMap.newKeySet();

    GroupScenario(Map<String, Object> c) {
        this.c = c;
        this.topic = (String) c.get("topic");
        this.group = (String) c.get("group");
    }

    final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<byte[], byte[]> k;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        volatile boolean stop;
        final Thread thread;

        Member(String name) {
            this.name = name;
            Map<String, Object> cfg = new java.util.HashMap<>(Map.of("group.id", group, "client.id", name,
                    "max.poll.records", "20"));
            if (c.get("assignor") != null) cfg.put("partition.assignment.strategy", c.get("assignor"));
            this.k = Ops.consumer(c, cfg);
            this.thread = new Thread(this, name);
            thread.start();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            owned.removeAll(parts);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            owned.addAll(parts);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            owned.removeAll(parts);
        }

        @Override
        public void run() {
            try {
                k.subscribe(List.of(topic), this);
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> recs = k.poll(Duration.ofMillis(100));
                    if (recs.isEmpty()) continue;
                    boolean ok = true;
                    try {
                        k.commitSync();
                    } catch (CommitFailedException e) {
                        ok = false;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        Map<String, Object> d = new LinkedHashMap<>();
                        d.put("member", name);
                        d.put("value", Ops.text(r.value()));
                        d.put("partition", r.partition());
                        d.put("committed", ok);
                        deliveries.add(d);
                        seen.add(Ops.text(r.value()));
                    }
                }
            } catch (Exception e) {
                errors.add(name + ": " + Main.describe(e));
            } finally {
                k.close(Duration.ofSeconds(10));
            }
        }

        void stop() throws InterruptedException {
            stop = true;
            thread.join(30000);
        }

        List<Integer> owned() {
            List<Integer> out = new ArrayList<>();
            for (TopicPartition tp : owned) out.add(tp.partition());
            out.sort(null);
            return out;
        }
    }

    private static void await(BooleanSupplier cond, long timeoutMs, String what) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    private List<String> produce(KafkaProducer<byte[], byte[]> p, String tag, int n) throws Exception {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String v = tag + "-" + i;
            values.add(v);
            p.send(new ProducerRecord<>(topic, i % 6, null, Ops.bytes(v))).get();
        }
        return values;
    }

    private Map<String, Object> snapshot(List<Member> ms) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Member x : ms) m.put(x.name, x.owned());
        return m;
    }

    private static boolean sizes(List<Member> ms, int each) {
        return ms.stream().allMatch(m -> m.owned.size() == each);
    }

    Map<String, Object> run() throws Exception {
        long t = Ops.intOf(c, "phase_timeout_ms", 45000);
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> phases = new LinkedHashMap<>();
        List<String> produced = new ArrayList<>();
        List<Member> all = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = Ops.producer(c, Map.of())) {
            Member m1 = new Member("m1");
            all.add(m1);
            await(() -> m1.owned.size() == 6, t, "m1 to own 6 partitions");
            produced.addAll(produce(p, "a", 60));
            await(() -> seen.containsAll(produced), t, "phase 1 records");
            phases.put("one", snapshot(List.of(m1)));

            Member m2 = new Member("m2");
            Member m3 = new Member("m3");
            all.add(m2);
            all.add(m3);
            await(() -> sizes(List.of(m1, m2, m3), 2), t, "2 partitions each for 3 members");
            produced.addAll(produce(p, "b", 60));
            await(() -> seen.containsAll(produced), t, "phase 2 records");
            phases.put("three", snapshot(List.of(m1, m2, m3)));

            m3.stop();
            await(() -> sizes(List.of(m1, m2), 3), t, "3 partitions each after m3 left");
            produced.addAll(produce(p, "c", 60));
            await(() -> seen.containsAll(produced), t, "phase 3 records");
            phases.put("two", snapshot(List.of(m1, m2)));
        } catch (IllegalStateException e) {
            errors.add(e.getMessage() + " (owned: " + snapshot(all) + ")");
        } finally {
            for (Member m : all) m.stop();
        }
        out.put("phases", phases);
        out.put("produced", produced);
        out.put("deliveries", deliveries);
        out.put("errors", errors);
        return out;
    }

    /** {@code group.protocol=consumer}: subscribe and poll; report what the client raised (or what it read). */
    static Map<String, Object> kip848(Map<String, Object> c) {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> extra = new java.util.HashMap<>(Map.of("group.id", c.get("group"),
                "group.protocol", "consumer"));
        Map<String, Object> d = new java.util.HashMap<>(Map.of("auto.offset.reset", "earliest",
                "enable.auto.commit", "false"));
        d.putAll(extra);
        long deadline = System.currentTimeMillis() + Ops.intOf(c, "timeout_ms", 15000);
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> k = new KafkaConsumer<>(Ops.props(c, d),
                new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                new org.apache.kafka.common.serialization.ByteArrayDeserializer())) {
            k.subscribe(List.of((String) c.get("topic")));
            while (System.currentTimeMillis() < deadline) n += k.poll(Duration.ofMillis(200)).count();
            out.put("outcome", "no error");
        } catch (Exception e) {
            Throwable r = Main.root(e);
            out.put("outcome", "raised");
            out.put("type", r.getClass().getName());
            out.put("message", r.getMessage());
        }
        out.put("records", n);
        return out;
    }
}
