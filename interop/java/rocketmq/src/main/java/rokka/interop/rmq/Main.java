package rokka.interop.rmq;

import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.rocketmq.common.MQVersion;

/**
 * Command line of rokka's Java RocketMQ interop driver.
 *
 * <pre>
 *   java -jar rmq-java.jar SCENARIO[,SCENARIO...] --namesrv H:P [--prefix P] [--ak K --sk S] [--timeout-s N] [--tls true]
 *   java -jar rmq-java.jar matrix-producer|matrix-consumer      (JSON-lines roles of interop/matrix)
 * </pre>
 *
 * Scenarios run concurrently in this one JVM (each on its own topics and groups, named after
 * --prefix), so the suite pays for one JVM start per client version.  Every scenario prints one
 * JSON line {"event":"result","scenario":name,...} (or {"event":"result","scenario":name,"error":...});
 * the pytest side makes the assertions.  Exit code 0 unless the arguments are wrong.
 */
public final class Main {
    private static final Object OUT = new Object();

    public static void emit(Map<String, Object> obj) {
        String line = JSON.toJSONString(obj);
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: rmq-java SCENARIO[,SCENARIO...] --namesrv H:P [--prefix P] [--ak K --sk S]");
            System.exit(2);
        }
        if (args[0].startsWith("matrix-")) {
            int code = Matrix.run(args[0].substring("matrix-".length()));
            System.out.flush();
            Runtime.getRuntime().halt(code);
        }
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        if (!opts.containsKey("namesrv")) {
            System.err.println("--namesrv H:P is required");
            System.exit(2);
        }
        if ("true".equals(opts.get("tls"))) {      // --tls true: as -Dtls.enable=true, before any client class loads
            System.setProperty("tls.enable", "true");
        }
        Ctx ctx = new Ctx(opts);
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("event", "started");
        hello.put("version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        emit(hello);
        long timeoutS = Long.parseLong(opts.getOrDefault("timeout-s", "90"));
        ExecutorService pool = Executors.newCachedThreadPool();
        List<String> names = new ArrayList<>(List.of(args[0].split(",")));
        List<Future<Map<String, Object>>> futures = new ArrayList<>();
        for (String name : names) {
            futures.add(pool.submit(() -> Scenarios.run(name, ctx)));
        }
        long deadline = System.currentTimeMillis() + timeoutS * 1000;
        for (int i = 0; i < names.size(); i++) {
            Map<String, Object> res;
            try {
                res = futures.get(i).get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                res = new LinkedHashMap<>();
                res.put("error", "scenario timed out after " + timeoutS + " s");
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("event", "result");
            out.put("scenario", names.get(i));
            out.putAll(res);
            emit(out);
        }
        ctx.close();
        System.out.flush();
        // Client threads (netty, timers) of a timed-out scenario may still run: leave at once.
        Runtime.getRuntime().halt(0);
    }
}
