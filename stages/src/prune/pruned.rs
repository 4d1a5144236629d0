//! What pruning produced: the pruned weights, their masks and packed layers, and a report per
//! layer.

use kernels::{Mask, Pattern, SparseMatrix};
use serde::{Deserialize, Serialize};

use crate::{StageError, Weights};

/// What happened to one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LayerStatus {
    /// Pruned into the trial's pattern.
    Pruned,
    /// Left dense because the pattern does not fit this layer's shape.
    KeptDense {
        /// Why (e.g. "V = 64 does not divide the 10 rows").
        reason: String,
    },
}

/// Per-layer metrics of a prune trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerReport {
    /// Layer name.
    pub name: String,
    /// Weight matrix rows.
    pub rows: usize,
    /// Weight matrix columns.
    pub cols: usize,
    /// Pruned or kept dense (with the reason).
    pub status: LayerStatus,
    /// Fraction of the layer's weights removed by its mask.
    pub sparsity: f64,
    /// ‖w ⊙ mask‖₁ / ‖w‖₁ over the trained (input) weights; 1 for a dense layer.
    pub retained_l1: f64,
    /// The layer's relative output error `‖(W − W⊙mask)X‖/‖WX‖` on the calibration inputs,
    /// without the method's update (of the last pruning step; `None` for a layer kept dense).
    pub output_error_before: Option<f64>,
    /// The same with the method's update (`‖(W − Ŵ)X‖/‖WX‖`).
    pub output_error_after: Option<f64>,
}

/// A pruned, fine-tuned model.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruned {
    /// The trial's pattern.
    pub pattern: Pattern,
    /// Each layer's pattern (forward order; dense for a layer kept dense).
    pub layer_patterns: Vec<Pattern>,
    /// Dense weights with exact `+0.0` where masks drop weights.
    pub weights: Weights,
    /// Per layer (forward order): the keep-mask, `None` for a layer kept dense.
    pub masks: Vec<Option<Mask>>,
    /// Per-layer metrics.
    pub layers: Vec<LayerReport>,
    /// Test accuracy of the input model.
    pub accuracy_before: f64,
    /// Test accuracy right after the (last) pruning step, before its fine-tuning.
    pub accuracy_after_prune: f64,
    /// Test accuracy after fine-tuning.
    pub accuracy_after_finetune: f64,
    /// Fraction of all weights removed (dense-kept layers count as unpruned).
    pub sparsity: f64,
    /// ‖w ⊙ mask‖₁ / ‖w‖₁ over all layers' trained weights together.
    pub retained_l1: f64,
    /// Mean training loss of each fine-tune epoch, all steps in order.
    pub finetune_loss_curve: Vec<f32>,
}

impl Pruned {
    /// Each layer's weights packed in the format of its pattern (dense for layers kept dense),
    /// in forward order; `to_dense()` of each equals the layer's weights bit for bit.
    pub fn packed(&self) -> Result<Vec<(String, SparseMatrix)>, StageError> {
        self.weights
            .layers
            .iter()
            .zip(&self.masks)
            .zip(&self.layer_patterns)
            .map(|((l, m), pattern)| {
                let packed = match m {
                    Some(m) => SparseMatrix::from_masked(pattern, &l.weight, m)?,
                    None => SparseMatrix::from_masked(
                        &Pattern::Dense,
                        &l.weight,
                        &Mask::full(l.rows(), l.cols()),
                    )?,
                };
                Ok((l.name.clone(), packed))
            })
            .collect()
    }
}
