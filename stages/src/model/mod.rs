//! Models as plain data: the [`ModelSpec`] of the experiment file, and [`Weights`], the ordered
//! layers of a network with row-major `f32` values. Candle only appears in `net`, which turns
//! weights into trainable variables and back; everything downstream (prune, evaluate) reads
//! [`Weights`].
//!
//! Every layer is a matrix `rows × cols` (`out × in` for a linear layer, `out × in·k·k` for a
//! convolution, the im2col view) followed by a bias; [`Arch`] says how the layers connect (a
//! chain with ReLU between, or a transformer whose other tensors are [`Param`]s). Every layer is
//! a GEMM `W[rows, cols] × X[cols, n]`, with `n` the batch times the layer's tokens per sample
//! ([`Weights::layer_tokens`]: 1 for a linear layer of an MLP, the output positions of a
//! convolution, the sequence length inside a transformer), so every pattern and kernel applies.

mod arch;
mod checkpoint;
mod io;
pub(crate) mod net;
mod spec;
mod transformer;
mod weights;

pub use arch::{patch_grid, Arch, Param, ParamRef, TransformerArch, BLOCK_LAYERS, LAYER_NORM_EPS};
pub use checkpoint::{
    checkpoint_from_bytes, checkpoint_names, glob_matches, read_checkpoint, write_matrices,
    CheckpointTensor,
};
pub use io::WeightsDigest;
pub use spec::{ModelKind, ModelSpec};
pub(crate) use transformer::layer_input as transformer_layer_input;
pub use weights::{Layer, LayerKind, Weights};
