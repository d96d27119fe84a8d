package rokka.interop;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

/**
 * The commands of {@code serve}: plain client operations (create topics, produce, consume with or
 * without a group) and whole scenarios (group rebalance, KIP-848 refusal, transactions, admin, CLI tools).
 *
 * <p>Every command carries {@code bootstrap} and optional {@code props} (client config overrides, e.g. SASL).
 * Producers named by {@code client} stay open between commands (an idempotent producer across a broker
 * restart); everything else is opened and closed within its command.
 */
final class Ops implements AutoCloseable {
    private final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();

    Map<String, Object> run(String op, Map<String, Object> c) throws Exception {
        return switch (op) {
            case "create_topics" -> createTopics(c);
            case "produce" -> produce(c);
            case "consume" -> consume(c);
            case "close_producer" -> closeProducer(c);
            case "group3" -> new GroupScenario(c).run();
            case "kip848" -> GroupScenario.kip848(c);
            case "txn" -> TxnScenario.run(c);
            case "admin" -> AdminScenario.run(c);
            case "tool" -> Tools.run(c);
            default -> throw new IllegalArgumentException("unknown op " + op);
        };
    }

    // ------------------------------------------------------------------ config helpers

    @SuppressWarnings("unchecked")
    static Properties props(Map<String, Object> c, Map<String, Object> defaults) {
        Properties p = new Properties();
        p.put("bootstrap.servers", c.get("bootstrap"));
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        p.put("reconnect.backoff.max.ms", "1000");
        p.put("retry.backoff.ms", "200");
        p.putAll(defaults);
        Object extra = c.get("props");
        if (extra instanceof Map) {
            ((Map<String, Object>) extra).forEach((k, v) -> p.put(k, String.valueOf(v)));
        }
        return p;
    }

    static Admin admin(Map<String, Object> c) {
        return Admin.create(props(c, Map.of()));
    }

    static KafkaProducer<byte[], byte[]> producer(Map<String, Object> c, Map<String, Object> extra) {
        Map<String, Object> d = new HashMap<>(Map.of("acks", "all", "linger.ms", "5", "delivery.timeout.ms", "60000",
                "max.block.ms", "30000"));
        d.putAll(extra);
        return new KafkaProducer<>(props(c, d), new ByteArraySerializer(), new ByteArraySerializer());
    }

    static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> c, Map<String, Object> extra) {
        Map<String, Object> d = new HashMap<>(Map.of("auto.offset.reset", "earliest", "enable.auto.commit", "false",
                "session.timeout.ms", "10000", "heartbeat.interval.ms", "500"));
        d.putAll(extra);
        return new KafkaConsumer<>(props(c, d), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static int intOf(Map<String, Object> c, String k, int dflt) {
        Object v = c.get(k);
        return v == null ? dflt : ((Number) v).intValue();
    }

    // ------------------------------------------------------------------ records <-> JSON

    static byte[] bytes(Object s) {
        return s == null ? null : String.valueOf(s).getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    @SuppressWarnings("unchecked")
    static ProducerRecord<byte[], byte[]> record(String topic, Map<String, Object> r) {
        Integer part = r.get("partition") == null ? null : ((Number) r.get("partition")).intValue();
        Long ts = r.get("timestamp") == null ? null : ((Number) r.get("timestamp")).longValue();
        ProducerRecord<byte[], byte[]> pr = new ProducerRecord<>(topic, part, ts, bytes(r.get("key")), bytes(r.get("value")));
        Object hs = r.get("headers");
        if (hs instanceof List) {
            for (Object h : (List<Object>) hs) {
                List<Object> kv = (List<Object>) h;
                pr.headers().add(String.valueOf(kv.get(0)), bytes(kv.get(1)));
            }
        }
        return pr;
    }

    static Map<String, Object> json(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("topic", r.topic());
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("key", text(r.key()));
        m.put("value", text(r.value()));
        List<List<String>> hs = new ArrayList<>();
        for (Header h : r.headers()) hs.add(java.util.Arrays.asList(h.key(), text(h.value())));
        m.put("headers", hs);
        return m;
    }

    // ------------------------------------------------------------------ ops

    @SuppressWarnings("unchecked")
    Map<String, Object> createTopics(Map<String, Object> c) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> errors = new LinkedHashMap<>();
        try (Admin a = admin(c)) {
            for (Object o : (List<Object>) c.get("topics")) {
                Map<String, Object> t = (Map<String, Object>) o;
                NewTopic nt = new NewTopic((String) t.get("name"), intOf(t, "partitions", 3), (short) 1);
                if (t.get("configs") instanceof Map) {
                    Map<String, String> cfg = new HashMap<>();
                    ((Map<String, Object>) t.get("configs")).forEach((k, v) -> cfg.put(k, String.valueOf(v)));
                    nt.configs(cfg);
                }
                try {
                    a.createTopics(List.of(nt)).all().get();
                    errors.put(nt.name(), null);
                } catch (java.util.concurrent.ExecutionException e) {
                    errors.put(nt.name(), e.getCause().getClass().getSimpleName());
                }
            }
        }
        out.put("errors", errors);
        return out;
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> produce(Map<String, Object> c) throws Exception {
        String name = (String) c.get("client");
        Map<String, Object> extra = new HashMap<>();
        if (c.get("codec") != null) extra.put("compression.type", c.get("codec"));
        KafkaProducer<byte[], byte[]> p = name == null ? null : producers.get(name);
        if (p == null) {
            p = producer(c, extra);
            if (name != null) producers.put(name, p);
        }
        String topic = (String) c.get("topic");
        List<Future<RecordMetadata>> futs = new ArrayList<>();
        for (Object o : (List<Object>) c.get("records")) futs.add(p.send(record(topic, (Map<String, Object>) o)));
        p.flush();
        List<Map<String, Object>> res = new ArrayList<>();
        for (Future<RecordMetadata> f : futs) {
            Map<String, Object> m = new LinkedHashMap<>();
            try {
                RecordMetadata md = f.get();
                m.put("partition", md.partition());
                m.put("offset", md.offset());
            } catch (java.util.concurrent.ExecutionException e) {
                m.put("error", Main.describe(e.getCause()));
            }
            res.add(m);
        }
        if (name == null) p.close(Duration.ofSeconds(10));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("results", res);
        return out;
    }

    Map<String, Object> closeProducer(Map<String, Object> c) {
        KafkaProducer<byte[], byte[]> p = producers.remove((String) c.get("client"));
        if (p != null) p.close(Duration.ofSeconds(10));
        return new LinkedHashMap<>();
    }

    /**
     * Reads {@code topic} until {@code expect} records (or {@code timeout_ms}). Without {@code group}: every
     * partition assigned from the beginning, then {@code linger_ms} more to catch extras. With {@code group}:
     * subscribe, take exactly {@code expect} records and commit just past them (the rest stays unconsumed).
     */
    Map<String, Object> consume(Map<String, Object> c) {
        String topic = (String) c.get("topic");
        String group = (String) c.get("group");
        int expect = intOf(c, "expect", 1);
        long deadline = System.currentTimeMillis() + intOf(c, "timeout_ms", 30000);
        Map<String, Object> extra = new HashMap<>();
        if (group != null) extra.put("group.id", group);
        if (c.get("isolation") != null) extra.put("isolation.level", c.get("isolation"));
        List<Map<String, Object>> recs = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> k = consumer(c, extra)) {
            if (group == null) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : k.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
                k.assign(tps);
                k.seekToBeginning(tps);
            } else {
                k.subscribe(List.of(topic));
            }
            long lingerUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, lingerUntil)) {
                for (ConsumerRecord<byte[], byte[]> r : k.poll(Duration.ofMillis(200))) {
                    if (group != null && recs.size() >= expect) break;
                    recs.add(json(r));
                    commit.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (recs.size() >= expect && lingerUntil == Long.MAX_VALUE) {
                    if (group != null) break;
                    lingerUntil = System.currentTimeMillis() + intOf(c, "linger_ms", 500);
                }
            }
            if (group != null && Boolean.TRUE.equals(c.get("commit")) && !commit.isEmpty()) {
                k.commitSync(commit);
                Map<String, Object> committed = new LinkedHashMap<>();
                commit.forEach((tp, om) -> committed.put(tp.toString(), om.offset()));
                out.put("committed", committed);
            }
        }
        out.put("records", recs);
        return out;
    }

    @Override
    public void close() {
        producers.values().forEach(p -> p.close(Duration.ofSeconds(10)));
    }
}
