//! Lock recipes against a real ZooKeeper server: exclusion, order, cleanup, the rules of
//! each lock type.

mod common;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{connect, shared_cluster, unique};
use zkguard::Mutex;

#[test]
fn eight_sessions_never_hold_the_same_mutex_at_once_and_tokens_rise() {
    let cs = shared_cluster().connect_string();
    let path = unique("mx");
    let holders = Arc::new(AtomicI64::new(0));
    let last_token = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cs, path) = (cs.clone(), path.clone());
            let (holders, last_token) = (holders.clone(), last_token.clone());
            std::thread::spawn(move || {
                let client = connect(&cs, Duration::from_secs(10));
                let lock = Mutex::new(&client, &path).unwrap();
                for _ in 0..50 {
                    let g = lock.acquire().unwrap();
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let prev = last_token.swap(g.token(), Ordering::SeqCst);
                    assert!(g.token() > prev, "token {} after {prev}", g.token());
                    assert!(g.is_valid());
                    holders.fetch_sub(1, Ordering::SeqCst);
                    g.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let client = connect(&cs, Duration::from_secs(10));
    let (left, _) = client.get_children(&path).unwrap();
    assert!(left.is_empty(), "nodes left: {left:?}");
}
