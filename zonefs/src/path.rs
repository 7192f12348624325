//! File paths: a flat namespace of `/`-separated names; directories are path prefixes.

use crate::error::{FsError, Result};

/// The longest path, in bytes.
pub const PATH_BYTES_MAX: usize = 4096;

/// Checks a file path and returns it normalized: leading and trailing `/` dropped; no empty
/// component, no `.` or `..` component, no NUL byte, at most [`PATH_BYTES_MAX`] bytes.
pub fn normalize(path: &str) -> Result<String> {
    checked(path).map(str::to_string)
}

/// [`normalize`] without a copy: the normalized path is a slice of `path`.
pub fn checked(path: &str) -> Result<&str> {
    let bad = |reason| FsError::InvalidPath {
        path: path.to_string(),
        reason,
    };
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return Err(bad("empty"));
    }
    if trimmed.len() > PATH_BYTES_MAX {
        return Err(bad("longer than 4096 bytes"));
    }
    if trimmed.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    for part in trimmed.split('/') {
        match part {
            "" => return Err(bad("empty component (`//`)")),
            "." | ".." => return Err(bad("`.` and `..` are not supported")),
            _ => {}
        }
    }
    Ok(trimmed)
}

/// A directory given to `list`: normalized like a path, but the root (`""` or `/`) is allowed
/// and becomes `""`.
pub fn normalize_dir(dir: &str) -> Result<String> {
    if dir.trim_matches('/').is_empty() {
        return Ok(String::new());
    }
    normalize(dir)
}

/// The name of the entry directly under `dir` that `path` lies in (a file name or a
/// subdirectory name), if `path` is under `dir`.
pub fn child_of<'a>(dir: &str, path: &'a str) -> Option<&'a str> {
    let rest = if dir.is_empty() {
        path
    } else {
        path.strip_prefix(dir)?.strip_prefix('/')?
    };
    rest.split('/').next().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_rejects() {
        assert_eq!(normalize("/db/000001.log").unwrap(), "db/000001.log");
        assert_eq!(normalize("db/").unwrap(), "db");
        for bad in ["", "/", "a//b", "a/./b", "../x", "a\0b"] {
            assert!(normalize(bad).is_err(), "{bad:?}");
        }
        assert!(normalize(&"x".repeat(PATH_BYTES_MAX + 1)).is_err());
        assert_eq!(normalize_dir("/").unwrap(), "");
    }

    #[test]
    fn children() {
        assert_eq!(child_of("db", "db/CURRENT"), Some("CURRENT"));
        assert_eq!(child_of("db", "db/sub/x"), Some("sub"));
        assert_eq!(child_of("db", "dbx/CURRENT"), None);
        assert_eq!(child_of("", "db/x"), Some("db"));
    }
}
