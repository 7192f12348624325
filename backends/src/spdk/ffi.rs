//! Declarations of the C shim (`shim.c`). Only plain integers and pointers cross; no SPDK
//! struct is mirrored here except [`Geo`], which the shim defines itself.

use std::ffi::{c_char, c_int, c_void};

/// `struct ziob_spdk_geo` of the shim.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Geo {
    pub ns_blocks: u64,
    pub zone_size_blocks: u64,
    pub zone_count: u64,
    pub block_size: u32,
    pub max_open: u32,
    pub max_active: u32,
    pub max_append_bytes: u32,
    pub max_xfer_bytes: u32,
    pub vwc: u32,
    pub nsid: u32,
    pub is_zoned: u32,
}

/// `struct ziob_spdk_ctrlr` (controller + namespace), opaque.
#[repr(C)]
pub(crate) struct Ctrlr {
    _private: [u8; 0],
}

/// `struct spdk_nvme_qpair`, opaque.
#[repr(C)]
pub(crate) struct Qpair {
    _private: [u8; 0],
}

/// `spdk_nvme_cmd_cb`: the completion is passed as an opaque pointer and decoded by the shim.
pub(crate) type CmdCb = unsafe extern "C" fn(arg: *mut c_void, cpl: *const c_void);

/// Zone management actions, numbered as `ziob_spdk_zone_mgmt` expects.
pub(crate) const ZM_OPEN: c_int = 1;
pub(crate) const ZM_CLOSE: c_int = 2;
pub(crate) const ZM_FINISH: c_int = 3;
pub(crate) const ZM_RESET: c_int = 4;
pub(crate) const ZM_OFFLINE: c_int = 5;

extern "C" {
    pub(crate) fn ziob_spdk_version() -> c_int;
    pub(crate) fn ziob_spdk_env_init(
        name: *const c_char,
        no_huge: c_int,
        mem_size_mb: c_int,
        pci_allowed: *const c_char,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub(crate) fn ziob_spdk_connect(
        trid: *const c_char,
        nsid: u32,
        geo: *mut Geo,
        err: *mut c_char,
        errlen: usize,
    ) -> *mut Ctrlr;
    pub(crate) fn ziob_spdk_qpair_alloc(h: *mut Ctrlr, io_queue_size: u32) -> *mut Qpair;
    pub(crate) fn ziob_spdk_qpair_free(qp: *mut Qpair);
    pub(crate) fn ziob_spdk_qpair_poll(qp: *mut Qpair) -> i32;
    pub(crate) fn ziob_spdk_dma_alloc(size: usize, align: usize) -> *mut c_void;
    pub(crate) fn ziob_spdk_dma_free(buf: *mut c_void);
    pub(crate) fn ziob_spdk_cpl_status(cpl: *const c_void) -> u32;
    pub(crate) fn ziob_spdk_cpl_result(cpl: *const c_void) -> u64;
    pub(crate) fn ziob_spdk_read(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        buf: *mut c_void,
        lba: u64,
        blocks: u32,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
    pub(crate) fn ziob_spdk_write(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        buf: *mut c_void,
        lba: u64,
        blocks: u32,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
    pub(crate) fn ziob_spdk_append(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        buf: *mut c_void,
        zslba: u64,
        blocks: u32,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
    pub(crate) fn ziob_spdk_flush(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
    pub(crate) fn ziob_spdk_zone_mgmt(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        action: c_int,
        slba: u64,
        select_all: c_int,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
    pub(crate) fn ziob_spdk_report_zones(
        h: *mut Ctrlr,
        qp: *mut Qpair,
        buf: *mut c_void,
        len: u32,
        slba: u64,
        cb: CmdCb,
        arg: *mut c_void,
    ) -> c_int;
}
