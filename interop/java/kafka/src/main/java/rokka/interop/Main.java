package rokka.interop;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.StringWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Entry point of the rokka Java Kafka interop driver.
 *
 * <p>Theory of operation: {@code java -jar kafka-interop.jar serve} reads one JSON command per stdin line
 * ({@code {"op": "...", ...}}) and answers each with one JSON line on stdout: {@code {"event": "result", "op": ...,
 * ...}} or {@code {"event": "error", "op": ..., "error": "...", "type": "ExceptionClass"}}. The pytest side
 * (interop/test_kafka_java.py) keeps one JVM per scenario and restarts rokka between commands where the
 * scenario needs it. {@code matrix producer|consumer} speaks the matrix role protocol (interop/matrix/_role.py).
 * {@code version} prints the kafka-clients version. Nothing but JSON goes to stdout; client logs go to stderr.
 */
public final class Main {
    static final ObjectMapper JSON = new ObjectMapper();
    static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
            StandardCharsets.UTF_8);

    private Main() {}

    static synchronized void emit(Map<String, Object> obj) {
        try {
            OUT.println(JSON.writeValueAsString(obj));
            OUT.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static Map<String, Object> event(String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", name);
        return m;
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (sb.length() > 0) sb.append(" <- ");
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) break;
        }
        return sb.toString();
    }

    static Throwable root(Throwable t) {
        while ((t instanceof java.util.concurrent.ExecutionException || t instanceof java.util.concurrent.CompletionException
                || t.getClass().getName().equals("org.apache.kafka.common.KafkaException")) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** kafka-clients' version, from the properties file its jar carries. */
    static String clientVersion() {
        try (java.io.InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class
                .getResourceAsStream("/kafka/kafka-version.properties")) {
            java.util.Properties p = new java.util.Properties();
            p.load(in);
            return p.getProperty("version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    public static void main(String[] args) throws Exception {
        // Everything the tools or clients print lands on stderr; only emit() writes to the real stdout.
        System.setOut(System.err);
        String mode = args.length > 0 ? args[0] : "serve";
        switch (mode) {
            case "version" -> {
                Map<String, Object> m = event("version");
                m.put("kafka_clients", clientVersion());
                emit(m);
            }
            case "serve" -> serve();
            case "matrix" -> MatrixRole.run(args.length > 1 ? args[1] : "producer");
            default -> {
                System.err.println("usage: kafka-interop.jar serve | matrix producer|consumer | version");
                System.exit(2);
            }
        }
        System.exit(0);
    }

    @SuppressWarnings("unchecked")
    static void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Ops ops = new Ops();
        Map<String, Object> hello = event("ready");
        hello.put("kafka_clients", clientVersion());
        emit(hello);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> cmd = JSON.readValue(line, Map.class);
            String op = String.valueOf(cmd.get("op"));
            Map<String, Object> out;
            try {
                out = ops.run(op, cmd);
                out.put("event", "result");
            } catch (Throwable t) {
                out = new LinkedHashMap<>();
                out.put("event", "error");
                Throwable r = root(t);
                out.put("type", r.getClass().getSimpleName());
                out.put("error", describe(t));
                StringWriter sw = new StringWriter();
                t.printStackTrace(new PrintWriter(sw));
                System.err.println(sw);
            }
            out.put("op", op);
            if (cmd.containsKey("id")) out.put("id", cmd.get("id"));
            emit(out);
        }
        ops.close();
    }
}
