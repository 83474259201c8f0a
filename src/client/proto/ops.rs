//! Request bodies of the node operations, and the multi codec.

use super::{code, malformed, op, Malformed, RawReply, Reader, Writer};
use crate::client::path;
use crate::client::types::{Acl, CreateMode, Op, OpResult};
use crate::error::{Error, Result};

pub(crate) fn version_arg(v: Option<i32>) -> i32 {
    v.unwrap_or(-1)
}

pub(crate) fn create_body(
    w: &mut Writer,
    server_path: &str,
    data: &[u8],
    mode: CreateMode,
    acl: &[Acl],
) {
    w.string(server_path)
        .buffer(data)
        .acls(acl)
        .int(mode.flag());
    if let Some(ttl) = mode.ttl() {
        w.long(ttl.as_millis() as i64);
    }
}

/// One create of a multi.
fn multi_create(w: &mut Writer, server_path: &str, data: &[u8], mode: CreateMode, acl: &[Acl]) {
    let code = if mode == CreateMode::Container {
        op::CREATE_CONTAINER
    } else {
        op::CREATE
    };
    w.int(code).bool(false).int(-1);
    create_body(w, server_path, data, mode, acl);
}

pub(crate) fn encode_multi(w: &mut Writer, chroot: &str, ops: &[Op]) {
    for o in ops {
        let sp = path::to_server(chroot, o.path());
        match o {
            Op::Check { version, .. } => {
                w.int(op::CHECK).bool(false).int(-1);
                w.string(&sp).int(version_arg(*version));
            }
            Op::Create { data, mode, .. } => {
                multi_create(w, &sp, data, *mode, &Acl::open_unsafe());
            }
            Op::CreateWithAcl {
                data, mode, acl, ..
            } => multi_create(w, &sp, data, *mode, acl),
            Op::Delete { version, .. } => {
                w.int(op::DELETE).bool(false).int(-1);
                w.string(&sp).int(version_arg(*version));
            }
            Op::SetData { data, version, .. } => {
                w.int(op::SET_DATA).bool(false).int(-1);
                w.string(&sp).buffer(data).int(version_arg(*version));
            }
        }
    }
    w.int(-1).bool(true).int(-1);
}

pub(crate) fn decode_multi(
    raw: &RawReply,
    chroot: &str,
    ops: &[(&'static str, String)],
) -> Result<Vec<OpResult>> {
    let label = ops.first().map(|(_, p)| p.as_str()).unwrap_or("");
    let mut r = Reader::new(raw.body());
    let mut results = Vec::new();
    let mut errors = Vec::new();
    let bad = |m: Malformed| malformed("multi", label, &m.0);
    loop {
        let kind = r.int().map_err(bad)?;
        let done = r.bool().map_err(bad)?;
        let _err = r.int().map_err(bad)?;
        if done {
            break;
        }
        // One result per op sent: a server that sends more is not answering this multi
        // (and would otherwise have the client decode 64 MiB of results).
        if results.len() + errors.len() >= ops.len() {
            return Err(malformed(
                "multi",
                label,
                &format!("more results than the {} ops sent", ops.len()),
            ));
        }
        match kind {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                let p = r.string().map_err(bad)?;
                let stat = if kind != op::CREATE {
                    Some(r.stat().map_err(bad)?)
                } else {
                    None
                };
                results.push(OpResult::Create {
                    path: path::from_server(chroot, &p),
                    stat,
                });
            }
            op::DELETE => results.push(OpResult::Delete),
            op::CHECK => results.push(OpResult::Check),
            op::SET_DATA => results.push(OpResult::SetData {
                stat: r.stat().map_err(bad)?,
            }),
            op::ERROR => errors.push((results.len() + errors.len(), r.int().map_err(bad)?)),
            other => return Err(malformed("multi", label, &format!("result type {other}"))),
        }
    }
    if raw.err != code::OK || !errors.is_empty() {
        // The failing op carries its own code; the others OK or runtime-inconsistency.
        let (index, code) = errors
            .iter()
            .copied()
            .find(|&(_, c)| c != code::OK && c != code::RUNTIME_INCONSISTENCY)
            .or_else(|| errors.first().copied())
            .unwrap_or((0, raw.err));
        let (op, path) = ops
            .get(index)
            .map_or(("multi", label), |(o, p)| (*o, p.as_str()));
        return Err(Error::Multi {
            index,
            source: Box::new(Error::from_reply(code, op, path)),
        });
    }
    Ok(results)
}
