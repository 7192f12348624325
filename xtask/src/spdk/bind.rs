//! Handing the guest's ZNS controller from the kernel's `nvme` driver to `uio_pci_generic`
//! for SPDK, as guest shell functions: the one binding `spdk-test` and `bench-report` share.

/// Shell functions `driver` (the driver `$P` is bound to) and `bind_controller` (binds `$P`,
/// a PCI address, to `uio_pci_generic` through `driver_override` + `drivers_probe`; succeeds
/// only if it is bound afterwards). The caller sets `P`. The guest loads `uio_pci_generic`
/// at boot (the host root it runs in may have no `modprobe`); the kernel's zbd/nvme devices
/// of that controller are gone afterwards.
pub const BIND_FUNCTIONS: &str = r#"
driver() { basename "$(readlink "/sys/bus/pci/devices/$P/driver" 2>/dev/null)" 2>/dev/null; }
bind_controller() {
  hp=$(awk '/^HugePages_Total/ {print $2}' /proc/meminfo)
  echo "hugepages: $hp x 2 MiB; controller $P on driver $(driver)"
  [ "$(driver)" = uio_pci_generic ] && return 0
  [ -d /sys/bus/pci/drivers/uio_pci_generic ] || modprobe uio_pci_generic || return 1
  d=$(driver); [ -n "$d" ] && echo "$P" > "/sys/bus/pci/drivers/$d/unbind"
  echo uio_pci_generic > "/sys/bus/pci/devices/$P/driver_override"
  echo "$P" > /sys/bus/pci/drivers_probe
  echo "controller $P now on driver $(driver)"
  [ "$(driver)" = uio_pci_generic ]
}
"#;
