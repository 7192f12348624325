//! The `spdk:` spec: `ADDR[,nsid=N][,no_huge][,mem=SIZE][,qd=N][,bounce]`.

use crate::model::spec::parse_size_bytes;

/// Default SPDK memory size (MiB): what the QEMU guest with 512 hugepages fits.
pub const MEM_SIZE_MB_DEFAULT: u32 = 256;
/// Default I/O queue depth of each core's qpair.
pub const QUEUE_DEPTH_DEFAULT: u32 = 128;

/// The parsed arguments of an `spdk:` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpdkOptions {
    /// SPDK transport id string, e.g. `trtype:PCIe traddr:0000:00:04.0`.
    pub trid: String,
    /// The PCI address when the spec named one (DPDK then probes only that device).
    pub pci_addr: Option<String>,
    /// Namespace id.
    pub nsid: u32,
    /// Run DPDK without hugepages.
    pub no_huge: bool,
    /// SPDK memory size in MiB.
    pub mem_size_mb: u32,
    /// I/O queue depth per core.
    pub queue_depth: u32,
    /// Copy every transfer through SPDK DMA buffers, and do not install SPDK's allocator in
    /// the runtime.
    pub bounce: bool,
}

impl SpdkOptions {
    /// Parses what follows `spdk:`.
    pub fn parse(rest: &str) -> std::result::Result<SpdkOptions, String> {
        let mut parts = rest.split(',');
        let addr = parts.next().unwrap_or_default().trim();
        if addr.is_empty() {
            return Err("spdk needs a PCI address or a transport id string".into());
        }
        let (trid, pci_addr) = if addr.to_ascii_lowercase().contains("trtype") {
            (addr.to_string(), None)
        } else if is_pci_addr(addr) {
            (format!("trtype:PCIe traddr:{addr}"), Some(addr.to_string()))
        } else {
            return Err(format!(
                "`{addr}` is neither a PCI address (0000:00:04.0) nor a transport id (trtype:PCIe traddr:...)"
            ));
        };
        let mut o = SpdkOptions {
            trid,
            pci_addr,
            nsid: 1,
            no_huge: false,
            mem_size_mb: MEM_SIZE_MB_DEFAULT,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            bounce: false,
        };
        for opt in parts {
            let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
            let num = || -> std::result::Result<u32, String> {
                value
                    .parse()
                    .ok()
                    .filter(|&n: &u32| n > 0)
                    .ok_or_else(|| format!("{key}={value} is not a positive number"))
            };
            match key {
                "nsid" => o.nsid = num()?,
                "qd" => o.queue_depth = num()?,
                "no_huge" if value.is_empty() || value == "1" || value == "true" => {
                    o.no_huge = true
                }
                "bounce" if value.is_empty() || value == "1" || value == "true" => o.bounce = true,
                "mem" => {
                    let bytes = parse_size_bytes(value)?;
                    o.mem_size_mb = u32::try_from(bytes >> 20)
                        .ok()
                        .filter(|&m| m > 0)
                        .ok_or_else(|| format!("mem={value} must be between 1M and 4P"))?;
                }
                _ => {
                    return Err(format!(
                    "unknown spdk option `{opt}` (known: nsid=N, no_huge, mem=SIZE, qd=N, bounce)"
                ))
                }
            }
        }
        Ok(o)
    }
}

fn is_pci_addr(s: &str) -> bool {
    // [DDDD:]BB:DD.F, hex digits.
    let parts: Vec<&str> = s.split(':').collect();
    let (bus_dev, hex_ok) = match parts.as_slice() {
        [dom, bus, dev] => (
            (*bus, *dev),
            dom.len() == 4 && dom.chars().all(|c| c.is_ascii_hexdigit()),
        ),
        [bus, dev] => ((*bus, *dev), true),
        _ => return false,
    };
    let (bus, dev) = bus_dev;
    let Some((d, f)) = dev.split_once('.') else {
        return false;
    };
    hex_ok
        && bus.len() == 2
        && bus.chars().all(|c| c.is_ascii_hexdigit())
        && d.len() == 2
        && d.chars().all(|c| c.is_ascii_hexdigit())
        && f.len() == 1
        && f.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pci_and_trid_specs() {
        let o = SpdkOptions::parse("0000:00:04.0").unwrap();
        assert_eq!(o.trid, "trtype:PCIe traddr:0000:00:04.0");
        assert_eq!(o.pci_addr.as_deref(), Some("0000:00:04.0"));
        assert_eq!(
            (o.nsid, o.no_huge, o.mem_size_mb),
            (1, false, MEM_SIZE_MB_DEFAULT)
        );
        let o = SpdkOptions::parse("trtype:PCIe traddr:0000:00:04.0,nsid=2,no_huge,mem=512M,qd=64")
            .unwrap();
        assert_eq!(o.trid, "trtype:PCIe traddr:0000:00:04.0");
        assert_eq!(o.pci_addr, None);
        assert_eq!(
            (o.nsid, o.no_huge, o.mem_size_mb, o.queue_depth),
            (2, true, 512, 64)
        );
        assert!(!o.bounce);
        assert!(SpdkOptions::parse("0000:00:04.0,bounce").unwrap().bounce);
        assert!(SpdkOptions::parse("0000:00:04.0,bounce=maybe").is_err());
        assert!(SpdkOptions::parse("00:04.0").is_ok());
        assert!(SpdkOptions::parse("/dev/nvme0").is_err());
        assert!(SpdkOptions::parse("0000:00:04.0,nsid=0").is_err());
        assert!(SpdkOptions::parse("0000:00:04.0,bogus=1").is_err());
    }
}
