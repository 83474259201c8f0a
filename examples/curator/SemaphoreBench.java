// W7 of the benchmark (examples/bench/semaphore.rs) on Apache Curator's InterProcessSemaphoreV2, for a side-by-side
// figure: 3 permits, 8 sessions (one thread each) looping acquire -> hold a random 0-2 ms ->
// release, until N acquisitions in all. Prints one JSON line like the benchmark's W7 (no
// notification count: Curator does not expose one).
//
//   CP=$(ls /usr/share/java/{curator-recipes,curator-framework,curator-client,zookeeper,zookeeper-jute,guava,failureaccess,slf4j-api,slf4j-nop,netty-handler,netty-common,netty-buffer,netty-transport,netty-codec,netty-resolver,netty-transport-native-epoll,netty-transport-native-unix-common}.jar 2>/dev/null | paste -sd:)
//   javac -cp "$CP" -d /tmp/semb examples/curator/SemaphoreBench.java
//   java -cp "/tmp/semb:$CP" SemaphoreBench 127.0.0.1:2181 2000
//
// Point it at the server the Rust bench uses (ZK_CONNECT=... cargo run --release --example
// bench --features testing, with BENCH_ONLY=W7) to compare on one server.

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class SemaphoreBench {
    static final int PERMITS = 3;
    static final int SESSIONS = 8;

    // Who holds and who waits, and how long a permit sat free while someone waited.
    static int holders, waiting;
    static long since, idleNanos, violations;

    static synchronized void change(int h, int w) {
        long now = System.nanoTime();
        if (holders < PERMITS && waiting > 0) idleNanos += now - since;
        since = now;
        holders += h;
        waiting += w;
        if (holders > PERMITS) violations++;
    }

    static long next(long[] s) {
        s[0] ^= s[0] << 13;
        s[0] ^= s[0] >>> 7;
        s[0] ^= s[0] << 17;
        return s[0];
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        int total = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        String path = "/curator-semaphore-bench-" + ProcessHandle.current().pid();
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < SESSIONS; i++) {
            CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 10000,
                    new ExponentialBackoffRetry(100, 3));
            c.start();
            c.blockUntilConnected();
            clients.add(c);
        }
        // Warm the JIT and the server up: a short run, not counted.
        run(clients, path + "-warm", 300, false);
        synchronized (SemaphoreBench.class) { idleNanos = 0; violations = 0; }
        run(clients, path, total, true);
        for (CuratorFramework c : clients) c.close();
        System.exit(violations > 0 ? 1 : 0);
    }

    static void run(List<CuratorFramework> clients, String path, int total, boolean print) throws Exception {
        AtomicInteger acquired = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        List<Long> waits = Collections.synchronizedList(new ArrayList<>());
        long[] doneAt = new long[1];
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < SESSIONS; i++) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(clients.get(i), path, PERMITS);
            long[] rng = {0x9E3779B97F4A7C15L ^ (i + 1)};
            Thread t = new Thread(() -> {
                try {
                    start.await();
                    while (!stop.get()) {
                        change(0, 1);
                        long t0 = System.nanoTime();
                        Lease lease = sem.acquire(60, TimeUnit.SECONDS);
                        long waited = System.nanoTime() - t0;
                        if (lease == null) throw new IllegalStateException("acquire timed out");
                        change(1, -1);
                        waits.add(waited);
                        if (acquired.incrementAndGet() == total) {
                            doneAt[0] = System.nanoTime();
                            stop.set(true);
                        }
                        long us = Long.remainderUnsigned(next(rng), 2001);
                        Thread.sleep(us / 1000, (int) (us % 1000) * 1000);
                        change(-1, 0);
                        sem.returnLease(lease);
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    stop.set(true);
                }
            });
            t.start();
            threads.add(t);
        }
        synchronized (SemaphoreBench.class) { since = System.nanoTime(); }
        long t0 = System.nanoTime();
        start.countDown();
        for (Thread t : threads) t.join();
        double run = (doneAt[0] - t0) / 1e9;
        List<Long> w = new ArrayList<>(waits);
        Collections.sort(w);
        long p50 = w.get((int) Math.round((w.size() - 1) * 0.5));
        long p99 = w.get((int) Math.round((w.size() - 1) * 0.99));
        if (!print) return;
        System.out.printf(
                "{\"figure\":\"W7 curator\",\"what\":\"Curator InterProcessSemaphoreV2, 3 permits, 8 sessions x 1 thread, hold 0-2 ms at random\","
                        + "\"acquisitions\":%d,\"acquisitions_per_s\":%.3f,\"wait_p50_us\":%.1f,\"wait_p99_us\":%.1f,"
                        + "\"idle_permit_ms\":%.3f,\"idle_permit_share\":%.3f,\"idle_permit_per_release_us\":%.1f,\"violations\":%d}%n",
                total, total / run, p50 / 1e3, p99 / 1e3, idleNanos / 1e6, idleNanos / 1e9 / run,
                idleNanos / 1e3 / Math.max(acquired.get(), 1), violations);
    }
}
