// Runs Kafka's command-line tools, one after another, in one JVM: a tool is its main class,
// called with its arguments as the script would call it, so that a test pays for one JVM start
// rather than one per invocation. Kafka's tools end through Kafka's Exit class (3.9's Scala
// tools through kafka.utils.Exit, which calls it), whose exit procedure is
// replaced here: it records the status and parks the calling thread for good. Each tool runs on
// a thread of its own; its answer is complete when it has called Exit or returned from main.
//
// Protocol, on stdin and stdout: a request is one line, the main class and the arguments
// separated by NUL characters (arguments hold no newline); the answer is a header line
// "<status> <stdout bytes> <stderr bytes>" followed by those bytes (UTF-8). Run it as a
// single-file source program, java -cp '<kafka jars>/*' ToolShell.java, or compiled (tool_shell.py
// runs it from a jar it builds once)
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntSupplier;
import java.util.concurrent.locks.LockSupport;

public final class ToolShell {
    // the status the running tool passed to Exit, -1 while it has not
    private static final AtomicInteger EXITED = new AtomicInteger(-1);

    public static void main(String[] ignored) throws Exception {
        // A tool's Exit ends the tool as a process's exit would: the calling thread records the
        // status and parks for good, so no code of the tool runs after it (not even a catch).
        // Exit is org.apache.kafka.common.utils.Exit in 3.9, ...utils.internals.Exit in 4.x.
        Class<?> exit;
        try {
            exit = Class.forName("org.apache.kafka.common.utils.internals.Exit");
        } catch (ClassNotFoundException e) {
            exit = Class.forName("org.apache.kafka.common.utils.Exit");
        }
        Class<?> procedure = Class.forName(exit.getName() + "$Procedure");
        Object park = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, args) -> {
                    if (method.getDeclaringClass() == Object.class) {
                        return method.getName().equals("hashCode") ? 0
                                : method.getName().equals("equals") ? proxy == args[0] : "park";
                    }
                    synchronized (EXITED) {
                        EXITED.compareAndSet(-1, (Integer) args[0]);
                        EXITED.notifyAll();
                    }
                    while (true) {
                        LockSupport.park();
                    }
                });
        exit.getMethod("setExitProcedure", procedure).invoke(null, park);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, park);
        PrintStream out = System.out;
        PrintStream err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\u0000", -1);
            ByteArrayOutputStream toolOut = new ByteArrayOutputStream();
            ByteArrayOutputStream toolErr = new ByteArrayOutputStream();
            PrintStream captureOut = new PrintStream(toolOut, true, StandardCharsets.UTF_8);
            PrintStream captureErr = new PrintStream(toolErr, true, StandardCharsets.UTF_8);
            System.setOut(captureOut);
            System.setErr(captureErr);
            EXITED.set(-1);
            int[] returned = {-1};
            Thread tool = new Thread(() -> {
                int status = inScalaConsole(captureOut, captureErr, () -> runMain(parts));
                synchronized (EXITED) {
                    returned[0] = status;
                    EXITED.notifyAll();
                }
            }, "tool-main");
            tool.setDaemon(true);
            tool.start();
            int status;
            synchronized (EXITED) {
                while (EXITED.get() < 0 && returned[0] < 0) {
                    EXITED.wait();
                }
                status = EXITED.get() >= 0 ? EXITED.get() : returned[0];
            }
            captureOut.flush();
            captureErr.flush();
            System.setOut(out);
            System.setErr(err);
            byte[] o = toolOut.toByteArray();
            byte[] r = toolErr.toByteArray();
            out.print(status + " " + o.length + " " + r.length + "\n");
            out.write(o);
            out.write(r);
            out.flush();
        }
        Runtime.getRuntime().halt(0);
    }

    private static int runMain(String[] parts) {
        try {
            Class.forName(parts[0]).getMethod("main", String[].class)
                    .invoke(null, (Object) Arrays.copyOfRange(parts, 1, parts.length));
            return 0;
        } catch (InvocationTargetException e) {
            e.getCause().printStackTrace();
            return 1;
        } catch (ReflectiveOperationException e) {
            e.printStackTrace();
            return 127;
        }
    }

    // Scala's println writes to scala.Console.out, a thread-inherited variable set from
    // System.out once: 3.9's Scala tools get the invocation's streams through withOut/withErr.
    private static int inScalaConsole(PrintStream out, PrintStream err, IntSupplier body) {
        Class<?> function0;
        Object console;
        try {
            function0 = Class.forName("scala.Function0");
            console = Class.forName("scala.Console$").getField("MODULE$").get(null);
        } catch (ReflectiveOperationException e) {
            return body.getAsInt();
        }
        int[] status = {1};
        try {
            Object withErr = thunk(function0, () -> status[0] = body.getAsInt());
            Object withOut = thunk(function0, () -> console.getClass()
                    .getMethod("withErr", PrintStream.class, function0).invoke(console, err, withErr));
            console.getClass().getMethod("withOut", PrintStream.class, function0)
                    .invoke(console, out, withOut);
        } catch (ReflectiveOperationException e) {
            e.printStackTrace();
        }
        return status[0];
    }

    interface Body {
        Object call() throws Exception;
    }

    private static Object thunk(Class<?> function0, Body body) {
        return Proxy.newProxyInstance(function0.getClassLoader(), new Class<?>[] {function0},
                (proxy, method, args) -> {
                    if (method.getName().equals("apply") && (args == null || args.length == 0)) {
                        return body.call();
                    }
                    if (method.getName().equals("hashCode")) {
                        return 0;
                    }
                    if (method.getName().equals("equals")) {
                        return proxy == args[0];
                    }
                    return "thunk";
                });
    }
}
