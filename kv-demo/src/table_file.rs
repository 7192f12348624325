//! Tables as zone files: a table is written front to back into one `ziob-zonefs` file (the
//! zone file layer places it by lifetime class and reclaims its zones), made durable, then
//! read through [`ZoneFile`].

use std::sync::Arc;

use bytes::Bytes;
use ziob_zonefs::{FileReader, FsError, WriteLifetime, ZoneFs};

use crate::sst::table::{TableBuilder, TableSource, TableSummary};

/// Closed blocks gathered before one append to the file (each append is a call to a ZIOB
/// core, which a busy core takes up about a slice later: with 256 KiB a flush or
/// compaction on the background core spent most of its time waiting for those calls; 1 MiB
/// per table being written keeps the memory small). On a device that takes appends only in
/// whole blocks (the buffer off) the zone file layer cuts an append into pieces of at most the
/// device's largest append (`max_append_bytes`), each a call of its own.
pub const APPEND_BYTES: usize = 1 << 20;

/// Writes the table `builder` makes from `entries` to a new file `path` of lifetime class
/// `lifetime`, syncs it (durable when this returns), and says what it holds.
///
/// A write that fails or whose future is dropped leaves a partial file at `path` (not a valid
/// table: the footer comes last); the caller deletes it.
pub async fn write_table<'a>(
    fs: &ZoneFs,
    path: &str,
    lifetime: WriteLifetime,
    mut builder: TableBuilder,
    entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<TableSummary, FsError> {
    fs.create(path, lifetime).await?;
    for (k, v) in entries {
        builder.add(k, v);
        if builder.ready_bytes() >= APPEND_BYTES {
            fs.append(path, &builder.take_ready()).await?;
        }
    }
    let (rest, summary) = builder.finish();
    fs.append(path, &rest).await?;
    fs.sync(path).await?;
    Ok(summary)
}

/// A table file on zones, as a [`TableSource`]: read through its zonefs [`FileReader`], so
/// a block read costs no path lookup and no wait for the file system's state lock (which
/// appends, syncs and garbage collection take too).
#[derive(Clone, Debug)]
pub struct ZoneFile {
    reader: Arc<FileReader>,
}

impl ZoneFile {
    /// Opens the file `path` of `fs`.
    pub async fn open(fs: &ZoneFs, path: &str) -> Result<ZoneFile, FsError> {
        Ok(ZoneFile {
            reader: Arc::new(fs.open_reader(path).await?),
        })
    }
}

impl TableSource for ZoneFile {
    async fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        let got = self
            .reader
            .read_at(offset, len)
            .await
            .map_err(std::io::Error::other)?;
        if got.len() != len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: {} bytes at {offset}, {len} asked",
                    self.reader.path(),
                    got.len()
                ),
            ));
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use ziob::{Client, Runtime, ZiobConfig};
    use ziob_zonefs::MkfsOptions;

    use super::*;
    use crate::ikey::{self, Kind};
    use crate::memtable::Memtable;
    use crate::sst::cache::BlockCache;
    use crate::sst::table::{Table, TableOptions};

    /// A memtable flushed to a zone file reads back whole, by scan and by point lookup, after
    /// the file system is mounted again.
    #[test]
    fn memtable_to_zone_file_and_back() {
        let rt = Runtime::builder().cores(1).build().unwrap();
        futures::executor::block_on(async {
            let spec = "mem:zones=16,zone_size=1M";
            let client = Client::open(rt.handle(), spec, ZiobConfig::default())
                .await
                .unwrap();
            ZoneFs::mkfs(&client, MkfsOptions::default()).await.unwrap();
            let fs = ZoneFs::mount(client.clone()).await.unwrap();
            let mut m = Memtable::new();
            for i in 0u64..3000 {
                let kind = if i % 7 == 0 { Kind::Delete } else { Kind::Put };
                let v = if kind == Kind::Put {
                    vec![i as u8; 100]
                } else {
                    vec![]
                };
                m.add(&(i % 1000).to_be_bytes(), i + 1, kind, Bytes::from(v));
            }
            let builder = TableBuilder::new(TableOptions::default(), ikey::order, ikey::user_key);
            let entries = m.iter().map(|(k, v)| (k, &v[..]));
            let summary = write_table(
                &fs,
                "db/000001.sst",
                WriteLifetime::Medium,
                builder,
                entries,
            )
            .await
            .unwrap();
            assert_eq!(summary.entries, 3000);
            assert_eq!(fs.size("db/000001.sst").await.unwrap(), summary.file_bytes);
            drop(fs);
            let fs = ZoneFs::mount(client.clone()).await.unwrap();
            let cache = BlockCache::new(1 << 20);
            let file = ZoneFile::open(&fs, "db/000001.sst").await.unwrap();
            let t = Table::open(
                file,
                summary.file_bytes,
                ikey::order,
                ikey::user_key,
                &cache,
                1,
            )
            .await
            .unwrap();
            let mut it = t.iter_from(&[]).await.unwrap();
            let mut n = 0;
            let mut want = m.iter();
            while let Some((k, v)) = it.next().await.unwrap() {
                let (wk, wv) = want.next().unwrap();
                assert_eq!((&k[..], &v[..]), (wk, &wv[..]));
                n += 1;
            }
            assert_eq!(n, 3000);
            for key in [5u64, 7, 700, 999] {
                let seek = ikey::seek_key(&key.to_be_bytes(), u64::MAX >> 8);
                let (k, _) = t.seek_first(&seek, true).await.unwrap().unwrap();
                assert_eq!(ikey::user_key(&k), &key.to_be_bytes());
            }
            assert_eq!(
                t.seek_first(&ikey::seek_key(b"absent!!", 1), true)
                    .await
                    .unwrap()
                    .map(|(k, _)| ikey::user_key(&k).to_vec())
                    .filter(|k| k == b"absent!!"),
                None
            );
            client.close().await.unwrap();
        });
    }
}
