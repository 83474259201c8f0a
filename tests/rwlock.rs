//! The read/write lock against a real ZooKeeper server: shared reads, and a queued writer
//! blocking later readers. (Its handoff fast path: `tests/handoff.rs`.)

mod common;

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use common::{
    assert_quiet, children, connect, datas, recv, shared_cluster, spawn, unique, wait_children,
    wait_until, WITHIN,
};
use zkguard::RwLock;

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// 4. Read/write lock
// ---------------------------------------------------------------------------------------

#[test]
fn rwlock_shares_reads_and_a_queued_writer_blocks_later_readers() {
    let cs = shared_cluster().connect_string();
    let path = unique("rw");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let d = connect(&cs, SESSION);
    let lock_a = RwLock::new(&a, &path).unwrap().with_data("r1");
    let lock_b = RwLock::new(&b, &path).unwrap().with_data("r2");
    let lock_d = RwLock::new(&d, &path).unwrap();

    // Two readers at once.
    let r1 = lock_a.read().unwrap();
    let r2 = lock_b
        .try_read()
        .unwrap()
        .expect("a second reader is let in");
    assert!(r1.is_valid() && r2.is_valid());
    // A writer cannot get in past them, and leaves nothing behind.
    assert!(lock_d.try_write().unwrap().is_none());
    assert!(lock_d
        .write_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    wait_until(WITHIN, "the refused writer's node gone", || {
        children(&a, &path).len() == 2
    });

    let log = Arc::new(StdMutex::new(Vec::<&'static str>::new()));
    // A writer queues behind the readers.
    let (w_go_tx, w_go_rx) = crossbeam_channel::bounded::<()>(1);
    let (w_in_tx, w_in_rx) = crossbeam_channel::bounded::<()>(1);
    let writer = {
        let (cs, path, log) = (cs.clone(), path.clone(), log.clone());
        spawn(move || {
            let client = connect(&cs, SESSION);
            let lock = RwLock::new(&client, &path).unwrap().with_data("w");
            let g = lock.write().unwrap();
            log.lock().unwrap().push("w in");
            w_in_tx.send(()).unwrap();
            w_go_rx.recv().unwrap();
            log.lock().unwrap().push("w out");
            g.release().unwrap();
        })
    };
    wait_until(WITHIN, "the writer queued", || {
        datas(&lock_a.participants().unwrap()).last() == Some(&b"w".to_vec())
    });
    assert_quiet(&w_in_rx, "the writer got in while readers hold");

    // No writer starvation: a reader arriving after the waiting writer waits too.
    assert!(
        lock_d.try_read().unwrap().is_none(),
        "reader jumped the queued writer"
    );
    assert!(lock_d
        .read_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    wait_until(WITHIN, "the refused readers' nodes gone", || {
        children(&a, &path).len() == 3
    });
    let late_reader = {
        let (cs, path, log) = (cs.clone(), path.clone(), log.clone());
        spawn(move || {
            let client = connect(&cs, SESSION);
            let lock = RwLock::new(&client, &path).unwrap().with_data("r3");
            let g = lock.read().unwrap();
            log.lock().unwrap().push("r3 in");
            g.release().unwrap();
        })
    };
    wait_until(WITHIN, "the late reader queued", || {
        datas(&lock_a.participants().unwrap()).last() == Some(&b"r3".to_vec())
    });
    let queue = datas(&lock_a.participants().unwrap());
    assert_eq!(
        queue,
        vec![
            b"r1".to_vec(),
            b"r2".to_vec(),
            b"w".to_vec(),
            b"r3".to_vec()
        ]
    );
    assert_quiet(&late_reader, "the late reader got in past the writer");

    // One reader leaves: the writer still waits for the other.
    r1.release().unwrap();
    assert_quiet(&w_in_rx, "the writer got in while a reader holds");
    // The last reader leaves: the writer gets in, alone.
    drop(r2);
    recv(&w_in_rx, WITHIN, "writer in");
    assert!(
        lock_d.try_read().unwrap().is_none(),
        "reader beside a writer"
    );
    assert!(lock_d.try_write().unwrap().is_none(), "two writers");
    assert!(lock_a
        .read_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_quiet(&late_reader, "the late reader got in beside the writer");
    w_go_tx.send(()).unwrap();
    recv(&writer, WITHIN, "writer done");
    recv(&late_reader, WITHIN, "late reader done");
    assert_eq!(*log.lock().unwrap(), vec!["w in", "w out", "r3 in"]);

    // Free again: readers and a writer get in.
    let r = lock_d.try_read().unwrap().expect("free for readers");
    drop(r);
    let w = lock_d
        .write_timeout(WITHIN)
        .unwrap()
        .expect("free for a writer");
    drop(w);
    wait_children(&a, &path, &[]);
}
