//! How a network's layers connect ([`Arch`]): a chain (MLP, CNN: each layer feeds the next,
//! ReLU between) or a pre-LayerNorm transformer encoder ([`TransformerArch`]), whose GEMM
//! layers are listed in forward order (a topological order: a layer's inputs depend only on
//! the layers before it) and whose other tensors are [`Param`]s.

use serde::{Deserialize, Serialize};

use crate::StageError;

/// How the layers of a [`super::Weights`] connect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "arch", rename_all = "lowercase")]
pub enum Arch {
    /// Each layer feeds the next; ReLU between layers, none after the last; a convolution's
    /// output is flattened in (channel, row, column) order before a linear layer.
    #[default]
    Chain,
    /// A transformer encoder.
    Transformer(TransformerArch),
}

/// A ViT-style encoder: patch embedding, a class token and learned positions, `blocks` blocks
/// of `x += O·attn(LN₁ x)` then `x += Down·gelu(Up·LN₂ x)`, a final LayerNorm and a linear head
/// on the class token.
///
/// GEMM layers in forward order: `embed`, then per block `block.{b}.attn.{q,k,v,o}` and
/// `block.{b}.mlp.{up,down}`, then `head`. Parameters: `cls` (`d_model`), `pos`
/// (`tokens × d_model`), per block `block.{b}.ln{1,2}.{weight,bias}`, then `ln_f.{weight,bias}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformerArch {
    /// Encoder blocks.
    pub blocks: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads (`d_model` is a multiple of it).
    pub heads: usize,
    /// Hidden width of each block's MLP.
    pub d_ff: usize,
    /// Side of a square image patch, or input features per token for non-image data.
    pub patch: usize,
    /// Patch tokens per sample (the class token comes on top: [`TransformerArch::tokens`]).
    pub patches: usize,
    /// Input features per patch (`channels · patch²` for an image).
    pub patch_dim: usize,
}

/// A tensor of a network that is not a GEMM layer's weight (embeddings, norms).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Stable name (the safetensors tensor name).
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values, row-major in `shape`.
    pub values: Vec<f32>,
}

/// What a parameter is initialised to.
pub(crate) enum ParamInit {
    /// All ones (a LayerNorm gain).
    Ones,
    /// All zeros (a LayerNorm shift).
    Zeros,
    /// Uniform in ±0.02 (embeddings).
    Small,
}

/// LayerNorm's ε.
pub const LAYER_NORM_EPS: f64 = 1e-5;

/// The GEMMs of one block, in forward order, with their names.
pub const BLOCK_LAYERS: [&str; 6] = ["attn.q", "attn.k", "attn.v", "attn.o", "mlp.up", "mlp.down"];

/// The patches per sample and the values per patch of square patches of side `patch` over
/// inputs of `n_features` (an image when `image_shape` is known), or why they do not tile.
pub fn patch_grid(
    patch: usize,
    n_features: usize,
    image_shape: Option<(usize, usize, usize)>,
) -> Result<(usize, usize), String> {
    match image_shape {
        Some((c, h, w)) => {
            if patch == 0 || !h.is_multiple_of(patch) || !w.is_multiple_of(patch) {
                return Err(format!(
                    "patch = {patch} does not tile the {h}x{w} images of the data set"
                ));
            }
            Ok(((h / patch) * (w / patch), c * patch * patch))
        }
        None => {
            if patch == 0 || !n_features.is_multiple_of(patch) {
                return Err(format!(
                    "patch = {patch} features per token does not divide the data set's {n_features} features"
                ));
            }
            Ok((n_features / patch, patch))
        }
    }
}

impl TransformerArch {
    /// The architecture of a transformer on inputs of `n_features` (an image when
    /// `image_shape` is known) with square patches of side `patch`.
    pub fn new(
        blocks: usize,
        d_model: usize,
        heads: usize,
        d_ff: usize,
        patch: usize,
        n_features: usize,
        image_shape: Option<(usize, usize, usize)>,
    ) -> Result<TransformerArch, StageError> {
        let bad = |m: String| Err(StageError::InvalidConfig(format!("model: {m}")));
        if blocks == 0 || d_model == 0 || heads == 0 || d_ff == 0 || patch == 0 {
            return bad("a transformer needs layers, d_model, heads, d_ff and patch >= 1".into());
        }
        if !d_model.is_multiple_of(heads) {
            return bad(format!(
                "d_model = {d_model} is not divisible by heads = {heads}"
            ));
        }
        let (patches, patch_dim) = patch_grid(patch, n_features, image_shape)
            .map_err(|m| StageError::InvalidConfig(format!("model: {m}")))?;
        Ok(TransformerArch {
            blocks,
            d_model,
            heads,
            d_ff,
            patch,
            patches,
            patch_dim,
        })
    }

    /// Tokens per sample: the patches and the class token (first).
    pub fn tokens(&self) -> usize {
        self.patches + 1
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }

    /// Index of the layer `op` (an index into [`BLOCK_LAYERS`]) of block `b`.
    pub fn block_layer(&self, b: usize, op: usize) -> usize {
        1 + BLOCK_LAYERS.len() * b + op
    }

    /// Index of the classification head.
    pub fn head(&self) -> usize {
        1 + BLOCK_LAYERS.len() * self.blocks
    }

    /// Layer names and `[out, in]` shapes in forward order.
    pub(crate) fn layer_shapes(&self, n_classes: usize) -> Vec<(String, Vec<usize>)> {
        let d = self.d_model;
        let mut out = vec![("embed".to_string(), vec![d, self.patch_dim])];
        for b in 0..self.blocks {
            for (op, shape) in BLOCK_LAYERS.iter().zip([
                [d, d],
                [d, d],
                [d, d],
                [d, d],
                [self.d_ff, d],
                [d, self.d_ff],
            ]) {
                out.push((format!("block.{b}.{op}"), shape.to_vec()));
            }
        }
        out.push(("head".to_string(), vec![n_classes, d]));
        out
    }

    /// Parameter names, shapes and initialisations, in the order of [`Self::param`].
    pub(crate) fn param_shapes(&self) -> Vec<(String, Vec<usize>, ParamInit)> {
        let d = self.d_model;
        let mut out = vec![
            ("cls".to_string(), vec![d], ParamInit::Small),
            ("pos".to_string(), vec![self.tokens(), d], ParamInit::Small),
        ];
        let mut norm = |name: String| {
            out.push((format!("{name}.weight"), vec![d], ParamInit::Ones));
            out.push((format!("{name}.bias"), vec![d], ParamInit::Zeros));
        };
        for b in 0..self.blocks {
            norm(format!("block.{b}.ln1"));
            norm(format!("block.{b}.ln2"));
        }
        norm("ln_f".to_string());
        out
    }

    /// Index into the parameters of `cls`, `pos`, a block's norms or the final norm.
    pub fn param(&self, which: ParamRef) -> usize {
        match which {
            ParamRef::Cls => 0,
            ParamRef::Pos => 1,
            ParamRef::Norm1(b) => 2 + 4 * b,
            ParamRef::Norm2(b) => 4 + 4 * b,
            ParamRef::NormFinal => 2 + 4 * self.blocks,
        }
    }

    /// For each element of the `patches × patch_dim` patch matrix of a sample, the index of
    /// the input feature it holds: patches in row-major order over the image, each in
    /// (channel, row, column) order; for non-image data, consecutive runs of features.
    pub fn patch_index(&self, image_shape: Option<(usize, usize, usize)>) -> Vec<usize> {
        let Some((c, h, w)) = image_shape else {
            return (0..self.patches * self.patch_dim).collect();
        };
        let p = self.patch;
        let mut idx = Vec::with_capacity(self.patches * self.patch_dim);
        for py in 0..h / p {
            for px in 0..w / p {
                for ch in 0..c {
                    for y in 0..p {
                        for x in 0..p {
                            idx.push(ch * h * w + (py * p + y) * w + px * p + x);
                        }
                    }
                }
            }
        }
        idx
    }
}

/// A named parameter of a [`TransformerArch`]; a norm's weight is at the index, its bias next.
#[derive(Clone, Copy, Debug)]
pub enum ParamRef {
    /// The class token.
    Cls,
    /// The learned positions.
    Pos,
    /// Block `b`'s pre-attention norm.
    Norm1(usize),
    /// Block `b`'s pre-MLP norm.
    Norm2(usize),
    /// The final norm.
    NormFinal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_tile_the_image_and_indices_are_a_permutation() {
        let t = TransformerArch::new(2, 8, 2, 16, 2, 2 * 4 * 6, Some((2, 4, 6))).unwrap();
        assert_eq!((t.patches, t.patch_dim, t.tokens()), (6, 8, 7));
        let mut idx = t.patch_index(Some((2, 4, 6)));
        // The first patch: channel 0 rows 0-1 columns 0-1, then channel 1.
        assert_eq!(&idx[..8], &[0, 1, 6, 7, 24, 25, 30, 31]);
        idx.sort();
        assert_eq!(idx, (0..48).collect::<Vec<_>>());
        assert_eq!(t.head(), 13);
        assert_eq!(t.layer_shapes(10).len(), 14);
        assert_eq!(t.param_shapes().len(), 2 + 4 * 2 + 2);
        assert_eq!(t.param(ParamRef::NormFinal), 10);
        assert!(TransformerArch::new(1, 10, 4, 8, 1, 4, None).is_err());
        assert!(TransformerArch::new(1, 8, 4, 8, 3, 64, Some((1, 8, 8))).is_err());
    }
}
