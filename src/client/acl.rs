//! The ACL every node a recipe creates gets: [`NodeAcl`], its named presets, the check that
//! a session can create nodes with it, the rule that judges a directory's ACL, and what a
//! client remembers of those judgments ([`Tenancy`]).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::types::{Acl, Perms, Stat};
use crate::error::{escape, Error, Result};

/// The ACL of every node a recipe creates: its queue or single node, the lock directory, and
/// every parent or container it makes on the way.
///
/// Set a default for every recipe of a client with
/// [`ClientBuilder::node_acl`](crate::ClientBuilder::node_acl), and override it per recipe
/// instance with `with_acl` (for example [`Mutex::with_acl`](crate::Mutex::with_acl)). The
/// presets:
///
/// | preset | name | who may do what |
/// |---|---|---|
/// | [`NodeAcl::open`] (the default) | `open` | everyone everything (`world:anyone` ALL): processes with different identities share the lock, and anyone can also break it |
/// | [`NodeAcl::creator`] | `creator` | only the identities of the creating session (the `auth` scheme); nobody else may even read |
/// | [`NodeAcl::creator_read`] | `creator-read` | the creator's identities everything, everyone else read: others see holders, participants and the leader, and change nothing |
/// | [`NodeAcl::custom`] | — | any list of [`Acl`] entries |
///
/// ```no_run
/// use zkguard::{Client, Mutex, NodeAcl};
/// # fn main() -> zkguard::Result<()> {
/// // Every lock of this client: only sessions logged in as `app` may touch its nodes.
/// let client = Client::builder("127.0.0.1:2181")
///     .auth("digest", b"app:secret")
///     .node_acl(NodeAcl::creator())
///     .build()?;
/// // This one lock: others may see who holds it.
/// let lock = Mutex::new(&client, "/locks/invoices")?.with_acl(NodeAcl::creator_read())?;
/// let _guard = lock.acquire()?;
/// # Ok(()) }
/// ```
///
/// # What follows from a creator ACL
///
/// - **Identity.** The `auth` scheme means "every identity this session authenticated as":
///   a digest user given with [`ClientBuilder::auth`](crate::ClientBuilder::auth), a SASL
///   user ([`ClientBuilder::sasl_digest`](crate::ClientBuilder::sasl_digest)), or (if the
///   servers map certificates to identities) a TLS client certificate. Asking for it on a
///   client with none of these fails at once with [`Error::InvalidArgument`], before
///   anything is created. Contenders share a creator-ACL'd lock only if they log in as the
///   same identity (several processes with the same user and password do; a real Curator
///   client with the same digest credentials and `CREATOR_ALL_ACL` does too).
/// - **Another identity** cannot create its node in the lock directory: its acquire fails
///   at once with [`Error::NoAuth`] naming the directory and the operation; it never waits.
///   Under [`creator`](NodeAcl::creator) it cannot list the directory either, so
///   `participants()`, `holder()`, `leader()` and `zkguard holders` fail with
///   [`Error::NoAuth`] too; under [`creator_read`](NodeAcl::creator_read) they work.
/// - **Deleting a node needs DELETE on its parent.** A held node is safe from deletion
///   because the lock directory carries the ACL. An existing directory (one you or another
///   client created before) is used as it is, with its own ACL, and its ACL decides who may
///   create and delete in it: a lock directory made `world:anyone` earlier stays open to
///   everyone even if this instance asks for `creator`. For an unfair lock or election the
///   directory is the parent of its path: create that parent with the ACL you want (or let
///   the recipe create it).
/// - **Parents are shared.** Parents the recipe creates (for `/locks/a`, the container
///   `/locks`) get the same ACL, so a second identity cannot create `/locks/b` under a
///   `/locks` that the first made `creator`. Create shared parents yourself, with the ACL
///   they need, when several identities use locks below them.
/// - Writing to a held node needs WRITE on the node itself: under both creator presets only
///   the creator's identities may (revocation requests included).
#[derive(Clone, PartialEq, Eq)]
pub struct NodeAcl {
    name: &'static str,
    entries: Arc<[Acl]>,
    /// Identities (`scheme`, `id`) besides the ACL's own that may create, delete or
    /// administer in the directories the nodes go in.
    trusted: Arc<[(String, String)]>,
}

impl NodeAcl {
    /// Everyone may do everything (`world:anyone` ALL): today's default, and what Curator and
    /// kazoo create without an ACL provider. Anyone who reaches the ensemble can delete a
    /// held lock node.
    pub fn open() -> NodeAcl {
        NodeAcl::named("open", Acl::open_unsafe())
    }

    /// Only the identities of the creating session may do anything (ZooKeeper's
    /// `CREATOR_ALL_ACL`, `auth` scheme); nobody else may read, create, write or delete.
    pub fn creator() -> NodeAcl {
        NodeAcl::named("creator", Acl::creator_all())
    }

    /// The creating session's identities may do everything, everyone may read: others can
    /// list holders, participants and the leader but change nothing.
    ///
    /// With digest credentials (`auth("digest", b"user:password")`) the creator's entry is
    /// stored as `digest:user:base64(sha1(user:password))`, an unsalted hash from which a
    /// weak password can be guessed offline. ZooKeeper before 3.4.14 and 3.5.5
    /// (CVE-2019-0201) returns the ACL, hash included, to every reader: under this preset,
    /// everyone. Later versions return the hash only to sessions with ADMIN on the node
    /// (the creator's identities) and `digest:user:x` to other readers. Use a long random
    /// password, or an identity whose ACL entry holds no password hash: SASL
    /// ([`sasl_digest`](crate::ClientBuilder::sasl_digest), entry `sasl:user`), Kerberos, or
    /// a TLS client certificate.
    pub fn creator_read() -> NodeAcl {
        let mut acl = Acl::creator_all();
        acl.extend(Acl::read_unsafe());
        NodeAcl::named("creator-read", acl)
    }

    /// Any list of entries (the server judges them; an entry it rejects fails the create with
    /// [`Error::InvalidAcl`]). Every contender needs READ (to list the queue and watch
    /// nodes), CREATE and DELETE (its own node in the directory); without them its acquire
    /// fails with [`Error::NoAuth`]. WRITE is needed only to send or receive revocation
    /// requests.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (`node_acl`) for an empty list, or an entry with an empty
    /// scheme or no permission bits.
    pub fn custom(entries: Vec<Acl>) -> Result<NodeAcl> {
        let bad = |reason: String| Error::InvalidArgument {
            name: "node_acl",
            reason,
        };
        if entries.is_empty() {
            return Err(bad("an empty ACL list: nobody could use the nodes".into()));
        }
        for a in &entries {
            if a.scheme.is_empty() {
                return Err(bad(format!("entry with an empty scheme (id {:?})", a.id)));
            }
            if a.perms.bits() & Perms::ALL.bits() == 0 {
                return Err(bad(format!(
                    "entry {}:{} grants no permission",
                    a.scheme, a.id
                )));
            }
        }
        Ok(NodeAcl::named("custom", entries))
    }

    fn named(name: &'static str, entries: Vec<Acl>) -> NodeAcl {
        NodeAcl {
            name,
            entries: entries.into(),
            trusted: Arc::new([]),
        }
    }

    /// Also trusts `scheme:id` (as ZooKeeper writes it in an ACL: `digest:admin:<hash>`,
    /// `sasl:ops@EXAMPLE.COM`, `x509:CN=ops`) to create, delete and administer in the
    /// directories this ACL's nodes go in.
    ///
    /// A digest identity must be given whole, with its real hash
    /// (`digest:USER:BASE64HASH`, the 28-character base64 SHA-1 of `USER:PASSWORD`): a
    /// digest user name is no identity. ZooKeeper keeps no list of users: anyone can log in
    /// as `admin` with a password of their own, and to a session without ADMIN on a node the
    /// server shows every digest entry as `digest:USER:x`, so trusting `admin:x` would trust
    /// whoever logged in as `admin` last. Compute the hash from the user and password
    /// (`printf %s 'USER:PASSWORD' | openssl dgst -binary -sha1 | base64`, or ZooKeeper's
    /// `DigestAuthenticationProvider USER:PASSWORD`), or read it with `getAcl` as a session
    /// with ADMIN on the directory.
    ///
    /// A recipe whose ACL keeps others out ([`creator`](NodeAcl::creator),
    /// [`creator_read`](NodeAcl::creator_read), a custom list without `world` or `ip`
    /// writers) refuses to queue in a directory whose ACL lets anyone else create, delete or
    /// change the ACL there ([`Error::UntrustedDirectory`]): whoever may delete in the
    /// directory may delete a held node and let a second holder in. By default only the
    /// ACL's own identities are trusted (the creator's, as the server records them, and the
    /// identities a custom list names). Trust the identities of a directory an administrator
    /// prepared for several services here. `world` and `ip` identities are never trusted:
    /// anyone can be `world:anyone`, and an address is not a login.
    ///
    /// ```
    /// # fn main() -> zkguard::Result<()> {
    /// let acl = zkguard::NodeAcl::creator().trusting("digest", "admin:kWN6aNSbjcKWPqjiV7cg0N24raU=")?;
    /// assert_eq!(acl.trusted().len(), 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (`trust`) for an empty scheme or id, a `world`, `ip` or
    /// `auth` identity, or a digest identity without its real hash (`digest:admin:x`, or
    /// anything after the user name that is not a 28-character base64 SHA-1).
    ///
    /// ```
    /// let e = zkguard::NodeAcl::creator().trusting("digest", "admin:x").unwrap_err();
    /// assert!(e.to_string().contains("digest:USER:BASE64HASH"));
    /// ```
    pub fn trusting(mut self, scheme: &str, id: &str) -> Result<NodeAcl> {
        let refuse = |reason: String| Error::InvalidArgument {
            name: "trust",
            reason,
        };
        let shown = format!("{}:{}", escape(scheme), escape(id));
        if scheme.is_empty() || id.is_empty() || unauthenticated(scheme) || scheme == "auth" {
            return Err(refuse(format!(
                "cannot trust {shown}: name an authenticated identity as ZooKeeper writes it \
                 in an ACL (digest:USER:BASE64HASH, sasl:principal, x509:DN); world and ip \
                 identities are never trusted"
            )));
        }
        if scheme == "digest" && !digest_id(id) {
            return Err(refuse(format!(
                "cannot trust {shown}: a digest entry needs its real hash, because digest \
                 user names are not identities: ZooKeeper keeps no list of users, anyone can \
                 log in as any user name with a password of their own, and shows every \
                 digest entry as digest:USER:x to sessions without ADMIN on the node; give \
                 the full entry digest:USER:BASE64HASH (the 28-character base64 SHA-1 of \
                 USER:PASSWORD: printf %s 'USER:PASSWORD' | openssl dgst -binary -sha1 | \
                 base64), or trust a SASL or x509 identity"
            )));
        }
        let mut trusted = self.trusted.to_vec();
        trusted.push((scheme.to_string(), id.to_string()));
        self.trusted = trusted.into();
        Ok(self)
    }

    /// The identities [`trusting`](NodeAcl::trusting) added, as (`scheme`, `id`).
    pub fn trusted(&self) -> &[(String, String)] {
        &self.trusted
    }

    /// Whether the nodes are closed to unauthenticated identities: no `world` or `ip` entry
    /// grants more than READ. Then the directories the nodes go in must be closed to others
    /// too, and the recipes check that they are.
    pub fn keeps_others_out(&self) -> bool {
        self.entries
            .iter()
            .all(|a| !unauthenticated(&a.scheme) || a.perms.bits() & !Perms::READ.bits() == 0)
    }

    /// The entries of a directory's ACL `dir` that let an identity this ACL does not trust
    /// create or delete nodes in it or change its ACL: the rule the recipes apply to a
    /// directory before queueing in it (and `zkguard doctor` to every parent of a lock).
    /// A `world` or `ip` entry with CREATE, DELETE or ADMIN is always untrusted; any other
    /// is trusted when this ACL's entries, `ours` or [`trusted`](NodeAcl::trusted) name
    /// its identity. `ours` is what the server recorded for this ACL's `auth` entries (the
    /// session's identities as an ACL holds them: read back from a node made with
    /// [`Acl::creator_all`]; [`Client::who_am_i`](crate::Client::who_am_i) names a digest
    /// login without its hash); empty for a list without.
    ///
    /// ```
    /// use zkguard::{Acl, NodeAcl, Perms};
    ///
    /// let dir = vec![
    ///     Acl::new(Perms::ALL, "sasl", "alice"),
    ///     Acl::new(Perms::READ | Perms::CREATE, "world", "anyone"),
    /// ];
    /// let alice = vec![Acl::new(Perms::ALL, "sasl", "alice")];
    /// let flagged = NodeAcl::creator().untrusted(&dir, &alice);
    /// assert_eq!(flagged, vec![dir[1].clone()]);
    /// ```
    pub fn untrusted(&self, dir: &[Acl], ours: &[Acl]) -> Vec<Acl> {
        let power = Perms::CREATE.bits() | Perms::DELETE.bits() | Perms::ADMIN.bits();
        let same = |a: &Acl, scheme: &str, id: &str| a.scheme == scheme && a.id == id;
        dir.iter()
            .filter(|a| a.perms.bits() & power != 0)
            .filter(|a| {
                unauthenticated(&a.scheme)
                    || !(self
                        .entries
                        .iter()
                        .chain(ours)
                        .any(|o| same(a, &o.scheme, &o.id))
                        || self.trusted.iter().any(|(s, i)| same(a, s, i)))
            })
            .cloned()
            .collect()
    }

    /// Whether identities of `scheme` are no login (`world`, `ip`): never trusted, never
    /// taken for ours. The rule [`untrusted`](NodeAcl::untrusted) applies, for tools that
    /// sort a session's identities the same way.
    ///
    /// ```
    /// assert!(zkguard::NodeAcl::unauthenticated("ip"));
    /// assert!(!zkguard::NodeAcl::unauthenticated("sasl"));
    /// ```
    pub fn unauthenticated(scheme: &str) -> bool {
        unauthenticated(scheme)
    }

    /// The entries of `stored` that name a session for sure: no `world` or `ip` entry (no
    /// login), no digest entry whose hash the server hid (`digest:user:x`, shown to a session
    /// without ADMIN on the node: it would match anyone of that user name). Read back from a
    /// node made with the `auth` ACL, these are that session's identities as an ACL records
    /// them: how the recipes learn who "we" are (and `zkguard doctor` too).
    ///
    /// ```
    /// use zkguard::{Acl, NodeAcl, Perms};
    ///
    /// let stored = vec![
    ///     Acl::new(Perms::ALL, "sasl", "alice"),
    ///     Acl::new(Perms::ALL, "digest", "bob:x"),
    ///     Acl::new(Perms::READ, "world", "anyone"),
    /// ];
    /// assert_eq!(NodeAcl::identities_in(&stored), vec![stored[0].clone()]);
    /// ```
    pub fn identities_in(stored: &[Acl]) -> Vec<Acl> {
        stored
            .iter()
            .filter(|a| !unauthenticated(&a.scheme))
            .filter(|a| !(a.scheme == "digest" && a.id.ends_with(":x")))
            .cloned()
            .collect()
    }

    /// The entries every created node gets.
    pub fn entries(&self) -> &[Acl] {
        &self.entries
    }

    /// The preset's name (`open`, `creator`, `creator-read`), or `custom`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the entries name the creating session's identities (the `auth` scheme), which
    /// a session without credentials cannot do.
    pub fn needs_identity(&self) -> bool {
        self.entries.iter().any(|a| a.scheme == "auth")
    }

    /// The error for a session without credentials asking for this ACL; `Ok` otherwise.
    pub(crate) fn check_identity(&self, has_identity: bool, path: &str) -> Result<()> {
        if self.needs_identity() && !has_identity {
            return Err(Error::InvalidArgument {
                name: "node_acl",
                reason: format!(
                    "the {} ACL for {path} gives the nodes to the creating session's \
                     identities, and this client has none: log in with \
                     ClientBuilder::auth (e.g. digest) or sasl_digest, or use NodeAcl::open(); \
                     nothing was created",
                    self.name
                ),
            });
        }
        Ok(())
    }
}

/// What a client remembers for the co-tenant check (`queue/tenancy.rs`): its identities as
/// the server records them, and the directories judged trusted, each with the `czxid` and
/// `aversion` it had (the same node, its ACL unchanged). A leaf lock: taken with nothing
/// else held, and nothing taken under it.
#[derive(Default)]
pub(crate) struct Tenancy {
    identities: OnceLock<Arc<[Acl]>>,
    judged: Mutex<HashMap<String, (i64, i32, NodeAcl)>>,
}

/// Directories remembered per client at most (then it starts over).
const JUDGED_MAX: usize = 4096;

impl Tenancy {
    /// The client's identities, once learned.
    pub(crate) fn identities(&self) -> Option<Arc<[Acl]>> {
        self.identities.get().cloned()
    }

    /// Records the client's identities (credentials are fixed at build: the first answer
    /// holds for the client's life).
    pub(crate) fn learned(&self, ids: Vec<Acl>) -> Arc<[Acl]> {
        self.identities.get_or_init(|| ids.into()).clone()
    }

    /// Whether `dir`, as `stat` describes it, was judged trusted for `acl`.
    pub(crate) fn trusted(&self, dir: &str, acl: &NodeAcl, stat: &Stat) -> bool {
        self.judged
            .lock()
            .get(dir)
            .is_some_and(|(czxid, aversion, judged)| {
                *czxid == stat.czxid && *aversion == stat.aversion && judged == acl
            })
    }

    /// Whether `dir` was judged for `acl` before (its stat may since have changed).
    pub(crate) fn known(&self, dir: &str, acl: &NodeAcl) -> bool {
        self.judged
            .lock()
            .get(dir)
            .is_some_and(|(_, _, judged)| judged == acl)
    }

    /// `dir`, as `stat` describes it, is trusted for `acl`.
    pub(crate) fn record(&self, dir: &str, acl: &NodeAcl, stat: &Stat) {
        let mut judged = self.judged.lock();
        if judged.len() >= JUDGED_MAX && !judged.contains_key(dir) {
            judged.clear();
        }
        judged.insert(dir.to_string(), (stat.czxid, stat.aversion, acl.clone()));
    }
}

/// Whether `id` is a whole digest identity as an ACL stores it: `USER:HASH`, the hash a
/// base64 SHA-1 (28 characters, the last `=`), not the `x` ZooKeeper shows in its place.
fn digest_id(id: &str) -> bool {
    let Some((user, hash)) = id.rsplit_once(':') else {
        return false;
    };
    let b64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
    !user.is_empty() && hash.len() == 28 && hash.ends_with('=') && hash[..27].chars().all(b64)
}

/// Schemes whose identities are no login: anyone is `world:anyone`, and an address can be
/// shared or spoofed.
pub(crate) fn unauthenticated(scheme: &str) -> bool {
    matches!(scheme, "world" | "ip")
}

/// A `NodeAcl` is its entries wherever a plain node's ACL is asked for
/// ([`Client::create_with_acl`](crate::Client::create_with_acl),
/// [`Client::ensure_path_with_acl`](crate::Client::ensure_path_with_acl), a pipeline's
/// create), so the recipes' presets serve plain nodes too.
impl AsRef<[Acl]> for NodeAcl {
    fn as_ref(&self) -> &[Acl] {
        &self.entries
    }
}

/// The entries, for an [`Op::CreateWithAcl`](crate::Op::CreateWithAcl) in a `multi`.
impl From<&NodeAcl> for Vec<Acl> {
    fn from(acl: &NodeAcl) -> Vec<Acl> {
        acl.entries.to_vec()
    }
}

impl Default for NodeAcl {
    fn default() -> NodeAcl {
        NodeAcl::open()
    }
}

impl fmt::Debug for NodeAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeAcl")
            .field("name", &self.name)
            .field("entries", &self.entries)
            .field("trusted", &self.trusted)
            .finish()
    }
}

impl fmt::Display for NodeAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Parses a preset's name: `open`, `creator` or `creator-read` (as the command line's `--acl`
/// takes them).
impl FromStr for NodeAcl {
    type Err = Error;

    fn from_str(s: &str) -> Result<NodeAcl> {
        match s {
            "open" => Ok(NodeAcl::open()),
            "creator" => Ok(NodeAcl::creator()),
            "creator-read" => Ok(NodeAcl::creator_read()),
            other => Err(Error::InvalidArgument {
                name: "node_acl",
                reason: format!("unknown ACL preset {other:?}: use open, creator or creator-read"),
            }),
        }
    }
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
