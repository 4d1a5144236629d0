//! Timing of one kernel call: warm-up, repeats until a time budget, median, min and spread.

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

/// Times `f`: one warm-up call, then repeats until `budget_s` has passed (at least `min_reps`,
/// at most `max_reps`). Errors from `f` stop the measurement.
pub fn time<E>(
    f: impl FnMut() -> Result<(), E>,
    min_reps: usize,
    max_reps: usize,
    budget_s: f64,
) -> Result<Timing, E> {
    samples(f, min_reps, max_reps, budget_s).map(summarise)
}

/// The samples (microseconds) of [`time`], unsummarised.
pub fn samples<E>(
    mut f: impl FnMut() -> Result<(), E>,
    min_reps: usize,
    max_reps: usize,
    budget_s: f64,
) -> Result<Vec<f64>, E> {
    f()?;
    let mut samples = Vec::with_capacity(max_reps);
    let start = Instant::now();
    while samples.len() < max_reps
        && (samples.len() < min_reps || start.elapsed().as_secs_f64() < budget_s)
    {
        let t = Instant::now();
        f()?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
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
}
