//! [`Store::id`]: a name drawn once per store, so that the processes of a cluster can tell one
//! shared store from a store of their own at the same path on each host.

use std::fs;
use std::io::Read;

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
    /// first's.
    pub fn id(&self) -> Result<String, StoreError> {
        let path = self.root.join(STORE_ID_FILE);
        match fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_owned()),
            // An empty file (a write cut short before the first sync) is drawn again.
            Ok(_) => match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StoreError::Io { path, source: e })
                }
                _ => {}
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::Io { path, source: e }),
        }
        // Beside the id, not in `tmp/`, which another process's sweep may empty meanwhile.
        let tmp = self.root.join(format!(
            ".{STORE_ID_FILE}.{}.{}",
            std::process::id(),
            nanos()
        ));
        write_synced(&tmp, format!("{}\n", draw()).as_bytes())?;
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => sync_dir(&self.root)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::Io { path, source: e }),
        }
        let text = io(&path, fs::read_to_string(&path))?;
        Ok(text.trim().to_owned())
    }
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
    fn an_empty_id_file_is_drawn_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join(STORE_ID_FILE), "").unwrap();
        let id = store.id().unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(store.id().unwrap(), id);
    }
}
