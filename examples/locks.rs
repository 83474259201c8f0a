//! Locks in action: workers sharing a mutex, a semaphore and a read/write lock, then a lock
//! holder cut off from ZooKeeper.
//!
//! With `ZK_CONNECT` unset it starts a throwaway ZooKeeper server on loopback (the
//! `testing` feature's harness). With `ZK_CONNECT=host:port,...` it uses your ensemble, under
//! a fresh `/zkguard-locks-<pid>` path; the partition part then goes through a local fault
//! proxy in front of your servers (nothing of yours is touched).
//!
//! ```text
//! cargo run --example locks --features testing
//! ```

use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, Mutex, RwLock, Semaphore};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BoxResult<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let (_cluster, connect) = match std::env::var("ZK_CONNECT") {
        Ok(cs) if !cs.is_empty() => (None, cs),
        _ => {
            println!("starting a throwaway ZooKeeper server on loopback ...");
            let c = TestCluster::start(1)?;
            let cs = c.connect_string();
            (Some(c), cs)
        }
    };
    let root = format!("/zkguard-locks-{}", std::process::id());
    let connect_one = |timeout: Duration| -> zkguard::Result<Client> {
        Client::builder(&connect).session_timeout(timeout).build()
    };

    // 1. Four workers, one mutex: they take turns, and the fencing token always grows.
    let path = format!("{root}/mutex");
    let last_token = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let client = connect_one(Duration::from_secs(6));
            let (path, last_token) = (path.clone(), last_token.clone());
            std::thread::spawn(move || -> zkguard::Result<()> {
                let client = client?;
                let lock = Mutex::new(&client, &path)?.with_data(format!("worker {w}"));
                for _ in 0..3 {
                    let guard = lock.acquire()?;
                    let token = guard.token() as usize;
                    let before = last_token.swap(token, Ordering::SeqCst);
                    assert!(token > before, "tokens only grow");
                    println!("  worker {w} holds the mutex, token {token}");
                }
                Ok(())
            })
        })
        .collect();
    println!("mutex {path}: 4 workers x 3 turns");
    for w in workers {
        w.join().map_err(|_| "worker panicked")??;
    }

    // 2. A semaphore with 2 permits and 5 workers: never more than 2 inside.
    let path = format!("{root}/semaphore");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..5)
        .map(|_| {
            let client = connect_one(Duration::from_secs(6));
            let (path, inside, most) = (path.clone(), inside.clone(), most.clone());
            std::thread::spawn(move || -> zkguard::Result<()> {
                let client = client?;
                let pool = Semaphore::new(&client, &path, 2)?;
                for _ in 0..3 {
                    let _permit = pool.acquire()?;
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "worker panicked")??;
    }
    println!(
        "semaphore {path}: 5 workers x 3 turns, at most {} inside at once (2 permits)",
        most.load(Ordering::SeqCst)
    );

    // 3. Read/write: readers share, a writer is alone.
    let client = connect_one(Duration::from_secs(6))?;
    let rw = RwLock::new(&client, &format!("{root}/rw"))?;
    let r1 = rw.read()?;
    let r2 = rw.try_read()?.ok_or("a second reader must get in")?;
    println!(
        "rwlock: two readers at once; a writer now? {}",
        rw.try_write()?.is_some()
    );
    drop((r1, r2));
    println!(
        "rwlock: readers gone; a writer now? {}",
        rw.try_write()?.is_some()
    );

    // 4. A holder cut off: invalid at once, lost when its session times out, and only then
    //    does someone else get the lock.
    let addrs: Vec<_> = connect
        .split('/')
        .next()
        .unwrap_or_default()
        .split(',')
        .filter_map(|h| h.to_socket_addrs().ok()?.next())
        .collect();
    let proxy = FaultProxy::start(&addrs)?;
    let cut = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(4))
        .build()?;
    let path = format!("{root}/partition");
    let held = Mutex::new(&cut, &path)?.acquire()?;
    let lost = held.lost();
    println!(
        "partition: holder has {} (token {}), valid: {}",
        held.path(),
        held.token(),
        held.is_valid()
    );
    let other = connect_one(Duration::from_secs(6))?;
    // Whether the holder had heard of its loss is asked by the other session the moment it
    // gets the lock (the order of two instants stamped by two threads would depend on when
    // a loaded machine wakes each).
    let holder_lost = held.lost();
    let waiter = std::thread::spawn(move || -> zkguard::Result<(Instant, bool)> {
        let g = Mutex::new(&other, &path)?.acquire()?;
        let knew = holder_lost.try_recv().is_ok();
        let at = Instant::now();
        drop(g);
        Ok((at, knew))
    });
    let cut_at = Instant::now();
    proxy.blackhole();
    while held.is_valid() {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!(
        "partition: the holder knows it is not valid {:?} after the cut \
         (a connection silent for 2/3 of the session timeout is dropped)",
        cut_at.elapsed()
    );
    lost.recv_timeout(Duration::from_secs(30))?;
    let lost_at = Instant::now();
    println!(
        "partition: lost {:?} after the cut (session timeout {:?})",
        lost_at - cut_at,
        cut.session_timeout()
    );
    let (other_at, knew) = waiter.join().map_err(|_| "waiter panicked")??;
    println!(
        "partition: the other session got the lock {:?} after the holder learned it lost it",
        other_at.saturating_duration_since(lost_at)
    );
    assert!(
        knew,
        "the other session got the lock before the holder knew it lost it"
    );
    proxy.heal();
    drop(held);
    let cleanup = connect_one(Duration::from_secs(6))?;
    for dir in ["mutex", "semaphore", "rw", "partition"] {
        let _ = cleanup.delete(&format!("{root}/{dir}"), None);
    }
    let _ = cleanup.delete(&root, None);
    println!("done");
    Ok(())
}
