//! What every recipe is made of, written once: the recipe base, [`Base`] (client, path, the data
//! its nodes carry, their ACL, the canceller), the two ways a recipe takes its node (the
//! queue, the single node), the lock's path and canceller read from the base ([`Named`]),
//! and `recipe_options!`, which gives each recipe the same `with_acl` (and `with_data`)
//! with one text.

use super::holding::Holding;
use crate::client::{Client, NodeAcl};
use crate::error::Result;
use crate::queue::{self, names, Canceller, Kind, Place, Spec, Wait};

/// Checks a recipe's path the way every recipe's constructor does ([`Mutex::new`],
/// [`LeaderElection::new`], …), before anything is sent: a valid node path
/// ([`validate_path`]: absolute, no empty segment or trailing `/`, no character ZooKeeper
/// refuses) and not the root `/`, since a recipe needs a directory (or, unfair, a node) of
/// its own. Use it to check a path a user gave before connecting, as the command line does.
///
/// ```
/// use zkguard::{validate_recipe_path, Error};
///
/// validate_recipe_path("/locks/nightly")?;
/// assert!(matches!(validate_recipe_path("/"), Err(Error::InvalidPath { .. })));
/// assert!(matches!(validate_recipe_path("/locks/"), Err(Error::InvalidPath { .. })));
/// # Ok::<(), zkguard::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidPath`](crate::Error::InvalidPath) with the path and what is wrong with it.
///
/// [`Mutex::new`]: crate::Mutex::new
/// [`LeaderElection::new`]: crate::LeaderElection::new
/// [`validate_path`]: crate::validate_path
pub fn validate_recipe_path(path: &str) -> Result<()> {
    queue::check_lock_path(path)
}

/// The base every recipe keeps: [`Mutex`](crate::Mutex), [`UnfairMutex`](crate::UnfairMutex),
/// each side of an [`RwLock`](crate::RwLock), [`Semaphore`](crate::Semaphore) and
/// [`LeaderElection`](crate::LeaderElection) (a [`ReentrantMutex`](crate::ReentrantMutex)
/// through its `Mutex`).
#[derive(Clone)]
pub(crate) struct Base {
    pub(crate) client: Client,
    /// The recipe's path: its directory, or its node (unfair recipes).
    pub(crate) path: String,
    /// The data of this contender's nodes (an election's: the participant id).
    pub(crate) data: Vec<u8>,
    /// The ACL of every node the recipe creates.
    pub(crate) acl: NodeAcl,
    /// Cancels the recipe's blocked acquires ([`Lock::canceller`](crate::Lock::canceller)).
    pub(crate) canceller: Canceller,
}

impl Base {
    /// A recipe at `path` with the client's node ACL and the default data (host name and
    /// process id). Nothing is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming a bad path.
    pub(crate) fn new(client: &Client, path: &str) -> Result<Base> {
        validate_recipe_path(path)?;
        Ok(Base {
            client: client.clone(),
            path: path.to_string(),
            data: names::default_data(),
            acl: client.node_acl().clone(),
            canceller: Canceller::default(),
        })
    }

    /// The ACL `acl`, checked against the client's identities, for this recipe.
    pub(crate) fn check_acl(&self, acl: &NodeAcl) -> Result<()> {
        acl.check_identity(self.client.has_identity(), &self.path)
    }

    /// What the queue needs to queue us at `place` in `dir` (the recipe's path, or a
    /// directory under it: a semaphore's `leases`).
    pub(crate) fn spec<'a>(&'a self, place: Place<'a>, dir: &'a str) -> Spec<'a> {
        Spec::new(place, &self.path, dir, &self.data, &self.acl)
    }

    /// Queues in the recipe's own directory and holds the node when its turn comes.
    pub(crate) fn queue(
        &self,
        kind: Kind,
        wait: Wait,
        cancel: &Canceller,
    ) -> Result<Option<Holding>> {
        let spec = self.spec(Place::Own(kind), &self.path);
        Ok(queue::acquire(&self.client, &spec, wait, cancel)?
            .map(|a| Holding::new(&self.client, a, kind)))
    }

    /// Races for the single node at the recipe's path, whose data is `data` (unique to the
    /// call: it tells our node from another's after a lost create reply).
    pub(crate) fn single(
        &self,
        kind: Kind,
        data: &[u8],
        wait: Wait,
        cancel: &Canceller,
    ) -> Result<Option<Holding>> {
        Ok(queue::single(
            &self.client,
            (&self.path, kind),
            data,
            &self.acl,
            wait,
            cancel,
        )?
        .map(|a| Holding::new(&self.client, a, kind)))
    }
}

/// A recipe's base, for the option setters `recipe_options!` writes and for [`Named`].
pub(crate) trait Based {
    /// The base (the one an ACL is checked against, whose path and canceller the lock's are).
    fn base(&self) -> &Base;
    /// Applies `f` to every base the recipe keeps (an `RwLock` keeps one per side).
    fn each_base(&mut self, f: &mut dyn FnMut(&mut Base));
}

/// What a [`Lock`](crate::Lock)'s provided `path` and `canceller` read: a recipe's base's
/// (every [`Based`] type, written once below), a [`MultiLock`](crate::MultiLock)'s its own.
/// Public in a private module (the sealed pattern of `api.rs`): a bound of `Lock` that
/// nobody outside the crate can name or implement.
#[doc(hidden)]
pub trait Named {
    /// The lock's path.
    fn named_path(&self) -> &str;
    /// The canceller of the lock's blocked acquires.
    fn named_canceller(&self) -> &Canceller;
}

impl<T: Based> Named for T {
    fn named_path(&self) -> &str {
        &self.base().path
    }

    fn named_canceller(&self) -> &Canceller {
        &self.base().canceller
    }
}

/// Gives `$recipe` its option setters with one text for every recipe: `with_acl` (the ACL of
/// `$nodes`) and, with `data`, `with_data` (`$data` says which nodes carry it). `$example` is
/// a doc example's constructor call, after `zkguard::`.
///
/// `recipe_options!(Mutex { base }, …)` also implements [`Based`] for a recipe whose one base
/// is the field `base`; a recipe with another shape implements it itself.
/// `recipe_options!(ReadLock { side })` implements [`Based`] alone, for a lock with no
/// setters of its own (an `RwLock`'s side: the `RwLock` has them).
macro_rules! recipe_options {
    ($recipe:ident { $field:ident } $(, $($rest:tt)*)?) => {
        impl $crate::lock::recipe::Based for $recipe {
            fn base(&self) -> &$crate::lock::recipe::Base {
                &self.$field
            }

            fn each_base(&mut self, f: &mut dyn FnMut(&mut $crate::lock::recipe::Base)) {
                f(&mut self.$field);
            }
        }

        $($crate::lock::recipe::recipe_options!($recipe, $($rest)*);)?
    };
    ($recipe:ident, $what:literal, $nodes:literal, $example:literal $(, data: $data:literal)?) => {
        impl $recipe {
            #[doc = concat!(
                "The ACL of the nodes this ", $what, " creates (", $nodes, ") instead of the ",
                "client's [`ClientBuilder::node_acl`](crate::ClientBuilder::node_acl). See ",
                "[`NodeAcl`](crate::NodeAcl) for the presets and what a creator ACL implies (a ",
                "node that already exists keeps its own ACL). Nothing is sent: the ACL applies ",
                "to the nodes the next acquires create.\n\n",
                "# Errors\n\n",
                "[`Error::InvalidArgument`](crate::Error::InvalidArgument) for an ACL that names ",
                "the creator's identities on a client that has none.\n\n",
                "```no_run\n",
                "# fn main() -> zkguard::Result<()> {\n",
                "let client = zkguard::Client::builder(\"127.0.0.1:2181\")\n",
                "    .auth(\"digest\", b\"app:secret\")\n",
                "    .build()?;\n",
                "let ", $what, " = zkguard::", $example, "?\n",
                "    .with_acl(zkguard::NodeAcl::creator())?;\n",
                "# let _ = ", $what, ";\n",
                "# Ok(()) }\n",
                "```"
            )]
            pub fn with_acl(mut self, acl: $crate::client::NodeAcl) -> $crate::error::Result<$recipe> {
                $crate::lock::recipe::Based::base(&self).check_acl(&acl)?;
                $crate::lock::recipe::Based::each_base(&mut self, &mut |b| b.acl = acl.clone());
                Ok(self)
            }

            $(
                #[doc = concat!(
                    "Sets the data stored in this contender's ", $data, " (by default the host ",
                    "name and process id), which `participants` shows to everyone."
                )]
                #[must_use = "with_data returns the changed recipe; the original is consumed"]
                pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> $recipe {
                    let data = data.into();
                    $crate::lock::recipe::Based::each_base(&mut self, &mut |b| b.data.clone_from(&data));
                    self
                }
            )?
        }
    };
}
pub(crate) use recipe_options;

#[cfg(test)]
mod tests {
    use super::validate_recipe_path;
    use crate::Error;

    #[test]
    fn a_recipe_path_is_a_valid_node_path_and_not_the_root() {
        for ok in ["/a", "/locks/nightly", "/a/b/c"] {
            assert!(validate_recipe_path(ok).is_ok(), "{ok}");
        }
        for (bad, reason) in [
            ("/", "not the root"),
            ("", "empty path"),
            ("locks", "must start with '/'"),
            ("/locks/", "must not end with '/'"),
            ("/locks//a", "empty segment"),
            ("/locks/./a", "'.'"),
        ] {
            match validate_recipe_path(bad) {
                Err(Error::InvalidPath { path, reason: r }) => {
                    assert_eq!(path, bad);
                    assert!(r.contains(reason), "{bad:?}: {r}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        // The same rule as every node path's, the root alone refused besides.
        assert!(crate::validate_path("/").is_ok());
    }
}
