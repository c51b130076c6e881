// CkptJava STEPS WORKDIR: a JVM program through checkpoints. Each step: three pool threads sum a
// range, the heap grows (a HashMap, 256 KiB of garbage a step under a small -Xmx, so G1 collects
// often), an NIO selector thread echoes a line upper-cased on a connection kept from the start
// and on a new one, and a file is written and read back. Prints `step K` and ends with
// `DONE checksum=H steps=N`; any wrong answer exits 1.
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

public class CkptJava {
    static void fail(String why) {
        System.err.println("CkptJava: FAIL: " + why);
        System.exit(1);
    }

    static Thread echoServer(ServerSocketChannel srv) {
        Thread t = new Thread(() -> {
            try (Selector sel = Selector.open()) {
                srv.configureBlocking(false);
                srv.register(sel, SelectionKey.OP_ACCEPT);
                ByteBuffer buf = ByteBuffer.allocate(4096);
                while (true) {
                    sel.select();
                    for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext();) {
                        SelectionKey k = it.next();
                        it.remove();
                        if (k.isAcceptable()) {
                            SocketChannel c = srv.accept();
                            if (c == null) continue;
                            c.configureBlocking(false);
                            c.register(sel, SelectionKey.OP_READ);
                        } else if (k.isReadable()) {
                            SocketChannel c = (SocketChannel) k.channel();
                            buf.clear();
                            if (c.read(buf) < 0) {
                                c.close();
                                continue;
                            }
                            buf.flip();
                            String s = StandardCharsets.US_ASCII.decode(buf).toString().toUpperCase();
                            c.write(StandardCharsets.US_ASCII.encode(s));
                        }
                    }
                }
            } catch (IOException e) {
                fail("echo server: " + e);
            }
        });
        t.setDaemon(true);
        return t;
    }

    public static void main(String[] args) throws Exception {
        int steps = Integer.parseInt(args[0]);
        Path file = Path.of(args[1], "java-step.txt");
        ServerSocketChannel srv = ServerSocketChannel.open();
        srv.bind(new InetSocketAddress("127.0.0.1", 0));
        int port = ((InetSocketAddress) srv.getLocalAddress()).getPort();
        echoServer(srv).start();
        Socket kept = new Socket("127.0.0.1", port);
        BufferedReader keptIn = new BufferedReader(new InputStreamReader(kept.getInputStream()));
        PrintWriter keptOut = new PrintWriter(kept.getOutputStream(), true);
        ExecutorService pool = Executors.newFixedThreadPool(3);
        Map<Integer, String> seen = new HashMap<>();
        List<byte[]> live = new ArrayList<>();
        long h = 0xcbf29ce484222325L;
        for (int k = 1; k <= steps; k++) {
            final int kk = k;
            List<Future<Long>> parts = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                final int tt = t;
                parts.add(pool.submit(() -> {
                    long s = 0;
                    for (int i = 0; i < 100000; i++) s += (long) i * (kk + tt) % 7;
                    return s;
                }));
            }
            long sum = 0;
            for (Future<Long> f : parts) sum += f.get();
            seen.put(k, "v" + sum);
            byte[] garbage = new byte[256 << 10];
            garbage[k % garbage.length] = (byte) k;
            if (k % 8 == 0) live.add(garbage); // some of it stays
            keptOut.println("kept " + k);
            if (!("KEPT " + k).equals(keptIn.readLine())) fail("kept connection, step " + k);
            try (Socket s = new Socket("127.0.0.1", port)) {
                s.getOutputStream().write(("new " + k + "\n").getBytes(StandardCharsets.US_ASCII));
                String got = new BufferedReader(new InputStreamReader(s.getInputStream())).readLine();
                if (!("NEW " + k).equals(got)) fail("new connection, step " + k + ": " + got);
            }
            Files.writeString(file, "step " + k + " sum " + sum);
            if (!Files.readString(file).equals("step " + k + " sum " + sum)) fail("file, step " + k);
            if (seen.size() != k || live.size() != k / 8) fail("heap, step " + k);
            for (int i = 0; i < 8; i++) {
                h ^= ((long) k >> (8 * i)) & 0xff;
                h *= 0x100000001b3L;
            }
            System.out.println("step " + k);
            Thread.sleep(20);
        }
        pool.shutdown();
        kept.close();
        System.out.printf("DONE checksum=%016x steps=%d%n", h, steps);
    }
}
