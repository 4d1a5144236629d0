//! File locks: one per key (no key is computed twice at once, across processes), the store's
//! run lock (`gc --keep` never removes what a running experiment uses), and the per-host
//! measurement lock (timings hold it exclusively; other stage work holds it shared, so
//! nothing else runs on the host while a kernel is timed).

use super::StoreError;
use crate::key::AnyKey;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

fn open(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        // A lock file another user made (a shared store): a lock needs only a read descriptor.
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => File::open(path),
            _ => Err(e),
        })
        .map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })
}

/// An exclusive lock on one key, released on drop (and by the OS if the process dies).
#[derive(Debug)]
pub struct KeyLock {
    _file: File,
}

impl KeyLock {
    /// Blocks until the key's lock is ours.
    pub fn acquire(dir: &Path, key: &AnyKey) -> Result<KeyLock, StoreError> {
        let path = key_path(dir, key);
        loop {
            let file = open(&path)?;
            file.lock().map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
            if at_path(&file, &path) {
                return Ok(KeyLock { _file: file });
            }
        }
    }

    /// Takes the lock only if it is free.
    pub fn try_acquire(dir: &Path, key: &AnyKey) -> Result<Option<KeyLock>, StoreError> {
        let path = key_path(dir, key);
        loop {
            let file = open(&path)?;
            match file.try_lock() {
                Ok(()) if at_path(&file, &path) => return Ok(Some(KeyLock { _file: file })),
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(StoreError::Io { path, source })
                }
            }
        }
    }

    /// Removes the lock files of `dir` that no process holds, each while holding it (`gc`: a
    /// lock is needed only while its key is computed, and they would pile up). One it cannot
    /// open or lock (another user's, a file system without locks) stays. Returns how many went.
    /// Only where a process can tell that the file it locked was removed ([`at_path`]).
    pub fn remove_free(dir: &Path) -> Result<usize, StoreError> {
        if !cfg!(unix) {
            return Ok(0);
        }
        let mut removed = 0;
        for e in fs::read_dir(dir).map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })? {
            let Ok(e) = e else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(key) = name.strip_suffix(".lock").and_then(AnyKey::from_hex) else {
                continue;
            };
            if let Ok(Some(lock)) = KeyLock::try_acquire(dir, &key) {
                // A process that opened this file before the removal and then takes the lock
                // finds it gone from the path and opens the new one (`at_path`).
                if fs::remove_file(key_path(dir, &key)).is_ok() {
                    removed += 1;
                }
                drop(lock);
            }
        }
        Ok(removed)
    }
}

fn key_path(dir: &Path, key: &AnyKey) -> PathBuf {
    dir.join(format!("{}.lock", key.hex()))
}

/// Whether the locked `file` is still the one at `path`: `gc` removes free lock files, so a
/// process may lock a file that was unlinked after it opened it, which no one else would see.
#[cfg(unix)]
fn at_path(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn at_path(_: &File, _: &Path) -> bool {
    true
}

/// The store's run lock (`locks/runs.lock`): every `run` and `watch` holds it shared while it
/// runs, and `gc --keep`, which removes entries that a running experiment may have just
/// computed or may still read, holds it exclusive, only when no run holds it. Released on drop.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Shared, for a run; `waiting` is called once if a `gc --keep` holds it, before waiting
    /// for it (a gc is short).
    pub fn shared(dir: &Path, waiting: impl FnOnce()) -> Result<RunLock, StoreError> {
        let path = dir.join("runs.lock");
        let file = open(&path)?;
        let err = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting();
                file.lock_shared().map_err(err)?;
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(err(source)),
        }
        Ok(RunLock { _file: file })
    }

    /// Exclusive, for `gc --keep`, if no run holds it (`None` if one does).
    pub fn try_exclusive(dir: &Path) -> Result<Option<RunLock>, StoreError> {
        let path = dir.join("runs.lock");
        let file = open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(RunLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io { path, source }),
        }
    }
}

/// The per-host measurement lock.
#[derive(Clone, Debug)]
pub struct MeasureLock {
    path: std::path::PathBuf,
}

/// A held measurement lock (shared or exclusive), released on drop.
#[derive(Debug)]
pub struct MeasureGuard {
    _file: File,
}

impl MeasureLock {
    /// The lock for this host (not per store), one per user id (from `/proc/self`; `$USER`
    /// elsewhere), in `/tmp` where there is one, else the system's temporary folder: two runs
    /// of one user with different `$USER` or `$TMPDIR` (a batch job's) took different locks
    /// and timed at once.
    pub fn for_host() -> MeasureLock {
        #[cfg(unix)]
        let uid = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/self").map(|m| m.uid().to_string())
        };
        #[cfg(not(unix))]
        let uid: std::io::Result<String> = Err(std::io::ErrorKind::Unsupported.into());
        let uid = uid.unwrap_or_else(|_| std::env::var("USER").unwrap_or_else(|_| "user".into()));
        MeasureLock {
            path: Some(Path::new("/tmp"))
                .filter(|t| cfg!(unix) && t.is_dir())
                .map_or_else(std::env::temp_dir, Path::to_path_buf)
                .join(format!("cotune-measure-{uid}.lock")),
        }
    }

    /// A lock at `path` (tests: one that no other process shares).
    #[cfg(test)]
    pub(crate) fn at(path: PathBuf) -> MeasureLock {
        MeasureLock { path }
    }

    /// Exclusive: held while timing.
    pub fn exclusive(&self) -> Result<MeasureGuard, StoreError> {
        let file = open(&self.path)?;
        file.lock().map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(MeasureGuard { _file: file })
    }

    /// Shared: held by compute work that must not overlap a timing.
    pub fn shared(&self) -> Result<MeasureGuard, StoreError> {
        let file = open(&self.path)?;
        file.lock_shared().map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(MeasureGuard { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    fn key(i: u8) -> AnyKey {
        AnyKey::from_hex(&format!("{i:02x}").repeat(32)).unwrap()
    }

    /// `gc` removes the lock files no one holds, and a lock taken on a file that was removed
    /// meanwhile is not taken on the path's file.
    #[test]
    fn free_lock_files_are_removed_and_held_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let held = KeyLock::acquire(dir.path(), &key(1)).unwrap();
        drop(KeyLock::acquire(dir.path(), &key(2)).unwrap());
        fs::write(dir.path().join("runs.lock"), b"").unwrap();
        assert_eq!(KeyLock::remove_free(dir.path()).unwrap(), 1);
        assert!(key_path(dir.path(), &key(1)).exists());
        assert!(!key_path(dir.path(), &key(2)).exists());
        assert!(dir.path().join("runs.lock").exists());
        drop(held);

        let path = key_path(dir.path(), &key(3));
        let old = open(&path).unwrap();
        assert!(at_path(&old, &path));
        fs::remove_file(&path).unwrap();
        assert!(!at_path(&old, &path));
        let new = KeyLock::acquire(dir.path(), &key(3)).unwrap();
        assert!(at_path(&new._file, &path) && !at_path(&old, &path));
    }

    /// `gc --keep` runs only when no run holds the store, and a run started while it does
    /// waits (and says so once) until it ends.
    #[test]
    fn the_exclusive_run_lock_is_taken_only_when_no_run_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = RunLock::shared(dir.path(), || panic!("two runs share it")).unwrap();
        let b = RunLock::shared(dir.path(), || panic!("two runs share it")).unwrap();
        assert!(RunLock::try_exclusive(dir.path()).unwrap().is_none());
        drop(a);
        assert!(RunLock::try_exclusive(dir.path()).unwrap().is_none());
        drop(b);
        let held = RunLock::try_exclusive(dir.path()).unwrap().expect("free");
        let said = Arc::new(AtomicBool::new(false));
        let run = {
            let (d, said) = (dir.path().to_owned(), said.clone());
            std::thread::spawn(move || RunLock::shared(&d, || said.store(true, SeqCst)).map(|_| ()))
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(said.load(SeqCst) && !run.is_finished());
        drop(held);
        run.join().unwrap().unwrap();
    }
}
