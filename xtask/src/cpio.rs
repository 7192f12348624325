//! A minimal writer for the `newc` cpio format (what the kernel unpacks as initramfs).

/// Builds a newc archive in memory. Entries are written in insertion order; parent
/// directories must be added before their children.
pub struct NewcWriter {
    buf: Vec<u8>,
    next_ino: u32,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

impl Default for NewcWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl NewcWriter {
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            next_ino: 1,
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, 2, (0, 0), &[]);
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, S_IFREG | (mode & 0o7777), 1, (0, 0), data);
    }

    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes());
    }

    pub fn char_dev(&mut self, name: &str, mode: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | (mode & 0o7777), 1, (major, minor), &[]);
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) {
        let name = name.trim_start_matches('/');
        let ino = if name == "TRAILER!!!" {
            0
        } else {
            self.next_ino += 1;
            self.next_ino
        };
        let fields: [u32; 13] = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: fixed so that the archive (and its hash) is reproducible
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad4();
        self.buf.extend_from_slice(data);
        self.pad4();
    }

    fn pad4(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// Appends the trailer and returns the archive bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, 1, (0, 0), &[]);
        // The kernel reads the initramfs in 512-byte blocks happily, but pad anyway.
        while !self.buf.len().is_multiple_of(512) {
            self.buf.push(0);
        }
        self.buf
    }
}

/// FNV-1a 64-bit: a stable content hash for cache keys (not cryptographic).
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut w = NewcWriter::new();
        w.dir("bin");
        w.file("bin/x", 0o755, b"hello");
        w.char_dev("dev/console", 0o600, 5, 1);
        let a = w.finish();
        assert_eq!(&a[..6], b"070701");
        assert_eq!(a.len() % 512, 0);
        // first entry name right after the 110-byte header
        assert_eq!(&a[110..114], b"bin\0");
        let s = String::from_utf8_lossy(&a);
        assert!(s.contains("TRAILER!!!"));
        assert!(s.contains("hello"));
    }

    #[test]
    fn fnv_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
