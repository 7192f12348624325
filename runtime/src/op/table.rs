//! The in-flight op table: which task waits for which completion, and who owns the memory
//! the kernel may still touch.
//!
//! An op's key ([`OpKey`], the SQE user data) is its slab index *and* a generation: the
//! table's insert counter when the op was submitted. A slab index is reused as soon as its op
//! retires; the generation is not (it repeats only after 2^32 more inserts), so a key kept by
//! mistake (a future polled after it finished, a late completion) finds no slot instead of
//! another op's.

use std::any::Any;
use std::task::Waker;

use slab::Slab;

use crate::core::{Core, IGNORE_USER_DATA, WAKE_USER_DATA};
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

/// The key of one op: slab index in the low 32 bits, generation in the high 32 bits. It is
/// the SQE's user data and the target of `ASYNC_CANCEL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpKey(u64);

impl OpKey {
    fn new(index: usize, generation: u32) -> OpKey {
        let index = u32::try_from(index).expect("more than 2^32 ops in flight on one core");
        let key = OpKey((u64::from(generation) << 32) | u64::from(index));
        debug_assert!(key.0 != WAKE_USER_DATA && key.0 != IGNORE_USER_DATA);
        key
    }

    /// The key as SQE user data.
    pub(crate) fn user_data(self) -> u64 {
        self.0
    }

    /// The key a completion's user data names.
    pub(crate) fn from_user_data(user_data: u64) -> OpKey {
        OpKey(user_data)
    }

    fn index(self) -> usize {
        (self.0 & u64::from(u32::MAX)) as usize
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// A slot and the generation of the op that owns it.
struct Entry {
    generation: u32,
    slot: Slot,
}

/// All ops a core has submitted and not yet retired.
#[derive(Default)]
pub(crate) struct OpTable {
    slots: Slab<Entry>,
    /// Generation of the next op (wraps; 0 and u32::MAX are skipped so that no key can equal
    /// the reserved user data values).
    next_generation: u32,
    /// Slots the kernel still owns (Waiting or Abandoned).
    inflight: usize,
    /// Ops abandoned by dropped futures (statistics).
    pub(crate) abandoned_total: u64,
    /// The slots were leaked ([`OpTable::leak_all`]): the memory of an op that is dropped
    /// later is leaked too, since the kernel may still use it.
    leaked: bool,
}

/// What the caller of [`OpTable::complete`] does once it released the table.
pub(crate) struct Retired {
    /// Who to wake.
    pub(crate) waiter: Waiter,
    /// The memory of an abandoned op, to drop outside the table's borrow (its drop may run
    /// any code, including code that submits ops).
    pub(crate) memory: Option<Box<dyn Any>>,
}

impl OpTable {
    /// Reserves a slot for a new op and returns its key.
    pub(crate) fn insert(&mut self) -> OpKey {
        self.next_generation = self.next_generation.wrapping_add(1);
        if self.next_generation == u32::MAX {
            self.next_generation = 1;
        }
        let generation = self.next_generation;
        self.inflight += 1;
        let index = self.slots.insert(Entry {
            generation,
            slot: Slot::Waiting(Waiter::None),
        });
        OpKey::new(index, generation)
    }

    /// The slot of op `key`, if that op still has one (never another op's slot).
    fn slot_mut(&mut self, key: OpKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.index())
            .filter(|e| e.generation == key.generation())
            .map(|e| &mut e.slot)
    }

    /// Ops whose completion has not arrived yet.
    pub(crate) fn len(&self) -> usize {
        self.inflight
    }

    /// Whether no op is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.inflight == 0
    }

    /// Records a completion and returns who waits for it, and the memory of an abandoned op
    /// (now free to go). The caller wakes the waiter and drops the memory after releasing the
    /// table (both may run code that touches the table).
    #[inline]
    pub(crate) fn complete(&mut self, key: OpKey, completion: Completion) -> Retired {
        let nothing = Retired {
            waiter: Waiter::None,
            memory: None,
        };
        let Some(slot) = self.slot_mut(key) else {
            tracing::error!(?key, "completion for an unknown op");
            return nothing;
        };
        match std::mem::replace(slot, Slot::Completed(completion)) {
            Slot::Waiting(waiter) => {
                self.inflight -= 1;
                Retired {
                    waiter,
                    memory: None,
                }
            }
            Slot::Abandoned(memory) => {
                self.inflight -= 1;
                self.slots.remove(key.index());
                Retired {
                    waiter: Waiter::None,
                    memory: Some(memory),
                }
            }
            Slot::Completed(_) => {
                // Multishot ops are not used; a second completion means a bug elsewhere.
                tracing::error!(?key, "second completion for an op");
                nothing
            }
        }
    }

    /// Polls op `key`: the completion if it arrived (retiring the slot), else records the
    /// waiter: the id `task()` returns if the op is polled with that task's own waker, else a
    /// clone of `waker`. Panics if op `key` has no slot (it was retired or abandoned: the
    /// caller, [`super::Op`], never polls such a key).
    #[inline]
    pub(crate) fn poll(
        &mut self,
        key: OpKey,
        waker: &Waker,
        task: impl FnOnce() -> Option<usize>,
    ) -> Option<Completion> {
        match self.slot_mut(key) {
            Some(Slot::Completed(_)) => match self.slots.remove(key.index()).slot {
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
                panic!("op {key:?} polled after it was dropped or retired")
            }
        }
    }

    /// The future of op `key` is gone. If the kernel still owns its memory, keep `memory`
    /// alive until the completion and return `Abandon::Parked` (the caller requests a
    /// cancel); else hand it back for the caller to drop after releasing the table.
    pub(crate) fn abandon(&mut self, key: OpKey, memory: Box<dyn Any>) -> Abandon {
        let leaked = self.leaked;
        match self.slot_mut(key) {
            Some(slot @ Slot::Waiting(_)) => {
                *slot = Slot::Abandoned(memory);
                self.abandoned_total += 1;
                Abandon::Parked
            }
            Some(Slot::Completed(_)) => {
                self.slots.remove(key.index());
                Abandon::Free(memory)
            }
            Some(Slot::Abandoned(_)) => unreachable!("an op is abandoned once, by its drop"),
            None if leaked => {
                // The table gave up on its ops: this one may still be in the kernel.
                std::mem::forget(memory);
                Abandon::Leaked
            }
            None => Abandon::Free(memory),
        }
    }

    /// Keys of every op still in the kernel (at shutdown, to cancel them all).
    pub(crate) fn in_kernel_keys(&self) -> Vec<OpKey> {
        self.slots
            .iter()
            .filter(|(_, e)| matches!(e.slot, Slot::Waiting(_) | Slot::Abandoned(_)))
            .map(|(index, e)| OpKey::new(index, e.generation))
            .collect()
    }

    /// Gives up on in-flight ops (at shutdown after a timeout, or when the core dies): their
    /// memory is leaked rather than freed while the kernel may still write to it.
    pub(crate) fn leak_all(&mut self) {
        for (_, e) in self.slots.iter_mut() {
            if let Slot::Abandoned(_) = e.slot {
                let s = std::mem::replace(&mut e.slot, Slot::Waiting(Waiter::None));
                std::mem::forget(s);
            }
        }
        std::mem::forget(std::mem::take(&mut self.slots));
        self.inflight = 0;
        self.leaked = true;
    }
}

/// What [`OpTable::abandon`] did with an op's memory.
pub(crate) enum Abandon {
    /// Kept until the completion: cancel the op.
    Parked,
    /// The op is done: drop the memory (outside the table's borrow).
    Free(Box<dyn Any>),
    /// Leaked: the table gave up on its ops, and this one may still be in the kernel.
    Leaked,
}

/// Queues an `ASYNC_CANCEL` for op `key`; its own completion is ignored.
pub(crate) fn push_cancel(core: &Core, key: OpKey) {
    let sqe = io_uring::opcode::AsyncCancel::new(key.user_data())
        .build()
        .user_data(IGNORE_USER_DATA);
    // SAFETY: a cancel entry refers to no memory.
    unsafe { core.push_sqe(Sqe::Normal(sqe)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(result: i32) -> Completion {
        Completion {
            result,
            flags: 0,
            big: [0, 0],
        }
    }

    #[test]
    fn a_stale_key_never_reaches_the_op_that_reuses_its_slot() {
        let waker = futures::task::noop_waker();
        let mut t = OpTable::default();
        let mut rng = 0x1234_5678_9abc_def1u64;
        let mut live: Vec<OpKey> = Vec::new();
        let mut retired: Vec<OpKey> = Vec::new();
        for _ in 0..10_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if live.is_empty() || rng.is_multiple_of(3) {
                live.push(t.insert());
                continue;
            }
            let k = live.swap_remove((rng >> 8) as usize % live.len());
            assert!(t.complete(k, completion(1)).memory.is_none());
            assert!(t.poll(k, &waker, || None).is_some());
            retired.push(k);
            // Every retired key is stale: completing or abandoning it touches nothing.
            let s = retired[(rng >> 20) as usize % retired.len()];
            let r = t.complete(s, completion(2));
            assert!(matches!(r.waiter, Waiter::None) && r.memory.is_none());
            assert!(matches!(t.abandon(s, Box::new(())), Abandon::Free(_)));
            for &l in &live {
                assert_ne!(l, s);
                assert!(matches!(t.slot_mut(l), Some(Slot::Waiting(_))));
            }
        }
    }

    #[test]
    fn memory_of_an_op_dropped_after_the_table_gave_up_is_leaked() {
        struct Flag(std::rc::Rc<std::cell::Cell<bool>>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let mut t = OpTable::default();
        let k = t.insert();
        t.leak_all();
        let dropped = std::rc::Rc::new(std::cell::Cell::new(false));
        let r = t.abandon(k, Box::new(Flag(dropped.clone())));
        assert!(matches!(r, Abandon::Leaked));
        assert!(!dropped.get(), "freed memory the kernel may still use");
    }
}
