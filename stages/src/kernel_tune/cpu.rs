//! Tuning on the CPU kernels: every chosen point and every dense point in interleaved rounds,
//! the fastest few again in more rounds, the best chosen on all their samples.

use super::search::{distinct_runs, rank_by_cost, search};
use super::{argmin, rounds, summarise, Measured, TuneSpec, Tuned};
use crate::StageError;
use kernels::{FormatSignature, ParamPoint, SparseMatrix};

/// The fewest rounds in which [`tune_cpu`] measures every chosen point.
const FIRST_ROUNDS: usize = 3;
/// The fastest sparse points that [`tune_cpu`] measures again, with every dense point, the
/// fewest rounds it measures them in, and the multiple of the per-point budget those take.
const CONFIRM_POINTS: usize = 3;
const CONFIRM_ROUNDS: usize = 9;
const CONFIRM_BUDGETS: f64 = 3.0;

pub(super) fn tune_cpu(spec: &TuneSpec) -> Result<Tuned, StageError> {
    let sig = &spec.sig;
    let n = spec.n;
    let a = kernels::synthetic(sig, 0x5eed)?;
    let b = kernels::random_values(sig.cols * n, 0xb);
    let mut c = vec![0f32; sig.rows * n];
    let budget = spec.seconds_per_point;
    let space = kernels::cpu_space(sig, n);
    let cost = |sig: &FormatSignature, p: &ParamPoint| match &spec.calibration {
        Some(cal) => cal.cost(sig, n, p),
        None => kernels::predicted_cost(sig, n, p),
    };
    // The space as the products run it: one point per kernel (the cheapest-ranked of those
    // that run alike), so the space's size is what an exhaustive tuning measures.
    let ranked = distinct_runs(rank_by_cost(&space, |p| cost(sig, p)), |p| {
        kernels::effective_point(sig, n, p)
    });
    let space_size = ranked.len();
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
    // A dense format's candidates are the baseline's own points: they are measured once and
    // stand for the baseline too (measured twice, a point read up to 1.3x faster than itself).
    let format_is_dense = matches!(a, SparseMatrix::Dense(_));
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
            None if format_is_dense => {}
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
    let baseline = if format_is_dense {
        &[][..]
    } else {
        &dense_points[..]
    };
    let runs: Vec<(&SparseMatrix, &ParamPoint)> = order
        .iter()
        .map(|&i| (&a, &points[i].params))
        .chain(baseline.iter().map(|m| (&dense_a, &m.params)))
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
    if format_is_dense {
        dense_points = points.clone();
        for m in &mut dense_points {
            m.kernel = "dense".into();
        }
    }
    let dense_best = if format_is_dense {
        best
    } else {
        argmin(&dense_points).ok_or_else(empty)?
    };
    let pred: Vec<f64> = points.iter().map(|m| m.predicted_s).collect();
    let meas: Vec<f64> = points.iter().map(|m| m.timing.median_us).collect();
    Ok(Tuned {
        space_size,
        best,
        dense_best,
        spearman: kernels::spearman(&pred, &meas),
        points,
        dense_points,
        ranking: Some(match &spec.calibration {
            Some(c) if ranked.iter().any(|(p, _)| c.covers(sig, n, p)) => format!(
                "calibrated on this device ({} samples, {} terms)",
                c.samples,
                c.terms.len()
            ),
            Some(_) => "analytical (the calibration has no terms for these kernels)".into(),
            None => "analytical".into(),
        }),
        fallback: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{tune, Backend, Strategy};
    use super::*;
    use kernels::{Calibration, Pattern};

    /// A dense format is its own baseline: each point measured once, the baseline's rows the
    /// same measurements, its best exactly as fast as the dense best.
    #[test]
    fn a_dense_format_is_measured_once_as_its_own_baseline() {
        let sig = FormatSignature::for_pattern(&Pattern::Dense, 64, 64).unwrap();
        let spec = TuneSpec {
            sig,
            n: 8,
            strategy: Strategy::Exhaustive,
            seconds_per_point: 0.0,
            backend: Backend::Cpu,
            calibration: None,
        };
        let t = tune(&spec).unwrap();
        assert_eq!(t.points.len(), t.dense_points.len());
        for (p, d) in t.points.iter().zip(&t.dense_points) {
            assert_eq!((&p.params, &p.timing), (&d.params, &d.timing));
            assert_eq!(d.kernel, "dense");
        }
        assert_eq!(t.dense_best().timing.median_us, t.best().timing.median_us);
    }

    #[test]
    fn model_strategy_measures_the_budget_and_ranks_from_zero() {
        let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 8, m: 8 }, 16, 32).unwrap();
        let spec = TuneSpec {
            sig,
            n: 64,
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

    /// At batch 1 (and a few columns) every point of one thread count runs the same kernel: a
    /// budget larger than the thread counts measures each of them once, not copies of the
    /// cheapest-ranked one.
    #[test]
    fn a_batch_one_tuning_measures_each_thread_count_once() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, 64, 128).unwrap();
        for n in [1, 4] {
            let full = kernels::cpu_space(&sig, n).points();
            let threads: std::collections::BTreeSet<i64> =
                full.iter().map(|p| p.0["threads"]).collect();
            for strategy in [
                Strategy::Model { budget: 8 },
                Strategy::Guided { budget: 8 },
            ] {
                let t = tune(&TuneSpec {
                    sig,
                    n,
                    strategy,
                    seconds_per_point: 0.0,
                    backend: Backend::Cpu,
                    calibration: None,
                })
                .unwrap();
                if kernels::isa() == kernels::Isa::Scalar {
                    continue; // the tile kernels run every product on scalar code
                }
                assert!(full.len() > 8, "{} points at n = {n}", full.len());
                assert_eq!(t.space_size, threads.len(), "n = {n}");
                let measured: std::collections::BTreeSet<i64> =
                    t.points.iter().map(|m| m.params.0["threads"]).collect();
                assert_eq!(t.points.len(), threads.len(), "n = {n}: {:?}", t.points);
                assert_eq!(measured, threads, "n = {n}");
            }
        }
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

    /// `ranking` says calibrated only where the calibration ranked something: at batch 1 (the
    /// matrix-vector kernels, which it has no terms for) and without one, analytical.
    #[test]
    fn the_ranking_says_analytical_where_no_calibration_applied() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, 32, 64).unwrap();
        let cal = Calibration {
            terms: [("nm:tile_n=16".to_owned(), 1.0)].into_iter().collect(),
            samples: 1,
        };
        let ranking = |n: usize, calibration: Option<Calibration>| {
            tune(&TuneSpec {
                sig,
                n,
                strategy: Strategy::Model { budget: 1 },
                seconds_per_point: 0.0,
                backend: Backend::Cpu,
                calibration,
            })
            .unwrap()
            .ranking
            .unwrap()
        };
        assert!(ranking(64, Some(cal.clone())).starts_with("calibrated on this device"));
        assert_eq!(
            ranking(1, Some(cal)),
            "analytical (the calibration has no terms for these kernels)"
        );
        assert_eq!(ranking(64, None), "analytical");
    }
}
