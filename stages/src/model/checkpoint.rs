//! A user's own checkpoint for a layer study: the 2-D tensors of a safetensors file whose names
//! match the given globs, read as `f32` matrices (F32, F16, BF16 and F64 are read; 4-D
//! convolution weights `[out, in, kh, kw]` are taken as their `out × in·kh·kw` im2col view only
//! when the caller says the file holds convolutions). Every failure names the file, and the
//! tensor or glob concerned.

use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::StageError;

/// One matched tensor as a matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointTensor {
    /// The tensor's name in the file.
    pub name: String,
    /// Its shape in the file.
    pub shape: Vec<usize>,
    /// Rows of the matrix (outputs).
    pub rows: usize,
    /// Columns of the matrix (inputs; `in·kh·kw` for a convolution).
    pub cols: usize,
    /// Values, row-major `rows × cols`.
    pub values: Vec<f32>,
}

/// Whether `name` matches `glob`: `*` stands for any run of characters (dots included), `?`
/// for one character, everything else for itself.
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    // at[j]: the glob's first i characters match the name's first j.
    let mut at = vec![false; n.len() + 1];
    at[0] = true;
    for &c in &g {
        let mut next = vec![false; n.len() + 1];
        if c == '*' {
            let mut any = false;
            for j in 0..=n.len() {
                any |= at[j];
                next[j] = any;
            }
        } else {
            for j in 1..=n.len() {
                next[j] = at[j - 1] && (c == '?' || c == n[j - 1]);
            }
        }
        at = next;
    }
    at[n.len()]
}

/// The tensors of the safetensors file at `path` that match any of `globs`, in the order of
/// their names; `conv` accepts 4-D weights as their im2col view.
pub fn read_checkpoint(
    path: &Path,
    globs: &[String],
    conv: bool,
) -> Result<Vec<CheckpointTensor>, StageError> {
    let bytes = std::fs::read(path).map_err(|source| StageError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    checkpoint_from_bytes(&bytes, path, globs, conv)
}

/// The parsed file and its tensor names, sorted; `path` only names the file in errors.
fn parse<'a>(bytes: &'a [u8], path: &Path) -> Result<(SafeTensors<'a>, Vec<String>), StageError> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| StageError::BadWeights {
        path: path.to_path_buf(),
        what: format!("not a readable safetensors file: {e}"),
    })?;
    let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
    names.sort();
    Ok((st, names))
}

/// The tensor names of safetensors `bytes`, sorted; `path` only names the file in errors.
pub fn checkpoint_names(bytes: &[u8], path: &Path) -> Result<Vec<String>, StageError> {
    Ok(parse(bytes, path)?.1)
}

/// [`read_checkpoint`] on the file's bytes.
pub fn checkpoint_from_bytes(
    bytes: &[u8],
    path: &Path,
    globs: &[String],
    conv: bool,
) -> Result<Vec<CheckpointTensor>, StageError> {
    let bad = |what: String| StageError::BadWeights {
        path: path.to_path_buf(),
        what,
    };
    let (st, names) = parse(bytes, path)?;
    for g in globs {
        if !names.iter().any(|n| glob_matches(g, n)) {
            let some: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
            return Err(bad(format!(
                "`{g}` matches no tensor (the file holds {} tensors, such as {some:?})",
                names.len()
            )));
        }
    }
    let mut out = vec![];
    for name in names
        .iter()
        .filter(|n| globs.iter().any(|g| glob_matches(g, n)))
    {
        let t = st.tensor(name).map_err(|e| bad(format!("{name}: {e}")))?;
        let shape = t.shape().to_vec();
        let (rows, cols) = match shape[..] {
            [r, c] => (r, c),
            [o, i, kh, kw] if conv => (o, i * kh * kw),
            [_, _, _, _] => {
                return Err(bad(format!(
                    "{name} has shape {shape:?}: a 4-D convolution weight, but the study does not declare convolutions (conv = true)"
                )))
            }
            _ => {
                return Err(bad(format!(
                    "{name} has shape {shape:?}: a layer study takes 2-D weight matrices"
                )))
            }
        };
        let data = t.data();
        let values: Vec<f32> = match t.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F64 => {
                let wide: Vec<f64> = data
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                // A finite value past f32's range would be read as an infinity.
                if let Some(i) = wide
                    .iter()
                    .position(|v| v.is_finite() && v.abs() > f64::from(f32::MAX))
                {
                    return Err(bad(format!(
                        "{name}: its F64 value {:e} at index {i} is beyond the f32 range (±{:e}) a study computes in",
                        wide[i],
                        f32::MAX
                    )));
                }
                wide.iter().map(|&v| v as f32).collect()
            }
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(bad(format!(
                    "{name}: dtype {other:?} cannot be read (F32, F16, BF16 or F64)"
                )))
            }
        };
        if values.len() != rows * cols {
            return Err(bad(format!(
                "{name}: {} values for shape {shape:?}",
                values.len()
            )));
        }
        out.push(CheckpointTensor {
            name: name.clone(),
            shape,
            rows,
            cols,
            values,
        });
    }
    Ok(out)
}

/// Writes matrices as an F32 safetensors file (through a temporary file renamed into place),
/// each `rows × cols` under its name: what [`read_checkpoint`] reads back exactly.
pub fn write_matrices(path: &Path, tensors: &[CheckpointTensor]) -> Result<(), StageError> {
    let bad = |what: String| StageError::BadWeights {
        path: path.to_path_buf(),
        what,
    };
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|t| {
            let b = t.values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (t.name.clone(), vec![t.rows, t.cols], b)
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(n, s, b)| Ok((n.clone(), TensorView::new(Dtype::F32, s.clone(), b)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|e| bad(format!("tensors do not fit their shapes: {e}")))?;
    let out = safetensors::serialize(views, None::<std::collections::HashMap<String, String>>)
        .map_err(|e| bad(format!("tensors cannot be serialised: {e}")))?;
    let io = |source| StageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("safetensors.tmp");
    std::fs::write(&tmp, out).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::{checkpoint_from_bytes, glob_matches};
    use safetensors::tensor::{Dtype, TensorView};

    /// F64 values are read as f32; a finite one past f32's range is an error naming it (it
    /// was read as an infinity and failed the study as non-finite weights).
    #[test]
    fn f64_values_past_f32_are_named() {
        let file = |values: [f64; 2]| {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let view = TensorView::new(Dtype::F64, vec![1, 2], &bytes).unwrap();
            safetensors::serialize([("w", view)], None).unwrap()
        };
        let path = std::path::Path::new("m.safetensors");
        let read = checkpoint_from_bytes(&file([1.5, -2.0]), path, &["w".into()], false).unwrap();
        assert_eq!(read[0].values, [1.5, -2.0]);
        let e = checkpoint_from_bytes(&file([0.0, -1e300]), path, &["w".into()], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("F64 value -1e300 at index 1"), "{e}");
    }

    #[test]
    fn globs_match_runs_and_single_characters() {
        let q = "encoder.layer.11.attention.self.query.weight";
        assert!(glob_matches(
            "encoder.layer.*.attention.self.query.weight",
            q
        ));
        assert!(glob_matches("*query*", q));
        assert!(glob_matches("encoder.layer.1?.*", q));
        assert!(!glob_matches("encoder.layer.?.*", q));
        assert!(!glob_matches("*.key.weight", q));
        assert!(glob_matches("*", ""));
        assert!(!glob_matches("a", ""));
    }
}
