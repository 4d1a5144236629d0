//! The predictors of a unified search: a model's accuracy from its layers' one-shot
//! sensitivities (additive), its latency from its layers' tuned kernels plus the measured cost
//! outside them; both calibrated against every real trial so far.

/// Accuracy ≈ `intercept + slope · drop`, where `drop` is the sum of the model's layers'
/// one-shot accuracy drops; per (method, schedule) group a shift learnt from its own trials.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyFit {
    /// Accuracy at no drop.
    pub intercept: f64,
    /// Accuracy lost per unit of summed one-shot drop (≥ 0).
    pub slope: f64,
    /// Per group: the mean residual of its trials, shrunk by n/(n+1).
    pub shifts: Vec<f64>,
    /// The residuals' root mean square (a prior until three trials).
    pub sigma: f64,
    /// Trials fitted on.
    pub n: usize,
}

/// σ before three trials: two points of accuracy.
pub const PRIOR_SIGMA: f64 = 0.02;
/// The least σ the fit claims.
const SIGMA_FLOOR: f64 = 0.002;

impl AccuracyFit {
    /// Fits on `(group, drop, measured accuracy)`; the prior is `dense` at slope 1.
    pub fn fit(dense: f64, groups: usize, trials: &[(usize, f64, f64)]) -> AccuracyFit {
        let n = trials.len();
        let (mut intercept, mut slope) = (dense, 1.0);
        if n >= 2 {
            let mx = trials.iter().map(|t| t.1).sum::<f64>() / n as f64;
            let my = trials.iter().map(|t| t.2).sum::<f64>() / n as f64;
            let sxx: f64 = trials.iter().map(|t| (t.1 - mx).powi(2)).sum();
            let sxy: f64 = trials.iter().map(|t| (t.1 - mx) * (t.2 - my)).sum();
            slope = if sxx > 1e-12 {
                (-sxy / sxx).max(0.0)
            } else {
                1.0
            };
            intercept = my + slope * mx;
        } else if let Some(t) = trials.first() {
            intercept = t.2 + slope * t.1;
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
                *shift = r.iter().sum::<f64>() / k * k / (k + 1.0);
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
        (self.intercept - self.slope * drop + self.shifts.get(group).copied().unwrap_or(0.0))
            .clamp(0.0, 1.0)
    }
}

/// Latency ≈ `scale · Σ layers' tuned latencies + non_gemm_us`.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyFit {
    /// Measured over predicted GEMM time (1 until a trial is measured).
    pub scale: f64,
    /// The measured time outside the GEMMs per pass (the dense model's), µs.
    pub non_gemm_us: f64,
}

impl LatencyFit {
    /// Fits `scale` through the origin on `(Σ tuned, measured)`.
    pub fn fit(non_gemm_us: f64, trials: &[(f64, f64)]) -> LatencyFit {
        let sxx: f64 = trials.iter().map(|t| t.0 * t.0).sum();
        let sxy: f64 = trials.iter().map(|t| t.0 * (t.1 - non_gemm_us)).sum();
        let scale = if sxx > 0.0 && sxy > 0.0 {
            sxy / sxx
        } else {
            1.0
        };
        LatencyFit { scale, non_gemm_us }
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
    fn accuracy_fit_recovers_a_line_and_shifts() {
        let trials: Vec<(usize, f64, f64)> = (0..6)
            .map(|i| {
                let d = i as f64 * 0.05;
                (0, d, 0.9 - 0.5 * d)
            })
            .collect();
        let f = AccuracyFit::fit(0.95, 2, &trials);
        assert!((f.slope - 0.5).abs() < 1e-9 && (f.intercept - 0.9).abs() < 1e-9);
        assert!((f.predict(1, 0.1) - 0.85).abs() < 1e-9);
        assert_eq!(f.sigma, SIGMA_FLOOR);
        let prior = AccuracyFit::fit(0.95, 1, &[]);
        assert_eq!(
            (prior.predict(0, 0.1), prior.sigma),
            (0.95 - 0.1, PRIOR_SIGMA)
        );
    }

    #[test]
    fn latency_fit_scales_the_gemm_time() {
        let f = LatencyFit::fit(10.0, &[(100.0, 210.0), (50.0, 110.0)]);
        assert!((f.scale - 2.0).abs() < 1e-9);
        assert_eq!(LatencyFit::fit(5.0, &[]).predict(10.0), 15.0);
    }
}
