//! `cotune store export KEY --to DIR`: one store entry, verified, in a folder of the user's: its
//! artifacts as stored (a pruned model's `weights.safetensors` loads in PyTorch as it is), its
//! masks as safetensors ([`masks::export`]), and `entry.json`, its record in plain JSON.

use super::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::key::{AnyKey, CanonValue};
use crate::real::masks;
use crate::store::{read_entry, EntryState, Meta, Store};
use results::Value;
use serde_json::{json, Map, Value as Json};
use std::path::{Path, PathBuf};

/// The record file written beside the artifacts.
const ENTRY_JSON: &str = "entry.json";

/// Exports the entry whose key starts with `key` from `entries` (the store's) to `to`; returns
/// the exit code: 2 for a key that names no single entry or a `--to` that is not a new or
/// empty folder outside the store (or cannot be made), 1 for a damaged entry or a failed write
/// (which leaves `to` as it was).
pub fn export(store: &Store, entries: &[(AnyKey, PathBuf)], key: &str, to: &Path) -> u8 {
    let prefix = key.trim().to_ascii_lowercase();
    if !(6..=64).contains(&prefix.len()) || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        eprintln!(
            "error: `{key}` is not a key: expected 6 to 64 of its hex digits (a table's `key`, \
             `prune_key` or `train_key` column, or `cotune store ls`)"
        );
        return EXIT_USAGE;
    }
    let found: Vec<&(AnyKey, PathBuf)> = entries
        .iter()
        .filter(|(k, _)| k.hex().starts_with(&prefix))
        .collect();
    let (k, dir) = match found.as_slice() {
        [one] => *one,
        [] => {
            eprintln!(
                "error: no entry of the store {} has a key starting with {prefix} (the store \
                 the run used: --store or COTUNE_STORE)",
                store.root().display()
            );
            return EXIT_USAGE;
        }
        many => {
            eprintln!(
                "error: {} entries have keys starting with {prefix}; give more digits:",
                many.len()
            );
            for (k, d) in many.iter().take(10) {
                eprintln!("  {} {}", k.hex(), stage_of(d));
            }
            return EXIT_USAGE;
        }
    };
    let staged = check_destination(to, store.root()).and_then(|()| staging(to));
    let stage_dir = match staged {
        Ok(d) => d,
        Err(why) => {
            eprintln!("error: --to {}: {why}", to.display());
            return EXIT_USAGE;
        }
    };
    // Written aside and put in place once whole: a failed export leaves `to` as it was.
    let code = export_into(store, k, dir, &stage_dir, to);
    if code != EXIT_OK {
        let _ = std::fs::remove_dir_all(&stage_dir);
    }
    code
}

/// Exports entry `k` (stored in `dir`) into `stage_dir`, then puts it in place at `to`.
fn export_into(store: &Store, k: &AnyKey, dir: &Path, stage_dir: &Path, to: &Path) -> u8 {
    let meta = match read_entry(dir, Some(k)) {
        EntryState::Valid(m) => m,
        EntryState::Damaged(why) => {
            eprintln!(
                "error: entry {} is damaged ({why}): the next `cotune run` that needs it \
                 recomputes it",
                k.short()
            );
            return EXIT_FAILED;
        }
        EntryState::Missing => {
            eprintln!("error: entry {} was removed meanwhile", k.short());
            return EXIT_FAILED;
        }
    };
    let inputs = inputs(store, &meta);
    let written = write(dir, &meta, &inputs, stage_dir).and_then(|files| {
        put_in_place(stage_dir, to)
            .map(|()| files)
            .map_err(|e| format!("moving the export into place: {e}"))
    });
    match written {
        Ok(files) => {
            say!(
                "exported {} entry {} to {}: {}",
                meta.stage,
                k.short(),
                to.display(),
                files.join(", ")
            );
            if !meta.artifacts.keys().any(|a| a.ends_with(".safetensors")) {
                for (input, stage) in &inputs {
                    say!("  its input: {stage} {input}");
                }
            }
            EXIT_OK
        }
        Err(why) => {
            eprintln!(
                "error: exporting entry {} to {}: {why}",
                k.short(),
                to.display()
            );
            EXIT_FAILED
        }
    }
}

/// `to` must be a new or empty folder (an export never overwrites a file) outside the store
/// (whose folders `gc` and recomputed entries replace).
fn check_destination(to: &Path, store: &Path) -> Result<(), String> {
    // The deepest existing folder of `to`, resolved, says where it would be.
    let existing = to
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("."));
    let (Ok(at), Ok(root)) = (existing.canonicalize(), store.canonicalize()) else {
        return Err("cannot resolve the folder or the store".into());
    };
    if at.starts_with(&root) {
        return Err(format!(
            "inside the store {}: export to a folder of your own",
            store.display()
        ));
    }
    if std::fs::symlink_metadata(to).is_ok() && !to.exists() {
        return Err("a link to nothing".into());
    }
    match std::fs::read_dir(to) {
        Ok(mut d) => match d.next() {
            None => Ok(()),
            Some(_) => Err("not empty: an export writes into a new or empty folder".into()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if to.exists() && !to.is_dir() => Err(format!("not a folder ({e})")),
        Err(e) => Err(e.to_string()),
    }
}

/// A new folder for the export to be written into before it is put in place
/// ([`put_in_place`]): inside `to` where that is an existing (empty) folder, so that it stays
/// the folder it was (a link, a mount point, `.`, its permissions); else beside `to`, its
/// parents created.
fn staging(to: &Path) -> Result<PathBuf, String> {
    let hidden = format!(".export-{}", std::process::id());
    if to.is_dir() {
        let dir = to.join(hidden);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot write in it: {e}"))?;
        return Ok(dir);
    }
    let (Some(parent), Some(name)) = (to.parent(), to.file_name()) else {
        return Err("names no folder".into());
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let dir = parent.join(format!(".{}{hidden}", name.to_string_lossy()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot write in {}: {e}", parent.display()))?;
    Ok(dir)
}

/// Puts a whole export in place: its files moved up into `to` where it was staged inside it,
/// else the staging folder renamed to `to`.
fn put_in_place(stage_dir: &Path, to: &Path) -> Result<(), String> {
    let inside = to.is_dir() && stage_dir.parent().is_some_and(|p| p == to);
    if !inside {
        return std::fs::rename(stage_dir, to).map_err(|e| e.to_string());
    }
    for entry in std::fs::read_dir(stage_dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        std::fs::rename(entry.path(), to.join(entry.file_name())).map_err(|e| e.to_string())?;
    }
    std::fs::remove_dir(stage_dir).map_err(|e| e.to_string())
}

/// Copies the artifacts (each checked against its recorded blake3 once copied), the masks as
/// safetensors, and the record; returns the files written.
fn write(
    dir: &Path,
    meta: &Meta,
    inputs: &[(String, String)],
    to: &Path,
) -> Result<Vec<String>, String> {
    let mut files = vec![];
    for (name, digest) in &meta.artifacts {
        let dest = to.join(name);
        std::fs::copy(dir.join(name), &dest).map_err(|e| format!("{name}: {e}"))?;
        if crate::store::hash_file(&dest).map_err(|e| format!("{name}: {e}"))? != *digest {
            return Err(format!("{name} changed while it was copied"));
        }
        files.push(name.clone());
    }
    let mut record = record(meta, inputs);
    if meta.artifacts.contains_key(masks::MASKS) {
        match masks::export(dir, &meta.metrics, to).map_err(|e| e.to_string())? {
            Some(m) => {
                let n = m.masks.len();
                let s = if n == 1 { "" } else { "s" };
                files.push(format!("{} ({n} mask{s})", masks::MASKS_SAFETENSORS));
                record["masks"] = json!({
                    "file": masks::MASKS_SAFETENSORS,
                    "tensors": m.masks,
                    "dense": m.dense,
                });
            }
            None => say!(
                "note: {}'s layers could not be named, so it is exported only as stored",
                masks::MASKS
            ),
        }
    }
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(to.join(ENTRY_JSON), text + "\n").map_err(|e| format!("{ENTRY_JSON}: {e}"))?;
    files.push(ENTRY_JSON.to_string());
    Ok(files)
}

/// The record in plain JSON, with its inputs' stages: floats as numbers (non-finite ones as
/// strings), digests as hex.
fn record(meta: &Meta, inputs: &[(String, String)]) -> Json {
    let config: Map<String, Json> = meta
        .config
        .fields()
        .iter()
        .map(|(k, v)| (k.clone(), canon(v)))
        .collect();
    let row = |r: &results::Row| -> Json {
        Json::Object(r.iter().map(|(k, v)| (k.clone(), cell(v))).collect())
    };
    json!({
        "key": meta.key,
        "stage": meta.stage,
        "version": meta.version,
        "inputs": inputs
            .iter()
            .map(|(key, stage)| json!({ "key": key, "stage": stage }))
            .collect::<Vec<_>>(),
        "config": config,
        "metrics": row(&meta.metrics),
        "rows": meta.rows.iter().map(row).collect::<Vec<_>>(),
        "artifacts": meta.artifacts,
        "provenance": {
            "host": meta.provenance.host,
            "started_at": meta.provenance.started_at,
            "duration_s": meta.provenance.duration_s,
            "cotune_version": meta.provenance.cotune_version,
        },
    })
}

/// The entry's inputs with their stages (`?` where an input is no longer in the store).
fn inputs(store: &Store, meta: &Meta) -> Vec<(String, String)> {
    meta.inputs
        .iter()
        .map(|hex| {
            let stage = AnyKey::from_hex(hex)
                .map_or_else(|| "?".to_string(), |k| stage_of(&store.entry_dir(&k)));
            (hex.clone(), stage)
        })
        .collect()
}

/// The stage an entry folder's record names, unverified (`?` if it has none).
fn stage_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("meta.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Json>(&t).ok())
        .and_then(|j| j.get("stage")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn float(x: f64) -> Json {
    if x.is_finite() {
        json!(x)
    } else {
        Json::String(format!("{x}"))
    }
}

fn cell(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::I64(i) => json!(i),
        Value::F64(x) => float(*x),
        Value::Str(s) => json!(s),
        Value::ListF64(xs) => Json::Array(xs.iter().map(|&x| float(x)).collect()),
        Value::ListStr(xs) => json!(xs),
    }
}

fn canon(v: &CanonValue) -> Json {
    match v {
        CanonValue::U64(u) => json!(u),
        CanonValue::I64(i) => json!(i),
        CanonValue::F64Bits(b) => float(f64::from_bits(*b)),
        CanonValue::Bool(b) => json!(b),
        CanonValue::Str(s) => json!(s),
        CanonValue::Bytes(b) => json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        CanonValue::List(xs) => Json::Array(xs.iter().map(canon).collect()),
    }
}
