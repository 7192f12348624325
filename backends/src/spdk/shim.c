/*
 * ZIOB's C shim around SPDK's struct-heavy setup calls (environment options, transport ids,
 * controller/namespace identify data) and the completion entry. Everything the Rust side
 * calls goes through a ziob_spdk_* function with plain integer/pointer arguments, so the Rust
 * declarations never mirror an SPDK struct.
 *
 * Compiled by backends/build.rs (cargo feature `spdk`) against an installed SPDK found with
 * pkg-config. This file is ZIOB code; it contains no SPDK code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spdk/env.h>
#include <spdk/log.h>
#include <spdk/nvme.h>
#include <spdk/nvme_zns.h>
#include <spdk/version.h>

#if SPDK_VERSION_MAJOR < 25 || (SPDK_VERSION_MAJOR == 25 && SPDK_VERSION_MINOR < 9)
#error "ZIOB's spdk backend needs SPDK >= 25.09 (spdk/version.h is older)"
#endif

/* Keep in sync with `Geo` in ffi.rs. */
struct ziob_spdk_geo {
	uint64_t ns_blocks;
	uint64_t zone_size_blocks;
	uint64_t zone_count;
	uint32_t block_size;
	uint32_t max_open;   /* 0 = no limit */
	uint32_t max_active; /* 0 = no limit */
	uint32_t max_append_bytes;
	uint32_t max_xfer_bytes;
	uint32_t vwc;
	uint32_t nsid;
	uint32_t is_zoned;
};

/* Keep in sync with `Ctrlr` in ffi.rs (opaque there). */
struct ziob_spdk_ctrlr {
	struct spdk_nvme_ctrlr *ctrlr;
	struct spdk_nvme_ns *ns;
};

static void
set_err(char *err, size_t errlen, const char *fmt, const char *arg, int code)
{
	if (err != NULL && errlen > 0) {
		snprintf(err, errlen, fmt, arg, code);
	}
}

/*
 * SPDK's reason for a failure is a log line (e.g. "DPDK version 22.11.11 is not supported."),
 * while the call itself returns a bare errno. During environment init and controller attach
 * a log hook copies SPDK's error lines into a buffer, so the error returned to Rust carries
 * them; every line is still printed to stderr at SPDK's print level, as without the hook.
 */
static pthread_mutex_t g_capture_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_capture[512];

static void
capture_log(int level, const char *file, const int line, const char *func, const char *format,
	    va_list args)
{
	static const char *const names[] = {"ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"};
	char msg[256];
	va_list copy;
	size_t len, used;

	va_copy(copy, args);
	vsnprintf(msg, sizeof(msg), format, copy);
	va_end(copy);
	len = strlen(msg);
	while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '.' || msg[len - 1] == ' ')) {
		msg[--len] = '\0';
	}
	if (level <= (int)spdk_log_get_print_level()) {
		fprintf(stderr, "%s:%4d:%s: *%s*: %s\n", file ? file : "", line, func ? func : "",
			level >= 0 && level <= 4 ? names[level] : "LOG", msg);
	}
	if (level <= SPDK_LOG_ERROR && len > 0) {
		used = strlen(g_capture);
		if (used + 3 < sizeof(g_capture)) {
			snprintf(g_capture + used, sizeof(g_capture) - used, "%s%s",
				 used > 0 ? "; " : "", msg);
		}
	}
}

/*
 * DPDK's EAL says why it failed on its own log stream (e.g. "EAL: Cannot get hugepage
 * information."), not through SPDK's log. During environment init that stream is a tee to
 * stderr that keeps the last line. Declared here rather than by including <rte_log.h>, which
 * needs DPDK's include paths; the function is part of DPDK's stable API.
 */
int rte_openlog_stream(FILE *f);
/* The DPDK version loaded at run time ("DPDK 22.11.11"; stable API, like the above). */
const char *rte_version(void);

static pthread_mutex_t g_eal_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_eal_last[256];

static ssize_t
eal_log_write(void *cookie, const char *buf, size_t size)
{
	size_t end = size, start;

	(void)cookie;
	fwrite(buf, 1, size, stderr);
	while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == ' ')) {
		end--;
	}
	start = end;
	while (start > 0 && buf[start - 1] != '\n') {
		start--;
	}
	if (end > start) {
		pthread_mutex_lock(&g_eal_lock);
		snprintf(g_eal_last, sizeof(g_eal_last), "%.*s", (int)(end - start), buf + start);
		pthread_mutex_unlock(&g_eal_lock);
	}
	return (ssize_t)size;
}

/* Starts copying SPDK's error lines (one capture at a time, process-wide). */
static void
capture_begin(void)
{
	pthread_mutex_lock(&g_capture_lock);
	g_capture[0] = '\0';
	spdk_log_open(capture_log);
}

/*
 * Stops copying and restores SPDK's own logging (a log callback of NULL); appends what was
 * captured to `err` as "SPDK said: ...".
 */
static void
capture_end(char *err, size_t errlen)
{
	struct spdk_log_opts opts;
	size_t used;

	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	spdk_log_open_ext(&opts);
	if (err != NULL && errlen > 0 && g_capture[0] != '\0') {
		used = strnlen(err, errlen);
		if (used + 1 < errlen) {
			snprintf(err + used, errlen - used, "%sSPDK said: %s", used > 0 ? "; " : "",
				 g_capture);
		}
	}
	pthread_mutex_unlock(&g_capture_lock);
}

int
ziob_spdk_version(void)
{
	return SPDK_VERSION_MAJOR * 10000 + SPDK_VERSION_MINOR * 100 + SPDK_VERSION_PATCH;
}

/*
 * Initialises the SPDK environment (DPDK EAL) once per process. DPDK pins the calling thread
 * to its main lcore; the caller's CPU affinity is restored afterwards so the runtime's core
 * threads keep their own placement.
 */
int
ziob_spdk_env_init(const char *name, int no_huge, int mem_size_mb, const char *pci_allowed,
		   char *err, size_t errlen)
{
	struct spdk_env_opts opts;
	struct spdk_pci_addr allowed;
	cpu_set_t saved;
	FILE *eal_log;
	int have_saved, rc;

	memset(&opts, 0, sizeof(opts));
	opts.opts_size = sizeof(opts);
	spdk_env_opts_init(&opts);
	opts.name = name;
	opts.shm_id = -1;
	if (mem_size_mb > 0) {
		opts.mem_size = mem_size_mb;
	}
	if (no_huge) {
		opts.no_huge = true;
	}
	if (pci_allowed != NULL && pci_allowed[0] != '\0') {
		if (spdk_pci_addr_parse(&allowed, pci_allowed) != 0) {
			set_err(err, errlen, "cannot parse PCI address %s (%d)", pci_allowed, -EINVAL);
			return -EINVAL;
		}
		opts.pci_allowed = &allowed;
		opts.num_pci_addr = 1;
	}
	have_saved = sched_getaffinity(0, sizeof(saved), &saved) == 0;
	capture_begin();
	eal_log = fopencookie(NULL, "w", (cookie_io_functions_t){.write = eal_log_write});
	if (eal_log != NULL) {
		setvbuf(eal_log, NULL, _IOLBF, 0);
		rte_openlog_stream(eal_log);
	}
	rc = spdk_env_init(&opts);
	if (eal_log != NULL) {
		/* Back to DPDK's default stream; EAL threads may still log, so keep it open. */
		rte_openlog_stream(NULL);
	}
	if (have_saved) {
		sched_setaffinity(0, sizeof(saved), &saved);
	}
	if (rc != 0) {
		size_t used;

		set_err(err, errlen, "spdk_env_init (%s) failed: %d", no_huge ? "no_huge" : "hugepages",
			rc);
		/* Which DPDK SPDK met: its version check is a common cause (see docs/SPDK.md). */
		used = err != NULL ? strnlen(err, errlen) : 0;
		if (err != NULL && used + 1 < errlen) {
			snprintf(err + used, errlen - used, " [%s, %s]", rte_version(), SPDK_VERSION_STRING);
		}
	}
	capture_end(rc != 0 ? err : NULL, errlen);
	if (rc != 0 && err != NULL && errlen > 0) {
		size_t used = strnlen(err, errlen);

		pthread_mutex_lock(&g_eal_lock);
		if (g_eal_last[0] != '\0') {
			snprintf(err + used, errlen - used, "; DPDK's last line: %s", g_eal_last);
		}
		pthread_mutex_unlock(&g_eal_lock);
	}
	return rc;
}

/*
 * Attaches the controller named by `trid_str` (a transport id string, e.g.
 * "trtype:PCIe traddr:0000:00:04.0") and fills `geo` from namespace `nsid`.
 */
struct ziob_spdk_ctrlr *
ziob_spdk_connect(const char *trid_str, uint32_t nsid, struct ziob_spdk_geo *geo, char *err,
		  size_t errlen)
{
	struct spdk_nvme_transport_id trid;
	struct spdk_nvme_ctrlr_opts opts;
	struct spdk_nvme_ctrlr *ctrlr;
	struct spdk_nvme_ns *ns;
	const struct spdk_nvme_ctrlr_data *cdata;
	struct ziob_spdk_ctrlr *h;

	memset(&trid, 0, sizeof(trid));
	if (spdk_nvme_transport_id_parse(&trid, trid_str) != 0) {
		set_err(err, errlen, "cannot parse transport id `%s` (%d)", trid_str, -EINVAL);
		return NULL;
	}
	/* Default opts pick CC.CSS = I/O command sets (needed for ZNS) when CAP.CSS has it. */
	spdk_nvme_ctrlr_get_default_ctrlr_opts(&opts, sizeof(opts));
	capture_begin();
	ctrlr = spdk_nvme_connect(&trid, &opts, sizeof(opts));
	if (ctrlr == NULL) {
		set_err(err, errlen,
			"spdk_nvme_connect(%s) failed (%d): is the controller bound to uio_pci_generic or vfio-pci?",
			trid_str, -ENODEV);
	}
	capture_end(ctrlr == NULL ? err : NULL, errlen);
	if (ctrlr == NULL) {
		return NULL;
	}
	ns = spdk_nvme_ctrlr_get_ns(ctrlr, nsid);
	if (ns == NULL || !spdk_nvme_ns_is_active(ns)) {
		set_err(err, errlen, "%s: namespace %d is not active", trid_str, (int)nsid);
		spdk_nvme_detach(ctrlr);
		return NULL;
	}
	cdata = spdk_nvme_ctrlr_get_data(ctrlr);
	memset(geo, 0, sizeof(*geo));
	geo->nsid = nsid;
	geo->ns_blocks = spdk_nvme_ns_get_num_sectors(ns);
	geo->block_size = spdk_nvme_ns_get_sector_size(ns);
	geo->max_xfer_bytes = spdk_nvme_ns_get_max_io_xfer_size(ns);
	geo->vwc = cdata->vwc.present;
	geo->is_zoned = spdk_nvme_ns_get_csi(ns) == SPDK_NVME_CSI_ZNS;
	if (geo->is_zoned) {
		geo->zone_size_blocks = spdk_nvme_zns_ns_get_zone_size_sectors(ns);
		geo->zone_count = spdk_nvme_zns_ns_get_num_zones(ns);
		geo->max_open = spdk_nvme_zns_ns_get_max_open_zones(ns);
		geo->max_active = spdk_nvme_zns_ns_get_max_active_zones(ns);
		geo->max_append_bytes = spdk_nvme_zns_ctrlr_get_max_zone_append_size(ctrlr);
	}
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		spdk_nvme_detach(ctrlr);
		set_err(err, errlen, "%s: out of memory (%d)", trid_str, -ENOMEM);
		return NULL;
	}
	h->ctrlr = ctrlr;
	h->ns = ns;
	return h;
}

struct spdk_nvme_qpair *
ziob_spdk_qpair_alloc(struct ziob_spdk_ctrlr *h, uint32_t io_queue_size)
{
	struct spdk_nvme_io_qpair_opts opts;

	spdk_nvme_ctrlr_get_default_io_qpair_opts(h->ctrlr, &opts, sizeof(opts));
	if (io_queue_size > 0) {
		opts.io_queue_size = io_queue_size;
		if (opts.io_queue_requests < io_queue_size) {
			opts.io_queue_requests = io_queue_size;
		}
	}
	return spdk_nvme_ctrlr_alloc_io_qpair(h->ctrlr, &opts, sizeof(opts));
}

void
ziob_spdk_qpair_free(struct spdk_nvme_qpair *qp)
{
	spdk_nvme_ctrlr_free_io_qpair(qp);
}

int32_t
ziob_spdk_qpair_poll(struct spdk_nvme_qpair *qp)
{
	return spdk_nvme_qpair_process_completions(qp, 0);
}

void *
ziob_spdk_dma_alloc(size_t size, size_t align)
{
	return spdk_dma_zmalloc(size, align, NULL);
}

void
ziob_spdk_dma_free(void *buf)
{
	spdk_dma_free(buf);
}

/*
 * Completion status as the NVMe status field without the phase bit (the io_uring passthrough
 * encoding): SC bits 7:0, SCT 10:8, More 13, DNR 14. 0 = success.
 */
uint32_t
ziob_spdk_cpl_status(const struct spdk_nvme_cpl *cpl)
{
	return (uint32_t)cpl->status.sc | ((uint32_t)cpl->status.sct << 8) |
	       ((uint32_t)cpl->status.m << 13) | ((uint32_t)cpl->status.dnr << 14);
}

/* Command specific result, dwords 0-1 (the LBA a zone append landed at). */
uint64_t
ziob_spdk_cpl_result(const struct spdk_nvme_cpl *cpl)
{
	return (uint64_t)cpl->cdw0 | ((uint64_t)cpl->cdw1 << 32);
}

int
ziob_spdk_read(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, void *buf, uint64_t lba,
	       uint32_t blocks, spdk_nvme_cmd_cb cb, void *arg)
{
	return spdk_nvme_ns_cmd_read(h->ns, qp, buf, lba, blocks, cb, arg, 0);
}

int
ziob_spdk_write(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, void *buf, uint64_t lba,
		uint32_t blocks, spdk_nvme_cmd_cb cb, void *arg)
{
	return spdk_nvme_ns_cmd_write(h->ns, qp, buf, lba, blocks, cb, arg, 0);
}

int
ziob_spdk_append(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, void *buf, uint64_t zslba,
		 uint32_t blocks, spdk_nvme_cmd_cb cb, void *arg)
{
	return spdk_nvme_zns_zone_append(h->ns, qp, buf, zslba, blocks, cb, arg, 0);
}

int
ziob_spdk_flush(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, spdk_nvme_cmd_cb cb,
		void *arg)
{
	return spdk_nvme_ns_cmd_flush(h->ns, qp, cb, arg);
}

/* action: 1 open, 2 close, 3 finish, 4 reset, 5 offline (ZIOB's numbering, see ffi.rs). */
int
ziob_spdk_zone_mgmt(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, int action,
		    uint64_t slba, int select_all, spdk_nvme_cmd_cb cb, void *arg)
{
	bool all = select_all != 0;

	switch (action) {
	case 1:
		return spdk_nvme_zns_open_zone(h->ns, qp, slba, all, cb, arg);
	case 2:
		return spdk_nvme_zns_close_zone(h->ns, qp, slba, all, cb, arg);
	case 3:
		return spdk_nvme_zns_finish_zone(h->ns, qp, slba, all, cb, arg);
	case 4:
		return spdk_nvme_zns_reset_zone(h->ns, qp, slba, all, cb, arg);
	case 5:
		return spdk_nvme_zns_offline_zone(h->ns, qp, slba, all, cb, arg);
	default:
		return -EINVAL;
	}
}

/* Report Zones (all states, partial report) into a DMA buffer of `len` bytes. */
int
ziob_spdk_report_zones(struct ziob_spdk_ctrlr *h, struct spdk_nvme_qpair *qp, void *buf,
		       uint32_t len, uint64_t slba, spdk_nvme_cmd_cb cb, void *arg)
{
	return spdk_nvme_zns_report_zones(h->ns, qp, buf, len, slba, SPDK_NVME_ZRA_LIST_ALL, true,
					  cb, arg);
}
