//! The predictors of a unified search: a model's accuracy from its layers' one-shot
//! sensitivities (additive), its latency from its layers' tuned kernels plus the measured cost
//! outside them; both calibrated against every real trial so far.

/// Accuracy ≈ `intercept − slope · √drop`, where `drop` is the sum of the model's layers'
/// one-shot accuracy drops (each clamped at 0); per (method, schedule) group a shift learnt
/// from its own trials. Fine-tuning wins back most of a large one-shot loss (a layer pruned to
/// chance one-shot may fine-tune to within a few points of dense), so the fine-tuned loss is
/// concave in the one-shot one: the square root is the simplest concave link, and the fit
/// calibrates its scale.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyFit {
    /// Accuracy at no drop.
    pub intercept: f64,
    /// Accuracy lost per unit of √(summed one-shot drop) (≥ 0).
    pub slope: f64,
    /// Per group: the mean residual of its trials, shrunk by n/(n + [`SHIFT_PRIOR_TRIALS`]).
    pub shifts: Vec<f64>,
    /// The residuals' root mean square (a prior until three trials).
    pub sigma: f64,
    /// Trials fitted on.
    pub n: usize,
}

/// The slope before any trial: a model whose layers lose 0.25 one-shot loses 0.05 fine-tuned.
pub const PRIOR_SLOPE: f64 = 0.1;
/// The weight of the prior slope, in units of Σ(√drop − mean √drop)² (two trials whose √drops
/// differ by 0.2 weigh as much as it).
const SLOPE_WEIGHT: f64 = 0.02;

/// The predictor's feature of a summed one-shot drop.
fn feature(drop: f64) -> f64 {
    drop.max(0.0).sqrt()
}
/// A group's shift counts as many trials of no shift as this (one odd trial moves its
/// group by a quarter of its residual).
pub const SHIFT_PRIOR_TRIALS: f64 = 3.0;
/// σ before three trials: two points of accuracy.
pub const PRIOR_SIGMA: f64 = 0.02;
/// The least σ the fit claims.
const SIGMA_FLOOR: f64 = 0.002;

impl AccuracyFit {
    /// Fits on `(group, drop, measured accuracy)`; the prior is `dense` at slope 1.
    pub fn fit(dense: f64, groups: usize, trials: &[(usize, f64, f64)]) -> AccuracyFit {
        let trials: Vec<(usize, f64, f64)> =
            trials.iter().map(|&(g, d, a)| (g, feature(d), a)).collect();
        let n = trials.len();
        let (mut intercept, mut slope) = (dense, PRIOR_SLOPE);
        if n >= 1 {
            // Least squares with the slope shrunk towards the prior (ridge): a few trials with
            // nearly equal drops say little about the slope, and the prior decides.
            let mx = trials.iter().map(|t| t.1).sum::<f64>() / n as f64;
            let my = trials.iter().map(|t| t.2).sum::<f64>() / n as f64;
            let sxx: f64 = trials.iter().map(|t| (t.1 - mx).powi(2)).sum();
            let sxy: f64 = trials.iter().map(|t| (t.1 - mx) * (t.2 - my)).sum();
            slope = ((-sxy + SLOPE_WEIGHT * PRIOR_SLOPE) / (sxx + SLOPE_WEIGHT)).max(0.0);
            intercept = my + slope * mx;
        }
        let base = |t: &(usize, f64, f64)| intercept - slope * t.1;
        let mut shifts = vec![0.0; groups];
        for (g, shift) in shifts.iter_mut().enumerate() {
            let r: Vec<f64> = trials
                .iter()
                .filter(|t| t.0 == g)
                .map(|t| t.2 - base(t))
                .collect();
            if !r.is_empty() {
                let k = r.len() as f64;
                *shift = r.iter().sum::<f64>() / k * k / (k + SHIFT_PRIOR_TRIALS);
            }
        }
        let sigma = if n >= 3 {
            let ss: f64 = trials
                .iter()
                .map(|t| (t.2 - base(t) - shifts[t.0]).powi(2))
                .sum();
            (ss / n as f64).sqrt().max(SIGMA_FLOOR)
        } else {
            PRIOR_SIGMA
        };
        AccuracyFit {
            intercept,
            slope,
            shifts,
            sigma,
            n,
        }
    }

    /// The predicted accuracy of a model of `group` whose layers' drops sum to `drop`.
    pub fn predict(&self, group: usize, drop: f64) -> f64 {
        let shift = self.shifts.get(group).copied().unwrap_or(0.0);
        (self.intercept - self.slope * feature(drop) + shift).clamp(0.0, 1.0)
    }
}

/// Latency ≈ `scale · Σ layers' tuned latencies + non_gemm_us`, fitted by least squares on
/// every measured model (the dense one included, which spreads the GEMM sums): the time outside
/// the GEMMs is not the same in every model's pass, and the tuned kernels' times in a pass are
/// not their times alone.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyFit {
    /// Measured over tuned GEMM time (1 before two models are measured).
    pub scale: f64,
    /// The time outside the GEMMs per pass, µs (before two models: the dense model's
    /// measured time outside its GEMMs).
    pub non_gemm_us: f64,
    /// The relative residuals' root mean square (a prior until three models).
    pub sigma_rel: f64,
}

/// Relative latency σ before three models are measured.
pub const PRIOR_LATENCY_SIGMA: f64 = 0.10;

impl LatencyFit {
    /// Fits on `(Σ tuned, measured)`; the prior is `scale = 1`, `non_gemm_us`.
    pub fn fit(non_gemm_us: f64, models: &[(f64, f64)]) -> LatencyFit {
        let n = models.len() as f64;
        let mut f = LatencyFit {
            scale: 1.0,
            non_gemm_us,
            sigma_rel: PRIOR_LATENCY_SIGMA,
        };
        if models.len() >= 2 {
            let mx = models.iter().map(|t| t.0).sum::<f64>() / n;
            let my = models.iter().map(|t| t.1).sum::<f64>() / n;
            let sxx: f64 = models.iter().map(|t| (t.0 - mx).powi(2)).sum();
            let sxy: f64 = models.iter().map(|t| (t.0 - mx) * (t.1 - my)).sum();
            if sxx > 0.0 && sxy > 0.0 {
                f.scale = sxy / sxx;
                f.non_gemm_us = (my - f.scale * mx).max(0.0);
            }
        }
        if models.len() >= 3 {
            let ss: f64 = models
                .iter()
                .map(|t| (t.1 / f.predict(t.0) - 1.0).powi(2))
                .sum();
            f.sigma_rel = (ss / n).sqrt().max(0.01);
        }
        f
    }

    /// The predicted latency of a model whose layers' tuned latencies sum to `gemm_us`.
    pub fn predict(&self, gemm_us: f64) -> f64 {
        self.scale * gemm_us + self.non_gemm_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_fit_follows_the_data_and_shrinks_to_the_prior() {
        // Accuracy 0.9 − 0.5·√drop over widely spread drops: the data decide the slope.
        let trials: Vec<(usize, f64, f64)> = (0..6)
            .map(|i| {
                let d = (i as f64 * 0.2).powi(2);
                (0, d, 0.9 - 0.5 * d.sqrt())
            })
            .collect();
        let f = AccuracyFit::fit(0.95, 2, &trials);
        // Σ(x − x̄)² = 0.7 against the prior's weight 0.02.
        let want = (0.5 * 0.7 + SLOPE_WEIGHT * PRIOR_SLOPE) / (0.7 + SLOPE_WEIGHT);
        assert!((f.slope - want).abs() < 1e-9, "{}", f.slope);
        // At the mean feature the prediction is the mean accuracy, whatever the slope.
        assert!((f.predict(1, 0.25) - 0.65).abs() < 1e-9);
        // Two trials with nearly equal drops: the prior slope decides.
        let close = AccuracyFit::fit(0.95, 1, &[(0, 0.04, 0.96), (0, 0.0401, 0.90)]);
        assert!((close.slope - PRIOR_SLOPE).abs() < 0.05, "{}", close.slope);
        let prior = AccuracyFit::fit(0.95, 1, &[]);
        assert_eq!(
            (prior.predict(0, 0.25), prior.sigma),
            (0.95 - PRIOR_SLOPE * 0.5, PRIOR_SIGMA)
        );
    }

    #[test]
    fn latency_fit_scales_the_gemm_time() {
        let f = LatencyFit::fit(10.0, &[(100.0, 230.0), (50.0, 130.0), (10.0, 50.0)]);
        assert!((f.scale - 2.0).abs() < 1e-9 && (f.non_gemm_us - 30.0).abs() < 1e-9);
        assert_eq!(f.sigma_rel, 0.01);
        assert_eq!(LatencyFit::fit(5.0, &[]).predict(10.0), 15.0);
    }
}
