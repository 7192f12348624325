//! Opening a store: the device and its layout ([`Store`]), then per shard its manifest (the
//! tables, opened), orphan table files removed, and its WAL replayed into the memtables.

use std::sync::Arc;

use ziob::ZiobConfig;
use ziob_zonefs::ZoneFs;

use crate::batch::WriteBatch;
use crate::context::StoreCtx;
use crate::db_error::DbError;
use crate::durable::ShardLog;
use crate::options::{Options, MAX_IMMUTABLE_MEMTABLES};
use crate::placement;
use crate::placement::background_core;
use crate::shard::{shard_of, Shard};
use crate::snapshot::{Sequencer, SnapshotRegistry};
use crate::sst::cache::BlockCache;
use crate::store::{Store, StoreOptions};
use crate::version::{TableHandle, Version};
use crate::version_edit::VersionEdit;

/// The ZIOB settings `opts` ask for on a runtime of `runtime_cores` cores. With fewer
/// shards asked for than cores, ZIOB runs on every core when the tables may go to a
/// background core (`Options::tables_on_background_core`, see [`crate::placement`]; it
/// does so whether or not the device's active-zone limit then lets them), else
/// on the shards' cores only (shard `i` is on core `i`): every zone is then owned by a core
/// that runs a shard, and the other cores run callers only. (`shards` 0 asks for every
/// core; [`open`] then fits the instance to the store's count.)
pub fn ziob_config(opts: &Options, runtime_cores: usize) -> ZiobConfig {
    let fewer_shards = opts.shards > 0 && opts.shards < runtime_cores;
    let mut c = ZiobConfig {
        buffered: opts.buffered,
        cores: (fewer_shards && !opts.tables_on_background_core).then_some(opts.shards),
        ..ZiobConfig::default()
    };
    if opts.buffer_bytes > 0 {
        c.shard_budget_bytes = opts.buffer_bytes;
    }
    c
}

/// The store layout `opts` ask for: WAL room for the memtables a shard may hold unflushed
/// (the active one and [`MAX_IMMUTABLE_MEMTABLES`]) plus one more for batches logged to
/// several shards.
pub fn store_options(opts: &Options) -> StoreOptions {
    StoreOptions {
        shards: (opts.shards > 0).then_some(opts.shards),
        wal_bytes_per_shard: (MAX_IMMUTABLE_MEMTABLES as u64 + 2) * opts.write_buffer_bytes as u64,
        emu_zones: opts.emu_zones,
        emu_zone_bytes: opts.emu_zone_bytes,
        ..StoreOptions::default()
    }
}

/// The parts of an opened and recovered store: its shards (not started), their shared
/// context, the device layout.
pub type Opened = (Vec<Arc<Shard>>, Arc<StoreCtx>, Store);

/// Opens and recovers the store (see [`Db::open`](crate::Db::open)).
pub async fn open(
    handle: ziob::runtime::Handle,
    spec: &str,
    opts: Options,
) -> Result<Opened, DbError> {
    opts.validate()?;
    let cores = handle.cores();
    let asked = ziob_config(&opts, cores);
    let mut store =
        Store::open_spec(handle.clone(), spec, asked.clone(), &store_options(&opts)).await?;
    // `shards` 0 takes an existing store's own count, known only once the instance is open:
    // if that count wants ZIOB on fewer cores than it now runs on, open it again so.
    let fitted = Options {
        shards: store.shards(),
        ..opts.clone()
    };
    if opts.shards == 0 && ziob_config(&fitted, cores).cores != asked.cores {
        store.close().await?;
        store = Store::open_spec(
            handle.clone(),
            spec,
            ziob_config(&fitted, cores),
            &store_options(&fitted),
        )
        .await?;
    }
    match recover(handle, store.clone(), opts).await {
        Ok(parts) => Ok(parts),
        Err(e) => {
            let _ = store.close().await;
            Err(e)
        }
    }
}

/// Opens and recovers the store on the device of `client` (see
/// [`Db::open_on`](crate::Db::open_on)).
pub async fn open_on(
    handle: ziob::runtime::Handle,
    client: ziob::Client,
    opts: Options,
) -> Result<Opened, DbError> {
    opts.validate()?;
    let store = Store::open(client, &store_options(&opts)).await?;
    match recover(handle, store.clone(), opts).await {
        Ok(parts) => Ok(parts),
        Err(e) => {
            let _ = store.close().await;
            Err(e)
        }
    }
}

async fn recover(
    handle: ziob::runtime::Handle,
    store: Store,
    opts: Options,
) -> Result<Opened, DbError> {
    let cores = handle.cores();
    let n = store.shards();
    let fs = store.fs().clone();
    let table_core = opts
        .tables_on_background_core
        .then(|| placement::table_core(store.client(), n, cores))
        .flatten();
    placement::place_tables(&fs, table_core);
    tracing::debug!(?table_core, shards = n, cores, "table zones placed");
    let ctx = Arc::new(StoreCtx {
        fs: fs.clone(),
        cache: BlockCache::new(opts.cache_bytes),
        handle,
        opts,
        seq: Sequencer::new(0),
        snapshots: Arc::new(SnapshotRegistry::default()),
        logs: (0..n)
            .map(|i| ShardLog::new(store.wal(i).clone(), store.manifest(i).clone()))
            .collect(),
    });
    let mut shards = Vec::with_capacity(n);
    let mut states = Vec::with_capacity(n);
    for id in 0..n {
        let core = id % cores;
        let state = store.manifest(id).state().await;
        let mut tables = Vec::with_capacity(state.files.len());
        for meta in state.files.values() {
            tables.push(Arc::new(
                TableHandle::open(&fs, &ctx.cache, &ctx.handle, id, core, meta.clone()).await?,
            ));
        }
        let live: Vec<u64> = state.files.values().map(|m| m.number).collect();
        remove_orphans(&fs, id, &live).await?;
        let edit = VersionEdit {
            added: state.files.values().cloned().collect(),
            ..VersionEdit::default()
        };
        let version = Version::empty().apply(&edit, tables)?;
        let log = ctx.logs[id].clone();
        shards.push(Arc::new(Shard::new(
            id,
            (core, background_core(id, n, cores)),
            ctx.clone(),
            log,
            version,
            state.next_file_number.max(1),
        )));
        states.push(state);
    }
    // Replay every WAL from its start point; each operation goes to its key's shard, unless
    // that shard's tables have it (a batch spanning shards is in each of their WALs).
    let mut last_seq = states.iter().map(|s| s.last_seq).max().unwrap_or(0);
    // Operations found only in another shard's WAL (a crash lost their own shard's copy of a
    // cross-shard batch): by sequence number, per shard.
    let mut own: Vec<std::collections::HashSet<u64>> = vec![Default::default(); n];
    let mut foreign: Vec<std::collections::BTreeMap<u64, crate::batch::Op>> =
        vec![Default::default(); n];
    for (id, state) in states.iter().enumerate() {
        for (_, record) in store.wal(id).replay_all(state.wal_start).await? {
            for (seq, batch) in WriteBatch::decode_all(&record)? {
                for (j, op) in batch.ops().iter().enumerate() {
                    let s = shard_of(&op.key, n);
                    let op_seq = seq + j as u64;
                    if op_seq > states[s].last_seq {
                        shards[s].replay(op_seq, op);
                        if s == id {
                            own[s].insert(op_seq);
                        } else {
                            foreign[s].insert(op_seq, op.clone());
                        }
                    }
                }
                if !batch.is_empty() {
                    last_seq = last_seq.max(seq + batch.len() as u64 - 1);
                }
            }
        }
    }
    // Log those again in their own shard's WAL (synced): else the shard whose WAL holds
    // them could flush and move its WAL start past them while they sit only in this shard's
    // memtable, and the next reopen or crash would lose them.
    for (s, ops) in foreign.iter().enumerate() {
        let wal = store.wal(s);
        let mut payload = Vec::new();
        for (&op_seq, op) in ops.iter().filter(|(q, _)| !own[s].contains(q)) {
            let mut b = WriteBatch::new();
            match op.kind {
                crate::ikey::Kind::Put => b.put(op.key.clone(), op.value.clone()),
                crate::ikey::Kind::Delete => b.delete(op.key.clone()),
            }
            .map_err(|e| DbError::InvalidArgument(e.to_string()))?;
            let at = payload.len();
            b.encode(op_seq, &mut payload);
            if payload.len() as u64 > wal.max_payload_bytes() && at > 0 {
                wal.append(&payload[..at], false).await?;
                payload.drain(..at);
            }
        }
        if !payload.is_empty() {
            wal.append(&payload, true).await?;
        }
    }
    ctx.seq.recover(last_seq);
    Ok((shards, ctx, store))
}

/// Deletes the table files of shard `shard` not in `live` (left by a crash or a lost
/// deletion).
pub async fn remove_orphans(fs: &ZoneFs, shard: usize, live: &[u64]) -> Result<(), DbError> {
    let dir = format!("kv/{shard}");
    for name in fs.list(&dir).await? {
        let number = name
            .strip_suffix(".sst")
            .and_then(|n| n.parse::<u64>().ok());
        if number.is_none_or(|n| !live.contains(&n)) {
            fs.delete(&format!("{dir}/{name}")).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ziob_runs_on_the_shard_cores_only_when_the_tables_stay_there() {
        let cores_for = |shards: usize, runtime_cores: usize, tables_on_background_core| {
            let opts = Options {
                shards,
                tables_on_background_core,
                ..Options::default()
            };
            ziob_config(&opts, runtime_cores).cores
        };
        assert_eq!(cores_for(1, 2, false), Some(1));
        assert_eq!(cores_for(3, 8, false), Some(3));
        // Tables on the background core: every core.
        assert_eq!(cores_for(1, 2, true), None);
        assert_eq!(cores_for(3, 8, true), None);
        // Unspecified, one per core, or more shards than cores: every core.
        for tables in [false, true] {
            assert_eq!(cores_for(0, 2, tables), None);
            assert_eq!(cores_for(2, 2, tables), None);
            assert_eq!(cores_for(5, 2, tables), None);
        }
    }

    #[test]
    fn flushes_and_compactions_run_on_cores_without_a_shard_when_there_are_some() {
        // One shard on two cores: its background work beside it, on core 1.
        assert_eq!(background_core(0, 1, 2), 1);
        // Three shards on five cores: cores 3 and 4 take them in turn.
        let on: Vec<usize> = (0..3).map(|id| background_core(id, 3, 5)).collect();
        assert_eq!(on, vec![3, 4, 3]);
        // As many shards as cores, or more: each on its own core.
        assert_eq!(background_core(1, 2, 2), 1);
        assert_eq!(background_core(4, 5, 2), 0);
        assert_eq!(background_core(0, 1, 1), 0);
    }
}
