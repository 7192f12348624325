//! `zbd:` refuses what is not a zoned block device with a clear, typed error: a missing path
//! (everywhere) and, in the test guest (`cargo xtask vm-test`), the conventional NVMe
//! namespace and a partition-less regular file.

use std::io::Write as _;

use ziob_backends::{open_device, ErrorKind};

fn on_core<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    rt.block_on(f).unwrap();
}

#[test]
fn missing_device_is_an_io_error_naming_the_spec() {
    on_core(|| async {
        let e = match open_device("zbd:/definitely/not/a/device").await {
            Ok(_) => panic!("opened a missing device"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(
            e.to_string(),
            "zbd:/definitely/not/a/device: No such file or directory (os error 2)"
        );
    });
}

#[test]
fn regular_file_is_not_a_block_device() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let spec = format!("zbd:{}", f.path().display());
    on_core(move || async move {
        let e = match open_device(&spec).await {
            Ok(_) => panic!("opened a regular file"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.to_string().contains("is not a whole block device"), "{e}");
    });
}

#[test]
fn conventional_namespace_is_refused_as_not_zoned() {
    let (Some(_), Ok(conv)) = (
        std::env::var_os("ZIOB_GUEST"),
        std::env::var("ZIOB_CONV_BLOCK"),
    ) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no conventional NVMe namespace outside the ZIOB test guest (run with cargo xtask vm-test -p ziob-backends)"
        );
        return;
    };
    on_core(move || async move {
        let spec = format!("zbd:{conv}");
        let e = match open_device(&spec).await {
            Ok(_) => panic!("opened the conventional namespace {conv}"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::InvalidSpec);
        let name = conv.rsplit('/').next().unwrap();
        assert_eq!(
            e.to_string(),
            format!("invalid device spec `{spec}`: {conv} is not a zoned block device (/sys/block/{name}/queue/zoned is `none`)")
        );
    });
}
