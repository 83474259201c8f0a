mod common;
use std::time::Duration;
use common::*;
use zkguard::{LeaderElection, LeaderEvent};

#[test]
fn smoke() {
    let c = shared_cluster();
    let a = connect(&c.connect_string(), Duration::from_secs(4));
    let b = connect(&c.connect_string(), Duration::from_secs(4));
    let path = unique("el");
    let ea = LeaderElection::new(&a, &path, "a").unwrap();
    let eb = LeaderElection::new(&b, &path, "b").unwrap();
    let la = ea.lead().unwrap();
    assert!(eb.try_lead().unwrap().is_none());
    la.confirm().unwrap();
    let cb = eb.join().unwrap();
    let ev = cb.events();
    std::thread::sleep(Duration::from_millis(200));
    let ps = ea.participants().unwrap();
    println!("{ps:?}");
    assert_eq!(ps.len(), 2);
    assert!(ps[0].holds && ps[0].id() == "a");
    let before = b.stats().requests;
    la.resign().unwrap();
    assert_eq!(ev.recv_timeout(Duration::from_secs(5)).unwrap(), LeaderEvent::Elected { token: cb.token().unwrap() });
    println!("requests by b during failover: {}", b.stats().requests - before);
    assert!(cb.is_leader());
    cb.confirm().unwrap();
    assert_eq!(ea.leader().unwrap().unwrap().id(), "b");
    assert!(cb.resign().unwrap());
    assert_eq!(ev.recv_timeout(Duration::from_secs(5)).unwrap(), LeaderEvent::Resigned);
    assert_eq!(ev.recv_timeout(Duration::from_secs(5)).unwrap(), LeaderEvent::Elected { token: cb.token().unwrap() });
    drop(cb);
    assert!(ev.recv_timeout(Duration::from_secs(5)).is_err());
    // unfair
    let upath = unique("uel");
    let ua = LeaderElection::unfair(&a, &upath, "a").unwrap();
    let ub = LeaderElection::unfair(&b, &upath, "b").unwrap();
    let l = ua.lead().unwrap();
    l.confirm().unwrap();
    assert!(ub.try_lead().unwrap().is_none());
    assert_eq!(ub.leader().unwrap().unwrap().id(), "a");
    let cu = ub.join().unwrap();
    drop(l);
    assert!(cu.wait_for_leadership(Duration::from_secs(5)).unwrap());
    // fair on unfair's path
    let bad = LeaderElection::unfair(&a, &path, "x").unwrap();
    println!("{:?}", bad.try_lead());
    // confirm of deposed leader
    let lx = ea.lead().unwrap();
    b.delete(lx.path(), None).unwrap();
    println!("confirm after delete: {:?}", lx.confirm());
    a.close().unwrap();
}
