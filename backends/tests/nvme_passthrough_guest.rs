//! nvme-backend scenarios the shared conformance suite does not reach: commands split at the
//! passthrough transfer limit, what opening a non-zoned namespace says, and the ring check.
//! Guest only (`cargo xtask vm-test -p ziob-backends`); elsewhere each test prints why it
//! skips.

use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

use ziob_backends::{
    open_device, runtime_builder_for, AnyDevice, ErrorKind, NvmeDevice, ZoneAction, ZoneState,
    ZoneTarget, ZonedDevice,
};
use ziob_runtime::DmaBuf;

fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `$var` in the guest, or `None` after printing why the test skips.
fn guest_var(var: &str) -> Option<String> {
    match (std::env::var_os("ZIOB_GUEST"), std::env::var(var)) {
        (Some(_), Ok(v)) => Some(v),
        _ => {
            note(&format!(
                "skipped: ${var} is unset outside the ZIOB test guest (cargo xtask vm-test -p ziob-backends)"
            ));
            None
        }
    }
}

/// The tests of this file share the ZNS namespace: one at a time.
fn exclusive() -> MutexGuard<'static, ()> {
    static DEVICE: Mutex<()> = Mutex::new(());
    DEVICE.lock().unwrap_or_else(|p| p.into_inner())
}

fn block_on<F, Fut>(spec: &str, f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    runtime_builder_for(spec)
        .cores(1)
        .build()
        .unwrap()
        .block_on(f)
        .expect("the test panicked on the core");
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

async fn open_zns(spec: &str) -> AnyDevice {
    let d = open_device(spec).await.unwrap();
    d.zone_action(ZoneAction::Reset, ZoneTarget::All)
        .await
        .unwrap();
    d
}

#[test]
fn split_commands_are_all_or_nothing() {
    let Some(dev) = guest_var("ZIOB_ZNS_CHAR") else {
        return;
    };
    let _one_at_a_time = exclusive();
    let spec = format!("nvme:{dev}");
    block_on(&spec.clone(), move || async move {
        let d = open_zns(&spec).await;
        let AnyDevice::Nvme(nvme) = &d else {
            unreachable!("nvme: spec opens an nvme device")
        };
        let max = nvme.max_transfer_bytes();
        let g = *d.geometry();
        note(&format!(
            "{spec}: one command moves at most {max} bytes; capacity {} bytes",
            g.zone_capacity_bytes
        ));
        assert!(
            max < g.zone_capacity_bytes,
            "the test needs max transfer < capacity"
        );
        // A write of 2.5 commands lands whole and reads back whole (the read is split too).
        let len = (2 * max + max / 2) / g.block_size_bytes * g.block_size_bytes;
        let data = pattern(len as usize, 7);
        let (r, _) = d.write(0, 0, DmaBuf::from_slice(&data)).await;
        r.unwrap();
        let z = d.report_zones(0, 1).await.unwrap()[0];
        assert_eq!(
            (z.state, z.write_pointer_bytes),
            (ZoneState::ImplicitlyOpened, len)
        );
        let (r, buf) = d
            .read(0, 0, len as usize, DmaBuf::with_capacity(len as usize))
            .await;
        r.unwrap();
        assert!(buf[..] == data[..], "split read/write lost or moved data");
        // A split write that would cross the capacity is refused before anything lands, with
        // the status the device gives a single command: Zone Boundary Error.
        let at = g.zone_capacity_bytes - max;
        let (r, _) = d
            .write(1, 0, DmaBuf::from_slice(&pattern(at as usize, 1)))
            .await;
        r.unwrap();
        let crossing = DmaBuf::from_slice(&pattern(2 * max as usize, 2));
        let e = d.write(1, at, crossing).await.0.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BoundaryError, "{e}");
        assert_eq!(e.nvme_status(), Some((1, 0xB8)));
        let z = d.report_zones(1, 1).await.unwrap()[0];
        assert_eq!(z.write_pointer_bytes, at, "part of a refused write landed");
        // The same off the write pointer is an Invalid Write, as one command would be.
        let crossing = DmaBuf::from_slice(&pattern(2 * max as usize, 3));
        let e = d
            .write(1, at - g.block_size_bytes, crossing)
            .await
            .0
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidWrite, "{e}");
        // And into a Full zone a Zone Is Full.
        d.zone_action(ZoneAction::Finish, ZoneTarget::One(2))
            .await
            .unwrap();
        let crossing = DmaBuf::from_slice(&pattern(2 * max as usize, 4));
        let e = d
            .write(2, g.zone_capacity_bytes - max, crossing)
            .await
            .0
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ZoneFull, "{e}");
        d.zone_action(ZoneAction::Reset, ZoneTarget::All)
            .await
            .unwrap();
    });
}

#[test]
fn append_limit_is_zasl_as_the_kernel_reads_it() {
    let Some(dev) = guest_var("ZIOB_ZNS_CHAR") else {
        return;
    };
    let _one_at_a_time = exclusive();
    let spec = format!("nvme:{dev}");
    block_on(&spec.clone(), move || async move {
        let d = open_zns(&spec).await;
        let g = *d.geometry();
        note(&format!("{spec}: max append {} bytes", g.max_append_bytes));
        // The kernel's reading of ZASL (Identify CNS 0x06) for the same namespace, capped like
        // ours by the transfer limit.
        let block = std::env::var("ZIOB_ZNS_BLOCK").unwrap();
        let name = block.trim_start_matches("/dev/");
        let sysfs = format!("/sys/block/{name}/queue/zone_append_max_bytes");
        let kernel: u64 = std::fs::read_to_string(&sysfs)
            .unwrap_or_else(|e| panic!("{sysfs}: {e}"))
            .trim()
            .parse()
            .unwrap();
        let AnyDevice::Nvme(nvme) = &d else {
            unreachable!("nvme: spec opens an nvme device")
        };
        assert_eq!(
            g.max_append_bytes,
            kernel.min(nvme.max_transfer_bytes()),
            "max append vs {sysfs}"
        );
        let max = g.max_append_bytes as usize;
        let (r, _) = d.append(3, DmaBuf::from_slice(&pattern(max, 5))).await;
        assert_eq!(r.unwrap(), 0, "an append of exactly the limit is accepted");
        let (r, _) = d
            .append(
                3,
                DmaBuf::from_slice(&pattern(max + g.block_size_bytes as usize, 6)),
            )
            .await;
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AppendTooLarge, "{e}");
        assert_eq!(e.nvme_status(), Some((0, 0x02)));
        d.zone_action(ZoneAction::Reset, ZoneTarget::One(3))
            .await
            .unwrap();
    });
}

#[test]
fn a_conventional_namespace_is_refused_by_name() {
    let Some(dev) = guest_var("ZIOB_CONV_CHAR") else {
        return;
    };
    let spec = format!("nvme:{dev}");
    block_on(&spec.clone(), move || async move {
        let e = NvmeDevice::open(&dev, spec.clone()).await.err().unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string().contains("is not a Zoned Namespace"),
            "unexpected error: {e}"
        );
    });
}

#[test]
fn a_ring_without_big_entries_is_refused_with_the_fix() {
    let Some(dev) = guest_var("ZIOB_ZNS_CHAR") else {
        return;
    };
    let _one_at_a_time = exclusive();
    let rt = ziob_runtime::Runtime::builder().cores(1).build().unwrap();
    let e = rt
        .block_on(move || async move { open_device(&format!("nvme:{dev}")).await.err() })
        .unwrap()
        .expect("opening on a 64-byte-SQE ring must fail");
    assert!(e.to_string().contains("sqe128(true)"), "{e}");
}
