//! What one server says about itself: reachability, the four-letter words (`srvr`,
//! `conf`, `mntr`, `envi`) and, where they are not whitelisted, the admin server's
//! `/commands/...` (JSON over HTTP). Reading only: nothing here writes to ZooKeeper.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;
use zkguard::admin::{self, AdminError, Srvr};

use super::report::{RoundTrips, ServerReport, Spread, Unread};

/// How long one exchange with a server (a word, an HTTP request) may take.
const EXCHANGE: Duration = Duration::from_secs(3);

/// The words the doctor asks, and the admin server command that says the same.
const WORDS: [(&str, &str); 4] = [
    ("srvr", "server_stats"),
    ("conf", "configuration"),
    ("mntr", "monitor"),
    ("envi", "environment"),
];

/// One server as the doctor saw it.
#[derive(Default)]
pub struct Server {
    /// `host:port` as the connect string names it.
    pub address: String,
    /// A TCP connection to its client port succeeded.
    pub reachable: bool,
    /// Why it is not reachable.
    pub error: Option<String>,
    pub version: Option<String>,
    /// `standalone`, `leader`, `follower`, `observer` (or why it does not serve).
    pub mode: Option<String>,
    /// Round trips of a session of its own to this server alone (milliseconds).
    pub rtt_ms: Vec<f64>,
    /// Configuration keys as `conf` names them (`tickTime`, `syncLimit` …).
    pub conf: BTreeMap<String, String>,
    /// `mntr`'s figures without the `zk_` prefix (`avg_latency`, `fsync_threshold_exceed_count` …).
    pub mntr: BTreeMap<String, String>,
    /// `envi`'s `java.version`, if read.
    pub java: Option<String>,
    /// Where each of srvr/conf/mntr/envi was read from (`4lw`, `admin`), or why not.
    pub sources: BTreeMap<&'static str, Result<&'static str, String>>,
    /// Why nothing it says is read (it sent more than [`admin::MAX_REPLY`]): then nothing more is
    /// asked of it.
    pub unreadable: Option<String>,
}

impl Server {
    /// Asks `address` (`host:port`) everything it answers: the words first, then the
    /// admin server at `admin_port` of the same host for the words refused.
    pub fn probe(address: &str, admin_port: u16) -> Server {
        let mut s = Server {
            address: address.to_string(),
            ..Server::default()
        };
        let addr = match resolve(address) {
            Ok(a) => a,
            Err(e) => {
                s.error = Some(e);
                return s;
            }
        };
        if let Err(e) = TcpStream::connect_timeout(&addr, EXCHANGE) {
            s.error = Some(format!("cannot connect to {address}: {e}"));
            return s;
        }
        s.reachable = true;
        let admin = SocketAddr::new(addr.ip(), admin_port);
        // A port that does not answer one word in time answers none (a TLS port): the
        // others are not waited for again.
        let mut silent: Option<AdminError> = None;
        for (word, command) in WORDS {
            if s.unreadable.is_some() {
                let why = format!("`{word}`: not asked (the server is unreadable)");
                s.sources.insert(word, Err(why));
                continue;
            }
            let answer = match &silent {
                Some(e) => Err(e.clone()),
                None => admin::four_letter(addr, word, EXCHANGE),
            };
            let refused = match answer {
                Ok(text) => {
                    s.take_word(word, &text);
                    s.sources.insert(word, Ok("4lw"));
                    continue;
                }
                Err(e @ AdminError::TooLarge { .. }) => {
                    let why = format!("`{word}`: {e}");
                    s.unreadable = Some(why.clone());
                    s.sources.insert(word, Err(why));
                    continue;
                }
                Err(e) => {
                    if matches!(e, AdminError::NoAnswer { .. }) {
                        silent = Some(e.clone());
                    }
                    e
                }
            };
            let read = match admin_json(admin, command) {
                Ok(v) => {
                    s.take_admin(word, &v);
                    Ok("admin")
                }
                Err((oversized, e)) => {
                    let why = format!("`{word}`: {refused}; AdminServer at {admin}: {e}");
                    if oversized {
                        s.unreadable = Some(why.clone());
                    }
                    Err(why)
                }
            };
            s.sources.insert(word, read);
        }
        s
    }

    fn take_word(&mut self, word: &str, text: &str) {
        match word {
            "srvr" => {
                let srvr = Srvr::parse(text);
                self.version = srvr.short_version();
                self.mode = srvr.mode;
            }
            "conf" => self.conf = admin::parse_conf(text),
            "mntr" => self.mntr = admin::parse_mntr(text),
            _ => self.java = admin::parse_conf(text).remove("java.version"),
        }
    }

    /// The admin server's JSON in the words' terms.
    fn take_admin(&mut self, word: &str, v: &Value) {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let Some(map) = v.as_object() else { return };
        match word {
            "srvr" => {
                let stats = map.get("server_stats").and_then(Value::as_object);
                let version = map
                    .get("version")
                    .or_else(|| stats.and_then(|s| s.get("version")));
                self.version = Srvr::new(version.map(text), None).short_version();
                self.mode = stats.and_then(|s| s.get("server_state")).map(text);
            }
            "conf" => {
                for (k, v) in map {
                    self.conf.insert(camel(k), text(v));
                }
            }
            "mntr" => {
                for (k, v) in map {
                    self.mntr.insert(k.clone(), text(v));
                }
                if self.mode.is_none() {
                    self.mode = map.get("server_state").map(text);
                }
            }
            _ => self.java = map.get("java.version").map(text),
        }
    }

    /// A `conf` number (`tickTime` …).
    pub fn conf_u64(&self, key: &str) -> Option<u64> {
        self.conf.get(key)?.parse().ok()
    }

    /// A `mntr` number (`max_latency` …).
    pub fn mntr_f64(&self, key: &str) -> Option<f64> {
        self.mntr.get(key)?.parse().ok()
    }

    /// The words nobody answered, with why.
    pub fn unread(&self) -> Vec<(&'static str, &str)> {
        self.sources
            .iter()
            .filter_map(|(w, r)| r.as_ref().err().map(|e| (*w, e.as_str())))
            .collect()
    }

    /// The server as the JSON report shows it.
    pub fn report(&self) -> ServerReport<'_> {
        ServerReport {
            address: &self.address,
            reachable: self.reachable,
            error: self.error.as_deref(),
            version: self.version.as_deref(),
            mode: self.mode.as_deref(),
            rtt_ms: Spread::of(&self.rtt_ms).map(|spread| RoundTrips {
                spread,
                count: self.rtt_ms.len(),
            }),
            read_from: (self.sources.iter())
                .map(|(w, r)| (*w, r.as_ref().ok().copied()))
                .collect(),
            unread: (self.unread().into_iter())
                .map(|(word, why)| Unread { word, why })
                .collect(),
            unreadable: self.unreadable.as_deref(),
            conf: &self.conf,
            mntr: &self.mntr,
            java_version: self.java.as_deref(),
        }
    }
}

/// The admin server's `tick_time` → `conf`'s `tickTime`.
fn camel(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        match (c, up) {
            ('_', _) => up = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                up = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// `host:port` to one address (the first the resolver gives).
fn resolve(address: &str) -> Result<SocketAddr, String> {
    address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address} resolves to no address"))
}

/// The admin server's answer to `command` as JSON; `Err` says why not, and whether it sent
/// too much (then the server is unreadable).
fn admin_json(addr: SocketAddr, command: &str) -> Result<Value, (bool, String)> {
    let body = admin::admin_command(addr, command, EXCHANGE)
        .map_err(|e| (matches!(e, AdminError::TooLarge { .. }), e.to_string()))?;
    serde_json::from_str(&body).map_err(|e| (false, format!("/commands/{command}: not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn words_and_admin_json_read_alike() {
        let mut a = Server::default();
        a.take_word(
            "srvr",
            "Zookeeper version: 3.8.0-5a02a05, built on 2022\nMode: follower\n",
        );
        a.take_word("conf", "tickTime=2000\nsyncLimit=5\n");
        a.take_word("mntr", "zk_max_latency\t12\nzk_server_state\tfollower\n");
        let mut b = Server::default();
        b.take_admin(
            "srvr",
            &json!({"version": "3.8.0-5a02a05, built on 2022", "server_stats": {"server_state": "follower"}}),
        );
        b.take_admin("conf", &json!({"tick_time": 2000, "sync_limit": 5}));
        b.take_admin(
            "mntr",
            &json!({"max_latency": 12, "server_state": "follower"}),
        );
        for s in [&a, &b] {
            assert_eq!(s.version.as_deref(), Some("3.8.0"));
            assert_eq!(s.mode.as_deref(), Some("follower"));
            assert_eq!(s.conf_u64("tickTime"), Some(2000));
            assert_eq!(s.conf_u64("syncLimit"), Some(5));
            assert_eq!(s.mntr_f64("max_latency"), Some(12.0));
        }
    }
}
