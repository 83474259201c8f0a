// A participant that uses the real Apache Curator recipes, for zkguard's interop tests
// (tests/curator.rs compiles it with javac against Debian's libcurator-recipes-java).
//
//   java CuratorPeer <connect> <recipe> <path> [recipe args] <mode>
//
// recipes: mutex | read | write (InterProcessReadWriteLock) | semaphore <permits>
//          (InterProcessSemaphoreV2) | latch <id> (LeaderLatch)
//          | revocable (a revocable InterProcessMutex: prints "acquired <node>", waits for its
//            RevocationListener, prints "revoked", releases)
//          | revoke (Revoker.attemptRevoke on the node <path>)
// modes:   hold (acquire, print "acquired", wait for a line on stdin, release, print "released")
//          | loop <rounds> <slotdir> <hold_ms> (each round: acquire, take a marker slot, sleep,
//            free the slot, release; then "done rounds=R violations=V")
//
// JVM options: -Dpeer.digest=user:password (a digest login, every node CREATOR_ALL_ACL) and
// -Dpeer.acl=creator (every node CREATOR_ALL_ACL, the login left to JAAS); see run().
//
// Marker slots (the same rules as `Marker` in tests/curator.rs): an exclusive holder (mutex,
// latch) creates slot-0 with O_EXCL; a semaphore holder takes the first free of
// slot-0..slot-(N-1); a writer creates "w" and checks that no "r-*" exists; a reader creates
// "r-<unique>" and checks that "w" does not exist. Anything else is a violation.
//
// One line per event on stdout, flushed; on an exception the message goes to stderr and the
// exit status is 1.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;

public final class CuratorPeer {
    /** Something held; release() gives it back. */
    interface Held {
        void release() throws Exception;
    }

    /** Blocks until the recipe is held. */
    interface Acquirer {
        Held acquire() throws Exception;
    }

    /** InterProcessMutex with its (protected) lock node path exposed. */
    static final class RevocableMutex extends InterProcessMutex {
        RevocableMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    /** The shared mutual-exclusion check (see the header). */
    static final class Marker {
        final Path dir;
        final String kind; // "slots", "reader" or "writer"
        final int slots;
        int violations;

        Marker(Path dir, String kind, int slots) {
            this.dir = dir;
            this.kind = kind;
            this.slots = slots;
        }

        void violation(String what) {
            violations++;
            say("violation " + what);
        }

        /** Takes a slot: the file to delete before releasing, or null (a violation). */
        Path take() throws IOException {
            switch (kind) {
                case "slots":
                    for (int i = 0; i < slots; i++) {
                        Path slot = createNew("slot-" + i);
                        if (slot != null) {
                            return slot;
                        }
                    }
                    violation("all " + slots + " slots taken");
                    return null;
                case "writer":
                    Path w = createNew("w");
                    if (w == null) {
                        violation("w exists");
                        return null;
                    }
                    try (Stream<Path> files = Files.list(dir)) {
                        if (files.anyMatch(p -> p.getFileName().toString().startsWith("r-"))) {
                            violation("a reader holds with the writer");
                        }
                    }
                    return w;
                default:
                    Path r = createNew("r-java-" + UUID.randomUUID());
                    if (Files.exists(dir.resolve("w"))) {
                        violation("w exists with a reader");
                    }
                    return r;
            }
        }

        private Path createNew(String name) throws IOException {
            try {
                return Files.createFile(dir.resolve(name));
            } catch (FileAlreadyExistsException e) {
                return null;
            }
        }
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        try {
            run(args);
            System.exit(0);
        } catch (Throwable e) {
            System.err.println("CuratorPeer " + String.join(" ", args) + ": " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] a) throws Exception {
        String recipe = a[1];
        String path = a[2];
        int i = 3;
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                .connectString(a[0])
                .sessionTimeoutMs(5000)
                .connectionTimeoutMs(20000)
                .retryPolicy(new ExponentialBackoffRetry(100, 10));
        // -Dpeer.digest=user:password: log in with that digest identity and create every
        // node CREATOR_ALL_ACL (a Java service securing its locks with an ACLProvider).
        // -Dpeer.acl=creator: only the latter, for a login the JVM makes by itself: a SASL
        // login from the JAAS `Client` section (Kerberos), nothing set on Curator for it.
        String digest = System.getProperty("peer.digest");
        if (digest != null) {
            builder = builder.authorization("digest", digest.getBytes(StandardCharsets.UTF_8));
        }
        if (digest != null || "creator".equals(System.getProperty("peer.acl"))) {
            builder = builder.aclProvider(new ACLProvider() {
                @Override
                public List<ACL> getDefaultAcl() {
                    return ZooDefs.Ids.CREATOR_ALL_ACL;
                }

                @Override
                public List<ACL> getAclForPath(String p) {
                    return ZooDefs.Ids.CREATOR_ALL_ACL;
                }
            });
        }
        CuratorFramework client = builder.build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + a[0] + " within 30 s");
        }
        say("connected");
        Acquirer acquirer;
        String markerKind = "slots";
        int slots = 1;
        switch (recipe) {
            case "revoke":
                Revoker.attemptRevoke(client, path);
                say("revoke sent");
                client.close();
                return;
            case "revocable":
                revocable(client, path);
                client.close();
                return;
            case "mutex":
                acquirer = mutex(new InterProcessMutex(client, path));
                break;
            case "read":
                acquirer = mutex(new InterProcessReadWriteLock(client, path).readLock());
                markerKind = "reader";
                break;
            case "write":
                acquirer = mutex(new InterProcessReadWriteLock(client, path).writeLock());
                markerKind = "writer";
                break;
            case "semaphore":
                slots = Integer.parseInt(a[i++]);
                InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, slots);
                acquirer = () -> {
                    Lease lease = semaphore.acquire();
                    return lease::close;
                };
                break;
            case "latch":
                String id = a[i++];
                acquirer = () -> {
                    LeaderLatch latch = new LeaderLatch(client, path, id);
                    latch.start();
                    latch.await();
                    if (!latch.hasLeadership()) {
                        throw new IllegalStateException("await returned without leadership");
                    }
                    return latch::close;
                };
                break;
            default:
                throw new IllegalArgumentException("unknown recipe " + recipe);
        }
        String mode = a[i++];
        if (mode.equals("hold")) {
            Held held = acquirer.acquire();
            say("acquired");
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            held.release();
            say("released");
        } else if (mode.equals("loop")) {
            int rounds = Integer.parseInt(a[i++]);
            Marker marker = new Marker(Paths.get(a[i++]), markerKind, slots);
            long holdMs = Long.parseLong(a[i++]);
            for (int round = 0; round < rounds; round++) {
                Held held = acquirer.acquire();
                say("acquired");
                Path slot = marker.take();
                Thread.sleep(holdMs);
                if (slot != null) {
                    Files.delete(slot);
                }
                held.release();
                say("released");
            }
            say("done rounds=" + rounds + " violations=" + marker.violations);
        } else {
            throw new IllegalArgumentException("unknown mode " + mode);
        }
        client.close();
    }

    static Acquirer mutex(InterProcessMutex m) {
        return () -> {
            m.acquire();
            return m::release;
        };
    }

    static void revocable(CuratorFramework client, String path) throws Exception {
        RevocableMutex m = new RevocableMutex(client, path);
        CountDownLatch revoked = new CountDownLatch(1);
        m.makeRevocable(lock -> revoked.countDown());
        m.acquire();
        say("acquired " + m.node());
        revoked.await();
        say("revoked");
        m.release(); // from the owning thread, as InterProcessMutex requires
        say("released");
    }
}
