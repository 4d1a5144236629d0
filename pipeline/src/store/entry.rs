//! One entry folder: reading and verifying it against the digests its `meta.json` records,
//! and the synced writes and hashes that make it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::io;
use super::{Meta, StoreError};
use crate::key::AnyKey;

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

/// A verified entry returned by [`Store::get_or_compute`](super::Store::get_or_compute).
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

/// Reads and verifies one entry folder.
pub fn read_entry(dir: &Path, key: Option<&AnyKey>) -> EntryState {
    let text = match fs::read_to_string(dir.join("meta.json")) {
        Ok(t) => t,
        // No folder, or no bucket folder above it (a stray file there is set aside when the
        // entry is written: `Store::get_or_compute`).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) && !dir.exists() =>
        {
            return EntryState::Missing
        }
        Err(e) => return EntryState::Damaged(format!("meta.json unreadable: {e}")),
    };
    let meta = match Meta::from_json(&text) {
        Ok(meta) => meta,
        Err(why) => return EntryState::Damaged(why),
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

/// The blake3 of a file, hex (as entry records hold them).
pub fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut h = blake3::Hasher::new();
    h.update_reader(fs::File::open(path)?)?;
    Ok(h.finalize().to_hex().to_string())
}

pub(super) fn hash_artifacts(
    dir: &Path,
) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
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

pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = io(path, fs::File::create(path))?;
    io(path, f.write_all(bytes))?;
    io(path, f.sync_all())
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let f = io(dir, fs::File::open(dir))?;
    io(dir, f.sync_all())
}
