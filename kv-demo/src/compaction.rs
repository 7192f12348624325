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

use ziob_zonefs::WriteLifetime;

use crate::db_error::DbError;
use crate::ikey::{self, Kind};
use crate::iter::{first_ikey, LevelSource, MergeIter, Source, TableSource};
use crate::options::{Options, L0_COMPACTION_TRIGGER, LEVELS};
use crate::shard::Shard;
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
    let bottom = !version.deeper_overlap(level + 1, &lo, &hi);
    let trivial_move = overlaps.is_empty() && (inputs.len() == 1 || disjoint(&inputs));
    Some(Compaction {
        level,
        inputs,
        overlaps,
        bottom,
        trivial_move,
    })
}

/// The zone lifetime class of a level's tables: data of one level dies together.
pub fn lifetime_of(level: usize) -> WriteLifetime {
    match level {
        0 => WriteLifetime::Short,
        1 => WriteLifetime::Medium,
        2 => WriteLifetime::Long,
        _ => WriteLifetime::Extreme,
    }
}

/// Runs `c` on `shard`: writes the outputs, installs the edit. Returns the bytes read and
/// written.
pub async fn run(shard: &Shard, c: Compaction) -> Result<(u64, u64), DbError> {
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
            next_file_number: Some(shard.next_file_number()),
            ..VersionEdit::default()
        };
        shard.install_move(edit, handles, c.level, pointer).await?;
        return Ok((0, 0));
    }
    let ctx = shard.ctx().clone();
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
            sources.push(Source::Table(TableSource::new(t.clone(), &start).await?));
        }
    } else {
        sources.push(Source::Level(
            LevelSource::new(c.inputs.clone(), &start).await?,
        ));
    }
    sources.push(Source::Level(
        LevelSource::new(c.overlaps.clone(), &start).await?,
    ));
    let mut merge = MergeIter::new(sources).await?;
    let oldest = ctx.snapshots.oldest(&ctx.seq);
    let mut outputs: Vec<FileMeta> = Vec::new();
    let mut writer: Option<(u64, TableWriter)> = None;
    let mut current_key: Option<Vec<u8>> = None;
    let mut newer_seq = u64::MAX;
    let mut n = 0u64;
    while let Some((k, v)) = merge.next().await? {
        n += 1;
        if n % 16 == 0 {
            // Cooperative: the core also serves foreground I/O and reads.
            ziob::runtime::consume_budget().await;
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
            let number = shard.new_file_number();
            let w = TableWriter::create(
                &ctx.fs,
                table_path(shard.id, number),
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
            TableHandle::open(
                &ctx.fs,
                &ctx.cache,
                &ctx.handle,
                shard.id,
                shard.core,
                meta.clone(),
            )
            .await?,
        ));
    }
    let edit = VersionEdit {
        added: outputs,
        deleted,
        next_file_number: Some(shard.next_file_number()),
        ..VersionEdit::default()
    };
    shard.install_move(edit, handles, c.level, pointer).await?;
    Ok((read, written))
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
