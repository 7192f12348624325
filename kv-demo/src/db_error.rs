//! The typed errors of the store's API.

use std::sync::Arc;

use crate::error::CorruptionError;

/// What can go wrong in a [`Db`](crate::Db) call.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Bad input: an over-limit key or value, or a bad option.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The device holds a zone file system that is not a kv-demo store (no or a bad
    /// `kv/STORE`); it is never reformatted.
    #[error("not a kv-demo store: {0}")]
    NotAStore(String),
    /// The device holds foreign data (neither blank nor a zone file system); it is never
    /// reformatted.
    #[error("the device holds foreign data: {0}")]
    Foreign(String),
    /// Stored bytes are not a valid encoding.
    #[error(transparent)]
    Corruption(#[from] CorruptionError),
    /// The device, ZIOB or the zone file system failed (or a background flush or
    /// compaction did, which stops the store's writes).
    #[error("I/O: {0}")]
    Io(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store was closed (see [`Db::close`](crate::Db::close)): a write that returns
    /// this after `close` began wrote nothing; a read or scan that `close` overtook returns
    /// it too. (After [`Db::abandon`](crate::Db::abandon), or when the owner of the
    /// instance given to [`Db::open_on`](crate::Db::open_on) closes it, a write under way
    /// may get it after its record reached the WAL.)
    #[error("the store is closed")]
    Closed,
}

impl DbError {
    /// An I/O error with this message.
    pub fn io(msg: impl Into<String>) -> DbError {
        DbError::Io(Box::new(std::io::Error::other(msg.into())))
    }

    /// `e` as an I/O error — or [`DbError::Closed`] if it says the store's ZIOB instance is
    /// closed (a read or scan that `close` overtook; the device is fine).
    fn from_failure(e: impl std::error::Error + Send + Sync + 'static) -> DbError {
        if closed_instance(&e) {
            DbError::Closed
        } else {
            DbError::Io(Box::new(e))
        }
    }
}

/// Whether [`ZiobError::Closed`](ziob::ZiobError::Closed) is `e` or one of its causes
/// (through `source`, shared `Arc`s, the zone file system's errors and `std::io::Error`
/// wrappers).
fn closed_instance(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        // A transparent wrapper reports its inner error's source, not the inner error.
        let ziob = e
            .downcast_ref::<ziob::ZiobError>()
            .or_else(|| e.downcast_ref::<Arc<ziob::ZiobError>>().map(|a| &**a))
            .or(match e.downcast_ref::<ziob_zonefs::FsError>() {
                Some(ziob_zonefs::FsError::Ziob(z)) => Some(z),
                _ => None,
            });
        if matches!(ziob, Some(ziob::ZiobError::Closed)) {
            return true;
        }
        // An `io::Error` made from another error reports that one's source, not itself.
        cause = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

impl From<ziob_zonefs::FsError> for DbError {
    fn from(e: ziob_zonefs::FsError) -> Self {
        DbError::from_failure(e)
    }
}

impl From<ziob::ZiobError> for DbError {
    fn from(e: ziob::ZiobError) -> Self {
        DbError::from_failure(e)
    }
}

impl From<std::io::Error> for DbError {
    fn from(e: std::io::Error) -> Self {
        DbError::from_failure(e)
    }
}

impl From<crate::sst::table::TableError> for DbError {
    fn from(e: crate::sst::table::TableError) -> Self {
        match e {
            crate::sst::table::TableError::Io(e) => e.into(),
            crate::sst::table::TableError::Corrupt(c) => DbError::Corruption(c),
        }
    }
}

impl From<crate::batch::BatchError> for DbError {
    fn from(e: crate::batch::BatchError) -> Self {
        DbError::InvalidArgument(e.to_string())
    }
}

impl From<crate::wal::WalError> for DbError {
    fn from(e: crate::wal::WalError) -> Self {
        match e {
            crate::wal::WalError::TooLarge { .. } => DbError::InvalidArgument(e.to_string()),
            e => DbError::from_failure(e),
        }
    }
}

impl From<crate::manifest::ManifestError> for DbError {
    fn from(e: crate::manifest::ManifestError) -> Self {
        use crate::manifest::ManifestError as M;
        match e {
            M::Corrupt { .. } | M::Missing { .. } => {
                DbError::Corruption(CorruptionError::new(e.to_string()))
            }
            e => DbError::from_failure(e),
        }
    }
}

impl From<crate::store::StoreError> for DbError {
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError as S;
        match e {
            S::NotAStore { found } => DbError::NotAStore(found),
            S::Foreign { found } => DbError::Foreign(found),
            S::Corrupt { detail } => DbError::Corruption(CorruptionError::new(detail)),
            e @ (S::ShardMismatch { .. } | S::Config(_)) => DbError::InvalidArgument(e.to_string()),
            S::Fs(e) => e.into(),
            S::Ziob(e) => e.into(),
            S::Wal(e) => e.into(),
            S::Manifest(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ziob::ZiobError;
    use ziob_zonefs::FsError;

    #[test]
    fn a_closed_instance_is_closed_however_it_is_wrapped() {
        let closed = |e: DbError| matches!(e, DbError::Closed);
        assert!(closed(ZiobError::Closed.into()));
        assert!(closed(FsError::Ziob(ZiobError::Closed).into()));
        let table = std::io::Error::other(FsError::Ziob(ZiobError::Closed));
        assert!(closed(crate::sst::table::TableError::Io(table).into()));
        let wal = crate::wal::WalError::Log {
            log: "wal-0".into(),
            source: Arc::new(ZiobError::Closed),
        };
        assert!(closed(wal.into()));
        // Anything else stays an I/O error.
        let other = std::io::Error::other(FsError::NotFound("t".into()));
        assert!(matches!(DbError::from(other), DbError::Io(_)));
        assert!(matches!(
            DbError::from(FsError::NotFormatted),
            DbError::Io(_)
        ));
    }
}
