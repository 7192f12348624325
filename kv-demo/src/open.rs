//! Opening a store: the device, the zone file system, the shards.

use std::sync::Arc;

use ziob::{Client, ZiobConfig};
use ziob_zonefs::{FsError, MkfsOptions, ZoneFs};

use crate::db::Db;
use crate::db_error::DbError;
use crate::durable::ShardLog;
use crate::options::Options;
use crate::shard::{Shard, StoreCtx};
use crate::snapshot::{Sequencer, SnapshotRegistry};
use crate::sst::cache::BlockCache;
use crate::version::Version;

/// The ZIOB settings `opts` ask for.
pub fn ziob_config(opts: &Options) -> ZiobConfig {
    let mut c = ZiobConfig {
        buffered: opts.buffered,
        ..ZiobConfig::default()
    };
    if opts.buffer_bytes > 0 {
        c.shard_budget_bytes = opts.buffer_bytes;
    }
    c
}

/// Opens the store (see [`Db::open`]).
pub async fn open(handle: ziob::runtime::Handle, spec: &str, opts: Options) -> Result<Db, DbError> {
    opts.validate()?;
    let client = Client::open(handle.clone(), spec, ziob_config(&opts)).await?;
    let fs = match ZoneFs::mount(client.clone()).await {
        Ok(fs) => fs,
        Err(FsError::NotFormatted) => {
            ZoneFs::mkfs(&client, MkfsOptions::default()).await?;
            ZoneFs::mount(client.clone()).await?
        }
        Err(FsError::Foreign { reason }) => return Err(DbError::Foreign(reason)),
        Err(e) => return Err(e.into()),
    };
    let cores = handle.cores();
    let shards = if opts.shards == 0 { cores } else { opts.shards };
    let ctx = Arc::new(StoreCtx {
        fs: fs.clone(),
        cache: BlockCache::new(opts.cache_bytes),
        handle,
        opts,
        seq: Sequencer::new(0),
        snapshots: Arc::new(SnapshotRegistry::default()),
    });
    let mut list = Vec::with_capacity(shards);
    for id in 0..shards {
        remove_orphans(&fs, id, &[]).await?;
        list.push(Arc::new(Shard::new(
            id,
            id % cores,
            ctx.clone(),
            ShardLog::Volatile,
            Version::empty(),
            1,
        )));
    }
    Db::assemble(list, ctx, client)
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
