#!/bin/busybox sh
# ZIOB guest /init (generated into the initramfs by `cargo xtask vm-setup`).
# Per-run settings come from the job share (9p tag "job"): config.sh, cmd.sh.
# Results go back there: stdout, stderr, rc, devices.env, timing.
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
log() { echo "ziob-init: $*"; }
die() {
    log "FATAL: $*"
    [ -d /job/. ] && echo "init: $*" >> /job/init-error
    sync
    poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 5
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /dev/hugepages
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp

for m in $(cat /etc/ziob-modules); do
    insmod "/lib/modules/$m.ko" || log "insmod $m failed"
done

mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job /job || die "mount job share"
. /job/config.sh
echo "modules $(cut -d' ' -f1 /proc/uptime)" >> /job/timing

if [ -n "$ZIOB_CFG_NULLBLK_ARGS" ]; then
    insmod /lib/modules/null_blk.ko $ZIOB_CFG_NULLBLK_ARGS || log "insmod null_blk failed"
fi
if [ "${ZIOB_CFG_HUGEPAGES:-0}" -gt 0 ]; then
    # Normally reserved by the kernel command line already; top up if that fell short.
    [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$ZIOB_CFG_HUGEPAGES" ] \
        || echo "$ZIOB_CFG_HUGEPAGES" > /proc/sys/vm/nr_hugepages
    mount -t hugetlbfs hugetlbfs /dev/hugepages
fi

# Host root, read-only, with a RAM overlay so that the whole tree is writable in the guest
# (writes are discarded at poweroff). Falls back to a read-only root with tmpfs on /tmp.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host \
    || die "mount hostroot share"
scratch=
if [ "$ZIOB_CFG_SCRATCH" = 1 ]; then
    i=0
    while [ -z "$scratch" ] && [ "$i" -lt 200 ]; do
        for d in /sys/block/vd*; do
            [ "$(cat "$d/serial" 2>/dev/null)" = ziob-scratch ] && scratch=/dev/${d##*/}
        done
        [ -z "$scratch" ] && usleep 20000
        i=$((i + 1))
    done
fi
if [ -n "$scratch" ] && mount -t ext4 "$scratch" /rw; then
    ZIOB_SCRATCH_FS=ext4
else
    [ "$ZIOB_CFG_SCRATCH" = 1 ] && log "scratch disk not usable: RAM overlay"
    mount -t tmpfs -o size=75% tmpfs /rw
    ZIOB_SCRATCH_FS=tmpfs
fi
mkdir -p /rw/upper /rw/work
if mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot; then
    ROOT_MODE=overlay
else
    log "overlay failed: read-only host root, tmpfs on /tmp"
    mount --bind /host /newroot
    mount -t tmpfs tmpfs /newroot/tmp
    ROOT_MODE=readonly
fi
mount --rbind /dev /newroot/dev
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t tmpfs tmpfs /newroot/run
mkdir -p /newroot/run/ziob-job
mount --bind /job /newroot/run/ziob-job
if [ -n "$ZIOB_CFG_OUT_DIR" ]; then
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out "/newroot$ZIOB_CFG_OUT_DIR" \
        || die "mount out share at $ZIOB_CFG_OUT_DIR"
fi

# Wait for the NVMe namespaces (scanned asynchronously) and null_blk.
want_nvme=${ZIOB_CFG_NVME_NS:-0}
want_nullb=0
[ -n "$ZIOB_CFG_NULLBLK_ARGS" ] && want_nullb=1
i=0
while :; do
    n=0; b=0
    for d in /sys/block/nvme*n*; do [ -e "$d/queue/zoned" ] && n=$((n + 1)); done
    for d in /sys/block/nullb*; do [ -e "$d/queue/zoned" ] && b=$((b + 1)); done
    [ "$n" -ge "$want_nvme" ] && [ "$b" -ge "$want_nullb" ] && break
    i=$((i + 1))
    if [ "$i" -ge "${ZIOB_CFG_DEV_WAIT:-400}" ]; then
        log "timeout waiting for devices (nvme $n/$want_nvme, nullb $b/$want_nullb)"
        break
    fi
    usleep 50000
done

# Discover devices by sysfs, never by assumed names.
env=/job/devices.env
{
    echo "export ZIOB_GUEST='1'"
    echo "export ZIOB_GUEST_KERNEL='$(uname -r)'"
    echo "export ZIOB_GUEST_ROOT='$ROOT_MODE-$ZIOB_SCRATCH_FS'"
    echo "export ZIOB_HUGEPAGES='$(cat /proc/sys/vm/nr_hugepages)'"
    # TCG emulates `rep movsb` slowly, and glibc's memcpy uses it for copies from 2 KiB up
    # to its non-temporal threshold (a 16 KiB copy: 30 us instead of 6.4 us). Unless the
    # command sets its own tunables, keep memcpy on its vector loops.
    echo 'export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.cpu.x86_rep_movsb_threshold=4194304}"'
    [ -n "$ZIOB_CFG_OUT_DIR" ] && echo "export ZIOB_OUT_DIR='$ZIOB_CFG_OUT_DIR'"
} > $env
for d in /sys/block/*; do
    name=${d##*/}
    z=$(cat "$d/queue/zoned" 2>/dev/null)
    case "$name" in
    nvme*n*)
        ctrl=${name%n*}
        pci=$(readlink -f "/sys/class/nvme/$ctrl/device" 2>/dev/null)
        pci=${pci##*/}
        char=/dev/ng${name#nvme}
        [ -c "$char" ] || char=
        if [ "$z" = host-managed ]; then
            echo "export ZIOB_ZNS_BLOCK='/dev/$name'"
            [ -n "$char" ] && echo "export ZIOB_ZNS_CHAR='$char'"
            echo "export ZIOB_ZNS_NSID='$(cat $d/nsid 2>/dev/null || cat $d/device/nsid 2>/dev/null)'"
            echo "export ZIOB_NVME_PCI='$pci'"
        else
            echo "export ZIOB_CONV_BLOCK='/dev/$name'"
            [ -n "$char" ] && echo "export ZIOB_CONV_CHAR='$char'"
        fi
        ;;
    nullb*)
        [ "$z" = host-managed ] && echo "export ZIOB_NULLBLK_ZONED='/dev/$name'"
        ;;
    esac
done >> $env
echo "command $(cut -d' ' -f1 /proc/uptime)" >> /job/timing
: > /job/started

chroot /newroot /usr/bin/env -i /bin/sh /run/ziob-job/cmd.sh \
    < /dev/null > /job/stdout 2> /job/stderr
rc=$?
echo "done $(cut -d' ' -f1 /proc/uptime)" >> /job/timing
echo "$rc" > /job/rc.tmp && mv /job/rc.tmp /job/rc
sync
poweroff -f
echo o > /proc/sysrq-trigger
sleep 5
