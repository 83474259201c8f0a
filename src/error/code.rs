//! [`ErrorCode`]: the server's error codes (`KeeperException.Code`), each written once in
//! one table.

use std::fmt;

/// Declares [`ErrorCode`] and its table: each code is written here once.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $text:literal;)*) => {
        /// A ZooKeeper server error code (`KeeperException.Code`), carried by
        /// [`Error::Zk`](crate::Error::Zk) for the codes that have no variant of their own.
        ///
        /// Codes this version does not know survive as [`ErrorCode::Unknown`];
        /// [`from_i32`](ErrorCode::from_i32) never returns `Unknown` for a code listed
        /// here, so matching on a named variant is enough. New ZooKeeper releases add codes,
        /// so the enum is `#[non_exhaustive]`.
        ///
        /// ```
        /// use zkguard::ErrorCode;
        ///
        /// assert_eq!(ErrorCode::from_i32(-118), ErrorCode::SessionMoved);
        /// assert_eq!(ErrorCode::SessionMoved.as_i32(), -118);
        /// assert_eq!(ErrorCode::SessionMoved.to_string(), "session moved");
        /// assert_eq!(ErrorCode::from_i32(-9999), ErrorCode::Unknown(-9999));
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)*
            /// A code this version of zkguard does not know, as the server sent it.
            Unknown(i32),
        }

        impl ErrorCode {
            /// Every code zkguard knows, in the order of the protocol's table.
            #[cfg(test)]
            pub(crate) const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The code the server sends for `value`; [`ErrorCode::Unknown`] if this
            /// version does not know it.
            pub const fn from_i32(value: i32) -> ErrorCode {
                match value {
                    $($value => ErrorCode::$name,)*
                    other => ErrorCode::Unknown(other),
                }
            }

            /// The number on the wire.
            pub const fn as_i32(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $value,)*
                    ErrorCode::Unknown(v) => v,
                }
            }

            /// What the code means, in a few words (its `Display`).
            pub const fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $text,)*
                    ErrorCode::Unknown(_) => "unknown error",
                }
            }
        }
    };
}

error_codes! {
    /// Success (not an error; it appears in replies and multi results).
    Ok = 0, "ok";
    /// A system error on the server.
    SystemError = -1, "system error";
    /// A runtime inconsistency was found (in a multi: an operation not applied because
    /// another one failed).
    RuntimeInconsistency = -2, "runtime inconsistency";
    /// A data inconsistency was found.
    DataInconsistency = -3, "data inconsistency";
    /// The connection to the server was lost.
    ConnectionLoss = -4, "connection loss";
    /// Error while marshalling or unmarshalling data.
    MarshallingError = -5, "marshalling error";
    /// The operation is not implemented by the server.
    Unimplemented = -6, "unimplemented (is the server too old for this operation?)";
    /// The operation timed out on the server.
    OperationTimeout = -7, "operation timeout";
    /// Invalid arguments.
    BadArguments = -8, "bad arguments";
    /// The session is unknown to the server.
    UnknownSession = -12, "unknown session";
    /// A new configuration has no quorum.
    NewConfigNoQuorum = -13, "new config has no quorum";
    /// Another reconfiguration is in progress.
    ReconfigInProgress = -14, "reconfiguration in progress";
    /// The generic API error (no server sends it; codes below it are API errors).
    ApiError = -100, "API error";
    /// The node does not exist.
    NoNode = -101, "no node";
    /// Not authorized by the node's ACL.
    NoAuth = -102, "not authorized";
    /// The node's version is not the expected one.
    BadVersion = -103, "bad version";
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals = -108, "ephemeral nodes cannot have children";
    /// The node already exists.
    NodeExists = -110, "node exists";
    /// The node has children.
    NotEmpty = -111, "node has children";
    /// The session has expired.
    SessionExpired = -112, "session expired";
    /// An invalid callback was given.
    InvalidCallback = -113, "invalid callback";
    /// The ACL is invalid.
    InvalidAcl = -114, "invalid ACL";
    /// Authentication failed.
    AuthFailed = -115, "authentication failed";
    /// The session moved to another server.
    SessionMoved = -118, "session moved";
    /// A state-changing request went to a read-only server.
    NotReadOnly = -119, "server is read-only";
    /// An ephemeral node was requested on a local session.
    EphemeralOnLocalSession = -120, "ephemeral on local session";
    /// No watcher to remove.
    NoWatcher = -121, "no watcher";
    /// The request did not complete in time on the server.
    RequestTimeout = -122, "request timeout";
    /// Dynamic reconfiguration is disabled.
    ReconfigDisabled = -123, "reconfiguration disabled";
    /// The session was closed because SASL authentication is required.
    SessionClosedRequireSaslAuth = -124, "session closed: SASL authentication required";
    /// A quota was exceeded.
    QuotaExceeded = -125, "quota exceeded";
    /// The server throttled the operation.
    Throttled = -127, "throttled";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

impl From<i32> for ErrorCode {
    fn from(value: i32) -> ErrorCode {
        ErrorCode::from_i32(value)
    }
}

impl From<ErrorCode> for i32 {
    fn from(code: ErrorCode) -> i32 {
        code.as_i32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_has_a_name() {
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            let n = code.as_i32();
            assert!(seen.insert(n), "{n} is listed twice");
            assert_eq!(ErrorCode::from_i32(n), code);
            assert_eq!(ErrorCode::from(n), code);
            assert_eq!(i32::from(code), n);
            assert!(!matches!(code, ErrorCode::Unknown(_)));
            assert_ne!(code.to_string(), "unknown error", "{code:?}");
            assert_eq!(code.to_string(), code.description());
        }
        // KeeperException.Code has 32 codes (OK included) in ZooKeeper 3.8.
        assert_eq!(ErrorCode::ALL.len(), 32);
    }
}
