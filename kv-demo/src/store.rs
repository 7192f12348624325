//! The store's device layout and how a device becomes a [`Store`]: created, formatted,
//! opened, or refused.
//!
//! One device = one store (`docs/format.md`, "kv-demo manifest and WAL" → "Store layout"):
//! - zones `0..F`: a `ziob-zonefs` file system ([`MkfsOptions::zone_count`] = F) holding the
//!   tables (`kv/<shard>/<number>.sst`, [`table_path`]) and the [`STORE_FILE`];
//! - zones `F..N`: a [`LogSpace`] with each shard's [`Wal`] (`wal-<shard>`) and
//!   [`Manifest`] (`manifest-<shard>`). F is read back from the zonefs superblock on open.
//!
//! [`Store::open`] looks before it writes: an all-empty device is formatted; a zonefs with a
//! valid [`STORE_FILE`] is opened; a zonefs whose format was interrupted (no [`STORE_FILE`],
//! over part of the device, and either holding the [`FORMAT_MARKER`] or empty with the
//! zones past it empty) is formatted again; anything else — a zonefs of
//! another user (e.g. RocksDB's plugin), foreign bytes, a damaged STORE — is a typed
//! [`StoreError`] and the device is left as it was (nothing is written before the decision).

use ziob::backends::DeviceSpec;
use ziob::zonelog::LogSpaceOptions;
use ziob::{Client, Geometry, LogSpace, ZiobConfig, ZiobError, ZoneState};
use ziob_zonefs::{FsError, MkfsOptions, WriteLifetime, ZoneFs};

use crate::manifest::{Manifest, ManifestError, ManifestOptions};
use crate::version_edit::VersionEdit;
use crate::wal::{wal_log_name, Wal, WalError};

/// Zones of an `emu:` device [`Store::open_spec`] creates when its file does not exist.
pub const DEFAULT_EMU_ZONES: u32 = 64;
/// Zone size of such a device: 64 MiB (64 × 64 MiB = a 4 GiB sparse file).
pub const DEFAULT_EMU_ZONE_BYTES: u64 = 64 << 20;
/// WAL room per shard a new store's log space is sized for (see [`log_zones`]): 64 MiB.
pub const DEFAULT_WAL_BYTES_PER_SHARD: u64 = 64 << 20;
/// Zones per shard for its manifest in a new store's log space (the live one and the one a
/// roll moves to).
pub const MANIFEST_ZONES_PER_SHARD: u32 = 2;
/// The store file in the zone file system.
pub const STORE_FILE: &str = "kv/STORE";
/// Present from the start of a format until its end: a zonefs holding it and no
/// [`STORE_FILE`] is a format a crash interrupted, formatted again on open.
pub const FORMAT_MARKER: &str = "kv/FORMATTING";
/// The STORE file's magic bytes.
pub const STORE_MAGIC: [u8; 8] = *b"KVDEMO01";
/// The STORE format version this code writes and reads.
pub const STORE_VERSION: u32 = 1;
/// Bytes of the STORE file.
pub const STORE_FILE_BYTES: usize = 24;

/// The path of shard `shard`'s table number `number` in the zone file system.
pub fn table_path(shard: usize, number: u64) -> String {
    format!("kv/{shard}/{number}.sst")
}

/// What can go wrong opening or formatting a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The device holds a zone file system that is not a kv-demo store (no `kv/STORE`): e.g.
    /// one made by RocksDB's plugin. Left as it was.
    #[error("not a kv-demo store: {found}")]
    NotAStore {
        /// What was found.
        found: String,
    },
    /// The device holds something else than a zone file system. Left as it was.
    #[error("the device holds foreign data (not a kv-demo store): {found}")]
    Foreign {
        /// What was found.
        found: String,
    },
    /// A kv-demo store (or a zone file system) that is damaged: a bad STORE file, a journal
    /// that cannot be read back, a missing log.
    #[error("the store is corrupt: {detail}")]
    Corrupt {
        /// What is wrong.
        detail: String,
    },
    /// The caller asked for a shard count other than the store's (fixed at format).
    #[error("the store has {store} shards, {requested} were asked for")]
    ShardMismatch {
        /// The store's shard count.
        store: usize,
        /// The count asked for.
        requested: usize,
    },
    /// Options or a device unfit for a store (too small for the shards' logs, too few
    /// active zones with the buffer off, a bad spec).
    #[error("cannot make a store here: {0}")]
    Config(String),
    /// The zone file system failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// ZIOB failed (opening the device, the log space).
    #[error(transparent)]
    Ziob(#[from] ZiobError),
    /// A shard's WAL failed.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// A shard's manifest failed or is damaged.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// Settings of [`Store::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Shards: `None` = the store's count (a new store: one per runtime core). An explicit
    /// count that differs from an existing store's is [`StoreError::ShardMismatch`].
    pub shards: Option<usize>,
    /// WAL room per shard when formatting (sizes the log space, [`log_zones`]); pass at
    /// least the unflushed memtable bytes a shard may hold. Default
    /// [`DEFAULT_WAL_BYTES_PER_SHARD`].
    pub wal_bytes_per_shard: u64,
    /// Geometry of an `emu:` device [`Store::open_spec`] creates: zones and zone bytes.
    /// Default [`DEFAULT_EMU_ZONES`] × [`DEFAULT_EMU_ZONE_BYTES`].
    pub emu_zones: u32,
    /// See `emu_zones`.
    pub emu_zone_bytes: u64,
    /// The manifests' settings.
    pub manifest: ManifestOptions,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            shards: None,
            wal_bytes_per_shard: DEFAULT_WAL_BYTES_PER_SHARD,
            emu_zones: DEFAULT_EMU_ZONES,
            emu_zone_bytes: DEFAULT_EMU_ZONE_BYTES,
            manifest: ManifestOptions::default(),
        }
    }
}

/// The STORE file's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreMeta {
    /// Shards (fixed at format).
    pub shards: u32,
}

impl StoreMeta {
    /// The file's bytes: magic, version (u32), shards (u32), reserved (u32, 0), CRC-32C of
    /// the 20 bytes before it (u32).
    pub fn encode(&self) -> [u8; STORE_FILE_BYTES] {
        let mut b = [0u8; STORE_FILE_BYTES];
        b[..8].copy_from_slice(&STORE_MAGIC);
        b[8..12].copy_from_slice(&STORE_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.shards.to_le_bytes());
        let crc = crc32c::crc32c(&b[..20]);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the file's bytes; says what is wrong.
    pub fn decode(b: &[u8]) -> Result<StoreMeta, String> {
        if b.len() != STORE_FILE_BYTES {
            return Err(format!(
                "{} bytes, a STORE file has {STORE_FILE_BYTES}",
                b.len()
            ));
        }
        if b[..8] != STORE_MAGIC {
            return Err(format!("magic {:?}, not {:?}", &b[..8], STORE_MAGIC));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        if crc32c::crc32c(&b[..20]) != u32_at(20) {
            return Err("checksum mismatch".into());
        }
        if u32_at(8) != STORE_VERSION {
            return Err(format!(
                "version {}, this code reads version {STORE_VERSION}",
                u32_at(8)
            ));
        }
        if u32_at(16) != 0 {
            return Err("reserved bytes set".into());
        }
        let shards = u32_at(12);
        if shards == 0 {
            return Err("0 shards".into());
        }
        Ok(StoreMeta { shards })
    }
}

/// Zones of a new store's log space (zones `F..N`, F = N − this): per shard
/// [`MANIFEST_ZONES_PER_SHARD`] + ⌈`wal_bytes_per_shard` / zone capacity⌉ + 2 (the WAL's
/// zone being written and one it moves to before older ones are truncated).
///
/// # Errors
/// [`StoreError::Config`] when that is more than half the device's zones, or leaves the zone
/// file system fewer than 4 zones (2 journal + 2 data).
pub fn log_zones(
    geometry: &Geometry,
    shards: usize,
    wal_bytes_per_shard: u64,
) -> Result<u32, StoreError> {
    let cap = geometry.zone_capacity_bytes.max(1);
    let per_shard = MANIFEST_ZONES_PER_SHARD as u64 + wal_bytes_per_shard.div_ceil(cap) + 2;
    let want = per_shard.saturating_mul(shards as u64);
    let n = geometry.zone_count as u64;
    if want > n / 2 || n - want < 4 {
        return Err(StoreError::Config(format!(
            "{shards} shard(s) need {want} zones for their logs ({per_shard} each: manifest, \
             {wal_bytes_per_shard} WAL bytes in zones of {cap} bytes); a device of {n} zones gives \
             the logs at most half; use more or larger zones, fewer shards or less WAL room"
        )));
    }
    Ok(want as u32)
}

/// How [`Store::open`] came by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The device was blank (or created) and was formatted.
    Formatted,
    /// A format a crash had interrupted was done again.
    Reformatted,
    /// An existing store was opened.
    Existing,
}

/// An open store: the zone file system, the log space and each shard's WAL and manifest.
/// Cheap to clone (every part is a handle).
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    fs: ZoneFs,
    logs: LogSpace,
    meta: StoreMeta,
    wals: Vec<Wal>,
    manifests: Vec<Manifest>,
    opened: Opened,
}

/// What [`inspect`] found on a device, before anything is written.
enum Found {
    Blank,
    InterruptedFormat,
    Store(StoreMeta),
}

impl Store {
    /// Opens the store on `spec` through a new ZIOB instance on `handle`'s runtime with
    /// `config`; an `emu:PATH` whose file does not exist is created first with
    /// `opts.emu_zones` × `opts.emu_zone_bytes`.
    ///
    /// # Errors
    /// As [`Store::open`]; a bad spec or device ([`StoreError::Ziob`]).
    pub async fn open_spec(
        handle: ziob::runtime::Handle,
        spec: &str,
        config: ZiobConfig,
        opts: &StoreOptions,
    ) -> Result<Store, StoreError> {
        create_emu_if_absent(spec, opts.emu_zones, opts.emu_zone_bytes).await?;
        // A device that is not a store is refused before it is opened read-write (closing
        // a read-write instance may rewrite device metadata, e.g. the emu's zone table).
        refuse_read_only(&handle, spec).await?;
        let client = Client::open(handle, spec, config).await?;
        match Store::open(client.clone(), opts).await {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = client.close().await;
                Err(e)
            }
        }
    }

    /// Opens the store on `client`'s device: formats a blank device (or one whose format
    /// was interrupted), opens a kv-demo store, refuses anything else without writing.
    ///
    /// # Errors
    /// [`StoreError::NotAStore`], [`StoreError::Foreign`], [`StoreError::Corrupt`] (nothing
    /// written); [`StoreError::ShardMismatch`]; [`StoreError::Config`] for a device unfit for
    /// the shards; the file system's, log space's, WAL's and manifest's errors.
    pub async fn open(client: Client, opts: &StoreOptions) -> Result<Store, StoreError> {
        match inspect(&client).await? {
            Found::Blank => format(client, opts, false).await,
            Found::InterruptedFormat => format(client, opts, true).await,
            Found::Store(meta) => {
                let shards = meta.shards as usize;
                if let Some(requested) = opts.shards.filter(|&r| r != shards) {
                    return Err(StoreError::ShardMismatch {
                        store: shards,
                        requested,
                    });
                }
                open_existing(client, opts, meta).await
            }
        }
    }

    /// The ZIOB client the store works through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The zone file system (zones `0..F`) holding the tables.
    pub fn fs(&self) -> &ZoneFs {
        &self.fs
    }

    /// The log space (zones `F..N`) holding the WALs and manifests.
    pub fn logs(&self) -> &LogSpace {
        &self.logs
    }

    /// The shard count (fixed at format).
    pub fn shards(&self) -> usize {
        self.meta.shards as usize
    }

    /// Shard `shard`'s WAL. Panics if `shard >= shards()`.
    pub fn wal(&self, shard: usize) -> &Wal {
        &self.wals[shard]
    }

    /// Shard `shard`'s manifest. Panics if `shard >= shards()`.
    pub fn manifest(&self, shard: usize) -> &Manifest {
        &self.manifests[shard]
    }

    /// How the store was come by.
    pub fn opened(&self) -> Opened {
        self.opened
    }

    /// Syncs every WAL and every file, then closes the ZIOB instance.
    ///
    /// # Errors
    /// The first failure (the instance is closed anyway).
    pub async fn close(self) -> Result<(), StoreError> {
        let mut result: Result<(), StoreError> = Ok(());
        for w in &self.wals {
            if let Err(e) = w.sync().await {
                result = result.and(Err(e.into()));
            }
        }
        if let Err(e) = self.fs.sync_all().await {
            result = result.and(Err(e.into()));
        }
        // Every part holds the client: drop them so that closing releases the device.
        let Store {
            client,
            fs,
            logs,
            wals,
            manifests,
            ..
        } = self;
        drop((fs, logs, wals, manifests));
        let closed = client.close().await;
        result?;
        closed?;
        Ok(())
    }
}

/// Creates the `emu:` device of `spec` with `zones` × `zone_bytes` if its file does not
/// exist; returns whether it did. Other specs: nothing to do.
///
/// # Errors
/// A spec that does not parse, a geometry the emu refuses, the file system's errors.
pub async fn create_emu_if_absent(
    spec: &str,
    zones: u32,
    zone_bytes: u64,
) -> Result<bool, StoreError> {
    let parsed = DeviceSpec::parse(spec).map_err(|e| StoreError::Config(e.to_string()))?;
    let DeviceSpec::Emu { path, .. } = parsed else {
        return Ok(false);
    };
    if path.exists() {
        return Ok(false);
    }
    let geometry = Geometry::new(zones, zone_bytes);
    let dev = ziob::backends::create_device(spec, &geometry)
        .await
        .map_err(|e| StoreError::Ziob(e.into()))?;
    drop(dev);
    Ok(true)
}

/// Looks at `spec` through a read-only, pass-through instance and returns the refusal
/// ([`StoreError::NotAStore`], [`StoreError::Foreign`], [`StoreError::Corrupt`]) if the device
/// is not a store; anything else (including a device that does not open read-only, and the
/// per-process `mem:` and `nil:` devices) is left to the read-write open.
async fn refuse_read_only(handle: &ziob::runtime::Handle, spec: &str) -> Result<(), StoreError> {
    if spec.starts_with("mem:") || spec.starts_with("nil:") {
        return Ok(());
    }
    let spec = spec.to_string();
    let looked = handle
        .call(0, move || async move {
            let device = ziob::backends::open_device_read_only(&spec)
                .await
                .map_err(|e| StoreError::Ziob(e.into()))?;
            let ziob = ziob::Ziob::with_device(device, ZiobConfig::pass_through()).await?;
            let found = inspect(&ziob.client()).await.map(|_| ());
            let _ = ziob.abandon().await;
            found
        })
        .await;
    match looked {
        Ok(Err(
            e @ (StoreError::NotAStore { .. }
            | StoreError::Foreign { .. }
            | StoreError::Corrupt { .. }),
        )) => Err(e),
        _ => Ok(()),
    }
}

/// Decides what the device holds, writing nothing.
async fn inspect(client: &Client) -> Result<Found, StoreError> {
    let g = client.geometry();
    let report = client.report(0, g.zone_count).await?;
    let Some(used) = report.iter().find(|z| z.state != ZoneState::Empty) else {
        return Ok(Found::Blank);
    };
    let fs = match ZoneFs::mount_read_only(client.clone()).await {
        Ok(fs) => fs,
        Err(FsError::NotFormatted) => {
            return Err(StoreError::Foreign {
                found: format!("data in zone {} and no zone file system", used.index),
            })
        }
        Err(FsError::Foreign { reason }) => return Err(StoreError::Foreign { found: reason }),
        Err(FsError::Ziob(e)) => return Err(e.into()),
        Err(e) => {
            return Err(StoreError::Corrupt {
                detail: format!("the zone file system does not mount: {e}"),
            })
        }
    };
    if !fs.exists(STORE_FILE).await? {
        let f = fs.zone_count();
        let files = fs.list("").await.map(|l| l.len()).unwrap_or(0);
        // A format cut short: after the marker was made, or right after mkfs (an empty file
        // system over part of the device, the rest untouched).
        let rest_empty = report[f as usize..]
            .iter()
            .all(|z| z.state == ZoneState::Empty);
        if f < g.zone_count && (fs.exists(FORMAT_MARKER).await? || (files == 0 && rest_empty)) {
            return Ok(Found::InterruptedFormat);
        }
        return Err(StoreError::NotAStore {
            found: format!(
                "a zone file system over zones 0..{} ({files} entries at its top) without {STORE_FILE}",
                fs.zone_count()
            ),
        });
    }
    let size = fs.size(STORE_FILE).await?;
    let bytes = fs.read_at(STORE_FILE, 0, size.min(4096) as usize).await?;
    let meta = StoreMeta::decode(&bytes).map_err(|why| StoreError::Corrupt {
        detail: format!("{STORE_FILE}: {why}"),
    })?;
    if fs.zone_count() >= g.zone_count {
        return Err(StoreError::Corrupt {
            detail: format!(
                "the zone file system spans all {} zones: no room for the logs",
                g.zone_count
            ),
        });
    }
    Ok(Found::Store(meta))
}

/// Formats the device (`force`: over an interrupted format).
async fn format(client: Client, opts: &StoreOptions, force: bool) -> Result<Store, StoreError> {
    let g = client.geometry();
    let shards = opts.shards.unwrap_or_else(|| client.cores()).max(1);
    let shards32 = u32::try_from(shards)
        .map_err(|_| StoreError::Config(format!("{shards} shards is too many")))?;
    let logs = log_zones(&g, shards, opts.wal_bytes_per_shard)?;
    let f = g.zone_count - logs;
    // With the buffer off each log keeps one zone active: leave them to the logs.
    let mkfs = MkfsOptions {
        force,
        zone_count: Some(f),
        reserved_active_zones: 2 * shards32,
        ..MkfsOptions::default()
    };
    ZoneFs::mkfs(&client, mkfs).await.map_err(|e| match e {
        FsError::Config(why) => StoreError::Config(why),
        e => e.into(),
    })?;
    let fs = ZoneFs::mount(client.clone()).await?;
    fs.create(FORMAT_MARKER, WriteLifetime::Extreme).await?;
    let space = open_space(&client, f).await?;
    for log in space.logs() {
        // Left by the interrupted format.
        space.remove_log(&log).await?;
    }
    let mut manifests = Vec::with_capacity(shards);
    let mut wals = Vec::with_capacity(shards);
    for shard in 0..shards {
        manifests.push(Manifest::create(&space, shard, opts.manifest).await?);
        let wal = Wal::open(&space, shard).await?;
        // The WAL's first zone header durable: the format is complete only with every log.
        wal.sync().await?;
        wals.push(wal);
    }
    let meta = StoreMeta { shards: shards32 };
    let tmp = format!("{STORE_FILE}.tmp");
    if fs.exists(&tmp).await? {
        fs.delete(&tmp).await?;
    }
    fs.create(&tmp, WriteLifetime::Extreme).await?;
    fs.append(&tmp, &meta.encode()).await?;
    fs.sync(&tmp).await?;
    fs.rename(&tmp, STORE_FILE).await?;
    fs.delete(FORMAT_MARKER).await?;
    Ok(Store {
        client,
        fs,
        logs: space,
        meta,
        wals,
        manifests,
        opened: if force {
            Opened::Reformatted
        } else {
            Opened::Formatted
        },
    })
}

/// Opens the log space over zones `f..N`.
async fn open_space(client: &Client, f: u32) -> Result<LogSpace, StoreError> {
    Ok(LogSpace::open(
        client.clone(),
        LogSpaceOptions {
            zones: f..client.geometry().zone_count,
            ..LogSpaceOptions::default()
        },
    )
    .await?)
}

/// Opens an existing store.
async fn open_existing(
    client: Client,
    opts: &StoreOptions,
    meta: StoreMeta,
) -> Result<Store, StoreError> {
    let fs = ZoneFs::mount(client.clone()).await?;
    let space = open_space(&client, fs.zone_count()).await?;
    let shards = meta.shards as usize;
    let present = space.logs();
    let mut manifests = Vec::with_capacity(shards);
    let mut wals = Vec::with_capacity(shards);
    for shard in 0..shards {
        let manifest = Manifest::open(&space, shard, opts.manifest).await?;
        let name = wal_log_name(shard);
        let wal = Wal::open(&space, shard).await?;
        if !present.contains(&name) {
            // A WAL's zones all gone: its newest zone's header was never durable (nothing
            // synced in it) and the older ones were truncated. Empty, made again.
            tracing::warn!(log = %name, "WAL missing after a crash; created empty");
            wal.sync().await?;
        }
        // A crash cut the WAL before the position the manifest replays from (records that
        // were in tables but not yet durable in the WAL): new records would land below it
        // and be skipped by the next replay. Replay from the WAL's end instead (everything
        // the WAL holds is before the old start, so in tables).
        let state = manifest.state().await;
        if state.wal_start > wal.end() {
            tracing::warn!(
                log = %name,
                wal_start = %state.wal_start,
                end = %wal.end(),
                "WAL cut before the manifest's replay start; moved the start back to the end"
            );
            manifest
                .apply(&VersionEdit {
                    wal_start: Some(wal.end().into_raw()),
                    ..VersionEdit::default()
                })
                .await?;
        }
        manifests.push(manifest);
        wals.push(wal);
    }
    Ok(Store {
        client,
        fs,
        logs: space,
        meta,
        wals,
        manifests,
        opened: Opened::Existing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of docs/format.md.
    #[test]
    fn store_file_bytes() {
        let b = StoreMeta { shards: 2 }.encode();
        assert_eq!(&b[..8], b"KVDEMO01");
        assert_eq!(&b[8..20], &[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[20..], &crc32c::crc32c(&b[..20]).to_le_bytes());
        assert_eq!(&b[20..], &[0x78, 0x31, 0x0a, 0x3c]);
        assert_eq!(StoreMeta::decode(&b), Ok(StoreMeta { shards: 2 }));
        for i in 0..b.len() {
            let mut bad = b;
            bad[i] ^= 0x40;
            assert!(StoreMeta::decode(&bad).is_err(), "byte {i}");
        }
    }

    #[test]
    fn log_zones_follow_the_rule() {
        let g = Geometry::new(64, 64 << 20);
        assert_eq!(log_zones(&g, 2, 64 << 20).unwrap(), 10);
        assert_eq!(log_zones(&g, 1, 1).unwrap(), 5);
        assert!(matches!(
            log_zones(&g, 7, 64 << 20),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            log_zones(&Geometry::new(8, 1 << 20), 1, 1),
            Err(StoreError::Config(_))
        ));
    }

    #[test]
    fn table_paths() {
        assert_eq!(table_path(3, 17), "kv/3/17.sst");
    }
}
