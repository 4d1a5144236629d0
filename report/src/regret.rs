//! Tuner regret from measured rows: what a strategy would have found had it measured only
//! `k` of the configurations that were measured.
//!
//! Regret is `best found / best measured − 1`. The cost model's strategy measures the `k`
//! configurations it predicts fastest; random search measures a uniform `k`-subset, and its
//! regret here is the exact expectation over all subsets; exhaustive search is the reference
//! (regret 0 once it has measured everything).

/// The configurations the cost model ranks fastest (predicted cost, ties by position), `k` of
/// them, measured: the best latency among them over the best of all, minus one. `points` are
/// (predicted cost, measured latency); `NaN` if `points` is empty.
pub fn model_regret(points: &[(f64, f64)], k: usize) -> f64 {
    let best = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0).then(a.cmp(&b)));
    let found = order
        .iter()
        .take(k.max(1))
        .map(|&i| points[i].1)
        .fold(f64::INFINITY, f64::min);
    if points.is_empty() {
        f64::NAN
    } else {
        found / best - 1.0
    }
}

/// The expected regret of measuring a uniform random `k`-subset of `latencies` (without
/// replacement): with the latencies sorted ascending, the subset's best is the `i`-th with
/// probability C(n−1−i, k−1) / C(n, k). `NaN` if `latencies` is empty.
pub fn random_regret(latencies: &[f64], k: usize) -> f64 {
    let n = latencies.len();
    if n == 0 {
        return f64::NAN;
    }
    let k = k.clamp(1, n);
    let mut t = latencies.to_vec();
    t.sort_by(f64::total_cmp);
    // p_0 = k/n; p_{i+1} = p_i · (n−i−k)/(n−i−1).
    let mut p = k as f64 / n as f64;
    let mut expected = 0.0;
    for (i, ti) in t.iter().enumerate() {
        expected += p * ti;
        if i + 1 < n {
            p *= (n - i - k) as f64 / (n - i - 1) as f64;
        }
        if p == 0.0 {
            break;
        }
    }
    expected / t[0] - 1.0
}

/// `k` for a budget of `fraction` of `n` configurations: at least one, at most `n`.
pub fn budget_count(fraction: f64, n: usize) -> usize {
    ((fraction * n as f64).ceil() as usize).clamp(1, n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `k`-subset of `0..n`, for the brute-force oracle.
    fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
        (0u32..1 << n)
            .filter(|m| m.count_ones() as usize == k)
            .map(|m| (0..n).filter(|i| m >> i & 1 == 1).collect())
            .collect()
    }

    #[test]
    fn random_regret_is_the_mean_over_all_subsets() {
        let t = [5.0, 3.0, 9.0, 3.5, 4.0, 12.0, 3.2];
        for k in 1..=t.len() {
            let all = subsets(t.len(), k);
            let mean = all
                .iter()
                .map(|s| s.iter().map(|&i| t[i]).fold(f64::INFINITY, f64::min) / 3.0 - 1.0)
                .sum::<f64>()
                / all.len() as f64;
            let got = random_regret(&t, k);
            assert!((got - mean).abs() < 1e-12, "k {k}: {got} vs {mean}");
        }
        assert_eq!(random_regret(&t, t.len()), 0.0);
    }

    #[test]
    fn model_regret_takes_the_predicted_best() {
        // Predicted order: 2, 0, 1, 3; measured best is index 1.
        let p = [(2.0, 8.0), (3.0, 4.0), (1.0, 10.0), (4.0, 5.0)];
        assert_eq!(model_regret(&p, 1), 10.0 / 4.0 - 1.0);
        assert_eq!(model_regret(&p, 2), 8.0 / 4.0 - 1.0);
        assert_eq!(model_regret(&p, 3), 0.0);
        assert_eq!(model_regret(&p, 0), model_regret(&p, 1));
        assert!(model_regret(&[], 3).is_nan());
    }

    #[test]
    fn budgets_round_up_and_stay_in_range() {
        assert_eq!(budget_count(0.02, 10), 1);
        assert_eq!(budget_count(0.5, 9), 5);
        assert_eq!(budget_count(1.0, 9), 9);
        assert_eq!(budget_count(2.0, 9), 9);
    }
}
