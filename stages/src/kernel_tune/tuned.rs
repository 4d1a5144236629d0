//! What a tuning measured: every point with its prediction and timing, and the best ones.

use super::Timing;
use kernels::ParamPoint;

/// One measured point.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Kernel name (`cpu-vnm`, `dense`, ...).
    pub kernel: String,
    /// The parameters.
    pub params: ParamPoint,
    /// Cost-model prediction, seconds (calibrated when the tuning was).
    pub predicted_s: f64,
    /// The analytical model's prediction alone, seconds (equal to `predicted_s` without a
    /// calibration; NaN where there is no analytical CPU model).
    pub analytical_s: f64,
    /// Rank of the prediction in the whole space (0 = predicted fastest).
    pub predicted_rank: usize,
    /// The timing (NaN statistics when the point failed).
    pub timing: Timing,
    /// Why the point failed, if it did: it could not be measured (it failed to compile or
    /// launch), or (CUDA) its product disagreed with the CPU reference.
    pub error: Option<String>,
}

/// The result of a tuning.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    /// Size of the kernel's valid space, counting points that run alike once (on the CPU, at
    /// batch 1 and a few columns, one per thread count: `kernels::effective_point`).
    pub space_size: usize,
    /// Every measured point of the sparse kernel, in measurement order.
    pub points: Vec<Measured>,
    /// Every measured point of the dense baseline.
    pub dense_points: Vec<Measured>,
    /// Index of the fastest sparse point (on the CPU, the fastest of the few re-measured in
    /// rounds interleaved with the dense points).
    pub best: usize,
    /// Index of the fastest dense point.
    pub dense_best: usize,
    /// Spearman correlation of predicted vs measured cost over the measured points (NaN with < 3,
    /// or without a cost model).
    pub spearman: f64,
    /// What ranked the space: on the CPU the analytical model or its calibration on this
    /// device, on CUDA the GPU the cost model assumed and where its register counts came from.
    pub ranking: Option<String>,
    /// Set when no kernel of the backend implements the format: what ran instead, and why.
    pub fallback: Option<String>,
}

impl Tuned {
    /// The fastest sparse point.
    pub fn best(&self) -> &Measured {
        &self.points[self.best]
    }
    /// The fastest dense point.
    pub fn dense_best(&self) -> &Measured {
        &self.dense_points[self.dense_best]
    }
}

/// Index of the fastest point that was measured, if any was.
pub(super) fn argmin(v: &[Measured]) -> Option<usize> {
    (0..v.len())
        .filter(|&i| v[i].error.is_none() && !v[i].timing.median_us.is_nan())
        .min_by(|&i, &j| v[i].timing.median_us.total_cmp(&v[j].timing.median_us))
}
