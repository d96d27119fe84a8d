package rokka.interop;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The transactional producer: commit ("c1-*"), abort ("a-*"), commit again ("c2-*") on {@code topic}; then
 * a consume-transform-produce round: a group consumer reads the committed records of {@code topic} and a
 * second transaction writes them to {@code out_topic} with {@code sendOffsetsToTransaction}. Reported: what
 * read_committed and read_uncommitted consumers see on both topics, and the group's committed offsets.
 */
final class TxnScenario {
    private TxnScenario() {}

    static List<String> readAll(Map<String, Object> c, String topic, String isolation, int expect) {
        Map<String, Object> q = new HashMap<>(c);
        q.put("topic", topic);
        q.put("group", null);
        q.put("isolation", isolation);
        q.put("expect", expect);
        q.put("timeout_ms", 20000);
        q.put("linger_ms", 700);
        List<String> vals = new ArrayList<>();
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> recs = (List<Map<String, Object>>) new Ops().consume(q).get("records");
        for (Map<String, Object> r : recs) vals.add((String) r.get("value"));
        return vals;
    }

    /** Two producers with one transactional.id: the newer one's initTransactions fences the older one. */
    static Map<String, Object> fencing(Map<String, Object> c, String topic) {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Object> cfg = Map.of("transactional.id", c.get("txn_id") + "-fence", "enable.idempotence", "true",
                "transaction.timeout.ms", "30000");
        try (KafkaProducer<byte[], byte[]> old = Ops.producer(c, cfg)) {
            old.initTransactions();
            old.beginTransaction();
            old.send(new ProducerRecord<>(topic, 0, null, Ops.bytes("fenced-0")));
            old.flush();
            try (KafkaProducer<byte[], byte[]> fresh = Ops.producer(c, cfg)) {
                fresh.initTransactions();  // aborts the old one's open transaction, bumps the epoch
                try {
                    old.send(new ProducerRecord<>(topic, 0, null, Ops.bytes("fenced-1"))).get();
                    out.put("old_send", "acked");
                } catch (Exception e) {
                    out.put("old_send", Main.root(e).getClass().getSimpleName());
                }
                try {
                    old.commitTransaction();
                    out.put("old_commit", "committed");
                } catch (Exception e) {
                    out.put("old_commit", "raised");
                }
                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>(topic, 0, null, Ops.bytes("fresh-0")));
                fresh.commitTransaction();
                out.put("fresh", "committed");
            }
            out.put("visible", readAll(c, topic, "read_committed", 11));
        } catch (Exception e) {
            out.put("error", Main.describe(e));
        }
        return out;
    }

    static Map<String, Object> run(Map<String, Object> c) throws Exception {
        String topic = (String) c.get("topic");
        String outTopic = (String) c.get("out_topic");
        String group = (String) c.get("group");
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> p = Ops.producer(c, Map.of("transactional.id", c.get("txn_id"),
                "enable.idempotence", "true", "transaction.timeout.ms", "30000"))) {
            p.initTransactions();
            for (String[] round : new String[][] {{"c1", "commit"}, {"a", "abort"}, {"c2", "commit"}}) {
                p.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    p.send(new ProducerRecord<>(topic, i % 3, Ops.bytes("k" + i), Ops.bytes(round[0] + "-" + i)));
                }
                if (round[1].equals("commit")) p.commitTransaction(); else p.abortTransaction();
            }
            out.put("committed_view", readAll(c, topic, "read_committed", 10));
            out.put("uncommitted_view", readAll(c, topic, "read_uncommitted", Ops.intOf(c, "uncommitted_expect", 10)));

            // consume-transform-produce
            try (KafkaConsumer<byte[], byte[]> k = Ops.consumer(c, Map.of("group.id", group,
                    "isolation.level", "read_committed"))) {
                k.subscribe(List.of(topic));
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30000;
                while (got.size() < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : k.poll(Duration.ofMillis(200))) got.add(r);
                }
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                p.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    p.send(new ProducerRecord<>(outTopic, r.key(), Ops.bytes("t-" + Ops.text(r.value()))));
                    offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(offs, k.groupMetadata());
                p.commitTransaction();
                out.put("transformed", got.size());
            }
        }
        out.put("out_committed_view", readAll(c, outTopic, "read_committed", 10));
        out.put("fencing", fencing(c, topic));
        try (org.apache.kafka.clients.admin.Admin a = Ops.admin(c)) {
            Map<String, Object> committed = new LinkedHashMap<>();
            a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .forEach((tp, om) -> committed.put(tp.toString(), om == null ? null : om.offset()));
            out.put("group_offsets", committed);
            Map<String, Object> ends = new LinkedHashMap<>();
            Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> q = new HashMap<>();
            for (int i = 0; i < 3; i++) q.put(new TopicPartition(topic, i), org.apache.kafka.clients.admin.OffsetSpec.latest());
            a.listOffsets(q).all().get().forEach((tp, info) -> ends.put(tp.toString(), info.offset()));
            out.put("end_offsets", ends);
        }
        return out;
    }
}
