//! `ZoneWriter` / `ZoneReader`: a zone as a `futures::io` byte stream, round trip through
//! `futures::io::copy` in odd-sized pieces, seeking, and a full zone as `StorageFull`.

mod zonelog_support;

use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt, Cursor};
use ziob::zone_io::{ZoneReader, ZoneWriter};
use ziob::{Client, ZiobConfig};
use zonelog_support::{bounded, record, tokio_rt, ziob_rt};

#[test]
fn copy_round_trip_seek_and_full_zone() {
    bounded(120, || {
        let rt = ziob_rt(2);
        tokio_rt(2).block_on(async move {
            let client = Client::open(
                rt.handle(),
                "mem:zones=4,zone_size=1M",
                ZiobConfig::default(),
            )
            .await
            .unwrap();
            for (zone, len, buffer) in [
                (1u32, 300_001usize, 4096usize),
                (2, 777_777, 100_000),
                (3, 5, 1),
            ] {
                let data = record(u64::from(zone), len);
                let mut w = ZoneWriter::with_buffer(client.clone(), zone, buffer);
                let copied = futures::io::copy(Cursor::new(data.clone()), &mut w)
                    .await
                    .unwrap();
                assert_eq!(copied, len as u64);
                w.close().await.unwrap();
                assert_eq!(w.appended_bytes(), len as u64);
                // Durable and all there.
                let info = client.report(zone, 1).await.unwrap()[0];
                assert!(info.write_pointer_bytes >= len as u64);
                let mut r = ZoneReader::with_len(client.clone(), zone, len as u64);
                let mut back = Vec::new();
                futures::io::copy(&mut r, &mut back).await.unwrap();
                assert_eq!(back.len(), len);
                assert!(back == data, "zone {zone}: bytes differ");
                // Seek and read a piece.
                if len > 1000 {
                    let at = len as u64 / 3;
                    assert_eq!(r.seek(std::io::SeekFrom::Start(at)).await.unwrap(), at);
                    let mut piece = vec![0u8; 999];
                    r.read_exact(&mut piece).await.unwrap();
                    assert_eq!(&piece[..], &data[at as usize..at as usize + 999]);
                    assert_eq!(
                        r.seek(std::io::SeekFrom::End(-10)).await.unwrap(),
                        len as u64 - 10
                    );
                    let mut tail = Vec::new();
                    r.read_to_end(&mut tail).await.unwrap();
                    assert_eq!(&tail[..], &data[len - 10..]);
                }
            }
            // ZoneReader::open reads up to the write pointer (after the flush's padding).
            let mut r = ZoneReader::open(client.clone(), 3).await.unwrap();
            assert_eq!(r.len(), 4096);
            let mut all = Vec::new();
            r.read_to_end(&mut all).await.unwrap();
            assert_eq!(&all[..5], &record(3, 5)[..]);
            // Writing past the zone's capacity: StorageFull.
            let mut w = ZoneWriter::new(client.clone(), 0);
            let err = async {
                let chunk = vec![1u8; 64 << 10];
                for _ in 0..20 {
                    w.write_all(&chunk).await?;
                }
                w.flush().await
            }
            .await
            .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::StorageFull, "{err}");
            client.close().await.unwrap();
        });
    });
}
