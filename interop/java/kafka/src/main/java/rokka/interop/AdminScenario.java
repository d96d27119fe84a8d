package rokka.interop;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;

/**
 * The Admin client, one step after another; each step's value (or exception) is reported under its name,
 * so one refusal does not hide the rest. Topics {@code t1} (3 partitions, retention.ms=3600000) and
 * {@code t2} (1 partition) are created; {@code group} commits 2 records of t2; ACL steps run when
 * {@code acls} is true (the server must have an authorizer and the caller be a super user).
 */
final class AdminScenario {
    private AdminScenario() {}

    private static void step(Map<String, Object> out, String name, Callable<Object> body) {
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            r.put("ok", body.call());
        } catch (Throwable t) {
            Throwable root = Main.root(t);
            r.put("error", root.getClass().getSimpleName());
            r.put("message", root.getMessage());
        }
        out.put(name, r);
    }

    private static String topicConfig(Admin a, String topic, String key) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = a.describeConfigs(List.of(res)).all().get().get(res);
        ConfigEntry e = cfg.get(key);
        return e == null ? null : e.value();
    }

    static Object groupState(ConsumerGroupDescription d) throws Exception {
        for (String m : new String[] {"groupState", "state"}) {
            try {
                return String.valueOf(d.getClass().getMethod(m).invoke(d));
            } catch (NoSuchMethodException ignored) {
                // the other client line
            }
        }
        return null;
    }

    static Map<String, Object> run(Map<String, Object> c) throws Exception {
        String t1 = (String) c.get("t1");
        String t2 = (String) c.get("t2");
        String group = (String) c.get("group");
        long ts0 = ((Number) c.get("ts0")).longValue();
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin a = Ops.admin(c)) {
            step(out, "describe_cluster", () -> {
                DescribeClusterResult r = a.describeCluster();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("cluster_id", r.clusterId().get());
                m.put("nodes", r.nodes().get().size());
                m.put("controller", r.controller().get().id());
                return m;
            });
            step(out, "create_topics", () -> {
                a.createTopics(List.of(new NewTopic(t1, 3, (short) 1).configs(Map.of("retention.ms", "3600000")),
                        new NewTopic(t2, 1, (short) 1))).all().get();
                return true;
            });
            step(out, "create_existing", () -> a.createTopics(List.of(new NewTopic(t1, 3, (short) 1))).all().get());
            step(out, "create_validate_only", () -> a.createTopics(List.of(new NewTopic(t1 + "-v", 2, (short) 1)),
                    new org.apache.kafka.clients.admin.CreateTopicsOptions().validateOnly(true)).all().get());
            step(out, "list_topics", () -> new TreeSet<>(a.listTopics().names().get()).stream()
                    .filter(n -> n.startsWith(t1.substring(0, 6))).toList());
            step(out, "describe_topic", () -> {
                TopicDescription d = a.describeTopics(List.of(t1)).allTopicNames().get().get(t1);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("partitions", d.partitions().size());
                m.put("leader", d.partitions().get(0).leader().id());
                m.put("replicas", d.partitions().get(0).replicas().size());
                return m;
            });
            step(out, "describe_missing_topic", () -> a.describeTopics(List.of(t1 + "-missing")).allTopicNames().get());
            step(out, "describe_topic_config", () -> topicConfig(a, t1, "retention.ms"));
            step(out, "describe_broker_config", () -> {
                String id = String.valueOf(a.describeCluster().nodes().get().iterator().next().id());
                ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER, id);
                return a.describeConfigs(List.of(res)).all().get().get(res).entries().size();
            });
            step(out, "alter_topic_config", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t1);
                a.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET)))).all().get();
                return topicConfig(a, t1, "retention.ms");
            });
            step(out, "alter_bad_config", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t1);
                return a.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "not-a-number"), AlterConfigOp.OpType.SET)))).all().get();
            });
            step(out, "create_partitions", () -> {
                a.createPartitions(Map.of(t1, NewPartitions.increaseTo(4))).all().get();
                return a.describeTopics(List.of(t1)).allTopicNames().get().get(t1).partitions().size();
            });
            step(out, "list_offsets", () -> {
                try (KafkaProducer<byte[], byte[]> p = Ops.producer(c, Map.of())) {
                    for (int i = 0; i < 3; i++) {
                        p.send(new ProducerRecord<>(t2, 0, ts0 + i * 1000L, null, Ops.bytes("ts-" + i))).get();
                    }
                }
                TopicPartition tp = new TopicPartition(t2, 0);
                Map<String, Object> m = new LinkedHashMap<>();
                Map<String, OffsetSpec> specs = new LinkedHashMap<>();
                specs.put("earliest", OffsetSpec.earliest());
                specs.put("latest", OffsetSpec.latest());
                specs.put("ts_plus_500", OffsetSpec.forTimestamp(ts0 + 500));
                specs.put("ts_exact_2", OffsetSpec.forTimestamp(ts0 + 2000));
                specs.put("ts_after", OffsetSpec.forTimestamp(ts0 + 60000));
                specs.put("max_timestamp", OffsetSpec.maxTimestamp());
                for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
                    try {
                        m.put(e.getKey(), a.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp).get().offset());
                    } catch (Exception ex) {
                        m.put(e.getKey(), "error: " + Main.root(ex).getClass().getSimpleName());
                    }
                }
                return m;
            });
            step(out, "delete_records", () -> {
                TopicPartition tp = new TopicPartition(t2, 0);
                a.deleteRecords(Map.of(tp, org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(1)))
                        .all().get();
                return a.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
            });
            step(out, "describe_producers", () -> a.describeProducers(List.of(new TopicPartition(t2, 0))).all().get()
                    .size());
            step(out, "list_transactions", () -> a.listTransactions().all().get().size());
            step(out, "describe_log_dirs", () -> a.describeLogDirs(List.of(
                    a.describeCluster().nodes().get().iterator().next().id())).allDescriptions().get().size());
            step(out, "commit_group", () -> {
                Map<String, Object> q = new HashMap<>(c);
                q.put("topic", t2);
                q.put("group", group);
                q.put("expect", 2);
                q.put("commit", true);
                return new Ops().consume(q).get("committed");
            });
            step(out, "list_groups", () -> a.listConsumerGroups().all().get().stream()
                    .map(l -> l.groupId()).filter(group::equals).toList());
            step(out, "describe_group", () -> {
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("state", groupState(d));
                m.put("members", d.members().size());
                return m;
            });
            step(out, "group_offsets", () -> {
                Map<String, Object> m = new LinkedHashMap<>();
                a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                        .forEach((tp, om) -> m.put(tp.toString(), om.offset()));
                return m;
            });
            step(out, "alter_group_offsets", () -> {
                a.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(t2, 0),
                        new org.apache.kafka.clients.consumer.OffsetAndMetadata(1))).all().get();
                return a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                        .get(new TopicPartition(t2, 0)).offset();
            });
            step(out, "delete_group", () -> {
                a.deleteConsumerGroups(List.of(group)).all().get();
                return a.listConsumerGroups().all().get().stream().map(l -> l.groupId()).filter(group::equals).toList();
            });
            aclSteps(a, out, t1, Boolean.TRUE.equals(c.get("acls")));
            step(out, "delete_topics", () -> {
                a.deleteTopics(List.of(t1)).all().get();
                return a.listTopics().names().get().contains(t1);
            });
        }
        return out;
    }

    private static void aclSteps(Admin a, Map<String, Object> out, String topic, boolean enabled) {
        AclBindingFilter any = AclBindingFilter.ANY;
        if (!enabled) {
            step(out, "describe_acls", () -> a.describeAcls(any).values().get().size());
            return;
        }
        AclBinding b = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        step(out, "create_acls", () -> {
            a.createAcls(List.of(b)).all().get();
            return true;
        });
        step(out, "describe_acls", () -> {
            List<String> s = new ArrayList<>();
            for (AclBinding x : a.describeAcls(any).values().get()) s.add(x.pattern().name() + ":" + x.entry().principal()
                    + ":" + x.entry().operation());
            return s;
        });
        step(out, "delete_acls", () -> {
            AclBindingFilter f = new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            Set<Object> deleted = new java.util.HashSet<>(a.deleteAcls(List.of(f)).all().get());
            return deleted.size();
        });
    }
}
