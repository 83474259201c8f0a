//! What one server says about itself: reachability, the four-letter words (`srvr`,
//! `conf`, `mntr`, `envi`) and, where they are not whitelisted, the admin server's
//! `/commands/...` (JSON over HTTP). Reading only: nothing here writes to ZooKeeper.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What a port that keeps silent is said to give (a TLS port answers no plain text).
const NO_ANSWER: &str = "no answer (a TLS-only port answers no plain four-letter words)";

/// What a reply over [`MAX_REPLY`] is said to be (the server is then unreadable).
const OVERSIZED: &str = "a reply over 1 MiB, more than any four-letter word or AdminServer \
    command answers: not read further, nothing more asked of this server";

/// The most read of one reply (a word's, an admin server command's): `mntr`, `conf` and
/// `envi` answer a few KiB. Whatever listens on a port of the connect string chooses what
/// it sends: the doctor's memory does not grow with it.
const MAX_REPLY: usize = 1 << 20;

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
    /// Why nothing it says is read (it sent more than [`MAX_REPLY`]): then nothing more is
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
        let mut silent: Option<String> = None;
        for (word, command) in WORDS {
            if s.unreadable.is_some() {
                let why = format!("`{word}`: not asked (the server is unreadable)");
                s.sources.insert(word, Err(why));
                continue;
            }
            let answer = match &silent {
                Some(why) => Err(format!("`{word}`: {why}")),
                None => four_letter(addr, word),
            };
            if let Err(e) = &answer {
                if e.contains(OVERSIZED) {
                    s.unreadable = Some(e.clone());
                    s.sources.insert(word, Err(e.clone()));
                    continue;
                }
                if silent.is_none() && e.contains(NO_ANSWER) {
                    silent = Some(NO_ANSWER.to_string());
                }
            }
            let read = match answer {
                Ok(text) => {
                    s.take_word(word, &text);
                    Ok("4lw")
                }
                Err(refused) => match http_json(admin, command) {
                    Ok(v) => {
                        s.take_admin(word, &v);
                        Ok("admin")
                    }
                    Err(e) => {
                        let why = format!("{refused}; AdminServer at {admin}: {e}");
                        if e.contains(OVERSIZED) {
                            s.unreadable = Some(why.clone());
                        }
                        Err(why)
                    }
                },
            };
            s.sources.insert(word, read);
        }
        s
    }

    fn take_word(&mut self, word: &str, text: &str) {
        match word {
            "srvr" => {
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("Zookeeper version:") {
                        self.version = Some(short_version(v.trim()));
                    } else if let Some(v) = line.strip_prefix("Mode:") {
                        self.mode = Some(v.trim().to_string());
                    }
                }
            }
            "conf" => {
                for (k, v) in text.lines().filter_map(|l| l.split_once('=')) {
                    self.conf.insert(k.trim().into(), v.trim().into());
                }
            }
            "mntr" => {
                for (k, v) in text.lines().filter_map(|l| l.split_once('\t')) {
                    let k = k.trim();
                    self.mntr
                        .insert(k.strip_prefix("zk_").unwrap_or(k).into(), v.trim().into());
                }
            }
            _ => {
                self.java = text
                    .lines()
                    .find_map(|l| l.strip_prefix("java.version="))
                    .map(|v| v.trim().to_string());
            }
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
                self.version = map
                    .get("version")
                    .or_else(|| stats.and_then(|s| s.get("version")))
                    .map(|v| short_version(&text(v)));
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

    pub fn json(&self) -> Value {
        let rtt = match self.rtt_ms.is_empty() {
            true => Value::Null,
            false => {
                let min = self.rtt_ms.iter().cloned().fold(f64::INFINITY, f64::min);
                let max = self.rtt_ms.iter().cloned().fold(0.0, f64::max);
                let avg = self.rtt_ms.iter().sum::<f64>() / self.rtt_ms.len() as f64;
                json!({ "min": min, "avg": avg, "max": max, "count": self.rtt_ms.len() })
            }
        };
        let sources: BTreeMap<&str, Value> = self
            .sources
            .iter()
            .map(|(w, r)| match r {
                Ok(from) => (*w, json!(from)),
                Err(_) => (*w, Value::Null),
            })
            .collect();
        json!({
            "address": self.address,
            "reachable": self.reachable,
            "error": self.error,
            "version": self.version,
            "mode": self.mode,
            "rtt_ms": rtt,
            "read_from": sources,
            "unread": self.unread().iter().map(|(w, e)| json!({"word": w, "why": e})).collect::<Vec<_>>(),
            "unreadable": self.unreadable,
            "conf": self.conf,
            "mntr": self.mntr,
            "java_version": self.java,
        })
    }
}

/// `3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on …` → `3.8.0`.
fn short_version(v: &str) -> String {
    v.split(['-', ',', ' ']).next().unwrap_or(v).to_string()
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

/// A four-letter word's reply; `Err` says why there is none (not whitelisted, a TLS-only
/// port, no answer).
fn four_letter(addr: SocketAddr, word: &str) -> Result<String, String> {
    let reply = exchange(addr, word.as_bytes()).map_err(|e| format!("`{word}`: {e}"))?;
    if reply.contains("is not executed because it is not in the whitelist") {
        return Err(format!("`{word}` is not in 4lw.commands.whitelist"));
    }
    if reply.trim().is_empty() {
        return Err(format!("`{word}`: an empty answer (the words refused)"));
    }
    Ok(reply)
}

/// `GET /commands/COMMAND` of the admin server at `addr`, as JSON.
fn http_json(addr: SocketAddr, command: &str) -> Result<Value, String> {
    let req = format!("GET /commands/{command} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let reply = exchange(addr, req.as_bytes())?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or("not an HTTP answer")?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200") {
        return Err(format!("/commands/{command}: {status}"));
    }
    serde_json::from_str(body).map_err(|e| format!("/commands/{command}: not JSON: {e}"))
}

/// Writes `msg`, reads to EOF, within [`EXCHANGE`] and at most [`MAX_REPLY`] bytes (more
/// is an error saying [`OVERSIZED`]).
fn exchange(addr: SocketAddr, msg: &[u8]) -> Result<String, String> {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, EXCHANGE).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(EXCHANGE))
        .map_err(|e| e.to_string())?;
    s.write_all(msg).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = EXCHANGE.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(format!("{NO_ANSWER} within {} s", EXCHANGE.as_secs()));
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if out.len() + n > MAX_REPLY => return Err(OVERSIZED.to_string()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A server that closes with a reset after its answer: keep what came.
            Err(_) if !out.is_empty() => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("{NO_ANSWER} within {} s", EXCHANGE.as_secs()))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
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
