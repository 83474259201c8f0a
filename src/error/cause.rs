//! [`IoCause`]: an I/O error carried as the cause of an error, shared and comparable.

use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::Arc;

/// An I/O error carried as the cause of an [`Error`](crate::Error) or a
/// [`ConnectFailure`](crate::ConnectFailure). It reads as the I/O error itself: it
/// dereferences to it (`cause.kind()`), and its `Display` and `Debug` are the error's.
///
/// Cloning shares the error (`io::Error` is not `Clone`). Two causes are equal when they
/// are the same error or say the same thing, the same kind and message (`io::Error`
/// cannot be compared otherwise), which is what lets `Error` derive its equality.
///
/// ```
/// use std::io;
/// use zkguard::IoCause;
///
/// let a = IoCause::from(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
/// let b = IoCause::from(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
/// assert_eq!(a, b);
/// assert_eq!(a.kind(), io::ErrorKind::ConnectionRefused);
/// assert_eq!(a.to_string(), "refused");
/// ```
#[derive(Clone)]
pub struct IoCause(Arc<io::Error>);

impl IoCause {
    /// The I/O error.
    pub fn get_ref(&self) -> &io::Error {
        &self.0
    }

    /// The shared I/O error.
    pub fn as_arc(&self) -> &Arc<io::Error> {
        &self.0
    }
}

impl From<io::Error> for IoCause {
    fn from(e: io::Error) -> IoCause {
        IoCause(Arc::new(e))
    }
}

impl From<Arc<io::Error>> for IoCause {
    fn from(e: Arc<io::Error>) -> IoCause {
        IoCause(e)
    }
}

impl Deref for IoCause {
    type Target = io::Error;

    fn deref(&self) -> &io::Error {
        &self.0
    }
}

impl AsRef<io::Error> for IoCause {
    fn as_ref(&self) -> &io::Error {
        &self.0
    }
}

/// The same error, or the same kind and message.
impl PartialEq for IoCause {
    fn eq(&self, other: &IoCause) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string())
    }
}

impl Eq for IoCause {}

impl fmt::Display for IoCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for IoCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
