package rokka.interop.rmq;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/** Options of one run, client factories with unique instance names, and the shutdown list. */
final class Ctx {
    final String namesrv;
    final String prefix;
    final RPCHook hook;
    final Map<String, String> opts;
    private final AtomicInteger seq = new AtomicInteger();
    private final List<Runnable> closers = new CopyOnWriteArrayList<>();
    private DefaultMQAdminExt admin;

    Ctx(Map<String, String> opts) {
        this.opts = opts;
        this.namesrv = opts.get("namesrv");
        this.prefix = opts.getOrDefault("prefix", "J");
        this.hook = opts.containsKey("ak") ? hook(opts.get("ak"), opts.get("sk")) : null;
    }

    static RPCHook hook(String ak, String sk) {
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    String name(String what) {
        return prefix + "_" + what;
    }

    private void configure(ClientConfig c, String what) {
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(name(what) + "-" + seq.incrementAndGet());
    }

    DefaultMQProducer producer(String what, RPCHook rpcHook) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(name("PG_" + what), rpcHook);
        configure(p, what);
        p.setSendMsgTimeout(10000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        closers.add(p::shutdown);
        return p;
    }

    DefaultMQProducer producer(String what) throws Exception {
        return producer(what, hook);
    }

    TransactionMQProducer txnProducer(String what) {
        TransactionMQProducer p = new TransactionMQProducer(name("PG_" + what), hook);
        configure(p, what);
        p.setSendMsgTimeout(10000);
        closers.add(p::shutdown);
        return p;
    }

    DefaultMQPushConsumer push(String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(name(group), hook, new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        configure(c, group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        closers.add(c::shutdown);
        return c;
    }

    DefaultLitePullConsumer lite(String group, RPCHook rpcHook) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(name(group), rpcHook);
        configure(c, group);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPollTimeoutMillis(1000);
        closers.add(c::shutdown);
        return c;
    }

    DefaultLitePullConsumer lite(String group) {
        return lite(group, hook);
    }

    synchronized DefaultMQAdminExt admin() throws Exception {
        if (admin == null) {
            admin = new DefaultMQAdminExt(hook, 10000);
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName(name("admin"));
            admin.start();
            closers.add(admin::shutdown);
        }
        return admin;
    }

    /** Creates (or updates) {@code topic} with {@code queues} read/write queues on every broker. */
    void createTopic(String topic, int queues) throws Exception {
        for (String addr : Compat.masterAddrs(admin())) {
            admin().createAndUpdateTopicConfig(addr, new TopicConfig(topic, queues, queues, 6));
        }
        waitUntil(() -> {
            try {
                return Compat.routeQueues(admin(), topic) > 0;
            } catch (Exception e) {
                return false;
            }
        }, 10000, "route of " + topic);
    }

    static void waitUntil(BooleanSupplier cond, long timeoutMs, String what) {
        waitUntil(cond, timeoutMs, what, () -> "");
    }

    /** As above; a timeout's message ends with {@code detail}'s account of what was there instead. */
    static void waitUntil(BooleanSupplier cond, long timeoutMs, String what,
                          java.util.function.Supplier<String> detail) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out after " + timeoutMs + " ms waiting for " + what
                    + detail.get());
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for " + what);
            }
        }
    }

    void close() {
        for (Runnable r : closers) {
            try {
                r.run();
            } catch (RuntimeException e) {
                // shutting down anyway
            }
        }
    }
}
