//! The order a tuning takes its points in: the space ranked by a cost, and the strategies'
//! choice from that ranking.

use super::{guided, Strategy};
use kernels::{KernelSpace, ParamPoint};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;

/// The space ranked by a cost (cheapest first, ties in point order), with each point's cost.
pub(super) fn rank_by_cost(
    space: &KernelSpace,
    cost: impl Fn(&ParamPoint) -> f64,
) -> Vec<(ParamPoint, f64)> {
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

/// `ranked` without the points that run as an earlier one does (equal `runs_as`), so that a
/// budget is not spent measuring copies of one kernel: at batch 1 every point of one thread
/// count runs the same matrix-vector kernel ([`kernels::effective_point`]).
pub(super) fn distinct_runs(
    ranked: Vec<(ParamPoint, f64)>,
    runs_as: impl Fn(&ParamPoint) -> ParamPoint,
) -> Vec<(ParamPoint, f64)> {
    let mut seen = HashSet::new();
    ranked
        .into_iter()
        .filter(|(p, _)| seen.insert(runs_as(p)))
        .collect()
}

/// Measures the points `strategy` chooses from `ranked` (the space, cheapest predicted first)
/// through `measure`, which scores each batch of indices into `ranked` (lower is faster; see
/// [`guided::Batch`]). Returns the measured indices with their scores, in measurement order.
/// Every strategy but `guided` measures one batch.
pub(super) fn search<E>(
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
