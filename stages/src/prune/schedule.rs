//! Pruning schedules: the sequence of (pattern, fine-tune epochs) steps that lead to the target.
//!
//! `gradual` with `T` steps follows the cubic ramp `s_t = s · (1 − (1 − t/T)³)` (Zhu & Gupta):
//! unstructured and vector-wise prune to `s_t` directly; N:M decays `N` by one per step to its
//! target (5:8 → 4:8 → 3:8 → 2:8 for four steps, never above M−1); V:2:M widens `M` from 4 to its
//! target, `M_t = round(2 / (1 − s_t))` clamped to [4, M]. Fine-tune epochs are shared out evenly,
//! the remainder going to the last step.

use kernels::Pattern;

/// Gradual steps when an experiment file does not say.
pub const GRADUAL_STEPS_DEFAULT: usize = 4;

keytag::tagged_enum! {
    /// The family of a [`Schedule`], without its parameters.
    pub enum ScheduleKind {
        /// [`Schedule::Oneshot`].
        Oneshot = "oneshot",
        /// [`Schedule::Gradual`].
        Gradual = "gradual",
    }
}

/// How the target sparsity is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// Prune to the target at once, then fine-tune with the mask fixed.
    Oneshot,
    /// Prune in `steps` steps along the cubic ramp, fine-tuning after each.
    Gradual {
        /// Number of pruning steps (at least 1).
        steps: usize,
    },
}

impl Schedule {
    /// The schedule's family.
    pub fn kind(&self) -> ScheduleKind {
        match self {
            Schedule::Oneshot => ScheduleKind::Oneshot,
            Schedule::Gradual { .. } => ScheduleKind::Gradual,
        }
    }
}

/// Sparsity of step `t` of `steps` on the cubic ramp to `target`.
fn cubic(target: f64, t: usize, steps: usize) -> f64 {
    target * (1.0 - (1.0 - t as f64 / steps as f64).powi(3))
}

/// The steps of a schedule: each step's pattern and fine-tune epochs; the last is `pattern`.
pub(crate) fn plan(pattern: &Pattern, schedule: &Schedule, epochs: usize) -> Vec<(Pattern, usize)> {
    let steps = match schedule {
        Schedule::Oneshot => 1,
        Schedule::Gradual { steps } => (*steps).max(1),
    };
    let base = epochs / steps;
    (1..=steps)
        .map(|t| {
            let p = match *pattern {
                _ if t == steps => pattern.clone(),
                Pattern::Dense => Pattern::Dense,
                Pattern::Unstructured { sparsity } => Pattern::Unstructured {
                    sparsity: cubic(sparsity, t, steps),
                },
                Pattern::Vector { v, sparsity } => Pattern::Vector {
                    v,
                    sparsity: cubic(sparsity, t, steps),
                },
                Pattern::Nm { n, m } => Pattern::Nm {
                    n: (n + steps - t).min(m - 1),
                    m,
                },
                Pattern::Vnm { v, m } => {
                    let s = cubic(1.0 - 2.0 / m as f64, t, steps);
                    Pattern::Vnm {
                        v,
                        m: ((2.0 / (1.0 - s)).round() as usize).clamp(4, m),
                    }
                }
            };
            (
                p,
                if t == steps {
                    epochs - base * (steps - 1)
                } else {
                    base
                },
            )
        })
        .collect()
}

/// [`plan`] for every layer at once: each step's per-layer patterns and fine-tune epochs (every
/// layer's schedule has the same steps and epochs; a dense layer stays dense).
pub(crate) fn layer_plan(
    patterns: &[Pattern],
    schedule: &Schedule,
    epochs: usize,
) -> Vec<(Vec<Pattern>, usize)> {
    let per_layer: Vec<Vec<(Pattern, usize)>> =
        patterns.iter().map(|p| plan(p, schedule, epochs)).collect();
    let steps = plan(&Pattern::Dense, schedule, epochs);
    steps
        .iter()
        .enumerate()
        .map(|(k, (_, e))| (per_layer.iter().map(|l| l[k].0.clone()).collect(), *e))
        .collect()
}

/// [`obs_substeps`] for every layer at once: the per-layer patterns of each recomputation
/// step. Layers that need fewer steps repeat their first one (re-scoring at the same pattern
/// keeps the weights an earlier step kept, as removed weights score 0).
pub(crate) fn layer_substeps(patterns: &[Pattern], current: f64) -> Vec<Vec<Pattern>> {
    let per_layer: Vec<Vec<Pattern>> = patterns
        .iter()
        .map(|p| match p {
            Pattern::Dense => vec![Pattern::Dense],
            p => obs_substeps(p, current),
        })
        .collect();
    let n = per_layer.iter().map(Vec::len).max().unwrap_or(1);
    (0..n)
        .map(|k| {
            per_layer
                .iter()
                .map(|l| l[k.saturating_sub(n - l.len())].clone())
                .collect()
        })
        .collect()
}

/// The patterns of OBS's recomputation steps towards `pattern` from weights of density
/// `current` (fraction non-zero): each step halves the density until the target, so that no step
/// removes more than half of the remaining weights, where the quadratic model behind the OBS
/// update still holds (WoodFisher and oBERT likewise recompute the inverse Fisher several times
/// within one-shot pruning). N:M steps keep M and set `N = round(M · density)`; V:2:M steps keep
/// V and set `M = round(2 / density)`. The last step is `pattern` itself.
pub(crate) fn obs_substeps(pattern: &Pattern, current: f64) -> Vec<Pattern> {
    let target = pattern.density();
    let mut steps = Vec::new();
    let mut d = current / 2.0;
    while d > target * 1.0001 && steps.len() < 16 {
        steps.push(match *pattern {
            Pattern::Unstructured { .. } => Pattern::Unstructured { sparsity: 1.0 - d },
            Pattern::Vector { v, .. } => Pattern::Vector {
                v,
                sparsity: 1.0 - d,
            },
            Pattern::Nm { n, m } => Pattern::Nm {
                n: ((m as f64 * d).round() as usize).clamp(n, m - 1),
                m,
            },
            Pattern::Vnm { v, m } => Pattern::Vnm {
                v,
                m: ((2.0 / d).round() as usize).clamp(4, m),
            },
            Pattern::Dense => Pattern::Dense,
        });
        d /= 2.0;
    }
    steps.dedup();
    if steps.last() == Some(pattern) {
        steps.pop();
    }
    steps.push(pattern.clone());
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obs_substeps_halve_the_density() {
        let u = obs_substeps(&Pattern::Unstructured { sparsity: 0.875 }, 1.0);
        let d: Vec<f64> = u.iter().map(Pattern::density).collect();
        assert_eq!(d, [0.5, 0.25, 0.125]);
        let nm = obs_substeps(&Pattern::Nm { n: 2, m: 16 }, 1.0);
        assert_eq!(nm, [8, 4, 2].map(|n| Pattern::Nm { n, m: 16 }));
        let vnm = obs_substeps(&Pattern::Vnm { v: 64, m: 8 }, 1.0);
        assert_eq!(vnm, [4, 8].map(|m| Pattern::Vnm { v: 64, m }));
        // From weights already at the target density (a gradual step), a single step.
        assert_eq!(
            obs_substeps(&Pattern::Nm { n: 2, m: 8 }, 0.25),
            [Pattern::Nm { n: 2, m: 8 }]
        );
        assert_eq!(
            obs_substeps(&Pattern::Unstructured { sparsity: 0.5 }, 1.0).len(),
            1
        );
    }

    #[test]
    fn gradual_nm_decays_n_and_ends_on_the_target() {
        let p = plan(
            &Pattern::Nm { n: 2, m: 8 },
            &Schedule::Gradual { steps: 4 },
            10,
        );
        let ns: Vec<_> = p.iter().map(|(p, _)| p.clone()).collect();
        let want: Vec<_> = [5, 4, 3, 2].map(|n| Pattern::Nm { n, m: 8 }).to_vec();
        assert_eq!(ns, want);
        assert_eq!(p.iter().map(|s| s.1).collect::<Vec<_>>(), [2, 2, 2, 4]);
        // N never reaches M.
        let p = plan(
            &Pattern::Nm { n: 2, m: 4 },
            &Schedule::Gradual { steps: 4 },
            4,
        );
        assert!(p
            .iter()
            .all(|(p, _)| matches!(p, Pattern::Nm { n, .. } if *n < 4)));
    }

    #[test]
    fn gradual_ramps_are_monotone_and_oneshot_is_one_step() {
        let p = plan(
            &Pattern::Unstructured { sparsity: 0.9 },
            &Schedule::Gradual { steps: 5 },
            5,
        );
        let s: Vec<f64> = p.iter().map(|(p, _)| 1.0 - p.density()).collect();
        assert!(
            s.windows(2).all(|w| w[0] < w[1]) && (s[4] - 0.9).abs() < 1e-12,
            "{s:?}"
        );
        assert!(
            s[0] > 0.9 * 0.45,
            "the cubic ramp front-loads pruning: {s:?}"
        );
        let v = plan(
            &Pattern::Vnm { v: 16, m: 8 },
            &Schedule::Gradual { steps: 4 },
            0,
        );
        let ms: Vec<_> = v
            .iter()
            .map(|(p, _)| {
                if let Pattern::Vnm { m, .. } = p {
                    *m
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(ms, [4, 6, 8, 8]);
        assert_eq!(
            plan(&Pattern::Dense, &Schedule::Oneshot, 3),
            vec![(Pattern::Dense, 3)]
        );
    }
}
