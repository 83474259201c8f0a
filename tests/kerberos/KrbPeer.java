// A Java ZooKeeper client for tests/harness_kerberos.rs: connects, logs in with whatever
// the JVM's JAAS `Client` section says (Kerberos here), runs one operation and prints
// what happened, one line each:
//   event <KeeperState>             every session event (SaslAuthenticated, AuthFailed, ...)
//   whoami <scheme> <id>            `whoami`: the identities the server gives this session
//   created <path> sasl:<id>        `create <path>`: a node only our SASL identity may use
//   read ok | error <Code>          `read <path>`: reading a node
//   error <Code>                    a request refused by the server
// Usage: KrbPeer <connect string> whoami | create <path> | read <path>
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;

public class KrbPeer {
    public static void main(String[] args) throws Exception {
        LinkedBlockingQueue<KeeperState> events = new LinkedBlockingQueue<>();
        ZooKeeper zk = new ZooKeeper(args[0], 20000, e -> {
            if (e.getPath() == null) {
                System.out.println("event " + e.getState());
                events.add(e.getState());
            }
        });
        // With a SASL login, wait for its outcome; without one, for the connection.
        boolean sasl = !"false".equals(System.getProperty("zookeeper.sasl.client"));
        for (;;) {
            KeeperState s = events.poll(60, TimeUnit.SECONDS);
            if (s == null) {
                System.out.println("timeout");
                System.exit(2);
            }
            if (s == KeeperState.AuthFailed || s == KeeperState.SaslAuthenticated
                    || (!sasl && s == KeeperState.SyncConnected)) {
                break;
            }
        }
        try {
            switch (args[1]) {
                case "whoami":
                    for (ClientInfo info : zk.whoAmI()) {
                        System.out.println("whoami " + info.getAuthScheme() + " " + info.getUser());
                    }
                    break;
                case "create": {
                    String id = null;
                    for (ClientInfo info : zk.whoAmI()) {
                        if (info.getAuthScheme().equals("sasl")) {
                            id = info.getUser();
                        }
                    }
                    List<ACL> acl = new ArrayList<>();
                    acl.add(new ACL(ZooDefs.Perms.ALL, new Id("sasl", id)));
                    zk.create(args[2], new byte[] {1}, acl, CreateMode.PERSISTENT);
                    System.out.println("created " + args[2] + " sasl:" + id);
                    break;
                }
                case "read":
                    zk.getData(args[2], false, null);
                    System.out.println("read ok");
                    break;
                default:
                    System.out.println("unknown operation " + args[1]);
            }
        } catch (KeeperException e) {
            System.out.println("error " + e.code());
        }
        zk.close();
    }
}
