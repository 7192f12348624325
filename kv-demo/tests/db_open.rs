//! `Db::open` on what a device may hold: nothing (an absent `emu:` file is created), a
//! kv-demo store (opened), a zone file system of someone else (`NotAStore`), foreign bytes
//! (`Foreign`) — the last two are never reformatted. Bad options are `InvalidArgument`.

mod db_common;

use db_common::{tiny_emu, with_watchdog, EmuFile};
use kv_demo::{Db, DbError, Options, WriteOptions};
use ziob::{Client, Runtime, ZiobConfig};
use ziob_zonefs::{MkfsOptions, ZoneFs};

#[test]
fn creates_opens_and_refuses() {
    with_watchdog(120, || {
        let rt = Runtime::builder().cores(1).build().unwrap();
        futures::executor::block_on(async {
            // Absent: created and formatted; then reopened with its data.
            let dev = EmuFile::new("open");
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(1, 16))
                .await
                .unwrap();
            db.put(&b"k"[..], &b"v"[..], &WriteOptions::default())
                .await
                .unwrap();
            db.close().await.unwrap();
            assert!(
                std::fs::metadata(&dev.0).unwrap().len() > 0,
                "the emu file was created"
            );
            let db = Db::open(rt.handle(), &dev.spec(), tiny_emu(1, 16))
                .await
                .unwrap();
            assert_eq!(db.get(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
            db.close().await.unwrap();

            // A zone file system without kv/STORE: NotAStore, and it is left as it was.
            let other = EmuFile::new("other-fs");
            let db = Db::open(rt.handle(), &other.spec(), tiny_emu(1, 16))
                .await
                .unwrap();
            db.close().await.unwrap(); // creates the device file
            let client = Client::open(rt.handle(), &other.spec(), ZiobConfig::default())
                .await
                .unwrap();
            ZoneFs::mkfs(
                &client,
                MkfsOptions {
                    force: true,
                    ..MkfsOptions::default()
                },
            )
            .await
            .unwrap();
            client.close().await.unwrap();
            let before = std::fs::read(&other.0).unwrap();
            let err = Db::open(rt.handle(), &other.spec(), tiny_emu(1, 16))
                .await
                .unwrap_err();
            assert!(matches!(err, DbError::NotAStore(_)), "{err}");
            assert!(
                std::fs::read(&other.0).unwrap() == before,
                "a refused device was written"
            );

            // Foreign bytes in the first zone: Foreign, left as it was.
            let foreign = EmuFile::new("foreign");
            let db = Db::open(rt.handle(), &foreign.spec(), tiny_emu(1, 16))
                .await
                .unwrap();
            db.close().await.unwrap();
            let client = Client::open(rt.handle(), &foreign.spec(), ZiobConfig::default())
                .await
                .unwrap();
            for z in 0..client.geometry().zone_count {
                client.reset(z).await.unwrap();
            }
            client
                .append(0, bytes::Bytes::from(vec![0xA5u8; 8192]))
                .await
                .unwrap();
            client.close().await.unwrap();
            let before = std::fs::read(&foreign.0).unwrap();
            let err = Db::open(rt.handle(), &foreign.spec(), tiny_emu(1, 16))
                .await
                .unwrap_err();
            assert!(matches!(err, DbError::Foreign(_)), "{err}");
            assert!(
                std::fs::read(&foreign.0).unwrap() == before,
                "a refused device was written"
            );

            // Bad options.
            let bad = Options {
                write_buffer_bytes: 10,
                ..Options::default()
            };
            let err = Db::open(rt.handle(), "mem:zones=16,zone_size=1M", bad)
                .await
                .unwrap_err();
            assert!(matches!(err, DbError::InvalidArgument(_)), "{err}");
        });
    });
}
