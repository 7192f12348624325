//! Which ring a registered (fixed) file or buffer belongs to.
//!
//! A registration is an index into one ring's table, so it may only be used on that ring.
//! Core indices do not say which ring: every runtime in a process has a core 0. Each core
//! gets a process-unique [`RingId`] when it is created, and every registration records it.
//! An op on another ring uses the plain descriptor or an unregistered buffer instead, and a
//! registration dropped elsewhere is sent back to its own core to be undone there.

use std::rc::Rc;
use std::sync::{Arc, Weak};

use crate::core::{with_core, Core, CoreRemote, Message};
use crate::error::{Error, Result};
pub(crate) use crate::ring::RingId;

/// Whether `ring` is the ring of the current thread's core.
pub(crate) fn is_current(ring: RingId) -> bool {
    with_core(|c| c.remote.ring_id == ring).unwrap_or(false)
}

/// Runs `f` with the current thread's core if its ring is `ring`; `None` anywhere else (off
/// any core, or on a core of another ring, e.g. core 0 of another runtime).
pub(crate) fn on_ring<R>(ring: RingId, f: impl FnOnce(&Rc<Core>) -> R) -> Option<R> {
    with_core(|c| (c.remote.ring_id == ring).then(|| f(c))).flatten()
}

/// A file descriptor in slot `slot` of one ring's fixed file table. Dropping it empties the
/// slot (on the owning core, or by a message to it) and makes it free again.
pub(crate) struct FixedFile {
    ring: RingId,
    slot: u32,
    owner: Weak<CoreRemote>,
}

impl FixedFile {
    /// The slot, if the current thread is the core whose ring holds it.
    pub(crate) fn slot_here(&self) -> Option<u32> {
        is_current(self.ring).then_some(self.slot)
    }
}

/// Registers `fd` in a free slot of the current core's file table; `Ok(None)` when every slot
/// is taken.
pub(crate) fn register_file(fd: std::os::fd::RawFd) -> Result<Option<FixedFile>> {
    with_core(|c| {
        let Some(slot) = c.file_slots.borrow_mut().pop() else {
            return Ok(None);
        };
        if let Err(source) = c.ring.borrow().register_file_at(slot, fd) {
            c.file_slots.borrow_mut().push(slot);
            return Err(Error::Io {
                op: "register_files_update",
                source,
            });
        }
        Ok(Some(FixedFile {
            ring: c.remote.ring_id,
            slot,
            owner: Arc::downgrade(&c.remote),
        }))
    })
    .unwrap_or(Err(Error::NotOnCore("File::register")))
}

impl Drop for FixedFile {
    fn drop(&mut self) {
        if on_ring(self.ring, |c| c.release_file_slot(self.slot)).is_none() {
            // A core that stopped took its ring (and the slot) with it.
            if let Some(owner) = self.owner.upgrade() {
                let _ = owner.send(Message::ReleaseFileSlot(self.slot));
            }
        }
    }
}
