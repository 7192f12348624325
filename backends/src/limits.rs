//! Named limits of the backends crate. Every bound a backend or the model checks lives here.

/// Smallest logical block size accepted, in bytes (the smallest NVMe LBA format).
pub const BLOCK_SIZE_BYTES_MIN: u64 = 512;
/// Largest logical block size accepted, in bytes.
pub const BLOCK_SIZE_BYTES_MAX: u64 = 64 * 1024;
/// Block size at and above which the emu backend uses `O_DIRECT` (the [`ziob_runtime::DmaBuf`]
/// alignment); smaller blocks use buffered I/O, as a 4Kn filesystem would refuse them.
pub const EMU_DIRECT_BLOCK_SIZE_BYTES_MIN: u64 = 4096;
/// Most zones a device may have (bounds the zone table: 16 bytes per zone per slot).
pub const ZONE_COUNT_MAX: u32 = 1 << 20;
/// Largest device size (zone count × zone size) a geometry may describe, in bytes (4 EiB): the
/// emu file (header and tables plus this) must fit a file offset (`off_t`, 63 bits) with room
/// to spare, and every byte address of the device must fit 64 bits.
pub const DEVICE_SIZE_BYTES_MAX: u64 = 1 << 62;
/// Largest fixed latency the emu latency model adds per op (`lat_us`): 10 s. A longer one is a
/// typo or "forever", both better refused.
pub const EMU_LATENCY_MAX: std::time::Duration = std::time::Duration::from_secs(10);
/// Bandwidth cap range of the emu latency model (`bw_mbps`), in MB/s (10^6 bytes/s): 1 MB/s
/// (a 4 KiB op then takes 4 ms) to 10^6 MB/s (1 TB/s). 0 is refused: no cap is no option.
pub const EMU_BANDWIDTH_MBPS_RANGE: std::ops::RangeInclusive<u64> = 1..=1_000_000;
/// Default max append size when a geometry does not say, in bytes (QEMU's default ZASL
/// follows MDTS; 512 KiB is what the notes observed as a safe transfer).
pub const MAX_APPEND_BYTES_DEFAULT: u64 = 512 * 1024;
/// Writes of one zone an emu device accepts in flight at once (see
/// [`ZonedDevice::ordered_writes_in_flight`](crate::ZonedDevice::ordered_writes_in_flight)).
/// Each write reserves its range when issued, so any number would keep their order; 16 lets
/// one zone's write-back keep the latency model and the host disk busy (with 4, 16 KiB
/// appends to one zone through ZIOB reached 1.28× the pass-through IOPS, with 16 1.68×;
/// `README.md`).
pub const EMU_ORDERED_WRITES_IN_FLIGHT: u32 = 16;
/// How long an emu open retries a lock conflict with another process before it reports the
/// device busy: rides over a holder that is just closing, short enough for a prompt error.
pub const EMU_LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(250);
/// Size of the emu header and the alignment of every emu region, in bytes.
pub const EMU_REGION_ALIGN_BYTES: u64 = 4096;

const _: () = assert!(BLOCK_SIZE_BYTES_MIN.is_power_of_two());
const _: () = assert!(BLOCK_SIZE_BYTES_MAX.is_power_of_two());
const _: () = assert!(BLOCK_SIZE_BYTES_MIN <= EMU_DIRECT_BLOCK_SIZE_BYTES_MIN);
const _: () = assert!(EMU_DIRECT_BLOCK_SIZE_BYTES_MIN <= BLOCK_SIZE_BYTES_MAX);
const _: () = assert!(MAX_APPEND_BYTES_DEFAULT.is_multiple_of(BLOCK_SIZE_BYTES_MAX));
const _: () = assert!(EMU_REGION_ALIGN_BYTES as usize == ziob_runtime::DMA_ALIGN_BYTES);

/// Size of one data segment the nvme backend counts against the queue's `max_segments`, in
/// bytes (one page of a [`ziob_runtime::DmaBuf`]).
pub const NVME_SEGMENT_BYTES: u64 = 4096;
/// Largest NVMe passthrough transfer per command when sysfs does not give the queue limits, in
/// bytes (the notes: 512 KiB failed with EINVAL under QEMU with 127 segments, 256 KiB worked).
pub const NVME_PASSTHRU_TRANSFER_BYTES_FALLBACK: u64 = 256 * 1024;

const _: () = assert!(NVME_PASSTHRU_TRANSFER_BYTES_FALLBACK.is_multiple_of(BLOCK_SIZE_BYTES_MAX));
const _: () = assert!(NVME_SEGMENT_BYTES as usize == ziob_runtime::DMA_ALIGN_BYTES);
