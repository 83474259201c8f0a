//! SASL DIGEST-MD5 (RFC 2831), the client side, as ZooKeeper's `DigestLoginModule` expects
//! it: protocol `zookeeper`, server name `zk-sasl-md5`, quality of protection `auth` (no
//! integrity or confidentiality layer). Pure logic; the connection layer carries the tokens
//! in `sasl` requests (see `conn/connect.rs`). Never panics on what a server sends.

use std::fmt;

use super::config::SaslLogin;
use crate::error::ConnectFailure;

/// The mechanism of a client's SASL login, run against one server.
pub(crate) enum Mechanism {
    Digest(DigestMd5Client),
    #[cfg(feature = "kerberos")]
    Gssapi(super::kerberos::GssapiClient),
}

impl Mechanism {
    /// Starts a login with the server `server` (its connect-string entry, `host:port`): the
    /// mechanism and the first token to send.
    #[cfg_attr(not(feature = "kerberos"), allow(unused_variables))]
    pub(crate) fn start(
        login: &SaslLogin,
        server: &str,
    ) -> Result<(Mechanism, Vec<u8>), ConnectFailure> {
        match login {
            SaslLogin::Digest { user, password } => {
                let m = DigestMd5Client::new(user, password);
                let first = m.initial_response();
                Ok((Mechanism::Digest(m), first))
            }
            #[cfg(feature = "kerberos")]
            SaslLogin::Kerberos(login) => {
                let (m, first) =
                    super::kerberos::GssapiClient::start(login, super::path::host_of(server))?;
                Ok((Mechanism::Gssapi(m), first))
            }
        }
    }

    /// Answers one token of the server: `Some(reply)` to send, or `None` when the login is
    /// complete.
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, ConnectFailure> {
        match self {
            Mechanism::Digest(m) => m.step(token).map_err(|e| ConnectFailure::Sasl {
                reason: e.to_string(),
            }),
            #[cfg(feature = "kerberos")]
            Mechanism::Gssapi(m) => m.step(token),
        }
    }
}

/// The digest-uri ZooKeeper's server checks: `<protocol>/<server name>`.
const DIGEST_URI: &str = "zookeeper/zk-sasl-md5";

/// Why a login cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SaslError(pub String);

impl fmt::Display for SaslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(why: impl Into<String>) -> Result<T, SaslError> {
    Err(SaslError(why.into()))
}

enum Stage {
    /// Waiting for the server's digest-challenge.
    Challenge,
    /// Sent our digest-response; waiting for the server's `rspauth`, which it must prove
    /// with this value.
    RspAuth(String),
    Done,
}

/// One DIGEST-MD5 login.
pub(crate) struct DigestMd5Client {
    user: String,
    password: String,
    cnonce: String,
    stage: Stage,
}

impl DigestMd5Client {
    pub(crate) fn new(user: &str, password: &str) -> DigestMd5Client {
        // 128 random bits from the OS generator behind uuid v4, as hex.
        let cnonce = format!("{:032x}", uuid::Uuid::new_v4().as_u128());
        Self::with_cnonce(user, password, &cnonce)
    }

    fn with_cnonce(user: &str, password: &str, cnonce: &str) -> DigestMd5Client {
        DigestMd5Client {
            user: user.to_string(),
            password: password.to_string(),
            cnonce: cnonce.to_string(),
            stage: Stage::Challenge,
        }
    }

    /// What the client sends first: DIGEST-MD5 has no initial response, so an empty token
    /// asks the server for its challenge (as ZooKeeper's Java client does).
    pub(crate) fn initial_response(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Answers one token of the server: `Some(reply)` to send, or `None` when the login is
    /// complete (the server proved it knows the password too).
    pub(crate) fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Challenge => {
                let (reply, expected) = self.respond(token)?;
                self.stage = Stage::RspAuth(expected);
                Ok(Some(reply))
            }
            Stage::RspAuth(expected) => {
                let fields = parse(token)?;
                match field(&fields, "rspauth") {
                    Some(got) if got.eq_ignore_ascii_case(&expected) => Ok(None),
                    Some(_) => err(
                        "the server's rspauth is wrong: it does not know the password \
                         (not the server we meant to reach?)",
                    ),
                    None => err("the server's final token has no rspauth"),
                }
            }
            Stage::Done => err("the server sent a token after the login was complete"),
        }
    }

    /// The digest-response to a digest-challenge, and the rspauth the server must return.
    fn respond(&self, challenge: &[u8]) -> Result<(Vec<u8>, String), SaslError> {
        if challenge.is_empty() {
            // What ZooKeeper answers when it has no SASL server to run (no JAAS `Server`
            // section for DIGEST-MD5).
            return err(
                "the server sent no DIGEST-MD5 challenge: SASL is not set up on it (no JAAS \
                 Server section)",
            );
        }
        let fields = parse(challenge)?;
        let nonce = field(&fields, "nonce").ok_or_else(|| {
            SaslError("the server's challenge has no nonce (not DIGEST-MD5?)".into())
        })?;
        if let Some(alg) = field(&fields, "algorithm") {
            if !alg.eq_ignore_ascii_case("md5-sess") {
                return err(format!("unsupported algorithm {alg:?} (md5-sess only)"));
            }
        }
        // Options are listed in one value, comma-separated.
        let qops: Vec<&str> = field(&fields, "qop")
            .unwrap_or("auth")
            .split(',')
            .map(str::trim)
            .collect();
        if !qops.iter().any(|q| q.eq_ignore_ascii_case("auth")) {
            return err(format!(
                "the server offers quality of protection {qops:?}; zkguard speaks \"auth\""
            ));
        }
        let realm = field(&fields, "realm").unwrap_or("");
        let utf8 = field(&fields, "charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
        let nc = "00000001";
        let qop = "auth";
        let proof = |a2: &str| {
            digest(
                &self.user,
                realm,
                &self.password,
                nonce,
                &self.cnonce,
                nc,
                qop,
                a2,
            )
        };
        let response = proof(&format!("AUTHENTICATE:{DIGEST_URI}"));
        let rspauth = proof(&format!(":{DIGEST_URI}"));
        let mut out = String::new();
        if utf8 {
            out.push_str("charset=utf-8,");
        }
        out.push_str(&format!(
            "username=\"{}\",realm=\"{}\",nonce=\"{}\",nc={nc},cnonce=\"{}\",\
             digest-uri=\"{DIGEST_URI}\",maxbuf=65536,response={response},qop={qop}",
            quote(&self.user),
            quote(realm),
            quote(nonce),
            self.cnonce
        ));
        Ok((out.into_bytes(), rspauth))
    }
}

/// RFC 2831 section 2.1.2.1: HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2)))) with
/// A1 = H(user:realm:password):nonce:cnonce and A2 as given.
#[allow(clippy::too_many_arguments)]
fn digest(
    user: &str,
    realm: &str,
    password: &str,
    nonce: &str,
    cnonce: &str,
    nc: &str,
    qop: &str,
    a2: &str,
) -> String {
    let secret = md5(format!("{user}:{realm}:{password}").as_bytes());
    let mut a1 = secret.to_vec();
    a1.extend_from_slice(format!(":{nonce}:{cnonce}").as_bytes());
    let ha1 = hex(&md5(&a1));
    let ha2 = hex(&md5(a2.as_bytes()));
    hex(&md5(
        format!("{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}").as_bytes()
    ))
}

/// A value inside a quoted-string.
fn quote(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first value of `key` (keys are case-insensitive).
fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// Parses `key=value, key="quoted \"value\"", …` (RFC 2831's digest-challenge syntax).
fn parse(token: &[u8]) -> Result<Vec<(String, String)>, SaslError> {
    let text = std::str::from_utf8(token)
        .map_err(|_| SaslError("the server's token is not UTF-8 text".into()))?;
    let mut fields = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(fields);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return err(format!("malformed token: {key:?} has no value"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return err(format!("malformed token: {key:?} is not closed")),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return err(format!("malformed token: {key:?} is not closed")),
                    },
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim_end().to_string();
        }
        if key.is_empty() {
            return err("malformed token: a value without a key");
        }
        fields.push((key, value));
    }
}

// ---------------------------------------------------------------------------------------
// MD5 (RFC 1321), which DIGEST-MD5 is defined over; used for nothing else.
// ---------------------------------------------------------------------------------------

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

fn md5(data: &[u8]) -> [u8; 16] {
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_le_bytes());
    let (mut a0, mut b0, mut c0, mut d0) =
        (0x67452301u32, 0xefcdab89u32, 0x98badcfeu32, 0x10325476u32);
    for block in msg.chunks_exact(64) {
        let mut m = [0u32; 16];
        for (w, bytes) in m.iter_mut().zip(block.chunks_exact(4)) {
            *w = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(K[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (chunk, v) in out.chunks_exact_mut(4).zip([a0, b0, c0, d0]) {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_rfc_1321() {
        let cases: [(&str, &str); 7] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&md5(input.as_bytes())), want, "md5({input:?})");
        }
    }

    #[test]
    fn digest_matches_the_rfc_2831_example() {
        // RFC 2831 section 4 (IMAP; the digest-uri is the example's, not ZooKeeper's).
        let args = (
            "chris",
            "elwood.innosoft.com",
            "secret",
            "OA6MG9tEQGm2hh",
            "OA6MHXh6VqTrRk",
            "00000001",
            "auth",
        );
        let response = digest(
            args.0,
            args.1,
            args.2,
            args.3,
            args.4,
            args.5,
            args.6,
            "AUTHENTICATE:imap/elwood.innosoft.com",
        );
        assert_eq!(response, "d388dad90d4bbd760a152321f2143af7");
        let rspauth = digest(
            args.0,
            args.1,
            args.2,
            args.3,
            args.4,
            args.5,
            args.6,
            ":imap/elwood.innosoft.com",
        );
        assert_eq!(rspauth, "ea40f60335c427b5527b84dbabcdfffd");
    }

    fn server_challenge() -> &'static [u8] {
        // What ZooKeeper 3.8's server sends (Java's DIGEST-MD5 server).
        b"realm=\"zk-sasl-md5\",nonce=\"Nr1/0IbHmLxV6ejdK0ofXR9V8gn2oIHgbiGc0MEl\",charset=utf-8,algorithm=md5-sess"
    }

    #[test]
    fn a_login_answers_the_challenge_and_checks_the_servers_proof() {
        let mut c = DigestMd5Client::with_cnonce("alice", "alice-secret", "abc");
        assert!(c.initial_response().is_empty());
        let reply = c.step(server_challenge()).unwrap().expect("a response");
        let text = String::from_utf8(reply).unwrap();
        let fields = parse(text.as_bytes()).unwrap();
        assert_eq!(field(&fields, "username"), Some("alice"));
        assert_eq!(field(&fields, "realm"), Some("zk-sasl-md5"));
        assert_eq!(field(&fields, "digest-uri"), Some(DIGEST_URI));
        assert_eq!(field(&fields, "qop"), Some("auth"));
        assert_eq!(field(&fields, "charset"), Some("utf-8"));
        let expected = digest(
            "alice",
            "zk-sasl-md5",
            "alice-secret",
            "Nr1/0IbHmLxV6ejdK0ofXR9V8gn2oIHgbiGc0MEl",
            "abc",
            "00000001",
            "auth",
            ":zookeeper/zk-sasl-md5",
        );
        // A wrong proof is refused; the right one completes the login.
        let mut wrong = DigestMd5Client::with_cnonce("alice", "alice-secret", "abc");
        wrong.step(server_challenge()).unwrap();
        assert!(wrong
            .step(b"rspauth=00000000000000000000000000000000")
            .is_err());
        assert_eq!(
            c.step(format!("rspauth={expected}").as_bytes()).unwrap(),
            None
        );
        assert!(c.step(b"rspauth=x").is_err(), "a token after the end");
    }

    #[test]
    fn quoted_values_keep_commas_and_escapes() {
        let f = parse(br#"a="x,y", b = "q\"uo\\te" ,c=tok , realm="r1",realm="r2""#).unwrap();
        assert_eq!(field(&f, "a"), Some("x,y"));
        assert_eq!(field(&f, "B"), Some("q\"uo\\te"));
        assert_eq!(field(&f, "c"), Some("tok"));
        assert_eq!(field(&f, "realm"), Some("r1"));
        assert_eq!(quote("a\"b\\c"), "a\\\"b\\\\c");
    }

    #[test]
    fn hostile_challenges_are_errors_not_panics() {
        let cases: [&[u8]; 9] = [
            b"",
            b"nonce",
            b"nonce=\"unterminated",
            b"nonce=\"x\\",
            b"=x",
            &[0xff, 0xfe, 0x00],
            b"realm=\"r\"",
            b"nonce=\"n\",algorithm=md5",
            b"nonce=\"n\",qop=\"auth-conf\"",
        ];
        for case in cases {
            let mut c = DigestMd5Client::with_cnonce("u", "p", "c");
            assert!(
                c.step(case).is_err(),
                "{:?} was accepted",
                String::from_utf8_lossy(case)
            );
        }
        // Every prefix of a valid challenge: an error or a response, never a panic.
        let full = server_challenge();
        for n in 0..full.len() {
            let mut c = DigestMd5Client::with_cnonce("u", "p", "c");
            let _ = c.step(&full[..n]);
        }
    }
}
