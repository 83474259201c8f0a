//! Pipelined requests: [`Pipeline`] collects them, [`Pending`] waits for each reply.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;

use super::conn::{
    reply_slot, NoReply, Outgoing, ReplyRx, Settled, WatchKind, WatchReg, WatchSink, WatchTx,
};
use super::types::{Acl, CreateMode, Created, Identity, Op, OpResult, Stat, WatchedEvent};
use super::{path, proto, Bell, Client, Ringing};
use crate::error::{Error, Result};
use proto::{
    create_body, decode_multi, encode_multi, malformed, op, version_arg, Name, Names, RawReply,
    Reader, Writer,
};

/// removeWatches' type for data watches (`Watcher.WatcherType.Data`), which on the server
/// holds `exists` watches too.
const WATCHER_TYPE_DATA: i32 = 2;

/// Requests collected by [`Client::pipeline`], written together when the closure returns.
pub struct Pipeline<'a> {
    pub(super) client: &'a Client,
    pub(super) deadline: Instant,
    pub(super) out: Vec<Outgoing>,
    pub(super) sending: Arc<Sending>,
    /// The last request's reply slot (`SendState::last`).
    pub(super) last: Option<Settled>,
    /// What the watches armed from now on ring when they fire ([`Pipeline::ring`]).
    pub(super) bell: Option<Bell>,
}

/// Whether a pipeline's requests were handed over for sending (its closure returned), and
/// which of them (by index in [`Pipeline::out`]) were waited for before that, inside the
/// closure: those could only have timed out, so they fail at once and are not sent.
#[derive(Default)]
pub(super) struct Sending(Mutex<SendState>);

#[derive(Default)]
struct SendState {
    sent: bool,
    withdrawn: Vec<usize>,
    /// Once sent, the last request's reply slot. The server answers a session's requests
    /// in order and the connection thread hands the replies over in that order, so a caller
    /// waits for the last one first and wakes once for the whole pipeline, not once per
    /// reply (the bench's W2:8 under `strace -c`: 5 fewer futex calls per acquisition).
    last: Option<Settled>,
}

impl Sending {
    /// The requests to send: marks the pipeline sent and leaves out the withdrawn ones.
    pub(super) fn take(&self, out: Vec<Outgoing>, last: Option<Settled>) -> Vec<Outgoing> {
        let mut s = self.0.lock();
        s.sent = true;
        s.last = last;
        if s.withdrawn.is_empty() {
            return out;
        }
        let withdrawn = std::mem::take(&mut s.withdrawn);
        out.into_iter()
            .enumerate()
            .filter(|(i, _)| !withdrawn.contains(i))
            .map(|(_, o)| o)
            .collect()
    }
}

impl fmt::Debug for Pipeline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("requests", &self.out.len())
            .finish_non_exhaustive()
    }
}

/// The reply to come for one pipelined request.
#[must_use = "a pending request does nothing unless waited for"]
pub struct Pending<T> {
    state: std::result::Result<ReplyRx, Error>,
    decode: Box<dyn FnOnce(RawReply) -> Result<T> + Send>,
    op: &'static str,
    path: String,
    deadline: Instant,
    timeout: Duration,
    /// The pipeline's [`Sending`] and this request's index in it.
    sending: Arc<Sending>,
    index: usize,
}

impl<T> Pending<T> {
    /// Whether [`wait`](Pending::wait) would return at once: the reply (or the news of
    /// none) came, or the request was refused before sending. Never waits.
    pub(crate) fn is_settled(&self) -> bool {
        self.state.as_ref().map_or(true, ReplyRx::is_done)
    }

    /// Waits for the reply, until the deadline: the handle's timeout, counted from the start
    /// of the [`Client::pipeline`] call. The server answers a session's requests in order,
    /// and this returns once the pipeline's last reply is in too (or known not to come): the
    /// replies of one round trip wake the caller once, not once each.
    ///
    /// # Errors
    ///
    /// The request's own errors, as the [`Client`](crate::Client) method of the same name
    /// lists them; a request refused before sending (a bad path or argument) fails here.
    /// [`Error::InvalidArgument`] if waited for inside the [`Client::pipeline`] closure that
    /// made it: its request would go out only when that closure returns, so it is not sent.
    pub fn wait(self) -> Result<T> {
        let rx = self.state?;
        let last = {
            let mut s = self.sending.0.lock();
            if !s.sent {
                s.withdrawn.push(self.index);
                return Err(Error::InvalidArgument {
                    name: "pipeline",
                    reason: format!(
                        "{} of {} was waited for inside the pipeline closure; requests go \
                         out only when the closure returns, so it was not sent",
                        self.op, self.path
                    ),
                });
            }
            s.last.clone()
        };
        let timeout_err = || Error::Timeout {
            op: self.op,
            path: self.path.clone(),
            after: self.timeout,
        };
        // The pipeline's last reply first (see `SendState::last`).
        if let Some(last) = last {
            last.wait(self.deadline);
        }
        match rx.recv_deadline(self.deadline) {
            Ok(Ok(raw)) => (self.decode)(raw),
            // No connection before the deadline, or no reply before it.
            Ok(Err(NoReply::Deadline)) | Err(RecvTimeoutError::Timeout) => Err(timeout_err()),
            Ok(Err(NoReply::Failed(e))) => Err(e),
            Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLoss),
        }
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending")
            .field("op", &self.op)
            .field("path", &self.path)
            .finish()
    }
}

fn create_opcode(mode: CreateMode) -> i32 {
    match mode {
        CreateMode::Container => op::CREATE_CONTAINER,
        CreateMode::PersistentWithTtl(_) | CreateMode::PersistentSequentialWithTtl(_) => {
            op::CREATE_TTL
        }
        _ => op::CREATE2,
    }
}

fn check_create(path: &str, mode: CreateMode, acl: &[Acl]) -> Result<()> {
    if mode.is_sequential() {
        path::validate_sequential_path(path)?;
    } else {
        path::validate_path(path)?;
    }
    if path == "/" && !mode.is_sequential() {
        return Err(Error::NodeExists { path: "/".into() });
    }
    if acl.is_empty() {
        return Err(Error::InvalidArgument {
            name: "acl",
            reason: format!("empty ACL list for {path}"),
        });
    }
    if let Some(ttl) = mode.ttl() {
        // The server keeps TTLs in 40 bits of milliseconds.
        if ttl.is_zero() || ttl.as_millis() > (1u128 << 40) - 1 {
            return Err(Error::InvalidArgument {
                name: "ttl",
                reason: format!("{ttl:?} for {path} is outside 1 ms ..= 2^40-1 ms"),
            });
        }
    }
    Ok(())
}

/// What [`Pipeline::push`] needs to know of a request besides its body and decoder.
pub(super) struct Req<'p> {
    pub op: Name,
    pub path: &'p str,
    /// The client-side check of the arguments; on error nothing is sent.
    pub checked: Result<()>,
    pub opcode: i32,
    pub watch: Option<WatchKind>,
    /// The watch goes to this sink instead of a new channel.
    pub sink: Option<Arc<dyn WatchSink>>,
    /// The path is the server's as given, outside the chroot (`/zookeeper/config`).
    pub unrooted: bool,
}

impl<'p> Req<'p> {
    /// A request on one node whose path is checked the usual way.
    pub fn on(op: Name, path: &'p str, opcode: i32) -> Req<'p> {
        Req::checked(op, path, opcode, path::validate_path(path))
    }

    /// A request whose arguments were checked otherwise (`checked`: a create's, a
    /// multi's), so the path is not checked twice.
    pub fn checked(op: Name, path: &'p str, opcode: i32, checked: Result<()>) -> Req<'p> {
        Req {
            op,
            path,
            checked,
            opcode,
            watch: None,
            sink: None,
            unrooted: false,
        }
    }

    pub fn watch(self, watch: bool, kind: WatchKind) -> Req<'p> {
        Req {
            watch: watch.then_some(kind),
            ..self
        }
    }
}

/// A pending reply and, for watched requests, the watch's receiver.
pub(super) type Watched<T> = (Pending<T>, Option<Receiver<WatchedEvent>>);

impl<'a> Pipeline<'a> {
    /// The watches this pipeline arms from here on (their receivers) ring `bell` when they
    /// fire or are dropped unfired: for a [`wake`](crate::queue::wake) on that bell.
    pub(crate) fn ring(&mut self, bell: &Bell) {
        self.bell = Some(bell.clone());
    }

    /// Queues a request whose reply is decoded only when the server says OK; any other code
    /// becomes the error naming the path, and an undecodable body a marshalling error.
    pub(super) fn push<T: 'static>(
        &mut self,
        req: Req<'_>,
        body: impl FnOnce(&mut Writer, &str),
        decode: impl FnOnce(&mut Reader<'_>) -> proto::DecodeResult<T> + Send + 'static,
    ) -> Watched<T> {
        self.push_owned(req, body, move |raw| decode(&mut Reader::new(raw.body())))
    }

    /// [`Pipeline::push`] with a decoder that takes the reply's buffer (to keep it).
    pub(super) fn push_owned<T: 'static>(
        &mut self,
        req: Req<'_>,
        body: impl FnOnce(&mut Writer, &str),
        decode: impl FnOnce(RawReply) -> proto::DecodeResult<T> + Send + 'static,
    ) -> Watched<T> {
        let (op_name, p) = (req.op.as_str(), req.path.to_string());
        self.push_raw(req, body, move |raw| {
            if raw.err != proto::code::OK {
                return Err(reply_error(raw.err, op_name, &p));
            }
            decode(raw).map_err(|m| malformed(op_name, &p, &m.0))
        })
    }

    /// Queues a request with a decoder that sees the raw reply.
    fn push_raw<T: 'static>(
        &mut self,
        req: Req<'_>,
        body: impl FnOnce(&mut Writer, &str),
        decode: impl FnOnce(RawReply) -> Result<T> + Send + 'static,
    ) -> Watched<T> {
        let mut pending = Pending {
            state: Err(Error::Closed),
            decode: Box::new(decode),
            op: req.op.as_str(),
            path: req.path.to_string(),
            deadline: self.deadline,
            timeout: self.client.timeout,
            sending: self.sending.clone(),
            index: self.out.len(),
        };
        if let Err(e) = req.checked {
            pending.state = Err(e);
            return (pending, None);
        }
        let server_path = if req.unrooted {
            req.path.to_string()
        } else {
            path::to_server(&self.client.shared.cfg.chroot, req.path)
        };
        // Room for the path and a small body's other fields, so that it rarely grows.
        let mut w = Writer {
            buf: Vec::with_capacity(server_path.len() + 64),
        };
        body(&mut w, &server_path);
        // The frame: the length, then xid and op code (8 bytes), then the body.
        let max = self.client.shared.cfg.max_request;
        if w.buf.len() + 8 > max {
            pending.state = Err(Error::InvalidArgument {
                name: "request size",
                reason: format!(
                    "{} of {} is {} bytes, over the {max}-byte limit (the server's \
                     jute.maxbuffer; see ClientBuilder::max_request_size); nothing was sent",
                    req.op.as_str(),
                    req.path,
                    w.buf.len() + 8
                ),
            });
            return (pending, None);
        }
        let (tx, rx) = reply_slot();
        let (watch, watch_rx) = match (req.watch, req.sink) {
            (Some(kind), Some(sink)) => {
                let reg = WatchReg {
                    server_path,
                    kind,
                    tx: WatchTx::Sink(sink),
                };
                (Some(reg), None)
            }
            (Some(kind), None) => {
                let (wtx, wrx) = crossbeam_channel::unbounded();
                let reg = WatchReg {
                    server_path,
                    kind,
                    tx: WatchTx::Chan(Ringing::new(wtx, self.bell.clone())),
                };
                (Some(reg), Some(wrx))
            }
            (None, _) => (None, None),
        };
        self.out.push(Outgoing {
            name: req.op,
            opcode: req.opcode,
            body: w.buf,
            watch,
            tx,
        });
        self.last = Some(rx.settled());
        pending.state = Ok(rx);
        (pending, watch_rx)
    }

    fn chroot(&self) -> Arc<str> {
        Arc::from(self.client.shared.cfg.chroot.as_str())
    }

    /// See [`Client::create`].
    pub fn create(&mut self, path: &str, data: &[u8], mode: CreateMode) -> Pending<Created> {
        self.create_with_acl(path, data, mode, &Acl::open_unsafe())
    }

    /// See [`Client::create_with_acl`] (entries or a [`NodeAcl`](crate::NodeAcl)).
    pub fn create_with_acl(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &(impl AsRef<[Acl]> + ?Sized),
    ) -> Pending<Created> {
        let acl = acl.as_ref();
        let chroot = self.chroot();
        let checked = check_create(path, mode, acl);
        let req = Req::checked(Name::Create, path, create_opcode(mode), checked);
        let body = |w: &mut Writer, sp: &str| create_body(w, sp, data, mode, acl);
        self.push(req, body, move |r| {
            Ok(Created {
                path: path::from_server(&chroot, &r.string()?),
                stat: r.stat()?,
            })
        })
        .0
    }

    /// See [`Client::delete`].
    pub fn delete(&mut self, path: &str, version: Option<i32>) -> Pending<()> {
        let mut req = Req::on(Name::Delete, path, op::DELETE);
        if path == "/" {
            req.checked = Err(Error::InvalidPath {
                path: "/".into(),
                reason: "the root cannot be deleted".into(),
            });
        }
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).int(version_arg(version));
        };
        self.push(req, body, |_| Ok(())).0
    }

    fn exists_inner(&mut self, path: &str, watch: bool) -> Watched<Option<Stat>> {
        let req = Req::on(Name::Exists, path, op::EXISTS).watch(watch, WatchKind::Data);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        let (pending, w) = self.push(req, body, |r| r.stat());
        // A missing node is an answer, not an error (and leaves an exists watch behind).
        let pending = pending.map(|r| match r {
            Ok(stat) => Ok(Some(stat)),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        });
        (pending, w)
    }

    /// See [`Client::exists`].
    pub fn exists(&mut self, path: &str) -> Pending<Option<Stat>> {
        self.exists_inner(path, false).0
    }

    /// See [`Client::exists_w`].
    pub fn exists_w(&mut self, path: &str) -> Pending<(Option<Stat>, Receiver<WatchedEvent>)> {
        let (p, w) = self.exists_inner(path, true);
        with_watch(p, w, |s, w| (s, w))
    }

    fn get_data_inner(&mut self, path: &str, watch: bool) -> Watched<(Vec<u8>, Stat)> {
        let req = Req::on(Name::GetData, path, op::GET_DATA).watch(watch, WatchKind::Data);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push(req, body, |r| Ok((r.buffer()?, r.stat()?)))
    }

    /// `get_data` with a data watch that goes to a crate-internal sink.
    pub(crate) fn get_data_sink(
        &mut self,
        path: &str,
        sink: Arc<dyn WatchSink>,
    ) -> Pending<(Vec<u8>, Stat)> {
        let req = Req {
            sink: Some(sink),
            ..Req::on(Name::GetData, path, op::GET_DATA).watch(true, WatchKind::Data)
        };
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(true);
        };
        self.push(req, body, |r| Ok((r.buffer()?, r.stat()?))).0
    }

    /// See [`Client::get_data`].
    pub fn get_data(&mut self, path: &str) -> Pending<(Vec<u8>, Stat)> {
        self.get_data_inner(path, false).0
    }

    /// See [`Client::get_data_w`].
    pub fn get_data_w(&mut self, path: &str) -> Pending<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_data_inner(path, true);
        with_watch(p, w, |(d, s), w| (d, s, w))
    }

    /// See [`Client::set_data`].
    pub fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> Pending<Stat> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).buffer(data).int(version_arg(version));
        };
        self.push(Req::on(Name::SetData, path, op::SET_DATA), body, |r| {
            r.stat()
        })
        .0
    }

    fn get_children_inner(&mut self, path: &str, watch: bool) -> Watched<(Vec<String>, Stat)> {
        let req =
            Req::on(Name::GetChildren, path, op::GET_CHILDREN2).watch(watch, WatchKind::Child);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push(req, body, |r| Ok((r.strings()?, r.stat()?)))
    }

    /// [`Pipeline::get_children`] for the queue recipes: the names without a string
    /// allocated for each (see [`Names`]), and no stat.
    pub(crate) fn list(&mut self, path: &str) -> Pending<Names> {
        self.list_inner(path, false).0
    }

    /// [`Pipeline::list`] with the child watch [`Pipeline::get_children_w`] leaves.
    pub(crate) fn list_w(&mut self, path: &str) -> Pending<(Names, Receiver<WatchedEvent>)> {
        let (p, w) = self.list_inner(path, true);
        with_watch(p, w, |n, w| (n, w))
    }

    fn list_inner(&mut self, path: &str, watch: bool) -> Watched<Names> {
        let req =
            Req::on(Name::GetChildren, path, op::GET_CHILDREN2).watch(watch, WatchKind::Child);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push_owned(req, body, Names::check)
    }

    /// See [`Client::get_children`].
    pub fn get_children(&mut self, path: &str) -> Pending<(Vec<String>, Stat)> {
        self.get_children_inner(path, false).0
    }

    /// See [`Client::get_children_w`].
    pub fn get_children_w(
        &mut self,
        path: &str,
    ) -> Pending<(Vec<String>, Stat, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_children_inner(path, true);
        with_watch(p, w, |(c, s), w| (c, s, w))
    }

    /// See [`Client::get_acl`].
    pub fn get_acl(&mut self, path: &str) -> Pending<(Vec<Acl>, Stat)> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp);
        };
        let decode = |r: &mut Reader<'_>| Ok((r.acls()?, r.stat()?));
        self.push(Req::on(Name::GetAcl, path, op::GET_ACL), body, decode)
            .0
    }

    /// See [`Client::set_acl`].
    pub fn set_acl(&mut self, path: &str, acl: &[Acl], version: Option<i32>) -> Pending<Stat> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).acls(acl).int(version_arg(version));
        };
        self.push(Req::on(Name::SetAcl, path, op::SET_ACL), body, |r| r.stat())
            .0
    }

    /// See [`Client::who_am_i`].
    pub fn who_am_i(&mut self) -> Pending<Vec<Identity>> {
        // No path: "/" only names the request in errors; the body is empty.
        let req = Req::on(Name::WhoAmI, "/", op::WHO_AM_I);
        self.push(req, |_, _| {}, |r| r.identities()).0
    }

    /// See [`Client::sync`].
    pub fn sync(&mut self, path: &str) -> Pending<()> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp);
        };
        self.push(Req::on(Name::Sync, path, op::SYNC), body, |_| Ok(()))
            .0
    }

    /// Takes back this session's data watches on `path` (an `exists` watch on a missing
    /// node is one; ZooKeeper 3.5's removeWatches, type data). The client forgets its own
    /// registrations of them first, so nothing is delivered for them from this call on,
    /// and a reconnect does not arm them again. `NoWatcher` (none left: it fired, or was
    /// never set) is for the caller to ignore.
    pub(crate) fn remove_watches(&mut self, path: &str) -> Pending<()> {
        let shared = &self.client.shared;
        shared.forget_watches(&path::to_server(&shared.cfg.chroot, path));
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).int(WATCHER_TYPE_DATA);
        };
        let req = Req::on(Name::RemoveWatches, path, op::REMOVE_WATCHES);
        self.push(req, body, |_| Ok(())).0
    }

    /// See [`Client::multi`].
    pub fn multi(&mut self, ops: &[Op]) -> Pending<Vec<OpResult>> {
        let chroot = self.chroot();
        let label = ops.first().map(|o| o.path()).unwrap_or("");
        let paths: Vec<(&'static str, String)> = ops
            .iter()
            .map(|o| (o.name(), o.path().to_string()))
            .collect();
        let req = Req::checked(Name::Multi, label, op::MULTI, check_multi(ops));
        let cr = chroot.clone();
        let body = |w: &mut Writer, _: &str| encode_multi(w, &cr, ops);
        self.push_raw(req, body, move |raw| decode_multi(&raw, &chroot, &paths))
            .0
    }
}

impl<T: 'static> Pending<T> {
    /// The same request, its outcome passed through `f`.
    pub(super) fn map<U: 'static>(
        self,
        f: impl FnOnce(Result<T>) -> Result<U> + Send + 'static,
    ) -> Pending<U> {
        let Pending {
            state,
            decode,
            op,
            path,
            deadline,
            timeout,
            sending,
            index,
        } = self;
        Pending {
            state,
            decode: Box::new(move |raw| f(decode(raw))),
            op,
            path,
            deadline,
            timeout,
            sending,
            index,
        }
    }
}

/// The error a reply's code stands for, the client's mark of a dropped reply included.
pub(super) fn reply_error(code: i32, op: &'static str, path: &str) -> Error {
    if code == proto::code::REPLY_TOO_LARGE {
        return Error::Malformed {
            op,
            path: path.to_string(),
            reason: "the reply is over the client's size limit and was dropped (a listing of \
                     too many or too long children?); the connection goes on; see \
                     ClientBuilder::max_reply_size"
                .into(),
        };
    }
    Error::from_reply(code, op, path)
}

pub(super) fn with_watch<A: 'static, B: 'static>(
    p: Pending<A>,
    w: Option<Receiver<WatchedEvent>>,
    join: impl FnOnce(A, Receiver<WatchedEvent>) -> B + Send + 'static,
) -> Pending<B> {
    p.map(move |r| Ok(join(r?, w.ok_or(Error::Closed)?)))
}

fn check_multi(ops: &[Op]) -> Result<()> {
    for o in ops {
        match o {
            Op::Create { path, mode, .. } | Op::CreateWithAcl { path, mode, .. } => {
                if mode.ttl().is_some() {
                    return Err(Error::InvalidArgument {
                        name: "multi op",
                        reason: format!("TTL create of {path} inside a multi is not supported"),
                    });
                }
                let open = Acl::open_unsafe();
                let acl = match o {
                    Op::CreateWithAcl { acl, .. } => acl,
                    _ => &open,
                };
                check_create(path, *mode, acl)?
            }
            Op::Delete { path, .. } | Op::Check { path, .. } | Op::SetData { path, .. } => {
                path::validate_path(path)?
            }
        }
    }
    Ok(())
}
