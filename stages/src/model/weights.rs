//! A network's weights as plain data: its layers (a matrix and a bias each), how they connect,
//! and their seeded initialisation.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::arch::ParamInit;
use super::ModelSpec;
use super::{Arch, Param, TransformerArch};
use crate::StageError;

/// What a layer computes with its weight matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum LayerKind {
    /// `y = x Wᵀ + b`; the weight shape is `[out, in]`.
    Linear,
    /// 2-D convolution, stride 1, weight shape `[out, in, k, k]`; then ReLU and, if `pool`, 2×2
    /// max-pooling.
    Conv2d {
        /// Zero padding on each side.
        padding: usize,
        /// Whether a 2×2 max-pool follows the activation.
        pool: bool,
    },
}

/// One layer: its weight (row-major in `shape`) and its bias (one per output).
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Stable name (`fc0`, `fc1`, …, `conv0`, …): tensors are saved as `NAME.weight`, `NAME.bias`.
    pub name: String,
    /// What the layer computes.
    pub kind: LayerKind,
    /// Weight shape: `[out, in]` or `[out, in, k, k]`.
    pub shape: Vec<usize>,
    /// Weight values, row-major in `shape`.
    pub weight: Vec<f32>,
    /// Bias, `shape[0]` values.
    pub bias: Vec<f32>,
}

impl Layer {
    /// Rows of the weight matrix (outputs).
    pub fn rows(&self) -> usize {
        self.shape[0]
    }

    /// Columns of the weight matrix (inputs; `in·k·k` for a convolution).
    pub fn cols(&self) -> usize {
        self.shape[1..].iter().product()
    }
}

/// The weights of a network: its GEMM layers in forward order, how they connect, and the
/// tensors that are not GEMM weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// GEMM layers in forward order (the prunable ones and the ones kept dense).
    pub layers: Vec<Layer>,
    /// `(channels, height, width)` of the input when the network reads images (a CNN, or a
    /// transformer over image patches).
    pub image_shape: Option<(usize, usize, usize)>,
    /// How the layers connect.
    pub arch: Arch,
    /// Tensors other than the layers' weights and biases (empty for a chain).
    pub params: Vec<Param>,
}

impl Weights {
    /// Number of weights (biases not counted).
    pub fn n_weights(&self) -> usize {
        self.layers.iter().map(|l| l.weight.len()).sum()
    }

    /// Input features of one sample.
    pub fn n_features(&self) -> usize {
        match (&self.arch, self.image_shape, self.layers.first()) {
            (_, Some((c, h, w)), _) => c * h * w,
            (Arch::Transformer(t), None, _) => t.patches * t.patch_dim,
            (Arch::Chain, None, Some(l)) => l.cols(),
            (Arch::Chain, None, None) => 0,
        }
    }

    /// Per layer, the columns of its GEMM per sample: 1 for a linear layer of a chain, the
    /// output positions of a convolution, the patches (embedding) or tokens (blocks) of a
    /// transformer, 1 for its head.
    pub fn layer_tokens(&self) -> Vec<usize> {
        match &self.arch {
            Arch::Transformer(t) => (0..self.layers.len())
                .map(|i| match i {
                    0 => t.patches,
                    i if i == t.head() => 1,
                    _ => t.tokens(),
                })
                .collect(),
            Arch::Chain => {
                let (mut h, mut w) = self.image_shape.map_or((1, 1), |s| (s.1, s.2));
                self.layers
                    .iter()
                    .map(|l| match l.kind {
                        LayerKind::Linear => 1,
                        LayerKind::Conv2d { padding, pool } => {
                            let k = l.shape[2];
                            (h, w) = (h + 2 * padding + 1 - k, w + 2 * padding + 1 - k);
                            let tokens = h * w;
                            if pool {
                                (h, w) = (h / 2, w / 2);
                            }
                            tokens
                        }
                    })
                    .collect()
            }
        }
    }

    /// Why layer `i` stays dense whatever the pattern, if it does: a transformer's patch
    /// embedding and classification head (as in the papers, which prune the blocks' linear
    /// layers only).
    pub fn kept_dense(&self, i: usize) -> Option<&'static str> {
        match &self.arch {
            Arch::Transformer(t) if i == 0 || i == t.head() => {
                Some("a transformer's embedding and head stay dense")
            }
            _ => None,
        }
    }

    /// Fresh weights for `model` on inputs of `n_features` (an image of `image_shape` for a CNN)
    /// and `n_classes` outputs, drawn from a ChaCha8 generator seeded by `seed`.
    ///
    /// Every tensor is uniform in ±1/√fan_in (PyTorch's default for linear and convolution
    /// layers), drawn in the sorted order of the tensor names so that the values depend on the
    /// seed alone (candle's own initialisers use the thread RNG and cannot be seeded).
    pub fn init(
        model: &ModelSpec,
        n_features: usize,
        image_shape: Option<(usize, usize, usize)>,
        n_classes: usize,
        seed: u64,
    ) -> Result<Weights, StageError> {
        let (shapes, image_shape, arch) = architecture(model, n_features, image_shape, n_classes)?;
        let param_shapes = match &arch {
            Arch::Transformer(t) => t.param_shapes(),
            Arch::Chain => vec![],
        };
        // (tensor name, layer index, is bias), sorted by name.
        let mut order: Vec<(String, usize, bool)> = shapes
            .iter()
            .enumerate()
            .flat_map(|(i, (name, _, _))| {
                [
                    (format!("{name}.bias"), i, true),
                    (format!("{name}.weight"), i, false),
                ]
            })
            .collect();
        order.sort();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // 24 random bits → uniform in [0, 1), then to [-bound, bound).
        let mut uniform = move |bound: f32| {
            ((rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * bound
        };
        let mut layers: Vec<Layer> = shapes
            .into_iter()
            .map(|(name, kind, shape)| Layer {
                name,
                kind,
                bias: Vec::new(),
                weight: Vec::new(),
                shape,
            })
            .collect();
        for (_, i, is_bias) in order {
            let layer = &mut layers[i];
            let fan_in = layer.cols();
            let bound = 1.0 / (fan_in as f32).sqrt();
            let len = if is_bias {
                layer.rows()
            } else {
                layer.rows() * fan_in
            };
            let values = (0..len).map(|_| uniform(bound));
            if is_bias {
                layer.bias = values.collect();
            } else {
                layer.weight = values.collect();
            }
        }
        // Parameters after the layers, in their own order (the chain draws nothing more).
        let params = param_shapes
            .into_iter()
            .map(|(name, shape, init)| {
                let len = shape.iter().product();
                let values = match init {
                    ParamInit::Ones => vec![1.0; len],
                    ParamInit::Zeros => vec![0.0; len],
                    ParamInit::Small => (0..len).map(|_| uniform(0.02)).collect(),
                };
                Param {
                    name,
                    shape,
                    values,
                }
            })
            .collect();
        Ok(Weights {
            layers,
            image_shape,
            arch,
            params,
        })
    }
}

type LayerShape = (String, LayerKind, Vec<usize>);
type ImageShape = Option<(usize, usize, usize)>;

/// Layer names, kinds and weight shapes of a model on given inputs; the image shape to record;
/// how the layers connect.
fn architecture(
    model: &ModelSpec,
    n_features: usize,
    image_shape: Option<(usize, usize, usize)>,
    n_classes: usize,
) -> Result<(Vec<LayerShape>, ImageShape, Arch), StageError> {
    let bad = |m: String| Err(StageError::InvalidConfig(m));
    if n_features == 0 || n_classes < 2 {
        return bad(format!(
            "model needs inputs and >= 2 classes, got {n_features} features, {n_classes} classes"
        ));
    }
    let (convs, hidden) = match model {
        ModelSpec::Mlp { hidden } => (&[][..], hidden),
        ModelSpec::Cnn { channels, hidden } => (&channels[..], hidden),
        &ModelSpec::Transformer {
            layers,
            d_model,
            heads,
            d_ff,
            patch,
        } => {
            let t =
                TransformerArch::new(layers, d_model, heads, d_ff, patch, n_features, image_shape)?;
            let shapes = t
                .layer_shapes(n_classes)
                .into_iter()
                .map(|(name, shape)| (name, LayerKind::Linear, shape))
                .collect();
            return Ok((shapes, image_shape, Arch::Transformer(t)));
        }
    };
    if let Some(w) = hidden.iter().chain(convs).find(|&&w| w == 0) {
        return bad(format!("model: layer width {w} must be at least 1"));
    }
    let mut shapes = Vec::new();
    let mut width = n_features;
    let mut recorded = None;
    if !convs.is_empty() {
        let Some((mut c, mut h, mut w)) = image_shape else {
            return bad("model: a cnn needs an image data set (digits or idx)".into());
        };
        recorded = image_shape;
        for (i, &out) in convs.iter().enumerate() {
            let pool = h >= 2 && w >= 2;
            shapes.push((
                format!("conv{i}"),
                LayerKind::Conv2d { padding: 1, pool },
                vec![out, c, 3, 3],
            ));
            c = out;
            if pool {
                (h, w) = (h / 2, w / 2);
            }
        }
        width = c * h * w;
    }
    for (i, &out) in hidden.iter().chain(std::iter::once(&n_classes)).enumerate() {
        shapes.push((format!("fc{i}"), LayerKind::Linear, vec![out, width]));
        width = out;
    }
    Ok((shapes, recorded, Arch::Chain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_seeded_and_shaped() {
        let spec = ModelSpec::Mlp { hidden: vec![5, 3] };
        let a = Weights::init(&spec, 4, None, 2, 9).unwrap();
        assert_eq!(a, Weights::init(&spec, 4, None, 2, 9).unwrap());
        assert_ne!(a, Weights::init(&spec, 4, None, 2, 10).unwrap());
        let shapes: Vec<_> = a
            .layers
            .iter()
            .map(|l| (l.name.as_str(), l.rows(), l.cols()))
            .collect();
        assert_eq!(shapes, [("fc0", 5, 4), ("fc1", 3, 5), ("fc2", 2, 3)]);
        for l in &a.layers {
            let bound = 1.0 / (l.cols() as f32).sqrt();
            assert!(l.weight.iter().chain(&l.bias).all(|v| v.abs() <= bound));
            assert_eq!(l.bias.len(), l.rows());
        }
        let cnn = ModelSpec::Cnn {
            channels: vec![4, 6],
            hidden: vec![],
        };
        let c = Weights::init(&cnn, 64, Some((1, 8, 8)), 10, 1).unwrap();
        let shapes: Vec<_> = c.layers.iter().map(|l| l.shape.clone()).collect();
        assert_eq!(
            shapes,
            [vec![4, 1, 3, 3], vec![6, 4, 3, 3], vec![10, 6 * 2 * 2]]
        );
        let linear = c.layers.iter().filter(|l| l.kind == LayerKind::Linear);
        assert_eq!(linear.count(), 1);
        assert!(Weights::init(&cnn, 64, None, 10, 1).is_err());
        assert!(Weights::init(&ModelSpec::Mlp { hidden: vec![0] }, 4, None, 2, 1).is_err());
    }
}
