//! The content-addressed store: one folder per key under `objects/<2 hex>/<key>/`, holding
//! `meta.json` and the stage's artifacts.
//!
//! An entry is written into `tmp/`, its artifacts hashed into `meta.json`, synced, and renamed
//! into place: a complete entry is never rewritten, and an interrupted write leaves only a
//! folder in `tmp/` (removed by the next run, [`Store::sweep_tmp`], or `gc`). Reads verify the recorded digests; a damaged entry is
//! moved to `quarantine/` and recomputed, never used. A per-key file lock makes two processes
//! sharing a store wait for each other instead of computing one key twice.

mod clock;
mod entry;
mod error;
mod id;
mod lock;
mod meta;
mod objects;
mod sweep;

pub use clock::{nanos, unix_now};
pub use entry::{hash_file, read_entry, EntryState, Fetched};
pub use error::StoreError;
pub use id::STORE_ID_FILE;
pub use lock::{KeyLock, MeasureGuard, MeasureLock, RunLock};
pub use meta::{value_from_json, value_to_json, Meta, Provenance, META_FORMAT};
pub use objects::Store;
