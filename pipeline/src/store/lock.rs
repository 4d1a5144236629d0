//! File locks: one per key (no key is computed twice at once, across processes), and the
//! per-host measurement lock (timings hold it exclusively; other stage work holds it shared, so
//! nothing else runs on the host while a kernel is timed).

use super::StoreError;
use crate::key::AnyKey;
use std::fs::{File, OpenOptions};
use std::path::Path;

fn open(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
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
        let path = dir.join(format!("{}.lock", key.hex()));
        let file = open(&path)?;
        file.lock()
            .map_err(|source| StoreError::Io { path, source })?;
        Ok(KeyLock { _file: file })
    }

    /// Takes the lock only if it is free.
    pub fn try_acquire(dir: &Path, key: &AnyKey) -> Result<Option<KeyLock>, StoreError> {
        let path = dir.join(format!("{}.lock", key.hex()));
        let file = open(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(KeyLock { _file: file })),
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
    /// The lock for this host, kept in the system's temporary folder (it is per host, not per store).
    pub fn for_host() -> MeasureLock {
        let uid = std::env::var("USER").unwrap_or_else(|_| "user".into());
        MeasureLock {
            path: std::env::temp_dir().join(format!("cotune-measure-{uid}.lock")),
        }
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
