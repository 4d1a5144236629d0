//! `masks.bin`: the keep-masks of a pruned model, one per layer (absent for layers kept dense),
//! so that evaluation re-packs each layer exactly as pruned.
//!
//! Format: magic `COTUNEM1`, u64 layer count, then per layer a u8 flag (0 = dense) and, when 1,
//! u64 rows, u64 cols and one byte per weight (row-major, 1 = kept). Little endian.
//!
//! `cotune store export` also writes them as safetensors ([`export`]), for other tools.

use crate::stage::StageError;
use kernels::Mask;
use results::{Row, Value};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::path::Path;

/// The artifact's file name in a prune entry.
pub const MASKS: &str = "masks.bin";

/// The file [`export`] writes.
pub const MASKS_SAFETENSORS: &str = "masks.safetensors";

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

/// What [`export`] wrote.
#[derive(Debug, PartialEq)]
pub struct Exported {
    /// The mask tensors' names.
    pub masks: Vec<String>,
    /// The tensors left dense (no mask).
    pub dense: Vec<String>,
}

/// Writes the masks of the entry in `entry` to `to/masks.safetensors`: per masked tensor
/// `<tensor>_mask` (BOOL, true = kept; the name PyTorch's `torch.nn.utils.prune` gives the
/// buffer), named and shaped after the entry's weights where it holds them (`<layer>.weight`,
/// a convolution's out × in × kh × kw), else after its `layer_names` (a checkpoint study's
/// tensors, rows × cols as studied: out × in·kh·kw for a convolution). `None` when the masks
/// cannot be named so (nothing is written).
pub fn export(entry: &Path, metrics: &Row, to: &Path) -> Result<Option<Exported>, StageError> {
    let masks = load(&entry.join(MASKS))?;
    let weights = entry.join(super::train::WEIGHTS);
    let tensors: Vec<(String, Vec<usize>)> = if weights.exists() {
        stages::Weights::load(&weights)?
            .layers
            .iter()
            .map(|l| (format!("{}.weight", l.name), l.shape.clone()))
            .collect()
    } else if let Some(Value::ListStr(names)) = metrics.get("layer_names") {
        names.iter().map(|n| (n.clone(), vec![])).collect()
    } else {
        return Ok(None);
    };
    if tensors.len() != masks.len() {
        return Ok(None);
    }
    let mut data = vec![];
    let mut dense = vec![];
    for ((tensor, shape), mask) in tensors.into_iter().zip(&masks) {
        let Some(m) = mask else {
            dense.push(tensor);
            continue;
        };
        let shape = if !shape.is_empty() && shape.iter().product::<usize>() == m.rows() * m.cols() {
            shape
        } else {
            vec![m.rows(), m.cols()]
        };
        let bytes: Vec<u8> = m.as_slice().iter().map(|&k| u8::from(k)).collect();
        data.push((format!("{tensor}_mask"), shape, bytes));
    }
    let path = to.join(MASKS_SAFETENSORS);
    let bad = |e: safetensors::SafeTensorError| StageError::Artifact {
        path: path.clone(),
        what: e.to_string(),
    };
    let views = data
        .iter()
        .map(|(n, s, b)| Ok((n.clone(), TensorView::new(Dtype::BOOL, s.clone(), b)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(bad)?;
    let meta = HashMap::from([("cotune.format".to_string(), "cotune-masks-v1".to_string())]);
    let bytes = safetensors::serialize(views, Some(meta)).map_err(bad)?;
    std::fs::write(&path, bytes).map_err(StageError::io(&path))?;
    Ok(Some(Exported {
        masks: data.into_iter().map(|(n, ..)| n).collect(),
        dense,
    }))
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
