//! Cleaning a store: the `tmp/` folders of runs that died mid-write, quarantined and damaged
//! entries, and (`gc --keep`) entries no experiment keeps.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::io;
use super::{EntryState, KeyLock, Store, StoreError};
use crate::key::AnyKey;

impl Store {
    /// Every entry folder in the store, with its key.
    pub fn entries(&self) -> Result<Vec<(AnyKey, PathBuf)>, StoreError> {
        let objects = self.root.join("objects");
        let mut out = Vec::new();
        for bucket in io(&objects, fs::read_dir(&objects))? {
            let bucket = io(&objects, bucket)?.path();
            if !bucket.is_dir() {
                continue;
            }
            for entry in io(&bucket, fs::read_dir(&bucket))? {
                let path = io(&bucket, entry)?.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if let Some(key) = AnyKey::from_hex(name) {
                    out.push((key, path));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// What `objects/` holds that is no bucket folder (a file where one goes): no entry can be
    /// read there, and writing one moves it aside.
    pub fn strays(&self) -> Result<Vec<PathBuf>, StoreError> {
        let objects = self.root.join("objects");
        let mut out = Vec::new();
        for bucket in io(&objects, fs::read_dir(&objects))? {
            // Followed as `entries` follows it: a link to a bucket folder is a bucket.
            let path = io(&objects, bucket)?.path();
            if !path.is_dir() {
                out.push(path);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Removes the unfinished writes that no live process owns: the `tmp/` folders of runs that
    /// died (kill -9, power loss) mid-write. A live writer holds its key's lock, so its folder is
    /// left alone. Returns (folders removed, bytes freed). Every run does this when it opens the
    /// store.
    pub fn sweep_tmp(&self) -> Result<(usize, u64), StoreError> {
        let d = self.root.join("tmp");
        let mut removed = (0, 0);
        for e in io(&d, fs::read_dir(&d))? {
            let p = io(&d, e)?.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let _lock = match name.get(..64).and_then(AnyKey::from_hex) {
                Some(key) => match KeyLock::try_acquire(&self.root.join("locks"), &key)? {
                    Some(lock) => Some(lock),
                    None => continue,
                },
                None => None,
            };
            removed.1 += size_of(&p);
            match remove_any(&p) {
                Ok(()) => removed.0 += 1,
                // Another sweeper got there first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Io { path: p, source: e }),
            }
        }
        Ok(removed)
    }

    /// Removes unfinished writes of dead processes, quarantined entries and damaged ones (an
    /// artifact missing or not matching its digest: a run would recompute them anyway), and the
    /// key lock files no process holds; with `keep`, also every entry whose key is not in it
    /// (the caller holds the store's [`super::RunLock`] exclusive, so that no run is using
    /// them). Returns (folders removed, bytes freed, lock files removed).
    pub fn gc(
        &self,
        keep: Option<&std::collections::BTreeSet<AnyKey>>,
    ) -> Result<(usize, u64, usize), StoreError> {
        let (mut removed, mut bytes) = self.sweep_tmp()?;
        for stray in self.strays()? {
            // A file only: a run may have replaced it by the bucket folder meanwhile.
            match fs::remove_file(&stray) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) if stray.is_dir() => {}
                Err(e) => {
                    return Err(StoreError::Io {
                        path: stray,
                        source: e,
                    })
                }
            }
        }
        // A folder that is gone already (a run quarantined it meanwhile) counts as removed.
        let mut drop_dir = |p: &Path| -> Result<(), StoreError> {
            bytes += size_of(p);
            match remove_any(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => io(p, Err(e))?,
                _ => removed += 1,
            }
            Ok(())
        };
        let q = self.root.join("quarantine");
        for e in io(&q, fs::read_dir(&q))? {
            drop_dir(&io(&q, e)?.path())?;
        }
        let locks = self.root.join("locks");
        let damaged = |key: &AnyKey, path: &Path| {
            matches!(super::read_entry(path, Some(key)), EntryState::Damaged(_))
        };
        for (key, path) in self.entries()? {
            if keep.is_some_and(|k| !k.contains(&key)) {
                drop_dir(&path)?;
            } else if damaged(&key, &path) {
                // Under the key's lock, which a run holds while it writes the key's new entry
                // in place of a damaged one (skipped while a run holds it), and read again.
                if let Some(_lock) = KeyLock::try_acquire(&locks, &key)? {
                    if damaged(&key, &path) {
                        drop_dir(&path)?;
                    }
                }
            }
        }
        let locks = KeyLock::remove_free(&locks)?;
        Ok((removed, bytes, locks))
    }
}

/// Removes a folder with what it holds, or a file.
fn remove_any(p: &Path) -> std::io::Result<()> {
    if fs::symlink_metadata(p)?.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
}

/// The bytes of a folder's files, or of a file.
fn size_of(p: &Path) -> u64 {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => dir_size(p),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

fn dir_size(p: &Path) -> u64 {
    fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        dir_size(&p)
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
