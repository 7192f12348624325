//! The typed errors of the store's API.

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
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}

impl DbError {
    /// An I/O error with this message.
    pub fn io(msg: impl Into<String>) -> DbError {
        DbError::Io(Box::new(std::io::Error::other(msg.into())))
    }
}

impl From<ziob_zonefs::FsError> for DbError {
    fn from(e: ziob_zonefs::FsError) -> Self {
        DbError::Io(Box::new(e))
    }
}

impl From<ziob::ZiobError> for DbError {
    fn from(e: ziob::ZiobError) -> Self {
        DbError::Io(Box::new(e))
    }
}

impl From<std::io::Error> for DbError {
    fn from(e: std::io::Error) -> Self {
        DbError::Io(Box::new(e))
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
            e => DbError::Io(Box::new(e)),
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
            e => DbError::Io(Box::new(e)),
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
