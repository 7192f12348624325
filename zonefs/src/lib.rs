//! `ziob-zonefs`: a zone file layer on ZIOB — append-only files stored as extents in zones,
//! for storage engines (RocksDB's `FileSystem` plugin, kv-demo) that want files on a zoned
//! device without a block file system.
//!
//! - **Files** are lists of extents `(zone, offset, length)` in data zones, in a flat
//!   namespace of `/`-separated paths (directories are prefixes: [`ZoneFs::list`]). Files
//!   are append-only: [`create`](ZoneFs::create), [`append`](ZoneFs::append),
//!   [`sync`](ZoneFs::sync), [`read_at`](ZoneFs::read_at), [`size`](ZoneFs::size),
//!   [`delete`](ZoneFs::delete), atomic [`rename`](ZoneFs::rename) (replaces the target),
//!   [`exists`](ZoneFs::exists); [`open_reader`](ZoneFs::open_reader) gives a
//!   [`FileReader`], whose reads skip the path lookup and the state lock.
//! - **Placement**: each file has a [`WriteLifetime`] class (RocksDB's write-lifetime hints
//!   plus WAL); each class appends to its own open data zone (classes share zones when the
//!   active-zone limit is below 9: one active zone is the journal's, one garbage
//!   collection's). The limit is the one a pass-through instance presents; with the buffer on
//!   it is the smallest core's share of the device's active zones, since the buffer lifts
//!   the limit only for data still in memory and a synced zone is active on the device, on
//!   its owner core's share ([`ziob::placement`]). A zone is reset as
//!   soon as no file holds a live byte in it.
//! - **Garbage collection**: when free data zones drop below [`GC_FREE_PERCENT`] %, the writer
//!   that needs a zone first moves the live extents of the closed zone with the most garbage
//!   to a GC zone, journals the swap (a `Relocate` delta) and resets the victim (ZenFS's
//!   victim rule; crash-safe at every step). Writers out of zones wait for GC; only a device
//!   whose zones hold (nearly) no garbage gives [`FsError::NoSpace`]. [`ZoneFs::gc`] runs it
//!   on demand; [`ZoneFs::stats`] counts bytes for write amplification.
//! - **Zone range**: a file system may occupy only zones `0..F` of the device
//!   ([`MkfsOptions::zone_count`]; recorded in its superblock): nothing past zone `F` is ever
//!   read, reset or written, so another user (e.g. a `ziob::zonelog::LogSpace`) can own the
//!   rest, and [`MkfsOptions::reserved_active_zones`] leaves it active zones.
//! - **Checking**: [`ZoneFs::fsck`] ([`FsckReport`]), [`ZoneFs::df`] ([`SpaceUsage`]: free,
//!   used, reclaimable, space amplification, as `zenfs df`), and
//!   [`ZoneFs::mount_read_only`], which writes nothing to the device.
//! - **Metadata journal** in the reserved zones `0..journal_zones` (default 2): superblock,
//!   snapshot, then delta records in the zone log's CRC-32C record frame; rolled to the next
//!   reserved zone with a fresh snapshot when one fills. Concurrent operations share journal
//!   writes and flushes (group commit). Byte layout: `docs/format.md`, "Zone file layer
//!   (zonefs)".
//! - **Concurrency**: reads, appends of different lifetime classes and syncs do their device
//!   I/O without holding the file system's state lock; a read racing a delete or a GC
//!   relocation of its file returns the file's bytes or [`FsError::NotFound`], never bytes of
//!   a reset zone. A [`FileReader`] does not take the lock at all while none of its file's
//!   zones was reset; it reads its file (after a rename too, and after a delete until a zone
//!   of the file is reset, as an open POSIX descriptor does).
//! - **Dropped futures**: any call may be dropped at any await (a cancelled caller). Its
//!   operation then may or may not have happened (a create, delete or rename dropped before
//!   it returned may still become durable), but nothing is left stuck: a journal write cut
//!   off makes the next commit roll the journal (its deltas are applied in memory, so the
//!   roll's snapshot carries them), an append cut off keeps the pieces it finished (the
//!   rest is dead bytes) and leaves no in-flight mark, a zone whose reset was cut off is free in the table, and a zone left without
//!   live data is taken back by the next garbage collection.
//! - **A failed journal write** (a device error) leaves every later call that writes or
//!   reads file data failing with [`FsError::Corrupt`] ("remount"): memory and device may
//!   disagree. When the cause was the ZIOB instance being closed under the file system,
//!   they fail with [`ziob::ZiobError::Closed`] instead. Either way the failed call's
//!   outcome is unknown until a remount shows it.
//! - **Crash semantics**: `create`, `delete` and `rename` are durable when they return.
//!   `append` is not; `sync(file)` makes the file durable up to its size at that point. After a
//!   crash each file has at least its last synced size and content; unsynced tails are lost.
//!   A sync writes its data zones back and lets its journal commit's one device cache flush
//!   make data and record durable together; a crash before that flush may keep the record
//!   but not all the data, and the mount then cuts the file to the data the device holds
//!   ([`MountReport::files_cut`]; only the journal's last batch can name such data).
//! - Works through a [`ziob::Client`]: `ZoneFs` is `Clone + Send + Sync` and its futures are
//!   `Send` (from tokio or any executor); [`ZoneFs::blocking`] gives the same operations as
//!   blocking calls for foreign threads (RocksDB's).
//!
//! ```
//! use ziob::{Client, Runtime, ZiobConfig};
//! use ziob_zonefs::{MkfsOptions, WriteLifetime, ZoneFs};
//! let rt = Runtime::builder().cores(1).build().unwrap();
//! futures::executor::block_on(async {
//!     let client = Client::open(rt.handle(), "mem:zones=8,zone_size=1M", ZiobConfig::default())
//!         .await
//!         .unwrap();
//!     ZoneFs::mkfs(&client, MkfsOptions::default()).await.unwrap();
//!     let fs = ZoneFs::mount(client.clone()).await.unwrap();
//!     fs.create("db/000001.log", WriteLifetime::Wal).await.unwrap();
//!     fs.append("db/000001.log", b"hello").await.unwrap();
//!     fs.sync("db/000001.log").await.unwrap();
//!     assert_eq!(&fs.read_at("db/000001.log", 0, 100).await.unwrap()[..], b"hello");
//!     assert_eq!(fs.list("db").await.unwrap(), vec!["000001.log".to_string()]);
//!     client.close().await.unwrap();
//! });
//! ```

mod blocking;
mod commit;
mod cut;
mod error;
mod fs;
mod fsck;
mod gc;
mod journal;
mod layout;
mod lifetime;
mod mount;
mod path;
mod reader;
pub mod records;
mod space;
mod stat;
pub mod superblock;
mod tree;
mod wire;
mod zones;

pub use blocking::BlockingZoneFs;
pub use cut::FileCut;
pub use error::{FsError, Result};
pub use fs::ZoneFs;
pub use fsck::{FsckProblem, FsckReport, ZoneCheck};
pub use gc::{FsStats, GcReport, BACKGROUND_VICTIMS, GC_FREE_PERCENT};
pub use journal::JOURNAL_ZONES_RANGE;
pub use lifetime::WriteLifetime;
pub use mount::{MkfsOptions, MountReport};
pub use path::PATH_BYTES_MAX;
pub use reader::FileReader;
pub use space::SpaceUsage;
pub use stat::FileStat;
pub use zones::ZoneUse;
