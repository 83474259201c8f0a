//! A first connect with nothing listening yet: it says so at once, in a warning, and keeps
//! trying until its deadline, so a server that starts meanwhile is connected. (A file of its
//! own: the test installs the process's logger to read the warning.)

use std::sync::Mutex;
use std::time::Duration;

use crossbeam_channel::Sender;
use zkguard::testing::TestCluster;
use zkguard::Client;

/// Passes the client's warnings to the test.
struct Capture(Mutex<Option<Sender<String>>>);

static CAPTURE: Capture = Capture(Mutex::new(None));

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn && m.target().starts_with("zkguard::client")
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            if let Some(tx) = &*self.0.lock().unwrap() {
                let _ = tx.send(r.args().to_string());
            }
        }
    }

    fn flush(&self) {}
}

const WITHIN: Duration = Duration::from_secs(20);

#[test]
fn a_first_connect_to_a_server_not_listening_yet_warns_at_once_and_connects_once_it_starts() {
    let (tx, warnings) = crossbeam_channel::unbounded();
    *CAPTURE.0.lock().unwrap() = Some(tx);
    log::set_logger(&CAPTURE).expect("the only logger of this test binary");
    log::set_max_level(log::LevelFilter::Warn);

    let cluster = TestCluster::start(1).unwrap();
    cluster.stop(0).unwrap(); // its port refuses connections now
    let cs = cluster.connect_string();
    let connecting = {
        let cs = cs.clone();
        std::thread::spawn(move || {
            Client::builder(&cs)
                .connect_timeout(Duration::from_secs(120))
                .build()
        })
    };
    // Told after the first refusal, while build() goes on trying.
    let warning = warnings
        .recv_timeout(WITHIN)
        .expect("a warning once the server refused");
    assert!(
        warning.contains(&cs) && warning.contains("trying again until the connect timeout"),
        "{warning}"
    );
    assert!(!connecting.is_finished(), "build() gave up: {warning}");

    // A server that starts before the deadline gets the client.
    cluster.start_server(0).unwrap();
    let client = connecting
        .join()
        .unwrap()
        .expect("connected once the server started");
    assert!(client.exists("/").unwrap().is_some());
    // One warning, not one per attempt.
    let more: Vec<String> = warnings.try_iter().collect();
    assert!(more.is_empty(), "more warnings: {more:?}");
}
