//! The logs a store has open, by name, and whether the store is closed: the part of the
//! bookkeeping both stores share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::name::LogName;
use crate::store::StoreError;

/// Open logs of type `L` by name, and the store's closed flag.
pub struct OpenLogs<L> {
    logs: RwLock<HashMap<LogName, Arc<L>>>,
    closed: AtomicBool,
}

impl<L> OpenLogs<L> {
    /// An open store with `logs` open.
    pub fn new(logs: HashMap<LogName, Arc<L>>) -> Self {
        OpenLogs {
            logs: RwLock::new(logs),
            closed: AtomicBool::new(false),
        }
    }

    /// [`StoreError::Closed`] once [`OpenLogs::mark_closed`] ran.
    pub fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// The open log `name` (`None` when it is not open), if the store is open.
    pub fn get(&self, name: &LogName) -> Result<Option<Arc<L>>, StoreError> {
        self.check_open()?;
        Ok(self.logs.read().expect("logs lock").get(name).cloned())
    }

    /// The open log `name`, made by `open` and kept when there is none yet.
    pub fn get_or_insert(&self, name: &LogName, open: impl FnOnce() -> Arc<L>) -> Arc<L> {
        let mut logs = self.logs.write().expect("logs lock");
        logs.entry(name.clone()).or_insert_with(open).clone()
    }

    /// Every open log.
    pub fn all(&self) -> Vec<Arc<L>> {
        self.logs
            .read()
            .expect("logs lock")
            .values()
            .cloned()
            .collect()
    }

    /// Closes the store: [`OpenLogs::check_open`] fails from now on.
    pub fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
