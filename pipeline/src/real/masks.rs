//! `masks.bin`: the keep-masks of a pruned model, one per layer (absent for layers kept dense),
//! so that evaluation re-packs each layer exactly as pruned.
//!
//! Format: magic `COTUNEM1`, u64 layer count, then per layer a u8 flag (0 = dense) and, when 1,
//! u64 rows, u64 cols and one byte per weight (row-major, 1 = kept). Little endian.

use crate::stage::StageError;
use kernels::Mask;
use std::path::Path;

/// The artifact's file name in a prune entry.
pub const MASKS: &str = "masks.bin";

const MAGIC: &[u8; 8] = b"COTUNEM1";

/// Writes the masks.
pub fn save(path: &Path, masks: &[Option<Mask>]) -> Result<(), StageError> {
    let mut out = MAGIC.to_vec();
    out.extend((masks.len() as u64).to_le_bytes());
    for m in masks {
        match m {
            None => out.push(0),
            Some(m) => {
                out.push(1);
                out.extend((m.rows() as u64).to_le_bytes());
                out.extend((m.cols() as u64).to_le_bytes());
                out.extend(m.as_slice().iter().map(|&k| u8::from(k)));
            }
        }
    }
    std::fs::write(path, out).map_err(StageError::io(path))
}

/// Reads masks written by [`save`].
pub fn load(path: &Path) -> Result<Vec<Option<Mask>>, StageError> {
    let bytes = std::fs::read(path).map_err(StageError::io(path))?;
    let bad = |what: &str| StageError::Artifact {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], StageError> {
        let s = bytes.get(at..at + n).ok_or_else(|| bad("truncated"))?;
        at += n;
        Ok(s)
    };
    if take(8)? != MAGIC {
        return Err(bad("not a cotune masks file"));
    }
    let u64_of = |s: &[u8]| {
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        u64::from_le_bytes(b)
    };
    let n = u64_of(take(8)?) as usize;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        match take(1)?[0] {
            0 => out.push(None),
            1 => {
                let rows = u64_of(take(8)?) as usize;
                let cols = u64_of(take(8)?) as usize;
                let keep = take(rows.checked_mul(cols).ok_or_else(|| bad("bad shape"))?)?
                    .iter()
                    .map(|&b| b == 1)
                    .collect();
                out.push(Some(
                    Mask::new(rows, cols, keep).map_err(|e| bad(&e.to_string()))?,
                ));
            }
            _ => return Err(bad("bad layer flag")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.bin");
        let m = Mask::new(2, 3, vec![true, false, true, false, false, true]).unwrap();
        save(&p, &[Some(m.clone()), None]).unwrap();
        let back = load(&p).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].as_ref().unwrap().as_slice(), m.as_slice());
        assert!(back[1].is_none());
        std::fs::write(&p, &std::fs::read(&p).unwrap()[..20]).unwrap();
        assert!(load(&p).is_err(), "a truncated file is an error");
    }
}
