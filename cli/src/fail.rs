//! A failure as the user sees it: one line on stderr and an exit status, and the statuses
//! every subcommand shares.

use std::fmt;

/// Exit status: bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: ZooKeeper unreachable or failing.
pub const EXIT_UNAVAILABLE: i32 = 69;
/// Exit status: internal error.
pub const EXIT_SOFTWARE: i32 = 70;
/// Exit status: CMD could not be executed.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// Exit status: CMD was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit status: the lock or leadership was lost while CMD ran.
pub const EXIT_LOST: i32 = 75;
/// Exit status: credentials or ACL refused.
pub const EXIT_NOPERM: i32 = 77;

/// A failure: one line on stderr and an exit status.
#[derive(Debug)]
pub struct Fail {
    pub code: i32,
    pub msg: String,
}

impl Fail {
    pub fn new(code: i32, msg: impl Into<String>) -> Fail {
        Fail {
            code,
            msg: msg.into(),
        }
    }

    /// A ZooKeeper error, with the exit status its kind calls for.
    pub fn zk(context: impl fmt::Display, e: zkguard::Error) -> Fail {
        use zkguard::Error as E;
        let code = match e {
            // A node no lock made in the lock's directory is a co-tenant's: refused tenancy,
            // as an untrusted directory is (the error names the node).
            E::ForeignNode { .. } => EXIT_NOPERM,
            E::InvalidPath { .. } | E::InvalidArgument { .. } | E::PermitMismatch { .. } => {
                EXIT_USAGE
            }
            E::AuthFailed
            | E::NoAuth { .. }
            | E::InvalidAcl { .. }
            | E::UntrustedDirectory { .. }
            | E::NotOurNode { .. } => EXIT_NOPERM,
            E::Spawn { .. } => EXIT_SOFTWARE,
            _ => EXIT_UNAVAILABLE,
        };
        let hint = match e {
            E::UntrustedDirectory { .. } => {
                " (`zkguard mkdir DIR --acl creator` makes a directory only this identity may \
                 change, which nobody else can delete)"
            }
            _ => "",
        };
        Fail::new(code, format!("{context}: {e}{hint}"))
    }
}
