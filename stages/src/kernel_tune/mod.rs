//! Kernel tuning: for one format signature, shape and batch-token count, search the kernel's
//! parameter space and measure the chosen points on synthetic weights of the exact structure
//! (values do not change speed), and tune the dense baseline on the same shape so that every
//! speedup is against a tuned dense kernel.
//!
//! Strategies: `exhaustive` measures every valid point; `random` measures `budget` points drawn
//! with a seed; `model` ranks the whole space with the analytical cost model
//! ([`kernels::predicted_cost`]) and measures the top `budget`; `guided` measures the model's
//! top half of `budget`, then spends the rest on a local search around the fastest measured
//! points ([`guided`]). Predicted and measured costs are
//! both kept, so the model's rank correlation and regret can be queried. On the CPU the model
//! is the analytical one corrected by the device's [`Calibration`] when the spec carries one
//! ([`calibrate`] measures it), and the analytical prediction is kept beside. On the CPU, every
//! chosen point and every dense point are measured in interleaved rounds ([`rounds`]), the 3
//! fastest points and every dense point then in more rounds, and the best point and the dense
//! baseline are chosen on all their samples: the machine's speed drifts over a tuning, and
//! neither the ranking nor the speedup should depend on when each point was measured.
//!
//! Backends: the CPU kernels (the default), or the CUDA kernels of [`kernels::cuda`] through
//! [`cuda::tune_cuda`] (see there for what differs: its own cost model, fp16, failed points).

pub mod calibrate;
pub mod cuda;
mod cuda_check;
mod cuda_ranking;
#[cfg(test)]
pub(crate) mod cuda_stand_in;
pub mod guided;
mod measure;

pub use measure::{rounds, summarise, Timing};

use crate::StageError;
use kernels::{
    Calibration, FormatSignature, KernelFamily, KernelSpace, ParamPoint, Pattern, SparseMatrix,
};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

keytag::tagged_enum! {
    /// The family of a [`Strategy`], without its parameters.
    pub enum StrategyKind {
        /// [`Strategy::Exhaustive`].
        Exhaustive = "exhaustive",
        /// [`Strategy::Random`].
        Random = "random",
        /// [`Strategy::Model`].
        Model = "model",
        /// [`Strategy::Guided`].
        Guided = "guided",
    }
}

/// How points are chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Strategy {
    /// Every valid point.
    Exhaustive,
    /// `budget` points drawn uniformly with `seed`.
    Random {
        /// Points measured.
        budget: usize,
        /// Seed of the draw.
        seed: u64,
    },
    /// The `budget` points the cost model ranks best.
    Model {
        /// Points measured.
        budget: usize,
    },
    /// The cost model's best-ranked `⌈budget/2⌉` points, then the neighbours of the fastest
    /// measured ones until `budget` points are measured ([`guided::guided_search`]).
    Guided {
        /// Points measured.
        budget: usize,
    },
}

impl Strategy {
    /// The strategy's family.
    pub fn kind(&self) -> StrategyKind {
        match self {
            Strategy::Exhaustive => StrategyKind::Exhaustive,
            Strategy::Random { .. } => StrategyKind::Random,
            Strategy::Model { .. } => StrategyKind::Model,
            Strategy::Guided { .. } => StrategyKind::Guided,
        }
    }
}

keytag::tagged_enum! {
    /// Which kernels a tuning measures.
    #[derive(Default)]
    pub enum Backend {
        /// The CPU kernels of [`kernels`] (f32).
        #[default]
        Cpu = "cpu",
        /// The CUDA kernels of [`kernels::cuda`] on the process's device ([`cuda::shared_device`]).
        Cuda = "cuda",
    }
}

/// The kernel families a tuning of `pattern` at `rows × cols` on `backend` measures: the
/// format's kernel (on CUDA, the CSR kernel for a format the tensor-core kernel does not run)
/// and the dense baseline that every tuning also measures.
pub fn families(
    backend: Backend,
    pattern: &Pattern,
    rows: usize,
    cols: usize,
) -> Vec<KernelFamily> {
    use kernels::PatternKind as K;
    let (sparse, dense) = match backend {
        Backend::Cpu => (
            match pattern.kind() {
                K::Dense => KernelFamily::CpuDense,
                K::Unstructured => KernelFamily::CpuCsr,
                K::Nm => KernelFamily::CpuNm,
                K::Vnm => KernelFamily::CpuVnm,
                K::Vector => KernelFamily::CpuVector,
            },
            KernelFamily::CpuDense,
        ),
        Backend::Cuda => (cuda::family(pattern, rows, cols), KernelFamily::CudaDense),
    };
    if sparse == dense {
        vec![dense]
    } else {
        vec![sparse, dense]
    }
}

/// One tuning problem.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneSpec {
    /// Structure and shape of the sparse operand.
    pub sig: FormatSignature,
    /// Batch tokens: columns of the dense operand.
    pub n: usize,
    /// Search strategy.
    pub strategy: Strategy,
    /// Time budget per measured point, seconds (rounds continue until the points' budgets are
    /// spent; CPU only: CUDA takes a fixed number of device-timed samples, [`cuda::REPS`]).
    pub seconds_per_point: f64,
    /// The kernels measured.
    pub backend: Backend,
    /// The device's calibration of the CPU cost model for this format's family (`None`: the
    /// analytical model alone; the CUDA backend has its own model and ignores it).
    pub calibration: Option<Calibration>,
}

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
    /// Size of the kernel's valid space.
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
    /// What ranked the space, where that needs saying: on CUDA, the GPU the cost model assumed
    /// and where its register counts came from (`None`: the CPU cost model).
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

/// Writes a point as `name=value,...` (names in order).
pub fn format_params(p: &ParamPoint) -> String {
    p.0.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`format_params`].
pub fn parse_params(s: &str) -> Result<ParamPoint, StageError> {
    let mut p = ParamPoint::default();
    for part in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| StageError::InvalidConfig(format!("bad parameter `{part}`")))?;
        let v = v
            .parse()
            .map_err(|_| StageError::InvalidConfig(format!("bad parameter value `{part}`")))?;
        p.0.insert(k.to_owned(), v);
    }
    Ok(p)
}

/// The space ranked by a cost (cheapest first, ties in point order), with each point's cost.
fn rank_by_cost(space: &KernelSpace, cost: impl Fn(&ParamPoint) -> f64) -> Vec<(ParamPoint, f64)> {
    let mut ranked: Vec<(ParamPoint, f64)> = space
        .points()
        .into_iter()
        .map(|p| {
            let c = cost(&p);
            (p, c)
        })
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    ranked
}

/// Measures the points `strategy` chooses from `ranked` (the space, cheapest predicted first)
/// through `measure`, which scores each batch of indices into `ranked` (lower is faster; see
/// [`guided::Batch`]). Returns the measured indices with their scores, in measurement order.
/// Every strategy but `guided` measures one batch.
fn search<E>(
    ranked: &[(ParamPoint, f64)],
    strategy: &Strategy,
    mut measure: impl FnMut(guided::Batch<'_>) -> Result<Vec<f64>, E>,
) -> Result<Vec<(usize, f64)>, E> {
    let mut all: Vec<usize> = (0..ranked.len()).collect();
    match *strategy {
        Strategy::Exhaustive => {}
        Strategy::Model { budget } => all.truncate(budget.max(1)),
        Strategy::Random { budget, seed } => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            all.shuffle(&mut rng);
            all.truncate(budget.max(1));
        }
        Strategy::Guided { budget } => {
            let (points, predicted): (Vec<ParamPoint>, Vec<f64>) = ranked.iter().cloned().unzip();
            return guided::guided_search(&points, &predicted, budget, budget.div_ceil(2), measure);
        }
    }
    let scores = measure(guided::Batch {
        points: &all,
        anchor: None,
    })?;
    Ok(all.into_iter().zip(scores).collect())
}

/// Index of the fastest point that was measured, if any was.
fn argmin(v: &[Measured]) -> Option<usize> {
    (0..v.len())
        .filter(|&i| v[i].error.is_none() && !v[i].timing.median_us.is_nan())
        .min_by(|&i, &j| v[i].timing.median_us.total_cmp(&v[j].timing.median_us))
}

/// Tunes one signature on the spec's backend. The caller holds the per-host measurement lock
/// around this call.
pub fn tune(spec: &TuneSpec) -> Result<Tuned, StageError> {
    match spec.backend {
        Backend::Cpu => tune_cpu(spec),
        Backend::Cuda => {
            let dev = cuda::shared_device().map_err(|e| StageError::Cuda(e.to_string()))?;
            cuda::tune_cuda(spec, dev)
        }
    }
}

/// The fewest rounds in which [`tune_cpu`] measures every chosen point.
const FIRST_ROUNDS: usize = 3;
/// The fastest sparse points that [`tune_cpu`] measures again, with every dense point, the
/// fewest rounds it measures them in, and the multiple of the per-point budget those take.
const CONFIRM_POINTS: usize = 3;
const CONFIRM_ROUNDS: usize = 9;
const CONFIRM_BUDGETS: f64 = 3.0;

fn tune_cpu(spec: &TuneSpec) -> Result<Tuned, StageError> {
    let sig = &spec.sig;
    let n = spec.n;
    let a = kernels::synthetic(sig, 0x5eed)?;
    let b = kernels::random_values(sig.cols * n, 0xb);
    let mut c = vec![0f32; sig.rows * n];
    let budget = spec.seconds_per_point;
    let space = kernels::cpu_space(sig, n);
    let space_size = space.points().len();
    let cost = |sig: &FormatSignature, p: &ParamPoint| match &spec.calibration {
        Some(cal) => cal.cost(sig, n, p),
        None => kernels::predicted_cost(sig, n, p),
    };
    let ranked = rank_by_cost(&space, |p| cost(sig, p));
    let dense = kernels::dense_space(sig.rows, sig.cols, n);
    let dense_a = match &a {
        SparseMatrix::Dense(_) => a.clone(),
        other => SparseMatrix::from_masked(
            &kernels::Pattern::Dense,
            &kernels::random_values(sig.rows * sig.cols, 0xd),
            &kernels::Mask::full(other.rows(), other.cols()),
        )?,
    };
    let dsig = dense_a.signature();
    let mut dense_points: Vec<Measured> =
        rank_by_cost(&dense, |p| kernels::predicted_cost(&dsig, n, p))
            .into_iter()
            .enumerate()
            .map(|(predicted_rank, (p, predicted_s))| Measured {
                kernel: "dense".into(),
                analytical_s: predicted_s,
                params: p,
                predicted_s,
                predicted_rank,
                timing: summarise(vec![]),
                error: None,
            })
            .collect();
    let mut measure = |runs: &[(&SparseMatrix, &ParamPoint)], min_rounds: usize, budget: f64| {
        rounds(
            runs.len(),
            |k| kernels::spmm(runs[k].0, &b, n, &mut c, runs[k].1),
            min_rounds,
            min_rounds.max(50),
            budget,
        )
    };
    // The first batch of sparse points runs with every dense point in the same interleaved
    // rounds (see [`rounds`]), so that neither the ranking nor the speedup depends on when
    // each point happened to be measured; a later batch of the `guided` search runs with the
    // best point so far, and its medians are scaled by that point's ratio to its score.
    let mut sparse_samples: Vec<Vec<f64>> = vec![vec![]; ranked.len()];
    let mut dense_samples: Vec<Vec<f64>> = vec![];
    let measured = search(&ranked, &spec.strategy, |batch| {
        let mut runs: Vec<(&SparseMatrix, &ParamPoint)> =
            batch.points.iter().map(|&i| (&a, &ranked[i].0)).collect();
        match batch.anchor {
            Some((j, _)) => runs.push((&a, &ranked[j].0)),
            None => runs.extend(dense_points.iter().map(|m| (&dense_a, &m.params))),
        }
        let mut samples = measure(&runs, FIRST_ROUNDS, budget)?;
        let k = batch.points.len();
        let medians: Vec<f64> = samples
            .iter()
            .map(|s| summarise(s.clone()).median_us)
            .collect();
        let scale = match batch.anchor {
            Some((_, score)) if (score / medians[k]).is_finite() => score / medians[k],
            _ => 1.0,
        };
        if batch.anchor.is_none() {
            dense_samples = samples.split_off(k);
        }
        for (&i, s) in batch.points.iter().zip(samples) {
            sparse_samples[i] = s;
        }
        Ok::<_, StageError>(medians[..k].iter().map(|m| m * scale).collect())
    })?;
    let mut points: Vec<Measured> = measured
        .iter()
        .map(|&(i, _)| {
            let (p, predicted_s) = &ranked[i];
            Measured {
                kernel: space.kernel.to_owned(),
                analytical_s: kernels::predicted_cost(sig, n, p),
                params: p.clone(),
                predicted_s: *predicted_s,
                predicted_rank: i,
                timing: summarise(vec![]),
                error: None,
            }
        })
        .collect();
    let mut samples: Vec<Vec<f64>> = measured
        .iter()
        .map(|&(i, _)| std::mem::take(&mut sparse_samples[i]))
        .chain(dense_samples)
        .collect();
    let empty = || StageError::InvalidConfig(format!("empty kernel space for {sig:?} at n = {n}"));
    // The fastest few sparse points (by their scores) and every dense point again, in more
    // rounds: the best is chosen among these confirmed points, on all their samples.
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&i, &j| measured[i].1.total_cmp(&measured[j].1));
    order.truncate(CONFIRM_POINTS);
    let runs: Vec<(&SparseMatrix, &ParamPoint)> = order
        .iter()
        .map(|&i| (&a, &points[i].params))
        .chain(dense_points.iter().map(|m| (&dense_a, &m.params)))
        .collect();
    let more = measure(&runs, CONFIRM_ROUNDS, CONFIRM_BUDGETS * budget)?;
    let positions = order.iter().copied().chain(points.len()..samples.len());
    for (i, s) in positions.zip(more) {
        samples[i].extend(s);
    }
    let mut samples = samples.into_iter();
    for m in points.iter_mut().chain(dense_points.iter_mut()) {
        m.timing = summarise(samples.next().unwrap_or_default());
    }
    let best = order
        .iter()
        .copied()
        .min_by(|&i, &j| {
            points[i]
                .timing
                .median_us
                .total_cmp(&points[j].timing.median_us)
        })
        .ok_or_else(empty)?;
    let dense_best = argmin(&dense_points).ok_or_else(empty)?;
    let pred: Vec<f64> = points.iter().map(|m| m.predicted_s).collect();
    let meas: Vec<f64> = points.iter().map(|m| m.timing.median_us).collect();
    Ok(Tuned {
        space_size,
        best,
        dense_best,
        spearman: kernels::spearman(&pred, &meas),
        points,
        dense_points,
        ranking: spec.calibration.as_ref().map(|c| {
            format!(
                "calibrated on this device ({} samples, {} terms)",
                c.samples,
                c.terms.len()
            )
        }),
        fallback: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::Pattern;

    #[test]
    fn params_round_trip() {
        let p = ParamPoint::from_pairs([("rows", 4), ("threads", 2), ("tile_n", 32)]);
        assert_eq!(parse_params(&format_params(&p)).unwrap(), p);
    }

    #[test]
    fn model_strategy_measures_the_budget_and_ranks_from_zero() {
        let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 8, m: 8 }, 16, 32).unwrap();
        let spec = TuneSpec {
            sig,
            n: 8,
            strategy: Strategy::Model { budget: 3 },
            seconds_per_point: 0.0,
            backend: Backend::Cpu,
            calibration: None,
        };
        let t = tune(&spec).unwrap();
        assert_eq!(t.points.len(), 3.min(t.space_size));
        assert_eq!(t.points[0].predicted_rank, 0);
        assert!(t.best().timing.median_us.is_finite());
        assert!(!t.dense_points.is_empty());
        // With no time budget every point takes a sample in each of 3 rounds; the confirmed
        // points (the 3 fastest sparse ones, every dense one) one more in each of 9 rounds.
        let confirmed = FIRST_ROUNDS + CONFIRM_ROUNDS;
        assert_eq!(t.best().timing.repeats, confirmed);
        let n_confirmed = t
            .points
            .iter()
            .filter(|m| m.timing.repeats == confirmed)
            .count();
        assert_eq!(n_confirmed, CONFIRM_POINTS.min(t.points.len()));
        assert!(t
            .points
            .iter()
            .all(|m| [FIRST_ROUNDS, confirmed].contains(&m.timing.repeats)));
        assert!(t.dense_points.iter().all(|m| m.timing.repeats == confirmed));
        let ex = tune(&TuneSpec {
            strategy: Strategy::Exhaustive,
            ..spec
        })
        .unwrap();
        assert_eq!(ex.points.len(), ex.space_size);
    }

    #[test]
    fn guided_strategy_seeds_from_the_model_then_steps_to_neighbours() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, 32, 64).unwrap();
        let t = tune(&TuneSpec {
            sig,
            n: 64,
            strategy: Strategy::Guided { budget: 8 },
            seconds_per_point: 0.0,
            backend: Backend::Cpu,
            calibration: None,
        })
        .unwrap();
        assert!(t.space_size > 8);
        assert_eq!(t.points.len(), 8, "the budget, no more");
        let ranks: Vec<usize> = t.points.iter().map(|m| m.predicted_rank).collect();
        assert_eq!(
            ranks[..4],
            [0, 1, 2, 3],
            "half the budget on the model's top points"
        );
        let mut distinct = ranks.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "no point measured twice");
        // Each later point differs from an earlier one in one parameter.
        let differ = |a: &ParamPoint, b: &ParamPoint| {
            a.0.iter().filter(|(k, v)| b.0.get(*k) != Some(*v)).count()
        };
        for i in 4..8 {
            assert!(
                t.points[..i]
                    .iter()
                    .any(|m| differ(&m.params, &t.points[i].params) == 1),
                "{:?} is no neighbour of an earlier point",
                t.points[i].params
            );
        }
        assert_eq!(t.best().timing.repeats, FIRST_ROUNDS + CONFIRM_ROUNDS);
        assert!(t.dense_points.iter().all(|m| m.timing.repeats > 0));
    }

    #[test]
    fn a_calibrated_tuning_ranks_by_the_calibration_and_keeps_the_analytical_prediction() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, 32, 64).unwrap();
        let n = 64;
        let analytical = |p: &ParamPoint| kernels::predicted_cost(&sig, n, p);
        let top = kernels::cpu_space(&sig, n)
            .points()
            .into_iter()
            .min_by(|a, b| analytical(a).total_cmp(&analytical(b)))
            .unwrap();
        // This device runs the analytical model's favourite tile width e⁵ times slower.
        let liked = top.0["tile_n"];
        let cal = Calibration {
            terms: [(format!("nm:tile_n={liked}"), 5.0)].into_iter().collect(),
            samples: 1,
        };
        let t = tune(&TuneSpec {
            sig,
            n,
            strategy: Strategy::Model { budget: 2 },
            seconds_per_point: 0.0,
            backend: Backend::Cpu,
            calibration: Some(cal.clone()),
        })
        .unwrap();
        assert!(t.points.iter().all(|m| m.params.0["tile_n"] != liked));
        for m in &t.points {
            assert_eq!(m.predicted_s, cal.cost(&sig, n, &m.params));
            assert_eq!(m.analytical_s, analytical(&m.params));
        }
        assert!(t.ranking.unwrap().starts_with("calibrated on this device"));
    }
}
