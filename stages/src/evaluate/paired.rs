//! Paired timing: a model and its dense baseline measured in alternation, so that each ratio
//! compares two passes taken moments apart.
//!
//! Timed in separate blocks, the same dense model read 1.13× faster than itself on a quiet
//! 2-core VM (issue 18): the machine drifts between blocks by more than the kernels differ.
//! In alternation the drift hits both sides of a pair alike, and the speedup is the median of
//! the per-pair ratios, with a distribution-free 95 % confidence interval of that median (order
//! statistics of the ratios), which is what the Pareto front's ties are judged by.

/// A speedup measured in pairs: the median of `baseline / model` over the pairs, and the 95 %
/// confidence interval of that median.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speedup {
    /// Median of the per-pair ratios.
    pub median: f64,
    /// Lower end of the median's 95 % confidence interval.
    pub lo: f64,
    /// Upper end of the median's 95 % confidence interval.
    pub hi: f64,
    /// Number of pairs.
    pub pairs: usize,
}

impl Speedup {
    /// No pairs: every figure NaN.
    pub const UNMEASURED: Speedup = Speedup {
        median: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        pairs: 0,
    };
}

/// Times `model` and `baseline` alternately (one warm-up call of each first), in pairs whose
/// order varies (`rounds`) so that neither always runs first, until `budget_s` has passed (at
/// least `min_pairs`, at most `max_pairs`). Returns each side's samples (microseconds), pair
/// `i` being the `i`-th of each.
pub fn alternate<E>(
    mut model: impl FnMut() -> Result<(), E>,
    mut baseline: impl FnMut() -> Result<(), E>,
    min_pairs: usize,
    max_pairs: usize,
    budget_s: f64,
) -> Result<(Vec<f64>, Vec<f64>), E> {
    let mut s = rounds(
        &mut [&mut model, &mut baseline],
        min_pairs,
        max_pairs,
        budget_s,
    )?;
    let b = s.pop().expect("two passes");
    let a = s.pop().expect("two passes");
    Ok((a, b))
}

/// Times every pass once per round (one warm-up call of each first), in a new order each round
/// (a seeded shuffle), until `budget_s` has passed (at least `min_rounds`, at most
/// `max_rounds`). Returns each pass's samples (microseconds), round `i` the `i`-th.
///
/// A pass's time depends on the pass before it (which thread pool it left awake, what it left
/// in cache): in a fixed order that alternated direction each round, a dense model read 0.75×
/// of itself at batch 1 (5 µs passes) because its two copies sat at different places in the
/// order. Shuffled, every pass follows every other equally often.
pub fn rounds<E>(
    passes: &mut [&mut dyn FnMut() -> Result<(), E>],
    min_rounds: usize,
    max_rounds: usize,
    budget_s: f64,
) -> Result<Vec<Vec<f64>>, E> {
    for pass in passes.iter_mut() {
        pass()?;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(max_rounds); passes.len()];
    let mut order: Vec<usize> = (0..passes.len()).collect();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let start = std::time::Instant::now();
    let mut round = 0;
    while round < max_rounds && (round < min_rounds || start.elapsed().as_secs_f64() < budget_s) {
        // Fisher-Yates with a xorshift64: the order only has to vary, not to be unpredictable.
        for i in (1..order.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            order.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        for &i in &order {
            let t = std::time::Instant::now();
            passes[i]()?;
            samples[i].push(t.elapsed().as_secs_f64() * 1e6);
        }
        round += 1;
    }
    Ok(samples)
}

/// The speedup of `model` over `baseline` from paired samples (`baseline[i] / model[i]`).
/// The interval is the order-statistic interval of the median, ranks `n/2 ∓ 0.98·√n` (the
/// normal approximation of the binomial at 95 %); with fewer than 6 pairs it is their range.
pub fn speedup(model: &[f64], baseline: &[f64]) -> Speedup {
    let mut ratios: Vec<f64> = model
        .iter()
        .zip(baseline)
        .map(|(m, b)| b / m)
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    if n == 0 {
        return Speedup::UNMEASURED;
    }
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        0.5 * (ratios[n / 2 - 1] + ratios[n / 2])
    };
    let k = if n < 6 {
        0
    } else {
        ((n as f64 / 2.0 - 0.98 * (n as f64).sqrt()).floor().max(0.0) as usize).min(n / 2)
    };
    Speedup {
        median,
        lo: ratios[k],
        hi: ratios[n - 1 - k],
        pairs: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_pass_once_in_varying_orders() {
        let log = std::cell::RefCell::new(String::new());
        let (a, b) = alternate(
            || {
                log.borrow_mut().push('m');
                Ok::<(), ()>(())
            },
            || {
                log.borrow_mut().push('b');
                Ok(())
            },
            40,
            40,
            0.0,
        )
        .unwrap();
        assert_eq!((a.len(), b.len()), (40, 40));
        let log = log.into_inner();
        assert!(log.starts_with("mb"), "the warm-up comes first: {log}");
        let pairs: Vec<&str> = (1..=40).map(|i| &log[2 * i..2 * i + 2]).collect();
        assert!(pairs.iter().all(|p| *p == "mb" || *p == "bm"));
        // Both orders occur often (a seeded shuffle: the same every run).
        let first = pairs.iter().filter(|p| **p == "mb").count();
        assert!(
            (10..=30).contains(&first),
            "{first} of 40 rounds ran the model first"
        );
    }

    #[test]
    fn a_drift_shared_by_both_sides_cancels() {
        // The machine slows down 3x over the run; the model is always twice as fast.
        let model: Vec<f64> = (0..40).map(|i| 100.0 * (1.0 + i as f64 / 20.0)).collect();
        let baseline: Vec<f64> = model.iter().map(|m| 2.0 * m).collect();
        let s = speedup(&model, &baseline);
        assert_eq!((s.median, s.lo, s.hi, s.pairs), (2.0, 2.0, 2.0, 40));
        assert_eq!(s.hi - s.lo, 0.0);
    }

    #[test]
    fn the_interval_holds_the_median_and_narrows_with_pairs() {
        let ratios = |n: usize| -> (Vec<f64>, Vec<f64>) {
            // Ratios 0.9, 1.0, 1.1 repeating: median 1.0.
            let b: Vec<f64> = (0..n).map(|i| 0.9 + 0.1 * (i % 3) as f64).collect();
            (vec![1.0; n], b)
        };
        let (m, b) = ratios(9);
        let few = speedup(&m, &b);
        assert!(few.lo <= few.median && few.median <= few.hi);
        let (m, b) = ratios(300);
        let many = speedup(&m, &b);
        assert!((many.median - 1.0).abs() < 1e-12);
        assert!(many.hi - many.lo <= few.hi - few.lo);
        assert!(speedup(&[], &[]).median.is_nan());
        // Fewer than 6 pairs: the range.
        let s = speedup(&[1.0, 1.0, 1.0], &[1.0, 3.0, 2.0]);
        assert_eq!((s.lo, s.median, s.hi), (1.0, 2.0, 3.0));
    }
}
