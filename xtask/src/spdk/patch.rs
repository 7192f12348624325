//! The one source change `spdk-build` makes: relaxing the DPDK 22.11 patch-level check in
//! `dpdk_pci_init()` (`lib/env_dpdk/pci_dpdk.c`). SPDK refuses 22.11 patch releases above the
//! last one it validated (22.11.4 in SPDK 25.09), because a later LTS patch *could* change the
//! private PCI bus ABI it reaches into; Debian 12 ships 22.11.11. Without the change the build
//! succeeds and every `spdk:` open fails at run time with `DPDK version 22.11.11 is not
//! supported`.

/// The file holding the check, relative to the SPDK source root.
pub const FILE: &str = "lib/env_dpdk/pci_dpdk.c";

/// What [`relax`] did to the file's text.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The check was `minor > from` and now is `minor > to` (1-based line number).
    Changed { line: usize, from: u32, to: u32 },
    /// The check already accepts the installed patch release (`minor > limit`).
    AlreadyAccepts { line: usize, limit: u32 },
    /// The installed DPDK is not a 22.11 release: this check does not apply.
    NotNeeded,
}

/// A DPDK version `year.month.minor` as pkg-config reports it (`22.11.11`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpdkVersion {
    pub year: u32,
    pub month: u32,
    pub minor: u32,
}

impl DpdkVersion {
    /// Parses `pkg-config --modversion libdpdk` output (`22.11.11`, `23.11.0`).
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.trim().split('.').map(|p| p.parse::<u32>().ok());
        let (year, month) = (it.next()??, it.next()??);
        let minor = it.next().flatten().unwrap_or(0);
        Some(Self { year, month, minor })
    }
}

impl std::fmt::Display for DpdkVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:02}.{}", self.year, self.month, self.minor)
    }
}

/// Relaxes the 22.11 check in `text` (the content of [`FILE`]) so that it accepts `dpdk`;
/// returns the new text (unchanged unless [`Outcome::Changed`]). Idempotent: a second run
/// finds [`Outcome::AlreadyAccepts`]. Fails if the file does not have the expected shape (an
/// `if (year == 22 && month == 11) {` branch whose next statement is `if (minor > N) {`).
pub fn relax(text: &str, dpdk: DpdkVersion) -> Result<(String, Outcome), String> {
    if (dpdk.year, dpdk.month) != (22, 11) {
        return Ok((text.to_string(), Outcome::NotNeeded));
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let branch = lines
        .iter()
        .position(|l| l.contains("if (year == 22 && month == 11)"))
        .ok_or_else(|| format!("{FILE}: no `if (year == 22 && month == 11)` branch (an SPDK version this helper does not know; patch it by hand, see docs/SPDK.md)"))?;
    let (idx, limit) = lines
        .iter()
        .enumerate()
        .skip(branch + 1)
        .take(3)
        .find_map(|(i, l)| minor_limit(l).map(|n| (i, n)))
        .ok_or_else(|| format!("{FILE}:{}: no `if (minor > N) {{` after the 22.11 branch (an SPDK version this helper does not know; patch it by hand, see docs/SPDK.md)", branch + 1))?;
    if limit >= dpdk.minor {
        return Ok((
            text.to_string(),
            Outcome::AlreadyAccepts {
                line: idx + 1,
                limit,
            },
        ));
    }
    let old = format!("minor > {limit})");
    let new = format!("minor > {})", dpdk.minor);
    let mut out = String::with_capacity(text.len() + 4);
    for (i, l) in lines.iter().enumerate() {
        if i == idx {
            out.push_str(&l.replacen(&old, &new, 1));
        } else {
            out.push_str(l);
        }
    }
    Ok((
        out,
        Outcome::Changed {
            line: idx + 1,
            from: limit,
            to: dpdk.minor,
        },
    ))
}

/// `N` of a line `if (minor > N) {` (any indentation), else `None`.
fn minor_limit(line: &str) -> Option<u32> {
    let rest = line.trim().strip_prefix("if (minor > ")?;
    let (n, tail) = rest.split_once(')')?;
    (tail.trim() == "{").then_some(())?;
    n.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of the function in SPDK v25.09 (abridged).
    const V2509: &str = "\tif (year == 22 && month == 11) {\n\t\tif (minor > 4) {\n\t\t\t/* It is possible that LTS minor release changed private ABI */\n\t\t\tgoto not_supported;\n\t\t}\n\t\tg_dpdk_fn_table = &fn_table_2211;\n\t} else if (year == 23) {\n\t\tif ((month != 11 || minor != 0) &&\n";

    fn v(s: &str) -> DpdkVersion {
        DpdkVersion::parse(s).unwrap()
    }

    #[test]
    fn relaxes_once_then_is_idempotent() {
        let (t1, o1) = relax(V2509, v("22.11.11")).unwrap();
        assert_eq!(
            o1,
            Outcome::Changed {
                line: 2,
                from: 4,
                to: 11
            }
        );
        assert!(t1.contains("\t\tif (minor > 11) {\n"));
        assert_eq!(t1.lines().count(), V2509.lines().count());
        // Only that line differs.
        let diff: Vec<_> = t1
            .lines()
            .zip(V2509.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(diff.len(), 1);
        let (t2, o2) = relax(&t1, v("22.11.11")).unwrap();
        assert_eq!(o2, Outcome::AlreadyAccepts { line: 2, limit: 11 });
        assert_eq!(t2, t1);
        // An older patch release is already accepted by the relaxed check.
        assert_eq!(
            relax(&t1, v("22.11.7")).unwrap().1,
            Outcome::AlreadyAccepts { line: 2, limit: 11 }
        );
    }

    #[test]
    fn supported_or_other_releases_are_left_alone() {
        assert_eq!(
            relax(V2509, v("22.11.3")).unwrap(),
            (
                V2509.to_string(),
                Outcome::AlreadyAccepts { line: 2, limit: 4 }
            )
        );
        assert_eq!(
            relax(V2509, v("23.11.0")).unwrap(),
            (V2509.to_string(), Outcome::NotNeeded)
        );
    }

    #[test]
    fn unknown_shape_is_an_error_not_a_guess() {
        assert!(relax("int main(void) { return 0; }\n", v("22.11.11")).is_err());
        let moved = V2509.replace("if (minor > 4) {", "if (minor >= 5) {");
        assert!(relax(&moved, v("22.11.11")).is_err());
    }

    #[test]
    fn parses_pkg_config_versions() {
        assert_eq!(
            v("22.11.11\n"),
            DpdkVersion {
                year: 22,
                month: 11,
                minor: 11
            }
        );
        assert_eq!(v("23.11").minor, 0);
        assert!(DpdkVersion::parse("x.y").is_none());
        assert_eq!(v("22.11.11").to_string(), "22.11.11");
    }
}
