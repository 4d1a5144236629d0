//! Timing of kernel calls: several calls measured in interleaved rounds until a time budget,
//! and the median, min and spread of samples.

use std::time::Instant;

/// The timing of one kernel configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Median of the repeats, microseconds.
    pub median_us: f64,
    /// Fastest repeat, microseconds.
    pub min_us: f64,
    /// (max − min) / median of the repeats.
    pub spread: f64,
    /// Number of timed repeats.
    pub repeats: usize,
}

/// Times `count` calls (`call(i)` runs the `i`-th) in interleaved rounds: one untimed warm-up
/// round, then rounds of one timed call each until every call has `min_rounds` samples and
/// either `budget_s` per call has passed or `max_rounds` are done. Odd rounds run the calls in
/// reverse order. Returns each call's samples (microseconds).
///
/// Why rounds: on the shared machines this project runs on, a kernel's speed moves by 25–50 %
/// between states that last seconds (on the Zen 3 VM of 2026-12-02, while a scalar loop on the
/// same core stayed within 3 %: most likely other tenants' use of the shared L3 and memory), so
/// samples taken back to back all come from one state, and two calls measured a second apart
/// compare states, not kernels. In rounds, every call's samples come from the same moments as
/// every other's.
pub fn rounds<E>(
    count: usize,
    mut call: impl FnMut(usize) -> Result<(), E>,
    min_rounds: usize,
    max_rounds: usize,
    budget_s: f64,
) -> Result<Vec<Vec<f64>>, E> {
    for i in 0..count {
        call(i)?;
    }
    let mut samples = vec![Vec::with_capacity(max_rounds); count];
    let total_budget = budget_s * count as f64;
    let start = Instant::now();
    let mut done = 0;
    while done < max_rounds && (done < min_rounds || start.elapsed().as_secs_f64() < total_budget) {
        for k in 0..count {
            let i = if done % 2 == 0 { k } else { count - 1 - k };
            let t = Instant::now();
            call(i)?;
            samples[i].push(t.elapsed().as_secs_f64() * 1e6);
        }
        done += 1;
    }
    Ok(samples)
}

/// Median, min and spread of samples (microseconds).
pub fn summarise(mut samples: Vec<f64>) -> Timing {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n == 0 {
        return Timing {
            median_us: f64::NAN,
            min_us: f64::NAN,
            spread: f64::NAN,
            repeats: 0,
        };
    }
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        0.5 * (samples[n / 2 - 1] + samples[n / 2])
    };
    Timing {
        median_us: median,
        min_us: samples[0],
        spread: (samples[n - 1] - samples[0]) / median,
        repeats: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let t = summarise(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!(t.median_us, 2.5);
        assert_eq!(t.min_us, 1.0);
        assert_eq!(t.spread, 9.0 / 2.5);
        assert_eq!(t.repeats, 4);
    }

    #[test]
    fn rounds_warm_up_once_then_interleave_forwards_and_backwards() {
        let mut order = vec![];
        let s = rounds(
            3,
            |i| {
                order.push(i);
                Ok::<(), ()>(())
            },
            2,
            2,
            10.0,
        )
        .unwrap();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 2, 1, 0]);
        assert!(s.iter().all(|v| v.len() == 2));
        let err = rounds(2, |i| if i == 1 { Err(i) } else { Ok(()) }, 1, 1, 0.0);
        assert_eq!(err, Err(1));
    }
}
