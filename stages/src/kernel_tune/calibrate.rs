//! Calibrating the CPU cost model on the machine it runs on.
//!
//! The analytical model ([`kernels::predicted_cost`]) was fitted by hand on one CPU and ranks
//! badly on others (issue 18: 37–84 % regret at a 10 % budget). Before a kernel family's first
//! tuning on a device, [`calibrate_cpu`] measures a fixed sample of that family's space (a
//! seeded fraction of every point, on a few patterns and shapes that cover its parameters) and
//! fits a [`Calibration`]; later tunings rank with [`Calibration::cost`]. The sample does not
//! depend on any experiment, so one calibration per (device, family, kernel version) serves
//! every tuning; the engine keeps it in the store under that key.

use super::measure::{rounds, summarise};
use crate::StageError;
use kernels::{Calibration, CalibrationSample, FormatSignature, KernelFamily, ParamPoint, Pattern};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What a calibration measures: a fraction of the space of each pattern at each shape.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationPlan {
    /// The family calibrated.
    pub family: KernelFamily,
    /// Patterns of that family whose spaces are sampled.
    pub patterns: Vec<Pattern>,
    /// Shapes `(rows, cols, n)` of the sampled products.
    pub shapes: Vec<(usize, usize, usize)>,
    /// Fraction of each space measured (at least one point).
    pub fraction: f64,
    /// Interleaved rounds in which each shape's sampled points are measured (after one
    /// warm-up round): each round's times are taken relative to the round's median, and a
    /// point's time is its median relative time (see [`calibrate_cpu`]).
    pub rounds: usize,
    /// Seed of the draw.
    pub seed: u64,
}

/// The CPU families that calibrate: every sparse family (the dense baseline is always tuned
/// exhaustively, so its ranking chooses nothing).
pub const CALIBRATED_FAMILIES: &[KernelFamily] = &[
    KernelFamily::CpuCsr,
    KernelFamily::CpuNm,
    KernelFamily::CpuVnm,
    KernelFamily::CpuVector,
];

impl CalibrationPlan {
    /// The sample of a CPU family, or `None` for a family that does not calibrate. A fifth of
    /// each space at 768×768×128 (where the fit carried to the BERT shapes: `kernels/BENCH.md`),
    /// 256×256×256 and 256×2048×64. Together they offer every value of every parameter that
    /// any shape's space offers (tile widths up to 12 vectors need n ≥ 192, K chunk 1024 needs
    /// K > 1024): a value the sample never measured keeps the analytical model's term while
    /// the measured ones move, which put unmeasured values at the top of the ranking (21 %
    /// regret on N:M 2:16 at n = 512 when the widest tile was missing).
    pub fn cpu(family: KernelFamily) -> Option<CalibrationPlan> {
        let patterns = match family {
            KernelFamily::CpuCsr => vec![
                Pattern::Unstructured { sparsity: 0.75 },
                Pattern::Unstructured { sparsity: 0.875 },
            ],
            KernelFamily::CpuNm => [4, 8, 16].map(|m| Pattern::Nm { n: 2, m }).to_vec(),
            KernelFamily::CpuVnm => [(64, 4), (16, 8), (64, 8), (128, 8), (64, 16), (128, 16)]
                .map(|(v, m)| Pattern::Vnm { v, m })
                .to_vec(),
            KernelFamily::CpuVector => [4, 16, 64]
                .map(|v| Pattern::Vector { v, sparsity: 0.75 })
                .to_vec(),
            _ => return None,
        };
        Some(CalibrationPlan {
            family,
            patterns,
            shapes: vec![(768, 768, 128), (256, 256, 256), (256, 2048, 64)],
            fraction: 0.2,
            rounds: 5,
            seed: 0xca1,
        })
    }

    /// The plan as one canonical line (what a calibration's key covers): patterns in their
    /// written form (`2:4`, `64:2:8`, `unstructured(0.75)`), never Rust names (before
    /// 2026-12-07 they were, `Nm { n: 2, m: 4 }`: those calibrations re-run once).
    pub fn describe(&self) -> String {
        let patterns: Vec<String> = self.patterns.iter().map(|p| p.to_string()).collect();
        let shapes: Vec<String> = self
            .shapes
            .iter()
            .map(|(r, c, n)| format!("{r}x{c}x{n}"))
            .collect();
        format!(
            "{} patterns=[{}] shapes=[{}] fraction={} rounds={} seed={}",
            self.family,
            patterns.join(", "),
            shapes.join(", "),
            self.fraction,
            self.rounds,
            self.seed
        )
    }
}

/// One measured point of a calibration, with what the models predicted for it.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationPoint {
    /// The sample (signature, n, point, its time as [`calibrate_cpu`] takes it).
    pub sample: CalibrationSample,
    /// The pattern it was drawn for.
    pub pattern: Pattern,
    /// The analytical model's prediction, seconds.
    pub analytical_s: f64,
    /// The fitted model's prediction, seconds.
    pub calibrated_s: f64,
}

/// A finished calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibrated {
    /// The fit.
    pub calibration: Calibration,
    /// Every measured point.
    pub points: Vec<CalibrationPoint>,
    /// Seconds spent measuring (warm-up and rounds).
    pub kernel_seconds: f64,
}

/// Measures `plan`'s sample on this machine and fits the cost model's corrections. The caller
/// holds the per-host measurement lock around this call.
///
/// Each (pattern, shape) is measured in [`CalibrationPlan::rounds`] interleaved rounds over its
/// sampled points. The machine's speed moves by 25–50 % between states that last seconds
/// ([`super::rounds`]), and the fit only uses each tuning's times relative to each other: so
/// each time is divided by its round's median, which takes out the state the round ran in, and
/// a point's relative time is the median over rounds. A sample's `seconds` is that relative
/// time times the median of the rounds' medians.
pub fn calibrate_cpu(plan: &CalibrationPlan) -> Result<Calibrated, StageError> {
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let mut measured: Vec<(Pattern, CalibrationSample)> = vec![];
    let started = std::time::Instant::now();
    for pattern in &plan.patterns {
        for &(rows, cols, n) in &plan.shapes {
            let sig = FormatSignature::for_pattern(pattern, rows, cols)?;
            let a = kernels::synthetic(&sig, 0x5eed)?;
            let b = kernels::random_values(cols * n, 0xb);
            let mut c = vec![0f32; rows * n];
            let mut points: Vec<ParamPoint> = kernels::cpu_space(&sig, n).points();
            points.shuffle(&mut rng);
            let take = ((plan.fraction * points.len() as f64).ceil() as usize).max(1);
            points.truncate(take);
            let times = rounds(
                points.len(),
                |i| kernels::spmm(&a, &b, n, &mut c, &points[i]),
                plan.rounds,
                plan.rounds,
                0.0,
            )?;
            for (point, seconds) in points.into_iter().zip(relative_medians(&times)) {
                measured.push((
                    pattern.clone(),
                    CalibrationSample {
                        sig,
                        n,
                        point,
                        seconds: seconds * 1e-6,
                    },
                ));
            }
        }
    }
    let kernel_seconds = started.elapsed().as_secs_f64();
    let fit_on: Vec<CalibrationSample> = measured.iter().map(|(_, s)| s.clone()).collect();
    let calibration = Calibration::fit(&fit_on);
    let points = measured
        .into_iter()
        .map(|(pattern, sample)| CalibrationPoint {
            analytical_s: kernels::predicted_cost(&sample.sig, sample.n, &sample.point),
            calibrated_s: calibration.cost(&sample.sig, sample.n, &sample.point),
            sample,
            pattern,
        })
        .collect();
    Ok(Calibrated {
        calibration,
        points,
        kernel_seconds,
    })
}

/// Each point's median over rounds of its time relative to its round's median, times the
/// median of the rounds' medians (`times[point][round]`, every point with the same rounds).
fn relative_medians(times: &[Vec<f64>]) -> Vec<f64> {
    let rounds = times.first().map_or(0, Vec::len);
    let round_medians: Vec<f64> = (0..rounds)
        .map(|r| summarise(times.iter().map(|t| t[r]).collect()).median_us)
        .collect();
    let scale = summarise(round_medians.clone()).median_us;
    times
        .iter()
        .map(|t| {
            let relative = t.iter().zip(&round_medians).map(|(x, m)| x / m).collect();
            summarise(relative).median_us * scale
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round run in a slow state (every point 1.5× slower) moves no point's time, and each
    /// point keeps its place relative to the others.
    #[test]
    fn a_slow_round_is_taken_out_by_its_median() {
        let times = vec![
            vec![1.0, 1.5, 1.0],
            vec![2.0, 3.0, 2.0],
            vec![4.0, 6.0, 4.0],
        ];
        assert_eq!(relative_medians(&times), [1.0, 2.0, 4.0]);
        assert!(relative_medians(&[]).is_empty());
    }

    #[test]
    fn every_sparse_cpu_family_has_a_plan_of_its_own_patterns() {
        for &family in CALIBRATED_FAMILIES {
            let plan = CalibrationPlan::cpu(family).unwrap();
            for p in &plan.patterns {
                let sig = FormatSignature::for_pattern(p, 256, 256).unwrap();
                assert_eq!(
                    kernels::cpu_space(&sig, 16).kernel,
                    family.to_string(),
                    "{p:?}"
                );
            }
        }
        assert!(CalibrationPlan::cpu(KernelFamily::CpuDense).is_none());
        assert!(CalibrationPlan::cpu(KernelFamily::CudaVnm).is_none());
    }

    /// Every value of every parameter, and every (rows, tile) pair, that the space offers at
    /// any shape is offered at one of the sample's shapes (the value is measured with
    /// probability ≥ 1 − 0.8^(points with it), and each has dozens).
    #[test]
    fn the_sample_covers_every_parameter_value_of_every_shape() {
        use std::collections::BTreeSet;
        let values = |sig: &FormatSignature, n: usize| -> BTreeSet<String> {
            let mut out = BTreeSet::new();
            for p in kernels::cpu_space(sig, n).points() {
                for (k, v) in &p.0 {
                    out.insert(format!("{k}={v}"));
                }
                out.insert(format!("rows={}|tile_n={}", p.0["rows"], p.0["tile_n"]));
            }
            out
        };
        for &family in CALIBRATED_FAMILIES {
            let plan = CalibrationPlan::cpu(family).unwrap();
            for p in &plan.patterns {
                let sampled: BTreeSet<String> = plan
                    .shapes
                    .iter()
                    .flat_map(|&(r, c, n)| {
                        values(&FormatSignature::for_pattern(p, r, c).unwrap(), n)
                    })
                    .collect();
                for (r, c, n) in [(768, 768, 512), (4096, 4096, 4096), (3072, 768, 64)] {
                    let sig = FormatSignature::for_pattern(p, r, c).unwrap();
                    let missing: Vec<String> =
                        values(&sig, n).difference(&sampled).cloned().collect();
                    assert!(missing.is_empty(), "{p:?} at {r}x{c}x{n}: {missing:?}");
                }
            }
        }
    }

    #[test]
    fn a_small_calibration_measures_its_fraction_and_fits() {
        let plan = CalibrationPlan {
            family: KernelFamily::CpuNm,
            patterns: vec![Pattern::Nm { n: 2, m: 8 }],
            // 64 columns: the tile kernels, whose parameters the calibration fits (at 16 the
            // panel kernels run, and the fit leaves them out).
            shapes: vec![(32, 64, 64)],
            fraction: 0.25,
            rounds: 1,
            seed: 1,
        };
        let sig = FormatSignature::for_pattern(&plan.patterns[0], 32, 64).unwrap();
        let space = kernels::cpu_space(&sig, 64).points().len();
        let done = calibrate_cpu(&plan).unwrap();
        assert_eq!(done.points.len(), space.div_ceil(4));
        assert_eq!(done.calibration.samples, done.points.len());
        assert!(done.kernel_seconds > 0.0);
        assert!(done
            .points
            .iter()
            .all(|p| p.sample.seconds > 0.0 && p.calibrated_s > 0.0));
        // Same seed, same draw.
        let again = calibrate_cpu(&plan).unwrap();
        let pts = |d: &Calibrated| -> Vec<ParamPoint> {
            d.points.iter().map(|p| p.sample.point.clone()).collect()
        };
        assert_eq!(pts(&done), pts(&again));
    }
}
