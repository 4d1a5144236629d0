//! The transformer's forward pass in candle ([`TransformerArch`]), for training, and stopped
//! at a GEMM layer's input for the one-shot methods' calibration ([`layer_input`]).
//!
//! LayerNorm and softmax are written with differentiable tensor ops (the softmax's max is
//! detached: it only shifts the exponent) so that backpropagation reaches every parameter.

use candle_core::{Tensor, D};

use super::arch::{ParamRef, TransformerArch, LAYER_NORM_EPS};
use super::net::Net;
use crate::StageError;

/// Why a forward pass ended early: it reached the layer it was asked to stop at (with that
/// layer's input, `tokens × cols`), or it failed.
pub(crate) enum Halt {
    Input(Tensor),
    Failed(StageError),
}

impl From<candle_core::Error> for Halt {
    fn from(e: candle_core::Error) -> Self {
        Halt::Failed(e.into())
    }
}

impl Halt {
    /// The error of a pass that was not asked to stop.
    pub(crate) fn into_error(self) -> StageError {
        match self {
            Halt::Failed(e) => e,
            Halt::Input(_) => StageError::InvalidConfig("a forward pass stopped early".into()),
        }
    }
}

/// `x Wᵀ + b` for the GEMM layer `i` on a 2-D `x` (`tokens × cols`), or the stop at `i`.
fn linear(net: &Net, i: usize, x: &Tensor, stop: Option<usize>) -> Result<Tensor, Halt> {
    if stop == Some(i) {
        return Err(Halt::Input(x.clone()));
    }
    let l = &net.layers[i];
    Ok(x.matmul(&l.weight.as_tensor().t()?)?
        .broadcast_add(l.bias.as_tensor())?)
}

/// LayerNorm over the last dimension with the parameters at `at` (weight) and `at + 1`.
fn layer_norm(net: &Net, at: usize, x: &Tensor) -> Result<Tensor, Halt> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = centred.broadcast_div(&(var + LAYER_NORM_EPS)?.sqrt()?)?;
    Ok(normed
        .broadcast_mul(net.params[at].as_tensor())?
        .broadcast_add(net.params[at + 1].as_tensor())?)
}

fn softmax_last(x: &Tensor) -> Result<Tensor, Halt> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let e = x.broadcast_sub(&max)?.exp()?;
    Ok(e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?)
}

/// Logits (`samples × classes`) of a batch `x` (`samples × features`), or the input of layer
/// `stop` as `Halt::Input`.
pub(crate) fn forward(
    net: &Net,
    t: &TransformerArch,
    x: &Tensor,
    stop: Option<usize>,
) -> Result<Tensor, Halt> {
    let (n, tokens, d) = (x.dim(0)?, t.tokens(), t.d_model);
    let (heads, dh) = (t.heads, t.head_dim());
    let index = net
        .patch_index
        .as_ref()
        .ok_or_else(|| Halt::Failed(StageError::InvalidConfig("no patch index".into())))?;
    let patches = x
        .index_select(index, 1)?
        .reshape((n * t.patches, t.patch_dim))?;
    let embedded = linear(net, 0, &patches, stop)?.reshape((n, t.patches, d))?;
    let cls = net.params[t.param(ParamRef::Cls)]
        .as_tensor()
        .reshape((1, 1, d))?
        .broadcast_as((n, 1, d))?;
    let pos = net.params[t.param(ParamRef::Pos)].as_tensor();
    let mut h = Tensor::cat(&[&cls, &embedded], 1)?
        .broadcast_add(pos)?
        .reshape((n * tokens, d))?;
    let scale = 1.0 / (dh as f64).sqrt();
    for b in 0..t.blocks {
        // The block's GEMMs in `BLOCK_LAYERS` order: q, k, v, o, up, down.
        let at = |op: usize| t.block_layer(b, op);
        let x1 = layer_norm(net, t.param(ParamRef::Norm1(b)), &h)?;
        // (n·tokens, d) → (n, heads, tokens, dh)
        let split = |y: Tensor| -> Result<Tensor, Halt> {
            Ok(y.reshape((n, tokens, heads, dh))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(linear(net, at(0), &x1, stop)?)?;
        let k = split(linear(net, at(1), &x1, stop)?)?;
        let v = split(linear(net, at(2), &x1, stop)?)?;
        let scores = (q.matmul(&k.transpose(2, 3)?.contiguous()?)? * scale)?;
        let mixed = softmax_last(&scores)?
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((n * tokens, d))?;
        h = (h + linear(net, at(3), &mixed, stop)?)?;
        let x2 = layer_norm(net, t.param(ParamRef::Norm2(b)), &h)?;
        let up = linear(net, at(4), &x2, stop)?.gelu()?;
        h = (h + linear(net, at(5), &up, stop)?)?;
    }
    let first = h
        .reshape((n, tokens, d))?
        .narrow(1, 0, 1)?
        .reshape((n, d))?;
    let normed = layer_norm(net, t.param(ParamRef::NormFinal), &first)?;
    linear(net, t.head(), &normed, stop)
}

/// The input of GEMM layer `i` on a batch `x`: `tokens × cols`, one row per sample and token.
pub(crate) fn layer_input(
    net: &Net,
    t: &TransformerArch,
    x: &Tensor,
    i: usize,
) -> Result<Tensor, StageError> {
    match forward(net, t, x, Some(i)) {
        Err(Halt::Input(x)) => Ok(x),
        Err(Halt::Failed(e)) => Err(e),
        Ok(_) => Err(StageError::InvalidConfig(format!(
            "the transformer has no layer {i}"
        ))),
    }
}
