//! Reads, writes, vectored I/O, fsync and fallocate against a temp file give correct data,
//! buffered and O_DIRECT, with plain and registered files and buffers.

use ziob_runtime::{DmaBuf, OpenOptions, Runtime};

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn roundtrip(direct: bool, register: bool, fixed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let rt = Runtime::builder()
        .cores(1)
        .fixed_buffers(if fixed { 8 } else { 0 }, 64 * 1024)
        .build()
        .unwrap();
    rt.block_on(move || async move {
        let f = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .direct(direct)
            .open(&path)
            .await
        {
            Ok(f) => f,
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("skipping O_DIRECT: the temp filesystem refuses it ({e})");
                return;
            }
            Err(e) => panic!("open: {e}"),
        };
        if register {
            assert!(f.register().unwrap());
        }
        f.fallocate(0, 1 << 20, 0).await.unwrap();
        for i in 0..16u64 {
            let data = pattern(i, 64 * 1024);
            let mut buf = if fixed {
                DmaBuf::fixed(data.len())
            } else {
                DmaBuf::with_capacity(data.len())
            };
            assert_eq!(buf.is_fixed(), fixed);
            buf.extend_from_slice(&data);
            let (res, _) = f.write_at(buf, i * 64 * 1024).await;
            assert_eq!(res.unwrap(), 64 * 1024);
        }
        // Starts write-back only (a no-op for O_DIRECT's clean pages); the whole file, then
        // one range.
        f.start_write_back(0, 0).await.unwrap();
        f.start_write_back(64 * 1024, 128 * 1024).await.unwrap();
        f.sync_data().await.unwrap();
        f.sync_all().await.unwrap();
        for i in (0..16u64).rev() {
            let buf = if fixed {
                DmaBuf::fixed(64 * 1024)
            } else {
                DmaBuf::with_capacity(64 * 1024)
            };
            let (res, buf) = f.read_at(buf, i * 64 * 1024).await;
            assert_eq!(res.unwrap(), 64 * 1024);
            assert!(buf[..] == pattern(i, 64 * 1024)[..], "block {i} differs");
        }
        // Vectored: two 4 KiB buffers.
        let a = DmaBuf::from_slice(&pattern(100, 4096));
        let b = DmaBuf::from_slice(&pattern(101, 4096));
        let (res, _) = f.writev_at(vec![a, b], 1 << 20).await;
        assert_eq!(res.unwrap(), 8192);
        let (res, bufs) = f
            .readv_at(
                vec![DmaBuf::with_capacity(4096), DmaBuf::with_capacity(4096)],
                1 << 20,
            )
            .await;
        assert_eq!(res.unwrap(), 8192);
        assert!(bufs[0][..] == pattern(100, 4096)[..]);
        assert!(bufs[1][..] == pattern(101, 4096)[..]);
        f.close().await.unwrap();
    })
    .unwrap();
    // Independent check through std.
    let bytes = std::fs::read(dir.path().join("data")).unwrap();
    assert_eq!(bytes.len(), (1 << 20) + 8192);
    assert!(bytes[3 * 65536..4 * 65536] == pattern(3, 65536)[..]);
}

#[test]
fn buffered_plain() {
    roundtrip(false, false, false);
}

#[test]
fn buffered_registered_file_and_fixed_buffers() {
    roundtrip(false, true, true);
}

#[test]
fn direct_plain() {
    roundtrip(true, false, false);
}

#[test]
fn direct_registered_file_and_fixed_buffers() {
    roundtrip(true, true, true);
}

#[test]
fn errors_name_the_op_and_errno() {
    let rt = Runtime::builder().cores(1).build().unwrap();
    rt.block_on(|| async {
        let err = OpenOptions::new()
            .read(true)
            .open("/nonexistent/ziob/file")
            .await
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert!(
            err.to_string().starts_with("open failed: No such file"),
            "{err}"
        );
        // Write on a read-only descriptor.
        let f = OpenOptions::new()
            .read(true)
            .open("/proc/self/status")
            .await
            .unwrap();
        let (res, _) = f.write_at(DmaBuf::from_slice(b"x"), 0).await;
        let err = res.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        assert!(err.to_string().starts_with("write failed"), "{err}");
        // Write-back of a pipe.
        let (reader, _writer) = std::io::pipe().unwrap();
        let f = ziob_runtime::File::from_fd(reader.into());
        let err = f.start_write_back(0, 4096).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESPIPE));
        assert!(
            err.to_string().starts_with("sync_file_range failed"),
            "{err}"
        );
    })
    .unwrap();
}

#[test]
fn io_off_core_is_a_clear_error() {
    let f = ziob_runtime::File::from_std(std::fs::File::open("/proc/self/status").unwrap());
    let (res, _buf) = futures::executor::block_on(f.read_at(DmaBuf::with_capacity(4096), 0));
    assert_eq!(
        res.unwrap_err().to_string(),
        "read must be called from a ZIOB runtime core"
    );
}
