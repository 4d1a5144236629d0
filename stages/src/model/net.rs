//! The candle side of a model: [`Weights`] as trainable [`Var`]s, the forward pass, and the
//! way back to plain [`Weights`].

use candle_core::{DType, Device, Tensor, Var, D};

use super::transformer::{self, Halt};
use super::{Arch, Layer, LayerKind, Param, Weights};
use crate::StageError;

/// One layer's trainable tensors.
pub(crate) struct NetLayer {
    pub(crate) kind: LayerKind,
    pub(crate) weight: Var,
    pub(crate) bias: Var,
}

/// A network whose parameters are candle variables (on the CPU).
pub(crate) struct Net {
    pub(crate) layers: Vec<NetLayer>,
    /// The non-GEMM tensors ([`Weights::params`]).
    pub(crate) params: Vec<Var>,
    pub(crate) arch: Arch,
    /// A transformer's patch gather ([`super::TransformerArch::patch_index`]).
    pub(crate) patch_index: Option<Tensor>,
    names: Vec<String>,
    param_names: Vec<String>,
    image_shape: Option<(usize, usize, usize)>,
    device: Device,
}

impl Net {
    /// Variables holding a copy of `w`.
    pub(crate) fn from_weights(w: &Weights) -> Result<Net, StageError> {
        let device = Device::Cpu;
        let layers = w
            .layers
            .iter()
            .map(|l| {
                Ok(NetLayer {
                    kind: l.kind.clone(),
                    weight: Var::from_vec(l.weight.clone(), l.shape.clone(), &device)?,
                    bias: Var::from_vec(l.bias.clone(), l.bias.len(), &device)?,
                })
            })
            .collect::<Result<Vec<_>, StageError>>()?;
        let params = w
            .params
            .iter()
            .map(|p| Ok(Var::from_vec(p.values.clone(), p.shape.clone(), &device)?))
            .collect::<Result<Vec<_>, StageError>>()?;
        let patch_index = match &w.arch {
            Arch::Transformer(t) => {
                let idx: Vec<u32> = t
                    .patch_index(w.image_shape)
                    .into_iter()
                    .map(|i| i as u32)
                    .collect();
                let len = idx.len();
                Some(Tensor::from_vec(idx, len, &device)?)
            }
            Arch::Chain => None,
        };
        Ok(Net {
            layers,
            params,
            arch: w.arch.clone(),
            patch_index,
            names: w.layers.iter().map(|l| l.name.clone()).collect(),
            param_names: w.params.iter().map(|p| p.name.clone()).collect(),
            image_shape: w.image_shape,
            device,
        })
    }

    /// Every variable: weights and biases, then the parameters.
    pub(crate) fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|l| [l.weight.clone(), l.bias.clone()])
            .chain(self.params.iter().cloned())
            .collect()
    }

    /// A `(rows, n_features)` batch as a tensor, reshaped to an image batch for a CNN.
    pub(crate) fn input(&self, x: Vec<f32>, rows: usize) -> Result<Tensor, StageError> {
        let features = x.len() / rows.max(1);
        let t = Tensor::from_vec(x, (rows, features), &self.device)?;
        Ok(
            match (self.image_shape, self.layers.first().map(|l| &l.kind)) {
                (Some((c, h, w)), Some(LayerKind::Conv2d { .. })) => t.reshape((rows, c, h, w))?,
                // An MLP reads the flat features; a transformer gathers its patches from them.
                _ => t,
            },
        )
    }

    /// Logits for a batch (`rows × n_classes`).
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor, StageError> {
        if let Arch::Transformer(t) = &self.arch {
            return transformer::forward(self, t, x, None).map_err(Halt::into_error);
        }
        let mut h = x.clone();
        let last = self.layers.len().saturating_sub(1);
        for (i, l) in self.layers.iter().enumerate() {
            h = apply_layer(
                &l.kind,
                l.weight.as_tensor(),
                l.bias.as_tensor(),
                &h,
                i == last,
            )?;
        }
        Ok(h)
    }

    /// Predicted classes of `rows` samples.
    pub(crate) fn predict(&self, x: &[f32], rows: usize) -> Result<Vec<u32>, StageError> {
        const CHUNK: usize = 1024;
        let features = x.len() / rows.max(1);
        let mut out = Vec::with_capacity(rows);
        for start in (0..rows).step_by(CHUNK) {
            let n = CHUNK.min(rows - start);
            let batch = self.input(x[start * features..(start + n) * features].to_vec(), n)?;
            out.extend(
                self.forward(&batch)?
                    .argmax(D::Minus1)?
                    .to_dtype(DType::U32)?
                    .to_vec1::<u32>()?,
            );
        }
        Ok(out)
    }

    /// The current values as plain weights.
    pub(crate) fn to_weights(&self) -> Result<Weights, StageError> {
        let layers = self
            .layers
            .iter()
            .zip(&self.names)
            .map(|(l, name)| {
                Ok(Layer {
                    name: name.clone(),
                    kind: l.kind.clone(),
                    shape: l.weight.dims().to_vec(),
                    weight: l.weight.as_tensor().flatten_all()?.to_vec1()?,
                    bias: l.bias.as_tensor().to_vec1()?,
                })
            })
            .collect::<Result<Vec<_>, StageError>>()?;
        let params = self
            .params
            .iter()
            .zip(&self.param_names)
            .map(|(v, name)| {
                Ok(Param {
                    name: name.clone(),
                    shape: v.dims().to_vec(),
                    values: v.as_tensor().flatten_all()?.to_vec1()?,
                })
            })
            .collect::<Result<Vec<_>, StageError>>()?;
        Ok(Weights {
            layers,
            image_shape: self.image_shape,
            arch: self.arch.clone(),
            params,
        })
    }
}

/// One layer's forward pass on a batch `h`: the product (a convolution, or a matrix product of
/// the flattened input), the bias, then ReLU (except after the `last` layer) and a convolution's
/// pooling.
pub(crate) fn apply_layer(
    kind: &LayerKind,
    weight: &Tensor,
    bias: &Tensor,
    h: &Tensor,
    last: bool,
) -> Result<Tensor, StageError> {
    let mut h = match kind {
        LayerKind::Linear => {
            let flat = if h.rank() > 2 {
                h.flatten_from(1)?
            } else {
                h.clone()
            };
            flat.matmul(&weight.t()?)?.broadcast_add(bias)?
        }
        LayerKind::Conv2d { padding, .. } => {
            let out = bias.dims1()?;
            h.conv2d(weight, *padding, 1, 1, 1)?
                .broadcast_add(&bias.reshape((1, out, 1, 1))?)?
        }
    };
    if !last {
        h = h.relu()?;
    }
    if let LayerKind::Conv2d { pool: true, .. } = kind {
        h = h.max_pool2d(2)?;
    }
    Ok(h)
}
