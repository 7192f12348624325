//! Leveled compaction: what to compact ([`pick`]) and doing it ([`run`]).
//!
//! - L0 → L1 when L0 holds [`L0_COMPACTION_TRIGGER`] tables: all of L0 and the L1 tables
//!   they overlap. When several levels are due, the one most over its limit goes first
//!   (L0: tables / trigger; Ln: bytes / budget).
//! - Ln → Ln+1 (n ≥ 1) when level n holds more than its budget
//!   ([`Options::level_budget_bytes`]): one table of Ln, round robin over the key space, and
//!   the Ln+1 tables it overlaps. A table that overlaps nothing below is moved (a manifest
//!   edit, no I/O); so is all of L0 when its tables and L1 do not overlap (sequential fills).
//! - The merged entries go to new tables of the output level, cut at `target_file_bytes` but
//!   never between two versions of one key (so the tables of a level never share a key). A
//!   version is dropped when a newer version of its key is visible to every live snapshot,
//!   and a deletion is dropped when no snapshot needs it and no deeper level may hold an
//!   older version of its key.

use std::sync::Arc;

use crate::context::StoreCtx;
use crate::db_error::DbError;
use crate::flush_first::FlushFirst;
use crate::ikey::{self, Kind};
use crate::iter::{first_ikey, LevelSource, MergeIter, Source, TableSource};
use crate::options::{Options, L0_COMPACTION_TRIGGER, LEVELS};
use crate::placement::lifetime_of;
use crate::sst::table::CursorUse;
use crate::table_writer::TableWriter;
use crate::version::{table_path, TableHandle, Version};
use crate::version_edit::{FileMeta, VersionEdit};

/// One compaction: `inputs` of `level` and their overlaps in `level + 1`.
#[derive(Debug)]
pub struct Compaction {
    /// The input level.
    pub level: usize,
    /// Tables of the input level.
    pub inputs: Vec<Arc<TableHandle>>,
    /// Tables of the output level (`level + 1`) the inputs overlap.
    pub overlaps: Vec<Arc<TableHandle>>,
    /// No level below the output may hold the key range (deletions can go).
    pub bottom: bool,
    /// Move the inputs down without rewriting them.
    pub trivial_move: bool,
}

fn key_range(tables: &[Arc<TableHandle>]) -> (Vec<u8>, Vec<u8>) {
    let lo = tables
        .iter()
        .map(|t| t.smallest_user_key())
        .min()
        .unwrap_or_default();
    let hi = tables
        .iter()
        .map(|t| t.largest_user_key())
        .max()
        .unwrap_or_default();
    (lo.to_vec(), hi.to_vec())
}

/// Whether the tables' user-key ranges are pairwise disjoint.
fn disjoint(tables: &[Arc<TableHandle>]) -> bool {
    let mut t: Vec<_> = tables.iter().collect();
    t.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
    t.windows(2)
        .all(|w| w[0].largest_user_key() < w[1].smallest_user_key())
}

/// The compaction `version` needs most, if any; `pointers[n]` is the largest user key of the
/// last table compacted out of level n.
pub fn pick(version: &Version, opts: &Options, pointers: &[Vec<u8>]) -> Option<Compaction> {
    // The level most over its limit (score ≥ 1) goes first, as RocksDB scores levels: L0
    // by table count, the others by bytes — so a steady stream of flushes cannot keep a
    // deeper level over its budget forever.
    let mut best: Option<(f64, usize)> = None;
    let l0 = version.l0_count() as f64 / L0_COMPACTION_TRIGGER as f64;
    if l0 >= 1.0 {
        best = Some((l0, 0));
    }
    for n in 1..LEVELS - 1 {
        let score = version.level_bytes(n) as f64 / opts.level_budget_bytes(n) as f64;
        if score > 1.0 && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, n));
        }
    }
    let (_, level) = best?;
    let inputs = if level == 0 {
        version.levels[0].clone()
    } else {
        let tables = &version.levels[level];
        let t = tables
            .iter()
            .find(|t| t.smallest_user_key() > &pointers[level][..])
            .unwrap_or(&tables[0]);
        vec![t.clone()]
    };
    let (lo, hi) = key_range(&inputs);
    let overlaps = version.overlapping(level + 1, &lo, &hi);
    // Deletions may go only if no deeper level meets any key the compaction writes: the
    // overlapped tables may reach past the inputs' range.
    let all: Vec<_> = inputs.iter().chain(&overlaps).cloned().collect();
    let (out_lo, out_hi) = key_range(&all);
    let bottom = !version.deeper_overlap(level + 1, &out_lo, &out_hi);
    let trivial_move = overlaps.is_empty() && (inputs.len() == 1 || disjoint(&inputs));
    Some(Compaction {
        level,
        inputs,
        overlaps,
        bottom,
        trivial_move,
    })
}

/// What a compaction made: the edit to install (its `next_file_number` left to the caller)
/// and the opened tables it adds.
#[derive(Debug)]
pub struct Outcome {
    /// Deletes the inputs, adds the outputs (or the moved inputs).
    pub edit: VersionEdit,
    /// The opened tables of `edit.added`, same order.
    pub added: Vec<Arc<TableHandle>>,
    /// The input level.
    pub level: usize,
    /// The largest user key of the inputs (the level's next compaction starts after it).
    pub pointer: Vec<u8>,
    /// Bytes of tables read.
    pub read_bytes: u64,
    /// Bytes of tables written.
    pub written_bytes: u64,
    /// Times it paused for a waiting flush ([`FlushFirst`]).
    pub pauses: u64,
}

/// Runs `c` for shard `shard` (whose tables' obsolete files are deleted on `core`), taking
/// file numbers from `new_file` and pausing for the shard's waiting flushes
/// (`flush_first`): writes and opens the outputs. The caller installs the outcome.
pub async fn run(
    ctx: &StoreCtx,
    shard: usize,
    core: usize,
    new_file: &dyn Fn() -> u64,
    flush_first: &FlushFirst,
    c: Compaction,
) -> Result<Outcome, DbError> {
    let out_level = c.level + 1;
    let deleted: Vec<(u32, u64)> = c
        .inputs
        .iter()
        .chain(&c.overlaps)
        .map(|t| (t.meta.level, t.meta.number))
        .collect();
    let pointer = key_range(&c.inputs).1;
    if c.trivial_move {
        let handles: Vec<_> = c
            .inputs
            .iter()
            .map(|t| Arc::new(t.moved(out_level)))
            .collect();
        let added = handles.iter().map(|t| t.meta.clone()).collect();
        let edit = VersionEdit {
            added,
            deleted,
            ..VersionEdit::default()
        };
        return Ok(Outcome {
            edit,
            added: handles,
            level: c.level,
            pointer,
            read_bytes: 0,
            written_bytes: 0,
            pauses: 0,
        });
    }
    let read: u64 = c
        .inputs
        .iter()
        .chain(&c.overlaps)
        .map(|t| t.meta.size)
        .sum();
    let start = first_ikey();
    let mut sources = Vec::new();
    if c.level == 0 {
        for t in &c.inputs {
            sources.push(Source::Table(
                TableSource::for_use(t.clone(), &start, CursorUse::Compaction).await?,
            ));
        }
    } else {
        sources.push(Source::Level(
            LevelSource::new(c.inputs.clone(), &start, CursorUse::Compaction).await?,
        ));
    }
    sources.push(Source::Level(
        LevelSource::new(c.overlaps.clone(), &start, CursorUse::Compaction).await?,
    ));
    let mut merge = MergeIter::new(sources);
    let oldest = ctx.snapshots.oldest(&ctx.seq);
    let mut outputs: Vec<FileMeta> = Vec::new();
    let mut writer: Option<(u64, TableWriter)> = None;
    let mut current_key: Option<Vec<u8>> = None;
    let mut newer_seq = u64::MAX;
    let mut n = 0u64;
    let mut pauses = 0u64;
    while let Some((k, v)) = merge.next().await? {
        n += 1;
        if n.is_multiple_of(crate::options::BACKGROUND_YIELD_EVERY) {
            // Cooperative: the core also serves foreground I/O and reads, and a waiting
            // flush goes first.
            pauses += u64::from(flush_first.pause().await);
            ziob::runtime::yield_now().await;
        }
        let (uk, seq, kind) = ikey::decode(&k).ok_or_else(|| {
            crate::error::CorruptionError::new("internal key during a compaction")
        })?;
        if current_key.as_deref() != Some(uk) {
            current_key = Some(uk.to_vec());
            newer_seq = u64::MAX;
        }
        // A newer version every reader sees hides this one; a deletion nobody needs, with
        // nothing older below, goes too.
        let drop = newer_seq <= oldest || (kind == Kind::Delete && seq <= oldest && c.bottom);
        newer_seq = seq;
        if drop {
            continue;
        }
        if let Some((_, w)) = &writer {
            if w.file_bytes() >= ctx.opts.target_file_bytes && w.last_user_key() != uk {
                let (number, w) = writer.take().unwrap();
                outputs.push(finish(w, number, out_level).await?);
            }
        }
        if writer.is_none() {
            let number = new_file();
            let w = TableWriter::create(
                &ctx.fs,
                table_path(shard, number),
                lifetime_of(out_level),
                ctx.table_options(),
            )
            .await?;
            writer = Some((number, w));
        }
        writer.as_mut().unwrap().1.add(&k, &v).await?;
    }
    if let Some((number, w)) = writer.take() {
        outputs.push(finish(w, number, out_level).await?);
    }
    let written = outputs.iter().map(|m| m.size).sum();
    let mut handles = Vec::new();
    for meta in &outputs {
        handles.push(Arc::new(
            TableHandle::open(&ctx.fs, &ctx.cache, &ctx.handle, shard, core, meta.clone()).await?,
        ));
    }
    let edit = VersionEdit {
        added: outputs,
        deleted,
        ..VersionEdit::default()
    };
    Ok(Outcome {
        edit,
        added: handles,
        level: c.level,
        pointer,
        read_bytes: read,
        written_bytes: written,
        pauses,
    })
}

async fn finish(w: TableWriter, number: u64, level: usize) -> Result<FileMeta, DbError> {
    let s = w.finish().await?;
    Ok(FileMeta {
        number,
        level: level as u32,
        size: s.file_bytes,
        entries: s.entries,
        smallest: s.first_key.into(),
        largest: s.last_key.into(),
    })
}

#[cfg(test)]
mod tests {
    use ziob::{Client, Runtime, ZiobConfig};
    use ziob_zonefs::{MkfsOptions, ZoneFs};

    use super::*;
    use crate::sst::cache::BlockCache;
    use crate::sst::table::TableOptions;

    /// A table of shard 0 at `level` holding a put of each of `keys` (sequence `seq`).
    async fn table(
        fs: &ZoneFs,
        rt: &ziob::runtime::Handle,
        number: u64,
        level: u32,
        keys: &[&str],
        seq: u64,
    ) -> Arc<TableHandle> {
        let mut w = TableWriter::create(
            fs,
            table_path(0, number),
            lifetime_of(0),
            TableOptions::default(),
        )
        .await
        .unwrap();
        for k in keys {
            w.add(&ikey::encode(k.as_bytes(), seq, Kind::Put), b"v")
                .await
                .unwrap();
        }
        let s = w.finish().await.unwrap();
        let meta = FileMeta {
            number,
            level,
            size: s.file_bytes,
            entries: s.entries,
            smallest: s.first_key.into(),
            largest: s.last_key.into(),
        };
        let cache = BlockCache::new(0);
        Arc::new(TableHandle::open(fs, &cache, rt, 0, 0, meta).await.unwrap())
    }

    /// Deletions are kept when a deeper level meets the key range the compaction writes —
    /// including the part only the overlapped tables of the output level reach (a deletion
    /// there may hide an older version below).
    #[test]
    fn bottom_covers_the_overlapped_tables_range() {
        let rt = Runtime::builder().cores(1).build().unwrap();
        futures::executor::block_on(async {
            let client = Client::open(
                rt.handle(),
                "mem:zones=16,zone_size=1M",
                ZiobConfig::default(),
            )
            .await
            .unwrap();
            ZoneFs::mkfs(&client, MkfsOptions::default()).await.unwrap();
            let fs = ZoneFs::mount(client.clone()).await.unwrap();
            let h = rt.handle();
            let mut added = Vec::new();
            for n in 1..=4 {
                added.push(table(&fs, &h, n, 0, &["a", "c"], 10 + n).await);
            }
            added.push(table(&fs, &h, 5, 1, &["a", "m", "z"], 5).await);
            added.push(table(&fs, &h, 6, 2, &["m"], 1).await);
            let edit = VersionEdit {
                added: added.iter().map(|t| t.meta.clone()).collect(),
                ..VersionEdit::default()
            };
            let v = Version::empty().apply(&edit, added).unwrap();
            let c = pick(&v, &Options::default(), &vec![Vec::new(); LEVELS]).unwrap();
            assert_eq!((c.level, c.inputs.len(), c.overlaps.len()), (0, 4, 1));
            assert!(
                !c.bottom,
                "L2 holds m, inside the overlapped L1 table's range"
            );
            assert!(!c.trivial_move);
            drop((c, v));
            client.close().await.unwrap();
        });
    }
}
