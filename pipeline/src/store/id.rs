//! [`Store::id`]: a name drawn once per store, so that the processes of a cluster can tell one
//! shared store from a store of their own at the same path on each host.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::clock::nanos;
use super::entry::{sync_dir, write_synced};
use super::error::io;
use super::{Store, StoreError};

/// The file at the store's root that holds its id.
pub const STORE_ID_FILE: &str = "STORE-ID";

impl Store {
    /// The store's id: 32 hex digits drawn when it is first asked for and kept in
    /// [`STORE_ID_FILE`]. A store copied elsewhere keeps its id, so equal ids prove a shared
    /// store only where nobody copied one; different ids prove two stores.
    ///
    /// Two processes asking at once for a new store's id get the same one: the id is written
    /// under a name of its own and hard-linked into place, and whoever links second reads the
    /// first's. On a file system without hard links the file is created in place instead
    /// (only one creation succeeds), and a reader that finds it still empty waits for its
    /// writer a moment. An id file left empty for longer is an error that names it: drawing a
    /// new one could give two processes two ids.
    pub fn id(&self) -> Result<String, StoreError> {
        let path = self.root.join(STORE_ID_FILE);
        match fs::metadata(&path) {
            Ok(_) => return read_id(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::Io { path, source: e }),
        }
        let id = format!("{}\n", draw());
        // Beside the id, not in `tmp/`, which another process's sweep may empty meanwhile;
        // named by process, time and a counter (threads of one process ask at once in tests).
        static DRAWS: AtomicU64 = AtomicU64::new(0);
        let tmp = self.root.join(format!(
            ".{STORE_ID_FILE}.{}.{}.{}",
            std::process::id(),
            nanos(),
            DRAWS.fetch_add(1, Ordering::Relaxed)
        ));
        write_synced(&tmp, id.as_bytes())?;
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => sync_dir(&self.root)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            // No hard links here: create it in place, once.
            Err(_) => match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    io(&path, f.write_all(id.as_bytes()))?;
                    io(&path, f.sync_all())?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::Io { path, source: e }),
            },
        }
        read_id(&path)
    }
}

/// The id in `path`, waiting up to a second for a writer that created it in place.
fn read_id(path: &Path) -> Result<String, StoreError> {
    for _ in 0..50 {
        let text = io(path, fs::read_to_string(path))?;
        if !text.trim().is_empty() {
            return Ok(text.trim().to_owned());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(StoreError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(
            "the store's id file is empty; remove it (every process of a cluster must then start again, to read the new one)",
        ),
    })
}

/// 128 random bits in hex: from the kernel's generator, or where it cannot be read, a digest
/// of what tells this moment and process apart.
fn draw() -> String {
    let mut bytes = [0u8; 16];
    let from_kernel = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_kernel.is_err() {
        let mut h = blake3::Hasher::new();
        h.update(&nanos().to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        h.update(format!("{:?}", std::thread::current().id()).as_bytes());
        h.update(fs::read("/etc/hostname").unwrap_or_default().as_slice());
        bytes.copy_from_slice(&h.finalize().as_bytes()[..16]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_drawn_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let first = store.id().unwrap();
        assert_eq!(first.len(), 32, "{first}");
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_eq!(Store::open(dir.path()).unwrap().id().unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(Store::open(other.path()).unwrap().id().unwrap(), first);
        // Nothing is left beside it.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(STORE_ID_FILE))
            .collect();
        assert_eq!(names, [STORE_ID_FILE]);
    }

    #[test]
    fn processes_asking_at_once_for_a_new_stores_id_get_one_id() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let ids: Vec<String> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4).map(|_| s.spawn(|| store.id().unwrap())).collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(ids.iter().all(|i| i == &ids[0]), "{ids:?}");
        }
    }

    #[test]
    fn an_empty_id_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join(STORE_ID_FILE), "").unwrap();
        let e = store.id().unwrap_err().to_string();
        assert!(e.contains(STORE_ID_FILE) && e.contains("empty"), "{e}");
    }
}
