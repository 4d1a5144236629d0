//! [`Store`]: opening a store, finding an entry's folder, and getting an entry or computing
//! it into `tmp/` and renaming it into place under the key's lock.

use std::fs;
use std::path::{Path, PathBuf};

use super::clock::nanos;
use super::entry::{hash_artifacts, read_entry, sync_dir, write_synced, EntryState, Fetched};
use super::error::io;
use super::{KeyLock, Meta, StoreError};
use crate::key::AnyKey;

/// An open store.
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) root: PathBuf,
}

const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by cotune.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

impl Store {
    /// Opens (creating if needed) the store at `root`.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        if root.exists() && !root.is_dir() {
            return Err(StoreError::NotAStore(root.to_owned()));
        }
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

    /// Checks that this process can write the store (a file in `tmp/` and in `locks/`), so that
    /// a run on a store it may only read fails before it computes anything, not in every
    /// instance.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        for sub in ["tmp", "locks"] {
            let probe =
                self.root
                    .join(sub)
                    .join(format!(".probe.{}.{}", std::process::id(), nanos()));
            io(&probe, fs::write(&probe, b""))?;
            let _ = fs::remove_file(&probe);
        }
        Ok(())
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
        if parent.exists() && !parent.is_dir() {
            // A file where the bucket folder goes holds no entry: a copy goes aside, as damage,
            // and the file goes. Never a rename: writers of other keys in this bucket hold
            // other locks, and one may have put the folder in its place by now (which neither
            // a hard link nor `remove_file` touches).
            let name = parent.file_name().unwrap_or_default().to_string_lossy();
            let to = self
                .root
                .join("quarantine")
                .join(format!("bucket-{name}.{}", nanos()));
            let _ = fs::hard_link(parent, to);
            let _ = fs::remove_file(parent);
        }
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
}
