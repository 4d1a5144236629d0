//! The content-addressed store: one folder per key under `objects/<2 hex>/<key>/`, holding
//! `meta.json` and the stage's artifacts.
//!
//! An entry is written into `tmp/`, its artifacts hashed into `meta.json`, synced, and renamed
//! into place: a complete entry is never rewritten, and an interrupted write leaves only a
//! folder in `tmp/` (removed by the next run, [`Store::sweep_tmp`], or `gc`). Reads verify the recorded digests; a damaged entry is
//! moved to `quarantine/` and recomputed, never used. A per-key file lock makes two processes
//! sharing a store wait for each other instead of computing one key twice.

mod lock;
mod meta;

pub use lock::{KeyLock, MeasureGuard, MeasureLock};
pub use meta::{value_from_json, value_to_json, Meta, Provenance, META_FORMAT};

use crate::key::AnyKey;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Errors of the store itself (a stage's own failure is not one of these).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("store {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The folder exists but is not a cotune store.
    #[error("{0} exists and is not a cotune store (no CACHEDIR.TAG); refusing to use it")]
    NotAStore(PathBuf),
}

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T, StoreError> {
    r.map_err(|source| StoreError::Io {
        path: path.to_owned(),
        source,
    })
}

/// What a read of an entry found.
#[derive(Debug)]
pub enum EntryState {
    /// No entry.
    Missing,
    /// A whole, verified entry.
    Valid(Box<Meta>),
    /// An entry that failed verification, with what is wrong.
    Damaged(String),
}

/// A verified entry returned by [`Store::get_or_compute`].
#[derive(Debug)]
pub struct Fetched {
    /// The entry's record.
    pub meta: Meta,
    /// The entry's folder.
    pub dir: PathBuf,
    /// True when the entry already existed (nothing was computed).
    pub cached: bool,
    /// A damaged entry that was found and replaced, if any.
    pub repaired: Option<String>,
}

/// An open store.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by cotune.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

impl Store {
    /// Opens (creating if needed) the store at `root`.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        let non_empty = fs::read_dir(root)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        if non_empty && !root.join("CACHEDIR.TAG").exists() {
            return Err(StoreError::NotAStore(root.to_owned()));
        }
        // The tag goes in first: another process opening the store at the same moment must
        // never see its folders without it.
        io(root, fs::create_dir_all(root))?;
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            io(&tag, fs::write(&tag, CACHEDIR_TAG))?;
        }
        for sub in ["objects", "tmp", "locks", "quarantine"] {
            let p = root.join(sub);
            io(&p, fs::create_dir_all(&p))?;
        }
        Ok(Store {
            root: root.to_owned(),
        })
    }

    /// The store's root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Folder of an entry (it may not exist).
    pub fn entry_dir(&self, key: &AnyKey) -> PathBuf {
        let hex = key.hex();
        self.root.join("objects").join(&hex[..2]).join(hex)
    }

    /// Reads and verifies an entry.
    pub fn read(&self, key: &AnyKey) -> EntryState {
        read_entry(&self.entry_dir(key), Some(key))
    }

    /// True when a verified entry exists (used by `plan`).
    pub fn contains(&self, key: &AnyKey) -> bool {
        matches!(self.read(key), EntryState::Valid(_))
    }

    /// Returns the entry for `key`, computing it with `compute` when it is missing or damaged.
    ///
    /// `compute` receives an empty folder for its artifacts and returns the entry's record
    /// (artifact digests and the key are filled in here). Its error is returned as is and
    /// nothing is stored: a failed trial is never cached.
    pub fn get_or_compute<E>(
        &self,
        key: &AnyKey,
        compute: impl FnOnce(&Path) -> Result<Meta, E>,
    ) -> Result<Result<Fetched, E>, StoreError> {
        let dir = self.entry_dir(key);
        let mut repaired = None;
        match read_entry(&dir, Some(key)) {
            EntryState::Valid(meta) => {
                return Ok(Ok(Fetched {
                    meta: *meta,
                    dir,
                    cached: true,
                    repaired,
                }))
            }
            EntryState::Damaged(why) => {
                self.quarantine(key, &dir)?;
                repaired = Some(why);
            }
            EntryState::Missing => {}
        }
        let _lock = KeyLock::acquire(&self.root.join("locks"), key)?;
        // Another process may have finished this key while we waited for the lock.
        if let EntryState::Valid(meta) = read_entry(&dir, Some(key)) {
            return Ok(Ok(Fetched {
                meta: *meta,
                dir,
                cached: true,
                repaired,
            }));
        }
        let tmp =
            self.root
                .join("tmp")
                .join(format!("{}.{}.{}", key.hex(), std::process::id(), nanos()));
        io(&tmp, fs::create_dir_all(&tmp))?;
        let mut meta = match compute(&tmp) {
            Ok(meta) => meta,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Ok(Err(e));
            }
        };
        meta.key = key.hex();
        meta.artifacts = hash_artifacts(&tmp)?;
        write_synced(&tmp.join("meta.json"), meta.to_json().as_bytes())?;
        sync_dir(&tmp)?;
        let parent = dir.parent().expect("entry folders have a parent");
        io(parent, fs::create_dir_all(parent))?;
        if dir.exists() {
            // Only a damaged entry that reappeared can be here; never overwrite in place.
            self.quarantine(key, &dir)?;
        }
        io(&dir, fs::rename(&tmp, &dir))?;
        sync_dir(parent)?;
        Ok(Ok(Fetched {
            meta,
            dir,
            cached: false,
            repaired,
        }))
    }

    fn quarantine(&self, key: &AnyKey, dir: &Path) -> Result<(), StoreError> {
        let to = self
            .root
            .join("quarantine")
            .join(format!("{}.{}", key.hex(), nanos()));
        match fs::rename(dir, &to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                path: dir.to_owned(),
                source: e,
            }),
        }
    }

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
            removed.1 += dir_size(&p);
            match fs::remove_dir_all(&p) {
                Ok(()) => removed.0 += 1,
                // Another sweeper got there first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Io { path: p, source: e }),
            }
        }
        Ok(removed)
    }

    /// Removes unfinished writes of dead processes and quarantined entries; with `keep`, also
    /// every entry whose key is not in it. Returns (folders removed, bytes freed).
    pub fn gc(
        &self,
        keep: Option<&std::collections::BTreeSet<AnyKey>>,
    ) -> Result<(usize, u64), StoreError> {
        let (mut removed, mut bytes) = self.sweep_tmp()?;
        let mut drop_dir = |p: &Path| -> Result<(), StoreError> {
            bytes += dir_size(p);
            io(p, fs::remove_dir_all(p))?;
            removed += 1;
            Ok(())
        };
        let q = self.root.join("quarantine");
        for e in io(&q, fs::read_dir(&q))? {
            drop_dir(&io(&q, e)?.path())?;
        }
        if let Some(keep) = keep {
            for (key, path) in self.entries()? {
                if !keep.contains(&key) {
                    drop_dir(&path)?;
                }
            }
        }
        Ok((removed, bytes))
    }
}

/// Reads and verifies one entry folder.
pub fn read_entry(dir: &Path, key: Option<&AnyKey>) -> EntryState {
    let text = match fs::read_to_string(dir.join("meta.json")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => {
            return EntryState::Missing
        }
        Err(e) => return EntryState::Damaged(format!("meta.json unreadable: {e}")),
    };
    let Some(meta) = Meta::from_json(&text) else {
        return EntryState::Damaged("meta.json is not a complete entry record".into());
    };
    if let Some(key) = key {
        if meta.key != key.hex() {
            return EntryState::Damaged(format!("meta.json names key {} instead", meta.key));
        }
    }
    for (name, digest) in &meta.artifacts {
        match hash_file(&dir.join(name)) {
            Ok(d) if &d == digest => {}
            Ok(_) => {
                return EntryState::Damaged(format!(
                    "artifact {name} does not match its recorded blake3"
                ))
            }
            Err(e) => return EntryState::Damaged(format!("artifact {name} unreadable: {e}")),
        }
    }
    EntryState::Valid(Box::new(meta))
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut h = blake3::Hasher::new();
    h.update_reader(fs::File::open(path)?)?;
    Ok(h.finalize().to_hex().to_string())
}

fn hash_artifacts(dir: &Path) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
    let mut out = std::collections::BTreeMap::new();
    for e in io(dir, fs::read_dir(dir))? {
        let p = io(dir, e)?.path();
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        if name == "meta.json" || !p.is_file() {
            continue;
        }
        let f = io(&p, fs::File::open(&p))?;
        io(&p, f.sync_all())?;
        out.insert(name, io(&p, hash_file(&p))?);
    }
    Ok(out)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = io(path, fs::File::create(path))?;
    io(path, f.write_all(bytes))?;
    io(path, f.sync_all())
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let f = io(dir, fs::File::open(dir))?;
    io(dir, f.sync_all())
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

/// Nanoseconds since the Unix epoch (unique-enough suffixes).
pub fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
