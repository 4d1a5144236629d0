//! The `guided` strategy's search: the cost model's best-ranked points first, then a local
//! search around the fastest measured ones.
//!
//! Why: a model ranks the space well on average but misses single cells; on the Zen 4 VM of
//! 2026-12-02 the calibrated model's top 10 % held a point within 5 % of the exhaustive best in
//! 48 of 54 (format, shape, threads) cells, and the misses were points one or two parameter
//! steps away from the model's pick (`rows` 6 against 8, `tile_n` 64 against 32). So half of
//! the budget goes to the model's top points and the rest to the unmeasured neighbours of the
//! fastest point measured so far (the points that differ from it in one parameter, by one step
//! of that parameter's valid values), best predicted first, until the budget is spent.
//!
//! The search is a plain function over an abstract measurement, so that the stage measures
//! through the kernels and `tuner_quality` replays it on an exhaustive tuning's table.

use kernels::ParamPoint;
use std::collections::BTreeMap;

/// The points that agree on every parameter but one, by the values of the other parameters:
/// each line holds (value of the one parameter, point index).
type Lines<'a> = BTreeMap<Vec<(&'a String, i64)>, Vec<(i64, usize)>>;

/// For each point, the points that differ from it in exactly one parameter and are next to it
/// among the points that share all its other parameters (the nearest smaller and larger value
/// of that parameter), in index order.
pub fn neighbours(points: &[ParamPoint]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]; points.len()];
    // Every parameter of every point: the points may come from several kernels' spaces, whose
    // parameters differ (a point never neighbours one of another space: their other
    // parameters differ).
    let names: std::collections::BTreeSet<&String> =
        points.iter().flat_map(|p| p.0.keys()).collect();
    for name in names {
        let mut lines = Lines::new();
        for (i, p) in points.iter().enumerate() {
            let Some(&v) = p.0.get(name) else { continue };
            let rest = p.0.iter().filter(|(k, _)| *k != name);
            lines
                .entry(rest.map(|(k, &v)| (k, v)).collect())
                .or_default()
                .push((v, i));
        }
        for line in lines.values_mut() {
            line.sort_unstable();
            for pair in line.windows(2) {
                let (a, b) = (pair[0].1, pair[1].1);
                out[a].push(b);
                out[b].push(a);
            }
        }
    }
    for n in &mut out {
        n.sort_unstable();
        n.dedup();
    }
    out
}

/// One batch to measure: the points' indices, and the point measured before whose score the
/// batch's scores are to be put on the scale of (`None` for the first batch).
pub struct Batch<'a> {
    /// Indices into the searched points.
    pub points: &'a [usize],
    /// A point measured in an earlier batch, with its score: a measurement that drifts between
    /// batches measures it again beside the batch and scales the batch by its ratio.
    pub anchor: Option<(usize, f64)>,
}

/// Searches `points` (with their predicted costs) within `budget` measurements: the `seeds`
/// best predicted first, in one batch, then batches of the unmeasured neighbours of the fastest
/// point measured so far that still has some (or, when no measured point has, the next points
/// of the ranking). `measure` returns one score per point of a batch, lower is faster (a point
/// that failed scores `f64::INFINITY`). Returns the measured points with their scores, in
/// measurement order.
pub fn guided_search<E>(
    points: &[ParamPoint],
    predicted: &[f64],
    budget: usize,
    seeds: usize,
    mut measure: impl FnMut(Batch<'_>) -> Result<Vec<f64>, E>,
) -> Result<Vec<(usize, f64)>, E> {
    assert_eq!(points.len(), predicted.len(), "one prediction per point");
    let budget = budget.clamp(1, points.len().max(1));
    let mut ranked: Vec<usize> = (0..points.len()).collect();
    ranked.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)));
    let near = neighbours(points);
    let mut done: Vec<(usize, f64)> = vec![];
    let mut measured = vec![false; points.len()];
    let mut batch: Vec<usize> = ranked[..seeds.clamp(1, budget).min(points.len())].to_vec();
    while !batch.is_empty() {
        let anchor = done
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let scores = measure(Batch {
            points: &batch,
            anchor,
        })?;
        assert_eq!(scores.len(), batch.len(), "one score per measured point");
        for (&i, s) in batch.iter().zip(scores) {
            measured[i] = true;
            done.push((i, if s.is_nan() { f64::INFINITY } else { s }));
        }
        let left = budget - done.len();
        if left == 0 {
            break;
        }
        let mut by_score = done.clone();
        by_score.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let around = by_score.iter().find_map(|&(i, s)| {
            let open: Vec<usize> = near[i].iter().copied().filter(|&j| !measured[j]).collect();
            (s.is_finite() && !open.is_empty()).then_some(open)
        });
        batch = match around {
            Some(mut open) => {
                open.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)));
                open.truncate(left);
                open
            }
            None => ranked
                .iter()
                .copied()
                .filter(|&j| !measured[j])
                .take(left)
                .collect(),
        };
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(rows: &[i64], tiles: &[i64]) -> Vec<ParamPoint> {
        let mut out = vec![];
        for &r in rows {
            for &t in tiles {
                // A constraint leaves a hole: rows 8 with tile 64 is invalid.
                if (r, t) != (8, 64) {
                    out.push(ParamPoint::from_pairs([("rows", r), ("tile_n", t)]));
                }
            }
        }
        out
    }

    #[test]
    fn neighbours_are_one_step_in_one_parameter_across_holes() {
        let pts = grid(&[1, 2, 4, 8], &[16, 32, 64]);
        let at = |r, t| {
            pts.iter()
                .position(|p| p.0["rows"] == r && p.0["tile_n"] == t)
                .unwrap()
        };
        let near = neighbours(&pts);
        let mut want = vec![at(2, 32), at(4, 16), at(4, 64), at(8, 32)];
        want.sort_unstable();
        assert_eq!(near[at(4, 32)], want);
        // (8, 64) does not exist: (4, 64)'s larger-rows neighbour is none, and (8, 32)'s
        // larger-tile neighbour is none.
        let mut want = vec![at(2, 64), at(4, 32)];
        want.sort_unstable();
        assert_eq!(near[at(4, 64)], want);
        assert_eq!(near[at(8, 32)].len(), 2);
    }

    /// A bowl whose minimum the model ranks last: the seeds miss it, the local search walks
    /// down to it.
    #[test]
    fn the_local_search_finds_a_minimum_the_model_ranks_last() {
        let rows: Vec<i64> = (1..=8).collect();
        let tiles: Vec<i64> = (1..=8).map(|t| t * 16).collect();
        let mut pts = vec![];
        for &r in &rows {
            for &t in &tiles {
                pts.push(ParamPoint::from_pairs([("rows", r), ("tile_n", t)]));
            }
        }
        let truth = |p: &ParamPoint| {
            let (r, t) = (p.0["rows"] as f64, p.0["tile_n"] as f64 / 16.0);
            1.0 + (r - 6.0).powi(2) + (t - 7.0).powi(2)
        };
        // The model prefers small tiles and rows: the true best is far down its ranking.
        let predicted: Vec<f64> = pts
            .iter()
            .map(|p| (p.0["rows"] + p.0["tile_n"] / 16) as f64)
            .collect();
        let mut calls = 0;
        let mut anchors = vec![];
        let done = guided_search(&pts, &predicted, 32, 8, |b| {
            calls += 1;
            anchors.push(b.anchor.map(|a| a.0));
            Ok::<_, ()>(b.points.iter().map(|&i| truth(&pts[i])).collect())
        })
        .unwrap();
        assert_eq!(done.len(), 32, "the budget is spent exactly");
        let mut seen: Vec<usize> = done.iter().map(|d| d.0).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 32, "no point is measured twice");
        let best = done.iter().map(|d| d.1).fold(f64::INFINITY, f64::min);
        assert_eq!(best, 1.0, "reached the minimum at rows 6, tile 112");
        assert!(calls > 1 && anchors[0].is_none() && anchors[1..].iter().all(|a| a.is_some()));
        // The model's top 32 alone miss it by far.
        let mut by_model: Vec<usize> = (0..pts.len()).collect();
        by_model.sort_by(|&a, &b| predicted[a].total_cmp(&predicted[b]));
        let model_best = by_model[..32]
            .iter()
            .map(|&i| truth(&pts[i]))
            .fold(f64::INFINITY, f64::min);
        assert!(model_best >= 9.0, "the model alone stops at {model_best}");
    }

    #[test]
    fn failed_points_are_not_expanded_and_the_ranking_fills_the_budget() {
        let pts = grid(&[1, 2], &[16, 32]);
        let predicted = vec![0.0, 1.0, 2.0, 3.0];
        // Every point fails: no neighbourhood is searched, the ranking fills the budget.
        let done = guided_search(&pts, &predicted, 3, 1, |b| {
            Ok::<_, ()>(vec![f64::NAN; b.points.len()])
        })
        .unwrap();
        assert_eq!(
            done.iter().map(|d| d.0).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "ranking order once no finite point is left to expand"
        );
        assert!(done.iter().all(|d| d.1 == f64::INFINITY));
        // A budget past the space measures the space once.
        let done = guided_search(&pts, &predicted, 99, 2, |b| {
            Ok::<_, ()>(b.points.iter().map(|&i| i as f64).collect())
        })
        .unwrap();
        assert_eq!(done.len(), 4);
    }
}
