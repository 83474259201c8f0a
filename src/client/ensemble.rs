//! The ensemble's dynamic configuration: reading it (`getConfig`: a getData of
//! `/zookeeper/config`, outside any chroot), changing it (`reconfig`), and following it
//! ([`ClientBuilder::follow_ensemble`]: a thread that keeps the client's server list the
//! configuration's).
//!
//! [`ClientBuilder::follow_ensemble`]: super::ClientBuilder::follow_ensemble

mod follow;
mod parse;

pub(crate) use follow::start as follow;
pub use parse::{EnsembleConfig, EnsembleServer};

use crossbeam_channel::Receiver;

use super::conn::WatchKind;
use super::pipeline::{with_watch, Req, Watched};
use super::proto::{op, Name, RawReply, Reader, Writer};
use super::types::{Stat, WatchedEvent};
use super::{Client, Pending, Pipeline};
use crate::error::{Error, Result};

/// Where ZooKeeper 3.5+ publishes the ensemble's dynamic configuration.
pub const CONFIG_NODE: &str = "/zookeeper/config";

impl Pipeline<'_> {
    /// The configuration's data and stat, and the zxid of the reply's header (what the
    /// follower checks the configuration's version against: see `ensemble/follow.rs`).
    fn get_config_inner(&mut self, watch: bool) -> Watched<(Vec<u8>, Stat, i64)> {
        let req = Req {
            unrooted: true,
            ..Req::on(Name::GetConfig, CONFIG_NODE, op::GET_DATA).watch(watch, WatchKind::Data)
        };
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push_owned(req, body, |raw: RawReply| {
            let mut r = Reader::new(raw.body());
            Ok((r.buffer()?, r.stat()?, raw.zxid().unwrap_or(0)))
        })
    }

    /// See [`Client::get_config`].
    pub fn get_config(&mut self) -> Pending<(Vec<u8>, Stat)> {
        let p = self.get_config_inner(false).0;
        p.map(|r| r.map(|(d, s, _)| (d, s)))
    }

    /// See [`Client::get_config_w`].
    pub fn get_config_w(&mut self) -> Pending<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_config_inner(true);
        with_watch(p, w, |(d, s, _), w| (d, s, w))
    }

    /// [`Pipeline::get_config_w`] for the follower: the data, the zxid of the reply's
    /// header, and the watch.
    pub(crate) fn config_reading_w(&mut self) -> Pending<(Vec<u8>, i64, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_config_inner(true);
        with_watch(p, w, |(d, _, z), w| (d, z, w))
    }

    /// See [`Client::reconfig`].
    pub fn reconfig(
        &mut self,
        joining: &[&str],
        leaving: &[u64],
        from_version: Option<u64>,
    ) -> Pending<(Vec<u8>, Stat)> {
        let checked = if joining.is_empty() && leaving.is_empty() {
            Err(Error::InvalidArgument {
                name: "reconfig",
                reason: "neither a server to add nor one to remove".into(),
            })
        } else if let Some(j) = joining.iter().find(|j| j.contains(',') || j.is_empty()) {
            Err(Error::InvalidArgument {
                name: "reconfig",
                reason: format!("{j:?} is not one server.N=... line"),
            })
        } else {
            Ok(())
        };
        let req = Req {
            unrooted: true,
            checked,
            ..Req::on(Name::Reconfig, CONFIG_NODE, op::RECONFIG)
        };
        let joining = joining.join(",");
        let leaving: Vec<String> = leaving.iter().map(u64::to_string).collect();
        let leaving = leaving.join(",");
        let body = |w: &mut Writer, _: &str| {
            for list in [&joining, &leaving] {
                if list.is_empty() {
                    w.int(-1); // null: nothing of this kind
                } else {
                    w.string(list);
                }
            }
            // No new membership list (an incremental change), then the version it applies to.
            w.int(-1)
                .long(from_version.map_or(-1, |v| v.min(i64::MAX as u64) as i64));
        };
        self.push(req, body, |r| Ok((r.buffer()?, r.stat()?))).0
    }
}

impl Client {
    /// The ensemble's dynamic configuration (ZooKeeper 3.5+'s `getConfig`): the data of
    /// `/zookeeper/config`, read whatever the client's chroot, and its stat. Parse it with
    /// [`EnsembleConfig::parse`]. A standalone server, or one with reconfiguration off,
    /// may hold an empty node or only its static servers.
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// let (data, _) = client.get_config()?;
    /// let config = zkguard::EnsembleConfig::parse(&data)?;
    /// println!("version {:x}: {:?}", config.version(), config.client_hosts());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Only the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_config(&self) -> Result<(Vec<u8>, Stat)> {
        self.one(|p| p.get_config())
    }

    /// Like [`Client::get_config`], and leaves a watch that fires once when the
    /// configuration changes (a `reconfig`).
    ///
    /// # Errors
    ///
    /// Only the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_config_w(&self) -> Result<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        self.one(|p| p.get_config_w())
    }

    /// Changes the ensemble's membership (ZooKeeper 3.5+'s incremental `reconfig`): adds
    /// the servers of `joining`, each a `server.N=host:quorumPort:electionPort[:role];clientHost:clientPort`
    /// line, and removes the servers whose ids are in `leaving`. With `from_version`, the
    /// change applies only if the configuration's version is that one. Returns the new
    /// configuration (its data, as [`Client::get_config`] reads it) and its stat.
    ///
    /// The servers must have `reconfigEnabled=true`, and the session must be allowed to
    /// write `/zookeeper/config`: a superuser (`zookeeper.DigestAuthenticationProvider.superDigest`),
    /// an identity its ACL lets write, or servers running with `zookeeper.skipACL=yes`.
    /// A server to add must be running, with a configuration naming the current ensemble
    /// and itself.
    ///
    /// ```no_run
    /// # fn f(admin: &zkguard::Client) -> zkguard::Result<()> {
    /// admin.reconfig(&["server.4=10.0.0.4:2888:3888:participant;10.0.0.4:2181"], &[1], None)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for nothing to add or remove, or a `joining` entry that is
    /// empty or holds a comma (nothing is sent); [`Error::NoAuth`] when the session may not
    /// change the configuration; [`Error::BadVersion`] when `from_version` is not the
    /// current version; [`Error::Zk`] with [`ErrorCode::ReconfigDisabled`],
    /// [`ErrorCode::NewConfigNoQuorum`] (the servers of the new configuration are not
    /// connected to the leader), [`ErrorCode::ReconfigInProgress`] or
    /// [`ErrorCode::BadArguments`]; and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    ///
    /// [`ErrorCode::ReconfigDisabled`]: crate::ErrorCode::ReconfigDisabled
    /// [`ErrorCode::NewConfigNoQuorum`]: crate::ErrorCode::NewConfigNoQuorum
    /// [`ErrorCode::ReconfigInProgress`]: crate::ErrorCode::ReconfigInProgress
    /// [`ErrorCode::BadArguments`]: crate::ErrorCode::BadArguments
    pub fn reconfig(
        &self,
        joining: &[&str],
        leaving: &[u64],
        from_version: Option<u64>,
    ) -> Result<(Vec<u8>, Stat)> {
        self.one(|p| p.reconfig(joining, leaving, from_version))
    }
}
