//! `spdk:` — an NVMe ZNS namespace driven by SPDK's userspace, polled-mode NVMe driver
//! (cargo feature `spdk`; needs an installed SPDK ≥ 25.09, see `docs/SPDK.md`).
//!
//! Spec: `spdk:ADDR[,nsid=N][,no_huge][,mem=SIZE][,qd=N][,bounce]` where `ADDR` is a PCI
//! address (`0000:00:04.0`) or an SPDK transport id string (`trtype:PCIe traddr:0000:00:04.0`).
//! `nsid` defaults to 1; `mem` is the SPDK/DPDK memory size (default 256M); `no_huge` runs
//! without hugepages (DPDK `--no-huge`, IOVA mode VA: only works with vfio and an IOMMU, not
//! with uio); `qd` is the I/O queue depth of each core's qpair; `bounce` copies every transfer
//! of this device through SPDK DMA buffers and does not install SPDK's allocator in the
//! runtime (to measure what zero copy saves).
//!
//! - The SPDK environment is initialised once per process, by the first `spdk:` open (later
//!   opens' `no_huge`/`mem` are ignored); each controller is attached once per process
//!   (`spdk_nvme_connect`) and shared by every handle and core.
//! - Each runtime core gets its own I/O qpair the first time it issues a command. While that
//!   core has commands in flight, a runtime poller calls `spdk_nvme_qpair_process_completions`
//!   every loop turn: the core busy-polls (100 % of a CPU) and never sleeps in the kernel.
//!   When the last command of the core completes, the poller is unregistered and the core may
//!   sleep again, so an idle SPDK device costs no CPU. Completion callbacks wake the waiting
//!   task exactly like an io_uring completion does.
//! - **Zero copy**: opening an `spdk:` device installs SPDK's DMA allocator
//!   (`spdk_dma_malloc`, hugepage memory the driver can translate to bus addresses) as the
//!   [`DmaAllocator`](ziob_runtime::DmaAllocator) of every runtime core, so the [`DmaBuf`](ziob_runtime::DmaBuf)s taken afterwards — ZIOB's
//!   chunks, read buffers — are SPDK memory and go to the device in place. A buffer that is
//!   not (taken before the open, on the heap after SPDK memory ran out, or with `bounce`) is
//!   copied through a per-core pool of SPDK DMA buffers instead. [`transfer_stats`] counts
//!   both.
//! - NVMe status codes become the model's typed [`DeviceError`](crate::DeviceError)s; the context a status does
//!   not carry (write pointer, zone state) comes from a report of the zone after the failure.
//!
//! Modules by job: `options` (the spec), `env` (SPDK environment and attached controllers),
//! `allocator` (SPDK DMA memory: the runtime's allocator, bounce buffers, transfer counters),
//! `qpair` (each core's qpair and its poller), `command` (one command's completion and
//! future), `device` ([`SpdkDevice`]). Report Zones data is decoded and checked by
//! [`crate::nvme::zone`], shared with the `nvme:` backend.

mod allocator;
mod command;
mod device;
mod env;
mod ffi;
mod options;
mod qpair;

pub use allocator::{transfer_stats, TransferStats};
pub use device::SpdkDevice;
pub use env::version;
pub use options::{SpdkOptions, MEM_SIZE_MB_DEFAULT, QUEUE_DEPTH_DEFAULT};
pub use qpair::core_is_polling;
