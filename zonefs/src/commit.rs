//! Group commit of journal deltas (leader / follower). An operation applies its delta to the
//! in-memory state and queues the encoded delta (a sequence number) under the state lock,
//! then waits for it to be durable *without* the state lock. The first waiter to take the
//! journal lock is the leader: it writes every queued delta in one append and one device
//! cache flush, and marks them durable; waiters that queued meanwhile find their delta
//! durable when they get the lock, or lead the next batch. So concurrent creates, deletes,
//! renames and syncs share journal writes and flushes. Each batch starts with a
//! [`Delta::BatchStart`] mark: the batches before it are durable with the data they name,
//! since their leader's flush returned before the journal lock was let go.
//!
//! Rolling to a fresh journal zone needs a snapshot of the state, so it needs the state lock.
//! Lock order: state, then journal. A leader holding only the journal lock never waits for
//! the state lock: when the batch does not fit, it lets go of the journal lock and rolls
//! under state + journal ([`GroupCommit::wait_locked`]), where the snapshot covers every
//! queued delta (they are all applied to the state), so the queue is emptied by the roll.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex as StdMutex;

use futures::lock::{Mutex, MutexGuard};
use ziob::Client;

use crate::error::{FsError, Result};
use crate::journal::{frame, Journal};
use crate::layout::Layout;
use crate::records::Delta;
use crate::tree::Tree;

/// Deltas queued and how far they are durable.
#[derive(Debug, Default)]
struct Queue {
    /// Encoded deltas not yet written, in sequence order.
    pending: VecDeque<Vec<u8>>,
    /// The sequence number the next queued delta gets.
    next: u64,
    /// Every delta numbered below this is durable.
    durable: u64,
    /// A journal write failed (the first failure is kept): memory and device may disagree;
    /// every call that checks the journal (all but the in-memory queries such as `size`,
    /// `list` and `df`) fails until a remount.
    failed: Option<Failed>,
    /// The current journal zone must not be appended to any more (a write to it failed as
    /// full, possibly after writing part of a batch): the next write rolls.
    must_roll: bool,
}

/// Why the journal stopped taking writes.
#[derive(Debug)]
enum Failed {
    /// The ZIOB instance was closed under the file system: later calls get
    /// [`ZiobError::Closed`](ziob::ZiobError::Closed), as the device's own calls would. The
    /// outcome of the calls whose deltas were in the failed write is unknown, as for a
    /// dropped call; the device holds a journal that a mount recovers (calling it corrupt
    /// would send callers after damage that is not there).
    Closed,
    /// Any other failure (its message): the journal may be torn.
    Other(String),
}

impl Failed {
    fn of(e: &FsError) -> Failed {
        match e {
            FsError::Ziob(ziob::ZiobError::Closed) => Failed::Closed,
            e => Failed::Other(e.to_string()),
        }
    }
}

/// What [`GroupCommit::wait`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Waited {
    /// The delta is durable.
    Durable,
    /// The journal must roll first: call [`GroupCommit::wait_locked`] under the state lock.
    NeedsRoll,
}

/// The journal behind a queue of deltas.
#[derive(Debug)]
pub struct GroupCommit {
    queue: StdMutex<Queue>,
    journal: Mutex<Journal>,
    /// Set with the queue's `failed` (never cleared): lets [`check_now`](Self::check_now)
    /// answer the common case without the queue's lock.
    any_failed: AtomicBool,
}

impl GroupCommit {
    /// Group commit over the mounted `journal`.
    pub fn new(journal: Journal) -> GroupCommit {
        GroupCommit {
            queue: StdMutex::new(Queue::default()),
            journal: Mutex::new(journal),
            any_failed: AtomicBool::new(false),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a journal write (batch or roll) as begun: if its future is dropped before
    /// [`disarm`](RollOnDrop::disarm), the journal must roll. The deltas it took off the queue
    /// may be on the device whole, in part or not at all, and they are not durable: the roll's
    /// snapshot (of the state, where they are applied) makes them durable, and writing them
    /// again instead would replay them twice after a crash.
    fn roll_on_drop(&self) -> RollOnDrop<'_> {
        RollOnDrop(Some(self))
    }

    /// Queues an encoded delta (call under the state lock, right after applying it);
    /// returns its sequence number.
    pub fn enqueue(&self, payload: Vec<u8>) -> u64 {
        let mut q = self.queue();
        q.pending.push_back(payload);
        q.next += 1;
        q.next - 1
    }

    /// The error every call gives after a failed journal write.
    pub fn check(&self) -> Result<()> {
        match &self.queue().failed {
            Some(Failed::Closed) => Err(FsError::Ziob(ziob::ZiobError::Closed)),
            Some(Failed::Other(why)) => Err(FsError::Corrupt {
                reason: format!("a journal write failed earlier ({why}); remount"),
            }),
            None => Ok(()),
        }
    }

    /// [`check`](Self::check) without the queue's lock while no journal write has failed:
    /// for reads through a [`FileReader`](crate::FileReader), on RocksDB's hot path.
    pub fn check_now(&self) -> Result<()> {
        if self.any_failed.load(Ordering::Acquire) {
            return self.check();
        }
        Ok(())
    }

    /// The newest queued delta that is not durable yet, if any.
    pub fn last_pending(&self) -> Option<u64> {
        let q = self.queue();
        (q.next > q.durable).then(|| q.next - 1)
    }

    /// `seq` durable, or the error that stops it.
    fn durable(&self, seq: u64) -> Result<bool> {
        self.check()?;
        Ok(self.queue().durable > seq)
    }

    /// The journal, locked (for `fsck` and counters; take the state lock first if both).
    pub async fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().await
    }

    /// Waits until delta `seq` is durable, leading batches as needed. Call without the
    /// state lock.
    pub async fn wait(&self, client: &Client, layout: &Layout, seq: u64) -> Result<Waited> {
        loop {
            if self.durable(seq)? {
                return Ok(Waited::Durable);
            }
            let mut j = self.journal.lock().await;
            if self.durable(seq)? {
                return Ok(Waited::Durable);
            }
            if !self.write_pending(client, layout, &mut j).await? {
                return Ok(Waited::NeedsRoll);
            }
        }
    }

    /// Waits until delta `seq` is durable, rolling the journal with a snapshot of `tree` if
    /// a batch does not fit. Call under the state lock (`tree` is the state's).
    pub async fn wait_locked(
        &self,
        client: &Client,
        layout: &Layout,
        tree: &Tree,
        seq: u64,
    ) -> Result<()> {
        let mut j = self.journal.lock().await;
        while !self.durable(seq)? {
            if !self.write_pending(client, layout, &mut j).await? {
                // Under the state lock nothing is queued meanwhile: the snapshot covers
                // every queued delta.
                let upto = {
                    let mut q = self.queue();
                    q.pending.clear();
                    q.next
                };
                let guard = self.roll_on_drop();
                let rolled = j.roll(client, layout, tree).await;
                guard.disarm();
                match rolled {
                    Ok(()) => {
                        let mut q = self.queue();
                        q.durable = upto;
                        q.must_roll = false;
                    }
                    Err(e) => {
                        self.queue().failed.get_or_insert_with(|| Failed::of(&e));
                        self.any_failed.store(true, Ordering::Release);
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes every queued delta to the current journal zone in one append and one flush.
    /// False when they do not fit (or the zone must not be appended to): the journal must
    /// roll.
    async fn write_pending(
        &self,
        client: &Client,
        layout: &Layout,
        j: &mut Journal,
    ) -> Result<bool> {
        let (bytes, upto) = {
            let mut q = self.queue();
            if q.must_roll {
                return Ok(false);
            }
            if q.pending.is_empty() {
                return Ok(true);
            }
            // The mark first: the batches before this one are durable with their data.
            let mark = Delta::BatchStart.encode();
            let payloads: Vec<&[u8]> = std::iter::once(mark.as_slice())
                .chain(q.pending.iter().map(Vec::as_slice))
                .collect();
            let bytes = frame(layout, &payloads);
            if !j.fits(layout, bytes.len() as u64) {
                return Ok(false);
            }
            q.pending.clear();
            (bytes, q.next)
        };
        let guard = self.roll_on_drop();
        let written = j.append_batch(client, layout, bytes).await;
        guard.disarm();
        match written {
            Ok(()) => {
                self.queue().durable = upto;
                Ok(true)
            }
            Err(FsError::Ziob(e)) if crate::fs::is_zone_full(&e) => {
                // The deltas taken are applied in memory: the roll's snapshot carries them.
                self.queue().must_roll = true;
                Ok(false)
            }
            Err(e) => {
                self.queue().failed.get_or_insert_with(|| Failed::of(&e));
                self.any_failed.store(true, Ordering::Release);
                Err(e)
            }
        }
    }
}

/// Sets the queue's `must_roll` when dropped armed (a journal write's future dropped at an
/// await): see [`GroupCommit::roll_on_drop`].
struct RollOnDrop<'a>(Option<&'a GroupCommit>);

impl RollOnDrop<'_> {
    /// The write ran to its end (whatever its result): the caller records it.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RollOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            g.queue().must_roll = true;
        }
    }
}
