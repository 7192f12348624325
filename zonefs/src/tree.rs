//! The namespace in memory: files by id and by path, each with its extents (synced ones
//! first). Pure bookkeeping: journal deltas are applied here, snapshots taken from here.

use std::collections::{BTreeMap, HashMap};

use crate::lifetime::WriteLifetime;
use crate::records::{Delta, Extent, FileEntry, Snapshot};

/// One file in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its path.
    pub path: String,
    /// Its lifetime class.
    pub lifetime: WriteLifetime,
    /// All its extents in file order; the first `synced` are journaled.
    pub extents: Vec<Extent>,
    /// How many extents are journaled (durable).
    pub synced: usize,
}

impl Node {
    /// The file's size: every byte appended.
    pub fn size(&self) -> u64 {
        self.extents.iter().map(|e| e.len).sum()
    }

    /// Adds `len` bytes at `offset` of `zone` to the end of the file, growing the last extent
    /// if it is unsynced and ends right there.
    pub fn push(&mut self, zone: u32, offset: u64, len: u64) {
        if self.extents.len() > self.synced {
            let last = self.extents.last_mut().expect("an unsynced extent");
            if last.zone == zone && last.offset + last.len == offset {
                last.len += len;
                return;
            }
        }
        self.extents.push(Extent { zone, offset, len });
    }
}

/// Every file, by id and by path.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    next_id: u64,
    nodes: HashMap<u64, Node>,
    paths: BTreeMap<String, u64>,
}

/// A journal delta that does not fit the tree (a corrupt journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyError(pub String);

impl Tree {
    /// The tree a snapshot describes (every extent synced).
    pub fn from_snapshot(snap: &Snapshot) -> Result<Tree, ApplyError> {
        let mut tree = Tree {
            next_id: snap.next_id,
            ..Tree::default()
        };
        for f in &snap.files {
            if f.id >= snap.next_id
                || tree.nodes.contains_key(&f.id)
                || tree.paths.contains_key(&f.path)
            {
                return Err(ApplyError(format!(
                    "snapshot file {} ({}) is duplicated or beyond next_id",
                    f.id, f.path
                )));
            }
            tree.paths.insert(f.path.clone(), f.id);
            tree.nodes.insert(
                f.id,
                Node {
                    path: f.path.clone(),
                    lifetime: f.lifetime,
                    extents: f.extents.clone(),
                    synced: f.extents.len(),
                },
            );
        }
        Ok(tree)
    }

    /// The snapshot of the durable state: every file with its synced extents.
    pub fn snapshot(&self) -> Snapshot {
        let files = self
            .paths
            .values()
            .map(|id| {
                let n = &self.nodes[id];
                FileEntry {
                    id: *id,
                    path: n.path.clone(),
                    lifetime: n.lifetime,
                    extents: n.extents[..n.synced].to_vec(),
                }
            })
            .collect();
        Snapshot {
            next_id: self.next_id,
            files,
        }
    }

    /// The id the next created file gets.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The file at `path`.
    pub fn lookup(&self, path: &str) -> Option<u64> {
        self.paths.get(path).copied()
    }

    /// The id of the file at `path`, or [`FsError::NotFound`](crate::FsError::NotFound).
    pub fn existing(&self, path: &str) -> Result<u64, crate::FsError> {
        self.lookup(path)
            .ok_or_else(|| crate::FsError::NotFound(path.to_string()))
    }

    /// File `id`.
    pub fn node(&self, id: u64) -> Option<&Node> {
        self.nodes.get(&id)
    }

    /// File `id`, to change.
    pub fn node_mut(&mut self, id: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&id)
    }

    /// Every file.
    pub fn nodes(&self) -> impl Iterator<Item = (&u64, &Node)> {
        self.nodes.iter()
    }

    /// Paths in order, from `from` on.
    pub fn paths_from<'a>(&'a self, from: &str) -> impl Iterator<Item = &'a String> + 'a {
        self.paths.range(from.to_string()..).map(|(p, _)| p)
    }

    /// Applies `delta`; returns the extents it freed (of deleted or replaced files, synced or
    /// not).
    pub fn apply(&mut self, delta: &Delta) -> Result<Vec<Extent>, ApplyError> {
        match delta {
            Delta::Create { id, lifetime, path } => {
                if *id < self.next_id || self.paths.contains_key(path) {
                    return Err(ApplyError(format!("create of {path} (id {id}) conflicts")));
                }
                self.next_id = id + 1;
                self.paths.insert(path.clone(), *id);
                self.nodes.insert(
                    *id,
                    Node {
                        path: path.clone(),
                        lifetime: *lifetime,
                        extents: Vec::new(),
                        synced: 0,
                    },
                );
                Ok(Vec::new())
            }
            Delta::Sync { id, extents } => {
                let node = self
                    .nodes
                    .get_mut(id)
                    .ok_or_else(|| ApplyError(format!("sync of unknown file {id}")))?;
                // In memory the extents are already there (appends pushed them); on replay
                // they are added.
                if node.extents.len() >= node.synced + extents.len()
                    && node.extents[node.synced..node.synced + extents.len()] == extents[..]
                {
                    node.synced += extents.len();
                } else {
                    node.extents.truncate(node.synced);
                    node.extents.extend_from_slice(extents);
                    node.synced = node.extents.len();
                }
                Ok(Vec::new())
            }
            Delta::BatchStart => Ok(Vec::new()),
            Delta::Delete { id } => {
                let node = self
                    .nodes
                    .remove(id)
                    .ok_or_else(|| ApplyError(format!("delete of unknown file {id}")))?;
                self.paths.remove(&node.path);
                Ok(node.extents)
            }
            Delta::Rename { id, path } => {
                let old = self
                    .nodes
                    .get(id)
                    .ok_or_else(|| ApplyError(format!("rename of unknown file {id}")))?
                    .path
                    .clone();
                if old == *path {
                    return Ok(Vec::new());
                }
                let mut freed = Vec::new();
                if let Some(target) = self.paths.remove(path) {
                    freed = self.nodes.remove(&target).expect("indexed").extents;
                }
                self.paths.remove(&old);
                self.paths.insert(path.clone(), *id);
                self.nodes.get_mut(id).expect("checked").path = path.clone();
                Ok(freed)
            }
            Delta::Relocate { moves } => {
                let mut freed = Vec::new();
                for m in moves {
                    let node = self
                        .nodes
                        .get_mut(&m.id)
                        .ok_or_else(|| ApplyError(format!("relocate in unknown file {}", m.id)))?;
                    let i = node
                        .extents
                        .iter()
                        .position(|e| *e == m.from)
                        .ok_or_else(|| {
                            ApplyError(format!(
                                "relocate of {:?}: not an extent of {}",
                                m.from, node.path
                            ))
                        })?;
                    if m.to.is_empty() || m.to.iter().map(|e| e.len).sum::<u64>() != m.from.len {
                        return Err(ApplyError(format!(
                            "relocate of {:?} to extents of another length",
                            m.from
                        )));
                    }
                    node.extents.splice(i..=i, m.to.iter().copied());
                    if i < node.synced {
                        node.synced += m.to.len() - 1;
                    }
                    freed.push(m.from);
                }
                Ok(freed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_then_snapshot_round_trip() {
        let mut t = Tree::default();
        let create = |id, path: &str| Delta::Create {
            id,
            lifetime: WriteLifetime::Short,
            path: path.into(),
        };
        t.apply(&create(0, "a")).unwrap();
        t.apply(&create(1, "b")).unwrap();
        t.node_mut(0).unwrap().push(9, 0, 10);
        t.node_mut(0).unwrap().push(9, 10, 5); // grows the unsynced extent
        assert_eq!(t.node(0).unwrap().extents.len(), 1);
        let ext = t.node(0).unwrap().extents.clone();
        t.apply(&Delta::Sync {
            id: 0,
            extents: ext.clone(),
        })
        .unwrap();
        t.node_mut(0).unwrap().push(9, 15, 1); // a synced extent is not grown
        assert_eq!(t.node(0).unwrap().extents.len(), 2);
        let freed = t
            .apply(&Delta::Rename {
                id: 0,
                path: "b".into(),
            })
            .unwrap();
        assert!(freed.is_empty());
        assert_eq!(t.lookup("b"), Some(0));
        assert_eq!(t.lookup("a"), None);
        let snap = t.snapshot();
        assert_eq!(snap.files.len(), 1);
        assert_eq!(snap.files[0].extents, ext);
        let back = Tree::from_snapshot(&snap).unwrap();
        assert_eq!(back.snapshot(), snap);
        assert_eq!(back.next_id(), 2);
        assert!(t.apply(&create(1, "c")).is_err());
        // Relocation splits a synced extent in place: the synced count follows.
        let ex = |zone, offset, len| Extent { zone, offset, len };
        let before = t.node(0).unwrap().clone();
        assert_eq!(before.synced, 1);
        let freed = t
            .apply(&Delta::Relocate {
                moves: vec![crate::records::Move {
                    id: 0,
                    from: before.extents[0],
                    to: vec![ex(20, 0, 5), ex(21, 0, 10)],
                }],
            })
            .unwrap();
        assert_eq!(freed, vec![before.extents[0]]);
        let after = t.node(0).unwrap();
        assert_eq!(after.synced, 2);
        assert_eq!(
            after.extents,
            vec![ex(20, 0, 5), ex(21, 0, 10), before.extents[1]]
        );
        assert_eq!(after.size(), before.size());
        // A move of bytes the file does not hold, or to another length, is corrupt.
        let bad = |from, to| Delta::Relocate {
            moves: vec![crate::records::Move { id: 0, from, to }],
        };
        assert!(t.apply(&bad(ex(20, 0, 4), vec![ex(1, 0, 4)])).is_err());
        assert!(t.apply(&bad(ex(20, 0, 5), vec![ex(1, 0, 4)])).is_err());
        assert!(t.apply(&Delta::Delete { id: 7 }).is_err());
    }
}
