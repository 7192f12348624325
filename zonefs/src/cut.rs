//! Cutting files to the data a crash left on the device. A sync writes its data zones back,
//! journals its extents, and only then flushes the device's cache once for both; a crash in
//! between may keep the journal record and lose part of the data (a device's cache need not
//! keep write order across zones). Only the extents of the journal's last batch can be in
//! that state ([`ZoneContents::unconfirmed`](crate::journal::ZoneContents)): every batch
//! before it ended with a device flush, and a snapshot is written only after one.

use std::collections::HashSet;

use ziob::{ZoneInfo, ZoneState};

use crate::records::Extent;
use crate::tree::Tree;

/// A file that a mount cut to the data the device holds
/// ([`MountReport::files_cut`](crate::MountReport::files_cut)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCut {
    /// Its path.
    pub path: String,
    /// Its size as journaled.
    pub journaled: u64,
    /// Its size kept: every byte before the first one past its zone's write pointer.
    pub kept: u64,
}

/// Cuts every file at its first extent that is `unconfirmed` (the last batch's) and ends
/// past its zone's write pointer, keeping that extent's bytes below the pointer; the file's
/// later extents go too (a file keeps a prefix of its bytes). The sync that journaled them
/// had not returned, so no synced byte is lost. Any other extent past a write pointer, and
/// any extent outside the data zones `first..report.len()`, past the zone `capacity` or in a
/// read-only or offline zone (which no crash explains, or whose write pointer says
/// nothing), is left for the caller to refuse or report; the file is not cut past it.
/// Returns the cut files, by path.
pub fn cut_to_device(
    tree: &mut Tree,
    unconfirmed: &[(u64, Extent)],
    report: &[ZoneInfo],
    first: u32,
    capacity: u64,
) -> Vec<FileCut> {
    if unconfirmed.is_empty() {
        return Vec::new();
    }
    let unconfirmed: HashSet<(u64, Extent)> = unconfirmed.iter().copied().collect();
    let mut cuts = Vec::new();
    for (&id, node) in tree.nodes() {
        let mut before = 0u64;
        for (i, e) in node.extents.iter().enumerate() {
            let end = e.offset.checked_add(e.len);
            let in_bounds = e.zone >= first
                && (e.zone as usize) < report.len()
                && end.is_some_and(|end| end <= capacity);
            // A zone the device made read-only or offline: its write pointer says nothing of
            // what a crash lost (nvme reports 0 there).
            if !in_bounds
                || matches!(
                    report[e.zone as usize].state,
                    ZoneState::ReadOnly | ZoneState::Offline
                )
            {
                break;
            }
            let wp = report[e.zone as usize].write_pointer_bytes;
            if end.is_some_and(|end| end > wp) && unconfirmed.contains(&(id, *e)) {
                let head = wp.saturating_sub(e.offset).min(e.len);
                cuts.push((id, i, head, before + head, node.size()));
                break;
            }
            before += e.len;
        }
    }
    let mut out = Vec::with_capacity(cuts.len());
    for (id, i, head, kept, journaled) in cuts {
        let node = tree.node_mut(id).expect("listed above");
        node.extents.truncate(i + 1);
        if head > 0 {
            node.extents[i].len = head;
        } else {
            node.extents.pop();
        }
        node.synced = node.extents.len();
        out.push(FileCut {
            path: node.path.clone(),
            journaled,
            kept,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
