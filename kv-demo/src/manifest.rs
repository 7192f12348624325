//! A shard's manifest: which tables the shard has (per level), where its WAL replay starts,
//! its next file number and its highest sequence number in tables — kept in the zone log
//! `manifest-<shard>` of the store's [`LogSpace`].
//!
//! The log holds a **snapshot** record (the whole state as one [`VersionEdit`] with every live
//! table in `added`), then one **edit** record per [`Manifest::apply`]. When the records
//! since the last snapshot pass [`ManifestOptions::roll_bytes`], the manifest *rolls*: it
//! writes a fresh snapshot and truncates the log before it (the zones holding only older
//! records are reset). Opening replays the log from its start: each snapshot replaces the
//! state, each edit after one is applied; edits before the first snapshot in the log (their
//! snapshot was truncated away) are skipped. Byte layout: `docs/format.md`, "kv-demo manifest
//! and WAL" → "Manifest".
//!
//! [`apply`](Manifest::apply) is durable when it returns (append + sync of the zone log). A
//! torn last record (a crash during an `apply` that had not returned) is dropped by the zone
//! log's recovery; any other damage is [`ManifestError::Corrupt`], never silently dropped
//! edits.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::lock::Mutex;
use futures::StreamExt;
use ziob::{LogSpace, Position, ZiobError, ZoneLog};

use crate::error::CorruptionError;
use crate::version_edit::{FileMeta, VersionEdit};

/// Record kind byte: a snapshot of the whole state.
pub const RECORD_SNAPSHOT: u8 = 0x01;
/// Record kind byte: one edit.
pub const RECORD_EDIT: u8 = 0x02;

/// The log name of shard `shard`'s manifest.
pub fn manifest_log_name(shard: usize) -> String {
    format!("manifest-{shard}")
}

/// What can go wrong with a manifest.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManifestError {
    /// The zone log below failed (device error, no space, closed instance, ...).
    #[error("manifest {log}: {source}")]
    Log {
        /// The log's name.
        log: String,
        /// The zone log's error.
        source: Arc<ZiobError>,
    },
    /// The shard has no manifest log, or it holds no snapshot (a store's manifests are
    /// created when it is formatted, so this is damage).
    #[error("manifest {log} is missing: {detail}")]
    Missing {
        /// The log's name.
        log: String,
        /// What is missing.
        detail: String,
    },
    /// The manifest's records are damaged or inconsistent.
    #[error("manifest {log} is corrupt at {position}: {detail}")]
    Corrupt {
        /// The log's name.
        log: String,
        /// Where (the record's position, or where the zone log cut it).
        position: Position,
        /// What is wrong.
        detail: String,
    },
    /// [`Manifest::apply`] of an edit that does not fit the state (deletes a table that is
    /// not live, adds one that is); nothing was written.
    #[error("manifest {log}: invalid edit: {detail}")]
    InvalidEdit {
        /// The log's name.
        log: String,
        /// What is wrong.
        detail: String,
    },
    /// An earlier [`Manifest::apply`] failed or was dropped while writing: its edit may or
    /// may not be durable, so the in-memory state may differ from the log's. Every later
    /// apply fails with this; reopen the manifest.
    #[error("manifest {log}: an earlier edit failed or was cancelled while being written; reopen")]
    Interrupted {
        /// The log's name.
        log: String,
    },
    /// A snapshot or edit larger than one record of the log.
    #[error("manifest {log}: a record of {len} bytes is over the {max}-byte record limit")]
    TooLarge {
        /// The log's name.
        log: String,
        /// The record's length.
        len: usize,
        /// The limit.
        max: u64,
    },
}

/// A shard's state as the manifest records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestState {
    /// Live tables by `(level, number)`.
    pub files: BTreeMap<(u32, u64), FileMeta>,
    /// WAL replay starts here ([`Position::ZERO`]: from the WAL's start).
    pub wal_start: Position,
    /// The next unused file number.
    pub next_file_number: u64,
    /// The highest sequence number in the shard's tables.
    pub last_seq: u64,
}

impl ManifestState {
    /// The live tables of `level`, by number.
    pub fn level(&self, level: u32) -> Vec<&FileMeta> {
        self.files
            .range((level, 0)..=(level, u64::MAX))
            .map(|(_, f)| f)
            .collect()
    }

    /// The number of levels holding tables (the highest level with a table, plus one).
    pub fn levels(&self) -> u32 {
        self.files.keys().next_back().map_or(0, |(l, _)| l + 1)
    }

    /// Checks that `edit` fits this state: every deleted table is live, no added table is
    /// live already (after the deletions), no table is added twice.
    pub fn check(&self, edit: &VersionEdit) -> Result<(), String> {
        let mut live: std::collections::BTreeSet<(u32, u64)> = self.files.keys().copied().collect();
        for &(level, number) in &edit.deleted {
            if !live.remove(&(level, number)) {
                return Err(format!("deletes table {number} at level {level}, not live"));
            }
        }
        for f in &edit.added {
            if !live.insert((f.level, f.number)) {
                return Err(format!(
                    "adds table {} at level {}, already live",
                    f.number, f.level
                ));
            }
        }
        Ok(())
    }

    /// Applies `edit` (checked with [`check`](ManifestState::check)): deletions, then
    /// additions (so a table may move levels); `wal_start` is set when present (it may go
    /// back: [`Store`](crate::store::Store) moves it down to the WAL's end when a crash cut
    /// the WAL before it); `next_file_number` and `last_seq` only grow (each becomes the
    /// larger of its value and the edit's).
    pub fn apply(&mut self, edit: &VersionEdit) {
        for key in &edit.deleted {
            self.files.remove(key);
        }
        for f in &edit.added {
            self.files.insert((f.level, f.number), f.clone());
        }
        if let Some(w) = edit.wal_start {
            self.wal_start = Position::from_raw(w);
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(s) = edit.last_seq {
            self.last_seq = self.last_seq.max(s);
        }
    }

    /// The whole state as one edit (every table in `added`, every field set).
    pub fn snapshot(&self) -> VersionEdit {
        VersionEdit {
            added: self.files.values().cloned().collect(),
            deleted: Vec::new(),
            wal_start: Some(self.wal_start.into_raw()),
            next_file_number: Some(self.next_file_number),
            last_seq: Some(self.last_seq),
        }
    }

    /// The state a snapshot record describes.
    fn from_snapshot(edit: &VersionEdit) -> Result<ManifestState, String> {
        if !edit.deleted.is_empty() {
            return Err("a snapshot with deleted tables".into());
        }
        let mut s = ManifestState::default();
        s.check(edit)?;
        s.apply(edit);
        Ok(s)
    }
}

/// Settings of a [`Manifest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ManifestOptions {
    /// Roll (fresh snapshot, truncate before it) once the records since the last snapshot
    /// take this many bytes (each record counted in whole blocks: it is synced alone), or
    /// the log moved to a fresh zone. 0 (the default): the log's largest record, about one
    /// zone.
    pub roll_bytes: u64,
}

struct Inner {
    state: ManifestState,
    /// Record bytes since (and with) the last snapshot.
    since_snapshot: u64,
    rolls: u64,
    /// An edit write began and did not finish: the state may differ from the log.
    interrupted: bool,
}

/// A shard's manifest (`Clone + Send + Sync`; futures are `Send`). Applies are serialized.
#[derive(Clone)]
pub struct Manifest {
    log: ZoneLog,
    roll_bytes: u64,
    /// The device's block size: every record is synced on its own, so it takes whole blocks.
    block_bytes: u64,
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Manifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifest")
            .field("log", &self.log)
            .field("roll_bytes", &self.roll_bytes)
            .finish()
    }
}

impl Manifest {
    /// Creates shard `shard`'s manifest in `space` with the empty state (first file number
    /// 1), durable when it returns.
    ///
    /// # Errors
    /// [`ManifestError::InvalidEdit`] if the log exists already; the zone log's.
    pub async fn create(
        space: &LogSpace,
        shard: usize,
        opts: ManifestOptions,
    ) -> Result<Manifest, ManifestError> {
        let name = manifest_log_name(shard);
        if space.logs().contains(&name) {
            return Err(ManifestError::InvalidEdit {
                log: name,
                detail: "the manifest exists already".into(),
            });
        }
        let log = space
            .open_log_on_core(&name, crate::placement::log_core(space, shard))
            .await
            .map_err(|e| log_err(&name, e))?;
        let state = ManifestState {
            next_file_number: 1,
            ..ManifestState::default()
        };
        let m = Manifest::with_state(space, log, opts, state, 0);
        m.write_snapshot(&mut *m.inner.lock().await).await?;
        Ok(m)
    }

    /// Opens shard `shard`'s manifest and recovers its state.
    ///
    /// # Errors
    /// [`ManifestError::Missing`] without a manifest log or snapshot;
    /// [`ManifestError::Corrupt`] for a damaged or inconsistent record, or a log the zone
    /// log's recovery cut anywhere but at a torn last record; the zone log's.
    pub async fn open(
        space: &LogSpace,
        shard: usize,
        opts: ManifestOptions,
    ) -> Result<Manifest, ManifestError> {
        let name = manifest_log_name(shard);
        if !space.logs().contains(&name) {
            return Err(ManifestError::Missing {
                log: name,
                detail: "no such log in the log space".into(),
            });
        }
        let log = space
            .open_log_on_core(&name, crate::placement::log_core(space, shard))
            .await
            .map_err(|e| log_err(&name, e))?;
        if let Some(cut) = log.recovery().and_then(|r| r.cut.as_ref()) {
            if !is_torn(&cut.reason) {
                return Err(ManifestError::Corrupt {
                    log: name,
                    position: cut.position,
                    detail: format!("damaged record in zone {}: {}", cut.zone, cut.reason),
                });
            }
        }
        let block_bytes = space.client().geometry().block_size_bytes.max(1);
        let mut state: Option<ManifestState> = None;
        let mut since_snapshot = 0;
        let mut records = std::pin::pin!(log.stream(log.start()));
        while let Some(r) = records.next().await {
            let (pos, bytes) = r.map_err(|e| match e {
                ZiobError::LogCorrupt {
                    position, detail, ..
                } => ManifestError::Corrupt {
                    log: name.clone(),
                    position: Position::from_raw(position),
                    detail,
                },
                e => log_err(&name, e),
            })?;
            let corrupt = |detail: String| ManifestError::Corrupt {
                log: name.clone(),
                position: pos,
                detail,
            };
            let (kind, edit) = decode_record(&bytes).map_err(|e| corrupt(e.to_string()))?;
            let len =
                (ziob::zonelog::frame_len(bytes.len()) as u64).div_ceil(block_bytes) * block_bytes;
            match (kind, &mut state) {
                (RECORD_SNAPSHOT, _) => {
                    state = Some(ManifestState::from_snapshot(&edit).map_err(corrupt)?);
                    since_snapshot = len;
                }
                (_, None) => {} // an edit whose snapshot was truncated away
                (_, Some(s)) => {
                    s.check(&edit).map_err(corrupt)?;
                    s.apply(&edit);
                    since_snapshot += len;
                }
            }
        }
        let state = state.ok_or_else(|| ManifestError::Missing {
            log: name.clone(),
            detail: "the log holds no snapshot record".into(),
        })?;
        Ok(Manifest::with_state(
            space,
            log,
            opts,
            state,
            since_snapshot,
        ))
    }

    fn with_state(
        space: &LogSpace,
        log: ZoneLog,
        opts: ManifestOptions,
        state: ManifestState,
        since_snapshot: u64,
    ) -> Manifest {
        let roll_bytes = if opts.roll_bytes == 0 {
            log.max_record_bytes()
        } else {
            opts.roll_bytes
        };
        Manifest {
            log,
            roll_bytes,
            block_bytes: space.client().geometry().block_size_bytes.max(1),
            inner: Arc::new(Mutex::new(Inner {
                state,
                since_snapshot,
                rolls: 0,
                interrupted: false,
            })),
        }
    }

    /// The zone log below.
    pub fn log(&self) -> &ZoneLog {
        &self.log
    }

    /// The current state (a copy).
    pub async fn state(&self) -> ManifestState {
        self.inner.lock().await.state.clone()
    }

    /// Rolls since the manifest was opened.
    pub async fn rolls(&self) -> u64 {
        self.inner.lock().await.rolls
    }

    /// Checks `edit` against the state, writes it (durable when this returns), applies it,
    /// and rolls when the log passed [`ManifestOptions::roll_bytes`] since the last snapshot.
    ///
    /// # Errors
    /// [`ManifestError::InvalidEdit`] (nothing written) for an edit that does not fit;
    /// [`ManifestError::TooLarge`]; the zone log's: the edit may or may not be durable, and
    /// every later apply gives [`ManifestError::Interrupted`] (reopen to learn).
    ///
    /// # Cancel safety
    /// If dropped while writing, as a failed write.
    pub async fn apply(&self, edit: &VersionEdit) -> Result<(), ManifestError> {
        let mut inner = self.inner.lock().await;
        if inner.interrupted {
            return Err(ManifestError::Interrupted {
                log: self.log.name().to_string(),
            });
        }
        inner
            .state
            .check(edit)
            .map_err(|detail| ManifestError::InvalidEdit {
                log: self.log.name().to_string(),
                detail,
            })?;
        let rec = self.encode_record(RECORD_EDIT, edit)?;
        inner.interrupted = true;
        let (_, len) = self.write(&rec).await?;
        inner.interrupted = false;
        inner.state.apply(edit);
        inner.since_snapshot += len;
        // Past the threshold, or the log moved to a fresh zone: roll (the snapshot goes to
        // the newest zone and the older ones are dropped).
        if inner.since_snapshot > self.roll_bytes || self.log.zones().len() > 1 {
            // The edit is durable and applied either way; a failed roll is tried again
            // after the next edit.
            if let Err(e) = self.roll_locked(&mut inner).await {
                tracing::warn!(log = self.log.name(), error = %e, "manifest roll failed");
            }
        }
        Ok(())
    }

    /// Writes a fresh snapshot and truncates the log before it now.
    ///
    /// # Errors
    /// The zone log's.
    pub async fn roll(&self) -> Result<(), ManifestError> {
        let mut inner = self.inner.lock().await;
        self.roll_locked(&mut inner).await
    }

    async fn roll_locked(&self, inner: &mut Inner) -> Result<(), ManifestError> {
        let pos = self.write_snapshot(inner).await?;
        self.log
            .truncate_before(pos)
            .await
            .map_err(|e| log_err(self.log.name(), e))?;
        inner.rolls += 1;
        Ok(())
    }

    /// Writes a snapshot of `inner.state` (durable); returns its position.
    async fn write_snapshot(&self, inner: &mut Inner) -> Result<Position, ManifestError> {
        let rec = self.encode_record(RECORD_SNAPSHOT, &inner.state.snapshot())?;
        let (pos, len) = self.write(&rec).await?;
        inner.since_snapshot = len;
        Ok(pos)
    }

    /// Encodes one record, checking it fits.
    fn encode_record(&self, kind: u8, edit: &VersionEdit) -> Result<Vec<u8>, ManifestError> {
        let mut rec = vec![kind];
        edit.encode(&mut rec);
        let max = self.log.max_record_bytes();
        if rec.len() as u64 > max {
            return Err(ManifestError::TooLarge {
                log: self.log.name().to_string(),
                len: rec.len(),
                max,
            });
        }
        Ok(rec)
    }

    /// Appends one encoded record and syncs; returns its position and framed length.
    async fn write(&self, rec: &[u8]) -> Result<(Position, u64), ManifestError> {
        let fail = |e| log_err(self.log.name(), e);
        let pos = self.log.append(rec).await.map_err(fail)?;
        self.log.sync().await.map_err(fail)?;
        let len = ziob::zonelog::frame_len(rec.len()) as u64;
        Ok((pos, len.div_ceil(self.block_bytes) * self.block_bytes))
    }
}

/// Splits a manifest record into its kind and edit.
pub fn decode_record(bytes: &Bytes) -> Result<(u8, VersionEdit), CorruptionError> {
    match bytes.first() {
        Some(&k @ (RECORD_SNAPSHOT | RECORD_EDIT)) => {
            Ok((k, VersionEdit::decode(&bytes.slice(1..))?))
        }
        Some(k) => Err(CorruptionError::new(format!(
            "manifest record of unknown kind {k:#04x}"
        ))),
        None => Err(CorruptionError::new("empty manifest record")),
    }
}

/// Whether the zone log cut the log at a record that runs past the written data (a write a
/// crash interrupted), as opposed to damaged bytes.
fn is_torn(reason: &str) -> bool {
    reason.contains("runs past the end of the data")
        || reason.contains("crosses the end of the data")
}

fn log_err(log: &str, e: ZiobError) -> ManifestError {
    ManifestError::Log {
        log: log.to_string(),
        source: Arc::new(e),
    }
}
