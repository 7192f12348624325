//! Opening a log file: the start marker and the scan that finds the end.
//!
//! Blocking code, run on tokio's blocking pool.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::frame::{Header, HEADER_BYTES};

/// Bytes of a start marker: the start position (u64 LE) and its CRC-32C (u32 LE).
const START_MARKER_BYTES: usize = 12;

/// The path of a log's data file.
pub fn data_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

/// The path of a log's start marker (written by truncation).
pub fn start_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.start"))
}

/// A recovered log file.
pub struct Recovered {
    /// The data file, open for reads and writes.
    pub file: File,
    /// Position of the first record.
    pub start: u64,
    /// End of the last whole record (the file was cut there).
    pub end: u64,
    /// Bytes of torn or corrupt tail dropped by the scan.
    pub dropped_bytes: u64,
}

/// Opens (creating when missing) the log `name` in `dir`: reads its start marker, scans the
/// records from there, stops at the first torn or corrupt frame and cuts the file there
/// (made durable), so appends go on from the last whole record.
pub fn open_log(dir: &Path, name: &str) -> io::Result<Recovered> {
    let path = data_path(dir, name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    let size = file.metadata()?.len();
    let start = read_start(dir, name)?;
    let mut end = start.min(size);
    let mut reader = BufReader::with_capacity(1 << 20, &file);
    reader.seek(SeekFrom::Start(end))?;
    let mut header = [0u8; HEADER_BYTES as usize];
    let mut data = Vec::new();
    while end + HEADER_BYTES <= size {
        reader.read_exact(&mut header)?;
        let h = Header::decode(&header);
        if end + h.frame_bytes() > size {
            break;
        }
        data.resize(h.len as usize, 0);
        reader.read_exact(&mut data)?;
        if !h.checks(&data) {
            break;
        }
        end += h.frame_bytes();
    }
    drop(reader);
    if end < start {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the log starts at {start} but the file holds only {size} bytes",
                path.display()
            ),
        ));
    }
    if end < size {
        file.set_len(end)?;
        file.sync_all()?;
    }
    Ok(Recovered {
        file,
        start,
        end,
        dropped_bytes: size - end,
    })
}

/// The start position recorded for `name` (0 without a marker).
fn read_start(dir: &Path, name: &str) -> io::Result<u64> {
    let path = start_path(dir, name);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let corrupt = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: corrupt start marker", path.display()),
        )
    };
    let bytes: [u8; START_MARKER_BYTES] = bytes.try_into().map_err(|_| corrupt())?;
    let start = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[0..8]) != crc {
        return Err(corrupt());
    }
    Ok(start)
}

/// Records `start` as the first position of `name`, atomically (temporary file, fdatasync,
/// rename, fsync of the directory).
pub fn write_start(dir: &Path, name: &str, start: u64) -> io::Result<()> {
    let mut bytes = [0u8; START_MARKER_BYTES];
    bytes[0..8].copy_from_slice(&start.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[0..8]);
    bytes[8..12].copy_from_slice(&crc.to_le_bytes());
    let path = start_path(dir, name);
    let tmp = path.with_extension("start.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_data()?;
    drop(f);
    std::fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::frame::encode_into;
    use super::*;

    #[test]
    fn scan_cuts_at_the_first_torn_or_corrupt_frame() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        encode_into(&mut bytes, b"one");
        encode_into(&mut bytes, b"two");
        let whole = bytes.len() as u64;
        // Every cut of the third frame and a corrupt third frame must all end at `whole`.
        let mut third = Vec::new();
        encode_into(&mut third, b"three");
        for cut in 0..=third.len() {
            let mut file_bytes = bytes.clone();
            file_bytes.extend_from_slice(&third[..cut]);
            if cut == third.len() {
                *file_bytes.last_mut().unwrap() ^= 1;
            }
            std::fs::write(data_path(dir.path(), "l"), &file_bytes).unwrap();
            let r = open_log(dir.path(), "l").unwrap();
            assert_eq!((r.start, r.end), (0, whole), "cut {cut}");
            assert_eq!(r.dropped_bytes, cut as u64);
            assert_eq!(
                std::fs::metadata(data_path(dir.path(), "l")).unwrap().len(),
                whole
            );
        }
    }

    #[test]
    fn start_marker_round_trips_and_refuses_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_start(dir.path(), "l").unwrap(), 0);
        write_start(dir.path(), "l", 1234).unwrap();
        assert_eq!(read_start(dir.path(), "l").unwrap(), 1234);
        let path = start_path(dir.path(), "l");
        let mut b = std::fs::read(&path).unwrap();
        b[0] ^= 1;
        std::fs::write(&path, b).unwrap();
        let e = read_start(dir.path(), "l").unwrap_err();
        assert!(e.to_string().contains("corrupt start marker"), "{e}");
    }
}
