//! [`Weights`] on disk (safetensors, with the layer order and kinds, and a transformer's
//! architecture and parameter names, in the header metadata) and its digest: blake3 over an
//! explicit encoding of names, kinds, shapes and value bytes.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};

use super::{Arch, Layer, LayerKind, Param, Weights};
use crate::StageError;

/// blake3 digest of a [`Weights`]: equal digests mean bit-identical weights and architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WeightsDigest(pub [u8; 32]);

impl fmt::Display for WeightsDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Layer description kept in the safetensors header (`cotune.layers`).
#[derive(Serialize, Deserialize)]
struct LayerMeta {
    name: String,
    #[serde(flatten)]
    kind: LayerKind,
}

const FORMAT: &str = "cotune-weights-v1";

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

impl Weights {
    /// The digest: blake3 over a versioned, length-prefixed encoding of the image shape and of
    /// every layer (name, kind, shape, weight bytes, bias bytes) in forward order; for an
    /// architecture other than a chain, then its JSON and every parameter (name, shape, bytes).
    /// A chain's encoding is the one it had before transformers existed, so its digests hold.
    pub fn digest(&self) -> WeightsDigest {
        let mut h = blake3::Hasher::new();
        let u = |h: &mut blake3::Hasher, v: usize| {
            h.update(&(v as u64).to_le_bytes());
        };
        h.update(FORMAT.as_bytes());
        match self.image_shape {
            None => u(&mut h, 0),
            Some((c, y, x)) => [1, c, y, x].into_iter().for_each(|v| u(&mut h, v)),
        }
        u(&mut h, self.layers.len());
        for l in &self.layers {
            u(&mut h, l.name.len());
            h.update(l.name.as_bytes());
            match l.kind {
                LayerKind::Linear => u(&mut h, 0),
                LayerKind::Conv2d { padding, pool } => [1, padding, pool as usize]
                    .into_iter()
                    .for_each(|v| u(&mut h, v)),
            }
            u(&mut h, l.shape.len());
            l.shape.iter().for_each(|&d| u(&mut h, d));
            u(&mut h, l.weight.len());
            h.update(&le_bytes(&l.weight));
            u(&mut h, l.bias.len());
            h.update(&le_bytes(&l.bias));
        }
        if self.arch != Arch::Chain {
            let arch = serde_json::to_string(&self.arch).expect("plain data serialises");
            u(&mut h, arch.len());
            h.update(arch.as_bytes());
            u(&mut h, self.params.len());
            for p in &self.params {
                u(&mut h, p.name.len());
                h.update(p.name.as_bytes());
                u(&mut h, p.shape.len());
                p.shape.iter().for_each(|&d| u(&mut h, d));
                u(&mut h, p.values.len());
                h.update(&le_bytes(&p.values));
            }
        }
        WeightsDigest(*h.finalize().as_bytes())
    }

    /// Serialises to safetensors bytes: `NAME.weight` and `NAME.bias` as F32 and the parameters
    /// under their names; the layer order, kinds and image shape (and, for an architecture
    /// other than a chain, its JSON and the parameter order) as JSON in the header metadata.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, StageError> {
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .layers
            .iter()
            .flat_map(|l| {
                [
                    (
                        format!("{}.weight", l.name),
                        l.shape.clone(),
                        le_bytes(&l.weight),
                    ),
                    (
                        format!("{}.bias", l.name),
                        vec![l.bias.len()],
                        le_bytes(&l.bias),
                    ),
                ]
            })
            .chain(
                self.params
                    .iter()
                    .map(|p| (p.name.clone(), p.shape.clone(), le_bytes(&p.values))),
            )
            .collect();
        let views = bytes
            .iter()
            .map(|(n, s, b)| Ok((n.clone(), TensorView::new(Dtype::F32, s.clone(), b)?)))
            .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
            .map_err(|e| {
                StageError::InvalidConfig(format!("weights do not match their shapes: {e}"))
            })?;
        let metas: Vec<LayerMeta> = self
            .layers
            .iter()
            .map(|l| LayerMeta {
                name: l.name.clone(),
                kind: l.kind.clone(),
            })
            .collect();
        let mut meta = HashMap::from([
            ("cotune.format".to_string(), FORMAT.to_string()),
            (
                "cotune.layers".to_string(),
                serde_json::to_string(&metas).expect("plain data serialises"),
            ),
            (
                "cotune.image_shape".to_string(),
                serde_json::to_string(&self.image_shape).expect("plain data serialises"),
            ),
        ]);
        if self.arch != Arch::Chain {
            let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            meta.insert(
                "cotune.arch".into(),
                serde_json::to_string(&self.arch).expect("plain data serialises"),
            );
            meta.insert(
                "cotune.params".into(),
                serde_json::to_string(&names).expect("plain data serialises"),
            );
        }
        safetensors::serialize(views, Some(meta))
            .map_err(|e| StageError::InvalidConfig(format!("weights cannot be serialised: {e}")))
    }

    /// Parses bytes written by [`Weights::to_safetensors`]; `path` only names the source in errors.
    pub fn from_safetensors(bytes: &[u8], path: &Path) -> Result<Weights, StageError> {
        let bad = |what: String| StageError::BadWeights {
            path: path.to_path_buf(),
            what,
        };
        let st = SafeTensors::deserialize(bytes)
            .map_err(|e| bad(format!("not a safetensors file: {e}")))?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| bad(e.to_string()))?;
        let meta = header.metadata().clone().unwrap_or_default();
        if meta.get("cotune.format").map(String::as_str) != Some(FORMAT) {
            return Err(bad(format!(
                "missing or unknown cotune.format (expected {FORMAT})"
            )));
        }
        let field = |k: &str| {
            meta.get(k)
                .ok_or_else(|| bad(format!("missing metadata {k}")))
        };
        let metas: Vec<LayerMeta> = serde_json::from_str(field("cotune.layers")?)
            .map_err(|e| bad(format!("cotune.layers: {e}")))?;
        let image_shape = serde_json::from_str(field("cotune.image_shape")?)
            .map_err(|e| bad(format!("cotune.image_shape: {e}")))?;
        let tensor = |name: String| -> Result<(Vec<usize>, Vec<f32>), StageError> {
            let t = st.tensor(&name).map_err(|e| bad(format!("{name}: {e}")))?;
            if t.dtype() != Dtype::F32 {
                return Err(bad(format!("{name}: dtype {:?}, expected F32", t.dtype())));
            }
            let values = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok((t.shape().to_vec(), values))
        };
        let mut layers = Vec::with_capacity(metas.len());
        for m in metas {
            let (shape, weight) = tensor(format!("{}.weight", m.name))?;
            let (bshape, bias) = tensor(format!("{}.bias", m.name))?;
            let expected_rank = if m.kind == LayerKind::Linear { 2 } else { 4 };
            if shape.len() != expected_rank || bshape != [shape[0]] {
                return Err(bad(format!(
                    "{}: weight shape {shape:?} and bias shape {bshape:?} do not fit",
                    m.name
                )));
            }
            layers.push(Layer {
                name: m.name,
                kind: m.kind,
                shape,
                weight,
                bias,
            });
        }
        let (arch, params) = match meta.get("cotune.arch") {
            None => (Arch::Chain, vec![]),
            Some(a) => {
                let arch: Arch =
                    serde_json::from_str(a).map_err(|e| bad(format!("cotune.arch: {e}")))?;
                let names: Vec<String> = serde_json::from_str(field("cotune.params")?)
                    .map_err(|e| bad(format!("cotune.params: {e}")))?;
                let params = names
                    .into_iter()
                    .map(|name| {
                        let (shape, values) = tensor(name.clone())?;
                        Ok(Param {
                            name,
                            shape,
                            values,
                        })
                    })
                    .collect::<Result<Vec<_>, StageError>>()?;
                (arch, params)
            }
        };
        if let Arch::Transformer(t) = &arch {
            // The architecture must be one `TransformerArch::new` builds for its own inputs.
            let features = match image_shape {
                Some((c, h, w)) => c * h * w,
                None => t.patches * t.patch_dim,
            };
            let rebuilt = super::TransformerArch::new(
                t.blocks,
                t.d_model,
                t.heads,
                t.d_ff,
                t.patch,
                features,
                image_shape,
            );
            if rebuilt.ok().as_ref() != Some(t) {
                return Err(bad(format!(
                    "cotune.arch is not a transformer its inputs allow: {t:?}"
                )));
            }
            let classes = layers.last().map_or(0, Layer::rows);
            let have: Vec<(String, Vec<usize>)> = layers
                .iter()
                .map(|l| (l.name.clone(), l.shape.clone()))
                .chain(params.iter().map(|p| (p.name.clone(), p.shape.clone())))
                .collect();
            let want: Vec<(String, Vec<usize>)> = t
                .layer_shapes(classes)
                .into_iter()
                .chain(t.param_shapes().into_iter().map(|(n, s, _)| (n, s)))
                .collect();
            if have != want {
                return Err(bad(format!(
                    "the tensors do not fit the transformer of cotune.arch: expected {want:?}"
                )));
            }
        }
        Ok(Weights {
            layers,
            image_shape,
            arch,
            params,
        })
    }

    /// Writes safetensors to `path` (through a temporary file renamed into place).
    pub fn save(&self, path: &Path) -> Result<(), StageError> {
        let io = |source| StageError::Io {
            path: path.to_path_buf(),
            source,
        };
        let tmp = path.with_extension("safetensors.tmp");
        std::fs::write(&tmp, self.to_safetensors()?).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a file written by [`Weights::save`].
    pub fn load(path: &Path) -> Result<Weights, StageError> {
        let bytes = std::fs::read(path).map_err(|source| StageError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Weights::from_safetensors(&bytes, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelSpec;

    #[test]
    fn safetensors_round_trip_is_exact_and_digest_sees_every_bit() {
        let cnn = ModelSpec::Cnn {
            channels: vec![2],
            hidden: vec![3],
        };
        let mut w = Weights::init(&cnn, 16, Some((1, 4, 4)), 3, 5).unwrap();
        w.layers[1].weight[0] = -0.0;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.safetensors");
        w.save(&p).unwrap();
        let back = Weights::load(&p).unwrap();
        assert_eq!(back, w);
        assert_eq!(back.digest(), w.digest());
        assert!(back.layers[1].weight[0].is_sign_negative());

        // -0.0 and +0.0 compare equal but are different bits: the digest must tell them apart.
        let mut flipped = w.clone();
        flipped.layers[1].weight[0] = 0.0;
        assert_ne!(flipped.digest(), w.digest());
        assert_eq!(w.digest().to_string().len(), 64);

        std::fs::write(&p, b"garbage").unwrap();
        let e = Weights::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("w.safetensors") && e.contains("not a safetensors file"),
            "{e}"
        );
    }
}
