//! The in-flight op table: which task waits for which completion, and who owns the memory
//! the kernel may still touch.

use std::any::Any;
use std::task::Waker;

use slab::Slab;

use crate::core::{Core, IGNORE_USER_DATA};
use crate::ring::{Completion, Sqe};

/// Who waits for an op's completion.
pub(crate) enum Waiter {
    /// Nobody has polled the op yet.
    None,
    /// The task with this id (see [`crate::task::TaskWakers`]) polled it with its own waker.
    Task(usize),
    /// Polled with some other waker (a combinator's, or outside a task): a clone of it.
    Waker(Waker),
}

/// The state of one submitted op.
pub(crate) enum Slot {
    /// Submitted; the waiter to wake on completion.
    Waiting(Waiter),
    /// The completion arrived; the future has not picked it up yet.
    Completed(Completion),
    /// The future was dropped before the completion: the slot owns the op's memory until the
    /// kernel is done with it. A cancel has been requested.
    Abandoned(#[allow(dead_code)] Box<dyn Any>),
}

/// All ops a core has submitted and not yet retired. The slab key is the SQE user data.
#[derive(Default)]
pub(crate) struct OpTable {
    slots: Slab<Slot>,
    /// Slots the kernel still owns (Waiting or Abandoned).
    inflight: usize,
    /// Ops abandoned by dropped futures (statistics).
    pub(crate) abandoned_total: u64,
}

impl OpTable {
    /// Reserves a slot for a new op and returns its key.
    pub(crate) fn insert(&mut self) -> usize {
        self.inflight += 1;
        self.slots.insert(Slot::Waiting(Waiter::None))
    }

    /// Ops whose completion has not arrived yet.
    pub(crate) fn len(&self) -> usize {
        self.inflight
    }

    /// Records a completion and returns who waits for it; frees the memory of an abandoned
    /// op. The caller wakes the waiter after releasing the table (waking may run code that
    /// touches the table).
    #[inline]
    pub(crate) fn complete(&mut self, key: usize, completion: Completion) -> Waiter {
        let Some(slot) = self.slots.get_mut(key) else {
            tracing::error!(key, "completion for an unknown op");
            return Waiter::None;
        };
        match std::mem::replace(slot, Slot::Completed(completion)) {
            Slot::Waiting(waiter) => {
                self.inflight -= 1;
                waiter
            }
            Slot::Abandoned(memory) => {
                self.inflight -= 1;
                self.slots.remove(key);
                drop(memory);
                Waiter::None
            }
            Slot::Completed(_) => {
                // Multishot ops are not used; a second completion means a bug elsewhere.
                tracing::error!(key, "second completion for an op");
                Waiter::None
            }
        }
    }

    /// Polls op `key`: the completion if it arrived (retiring the slot), else records the
    /// waiter: the id `task()` returns if the op is polled with that task's own waker, else a
    /// clone of `waker`.
    #[inline]
    pub(crate) fn poll(
        &mut self,
        key: usize,
        waker: &Waker,
        task: impl FnOnce() -> Option<usize>,
    ) -> Option<Completion> {
        match self.slots.get_mut(key) {
            Some(Slot::Completed(_)) => match self.slots.remove(key) {
                Slot::Completed(c) => Some(c),
                _ => unreachable!(),
            },
            Some(Slot::Waiting(w)) => {
                match (task(), &*w) {
                    (Some(id), _) => *w = Waiter::Task(id),
                    (None, Waiter::Waker(old)) if old.will_wake(waker) => {}
                    (None, _) => *w = Waiter::Waker(waker.clone()),
                }
                None
            }
            Some(Slot::Abandoned(_)) | None => {
                unreachable!("polled an op that was dropped or retired")
            }
        }
    }

    /// The future of op `key` is gone. If the kernel still owns its memory, keep `memory`
    /// alive until the completion and return true (the caller requests a cancel).
    pub(crate) fn abandon(&mut self, key: usize, memory: Box<dyn Any>) -> bool {
        match self.slots.get_mut(key) {
            Some(slot @ Slot::Waiting(_)) => {
                *slot = Slot::Abandoned(memory);
                self.abandoned_total += 1;
                true
            }
            Some(Slot::Completed(_)) => {
                self.slots.remove(key);
                false
            }
            _ => false,
        }
    }

    /// Keys of every op still in the kernel (at shutdown, to cancel them all).
    pub(crate) fn in_kernel_keys(&self) -> Vec<usize> {
        self.slots
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Waiting(_) | Slot::Abandoned(_)))
            .map(|(key, _)| key)
            .collect()
    }

    /// Gives up on in-flight ops at shutdown after a timeout: their memory is leaked rather
    /// than freed while the kernel may still write to it.
    pub(crate) fn leak_all(&mut self) {
        for (_, slot) in self.slots.iter_mut() {
            if let Slot::Abandoned(_) = slot {
                let s = std::mem::replace(slot, Slot::Waiting(Waiter::None));
                std::mem::forget(s);
            }
        }
        std::mem::forget(std::mem::take(&mut self.slots));
        self.inflight = 0;
    }
}

/// Queues an `ASYNC_CANCEL` for op `key`; its own completion is ignored.
pub(crate) fn push_cancel(core: &Core, key: usize) {
    let sqe = io_uring::opcode::AsyncCancel::new(key as u64)
        .build()
        .user_data(IGNORE_USER_DATA);
    // SAFETY: a cancel entry refers to no memory.
    unsafe { core.push_sqe(Sqe::Normal(sqe)) };
}
