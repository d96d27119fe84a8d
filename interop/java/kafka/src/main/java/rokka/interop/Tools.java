package rokka.interop;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Kafka command-line tools run in this JVM (only the tools4 build has them on its classpath): the
 * {@code main} class the shell script would start (kafka-topics.sh -> org.apache.kafka.tools.TopicCommand,
 * ...), with {@code args}, {@code stdin} as its standard input and its stdout/stderr captured.
 * {@code Exit.exit} is turned into an exception so a tool's exit code ends the call, not the JVM.
 */
final class Tools {
    private Tools() {}

    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    /**
     * Kafka's Exit class (org.apache.kafka.common.utils.Exit up to 4.x, ...utils.internals.Exit in later 4.x):
     * installs (or resets) procedures that throw {@link ExitCalled} instead of ending the JVM.
     */
    static final java.util.concurrent.atomic.AtomicReference<Integer> FIRST_EXIT =
            new java.util.concurrent.atomic.AtomicReference<>();

    static void exitHooks(boolean install) throws Exception {
        Class<?> exit;
        try {
            exit = Class.forName("org.apache.kafka.common.utils.internals.Exit");
        } catch (ClassNotFoundException e) {
            exit = Class.forName("org.apache.kafka.common.utils.Exit");
        }
        for (String what : new String[] {"ExitProcedure", "HaltProcedure", "ShutdownHookAdder"}) {
            if (!install) {
                exit.getMethod("reset" + what).invoke(null);
                continue;
            }
            java.lang.reflect.Method set = null;
            for (java.lang.reflect.Method m : exit.getMethods()) if (m.getName().equals("set" + what)) set = m;
            Class<?> iface = set.getParameterTypes()[0];
            boolean hook = what.equals("ShutdownHookAdder");
            Object proxy = java.lang.reflect.Proxy.newProxyInstance(iface.getClassLoader(), new Class<?>[] {iface},
                    (self, method, margs) -> {
                        if (method.getDeclaringClass() == Object.class) return method.getName().equals("hashCode") ? 0
                                : method.getName().equals("equals") ? false : "exit-proxy";
                        if (hook) return null;
                        // The first exit ends the tool, as System.exit would; a tool that catches our
                        // exception and exits again (TopicCommand catches Throwable) cannot change the code.
                        FIRST_EXIT.compareAndSet(null, (Integer) margs[0]);
                        throw new ExitCalled((Integer) margs[0]);
                    });
            set.invoke(null, proxy);
        }
    }

    /**
     * Scala tools (3.x ConsoleProducer, ConfigCommand) print through scala.Console, whose streams are
     * per-thread variables captured when it was first used: point this thread's at the current streams.
     */
    static void scalaConsole(PrintStream out, PrintStream err, InputStream in) {
        Class<?> console;
        try {
            console = Class.forName("scala.Console$");
        } catch (ClassNotFoundException e) {
            return;
        }
        try {
            Object module = console.getField("MODULE$").get(null);
            Map<String, Object> want = Map.of("outVar", out, "errVar", err, "inVar",
                    new java.io.BufferedReader(new java.io.InputStreamReader(in, StandardCharsets.UTF_8)));
            for (java.lang.reflect.Field f : console.getDeclaredFields()) {
                for (Map.Entry<String, Object> e : want.entrySet()) {
                    if (!f.getName().endsWith(e.getKey())) continue;
                    f.setAccessible(true);
                    Object var = f.get(module);
                    var.getClass().getMethod("value_$eq", Object.class).invoke(var, e.getValue());
                }
            }
        } catch (Exception e) {
            throw new IllegalStateException("cannot redirect scala.Console", e);
        }
    }

    @SuppressWarnings("unchecked")
    static synchronized Map<String, Object> run(Map<String, Object> c) throws Exception {
        String main = (String) c.get("main");
        String[] args = ((List<Object>) c.get("args")).stream().map(String::valueOf).toArray(String[]::new);
        String stdin = c.get("stdin") == null ? "" : (String) c.get("stdin");
        long timeout = Ops.intOf(c, "timeout_ms", 60000);
        ByteArrayOutputStream outBuf = new ByteArrayOutputStream();
        ByteArrayOutputStream errBuf = new ByteArrayOutputStream();
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        InputStream oldIn = System.in;
        int[] code = {0};
        String[] crash = {null};
        FIRST_EXIT.set(null);
        exitHooks(true);
        Thread th = new Thread(() -> {
            try {
                scalaConsole(System.out, System.err, System.in);
                Class.forName(main).getMethod("main", String[].class).invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                Throwable t = e.getCause();
                while (t != null && !(t instanceof ExitCalled) && t.getCause() != null && t.getCause() != t) {
                    t = t.getCause();
                }
                if (t instanceof ExitCalled x) {
                    code[0] = x.code;
                } else {
                    code[0] = 1;
                    crash[0] = Main.describe(e.getCause());
                }
            } catch (Exception e) {
                code[0] = 1;
                crash[0] = Main.describe(e);
            }
        }, "tool-" + main);
        try {
            System.setOut(new PrintStream(outBuf, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(errBuf, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            th.setDaemon(true);
            th.start();
            th.join(timeout);
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
            System.setIn(oldIn);
            exitHooks(false);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        Integer first = FIRST_EXIT.get();
        out.put("exit", th.isAlive() ? "timeout" : first != null ? first : code[0]);
        out.put("stdout", outBuf.toString(StandardCharsets.UTF_8));
        out.put("stderr", errBuf.toString(StandardCharsets.UTF_8));
        if (crash[0] != null) out.put("crash", crash[0]);
        System.err.print(out.get("stderr"));
        return out;
    }
}
