//! Pruning schedules: the sequence of (pattern, fine-tune epochs) steps that lead to the target.
//!
//! `gradual` with `T` steps follows the cubic ramp `s_t = s · (1 − (1 − t/T)³)` (Zhu & Gupta):
//! unstructured and vector-wise prune to `s_t` directly; N:M decays `N` by one per step to its
//! target (5:8 → 4:8 → 3:8 → 2:8 for four steps, never above M−1); V:2:M goes down its nested
//! structure ([`Target::VnmNested`]): `x_t = round(M · (1 − s_t))` kept of each row's M, as `x_t`
//! columns of every V × M block while `x_t ≥ 4`, then 3 and 2 of the block's 4 (each step's
//! structure within the last one's). Fine-tune epochs are shared out evenly, the remainder going
//! to the last step.

use kernels::{KernelError, Mask, Pattern};

/// What one masking step prunes a layer to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Target {
    /// The pattern (every step of the other patterns, and the last step of V:2:M).
    Pattern(Pattern),
    /// A step of the nested structure towards V:2:M: per V × M block `k` columns kept, each row
    /// keeping `per_row` of them ([`kernels::build_vnm_nested`]). V:2:M itself is `k = 4,
    /// per_row = 2`. A step of fewer columns or fewer a row fits within the last one, so where
    /// removed weights score 0 (magnitude, Wanda, OBS) it keeps a subset of its weights: pruning
    /// through V:2:M at a smaller M instead (2:4 rows, then 64:2:8 blocks) left
    /// rows whose block columns held weights an earlier step had removed, kept slots holding
    /// zeros (in the quickstart's MLP, OBS kept 1.4 % of a 64:2:8 layer's slots and 3.8 % of a
    /// 64:2:16 layer's on zeros).
    VnmNested {
        /// Rows per block.
        v: usize,
        /// Columns per group.
        m: usize,
        /// Columns kept per block and group.
        k: usize,
        /// Of those, kept per row.
        per_row: usize,
    },
}

impl Target {
    /// The pattern a step prunes to.
    pub(crate) fn of(pattern: &Pattern) -> Target {
        Target::Pattern(pattern.clone())
    }

    /// The step of V:2:M's nested structure that keeps `round(m · density)` of each row's `m`,
    /// at least `at_least` (2: V:2:M itself).
    fn vnm_at(v: usize, m: usize, density: f64, at_least: usize) -> Target {
        match ((m as f64 * density).round() as usize).clamp(at_least.max(2), m) {
            2 => Target::Pattern(Pattern::Vnm { v, m }),
            x => Target::VnmNested {
                v,
                m,
                k: x.max(4),
                per_row: x,
            },
        }
    }

    /// The fraction of weights a step keeps.
    pub(crate) fn density(&self) -> f64 {
        match *self {
            Target::Pattern(ref p) => p.density(),
            Target::VnmNested { m, per_row, .. } => per_row as f64 / m as f64,
        }
    }

    /// The pattern whose mask rules apply (V:2:M for its nested steps).
    pub(crate) fn pattern(&self) -> Pattern {
        match self {
            Target::Pattern(p) => p.clone(),
            Target::VnmNested { v, m, .. } => Pattern::Vnm { v: *v, m: *m },
        }
    }

    /// The keep-mask of this step on a `rows × cols` score matrix.
    pub(crate) fn mask(
        &self,
        scores: &[f32],
        rows: usize,
        cols: usize,
    ) -> Result<Mask, KernelError> {
        match *self {
            Target::Pattern(ref p) => kernels::build_mask(p, scores, rows, cols),
            Target::VnmNested { v, m, k, per_row } => {
                kernels::build_vnm_nested(scores, rows, cols, (v, m), (k, per_row))
            }
        }
    }
}

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

/// The steps of a schedule: each step's target and fine-tune epochs; the last is `pattern`.
pub(crate) fn plan(pattern: &Pattern, schedule: &Schedule, epochs: usize) -> Vec<(Target, usize)> {
    let steps = match schedule {
        Schedule::Oneshot => 1,
        Schedule::Gradual { steps } => (*steps).max(1),
    };
    let base = epochs / steps;
    (1..=steps)
        .map(|t| {
            let p = match *pattern {
                _ if t == steps => Target::of(pattern),
                Pattern::Dense => Target::of(&Pattern::Dense),
                Pattern::Unstructured { sparsity } => Target::of(&Pattern::Unstructured {
                    sparsity: cubic(sparsity, t, steps),
                }),
                Pattern::Vector { v, sparsity } => Target::of(&Pattern::Vector {
                    v,
                    sparsity: cubic(sparsity, t, steps),
                }),
                Pattern::Nm { n, m } => Target::of(&Pattern::Nm {
                    n: (n + steps - t).min(m - 1),
                    m,
                }),
                Pattern::Vnm { v, m } => {
                    let s = cubic(1.0 - 2.0 / m as f64, t, steps);
                    Target::vnm_at(v, m, 1.0 - s, 2)
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
) -> Vec<(Vec<Target>, usize)> {
    let per_layer: Vec<Vec<(Target, usize)>> =
        patterns.iter().map(|p| plan(p, schedule, epochs)).collect();
    let steps = plan(&Pattern::Dense, schedule, epochs);
    steps
        .iter()
        .enumerate()
        .map(|(k, (_, e))| (per_layer.iter().map(|l| l[k].0.clone()).collect(), *e))
        .collect()
}

/// [`obs_substeps`] for every layer at once, from the prunable layers' density `current`
/// (V:2:M's nested steps from the layer's own density, `own`: a layer pruned further than the
/// rest by an earlier gradual step must not be widened again): the per-layer targets of each
/// recomputation step. Layers that need fewer steps repeat their first one (re-scoring at the
/// same target keeps the weights an earlier step kept, as removed weights score 0).
pub(crate) fn layer_substeps(targets: &[Target], current: f64, own: &[f64]) -> Vec<Vec<Target>> {
    let per_layer: Vec<Vec<Target>> = targets
        .iter()
        .zip(own)
        .map(|(t, &own)| match (t, t.pattern()) {
            (Target::Pattern(Pattern::Dense), _) => vec![t.clone()],
            (_, Pattern::Vnm { .. }) => obs_substeps(t, own),
            _ => obs_substeps(t, current),
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

/// The targets of OBS's recomputation steps towards `target` from weights of density
/// `current` (fraction non-zero): each step halves the density until the target, so that no step
/// removes more than half of the remaining weights, where the quadratic model behind the OBS
/// update still holds (WoodFisher and oBERT likewise recompute the inverse Fisher several times
/// within one-shot pruning). N:M steps keep M and set `N = round(M · density)`; V:2:M steps go
/// down its nested structure (`round(M · density)` of each row's M: [`Target::VnmNested`]). The
/// last step is `target` itself.
pub(crate) fn obs_substeps(target: &Target, current: f64) -> Vec<Target> {
    let density = target.density();
    let mut steps = Vec::new();
    let mut d = current / 2.0;
    while d > density * 1.0001 && steps.len() < 16 {
        steps.push(match (target, target.pattern()) {
            (_, Pattern::Unstructured { .. }) => {
                Target::of(&Pattern::Unstructured { sparsity: 1.0 - d })
            }
            (_, Pattern::Vector { v, .. }) => Target::of(&Pattern::Vector {
                v,
                sparsity: 1.0 - d,
            }),
            (_, Pattern::Nm { n, m }) => Target::of(&Pattern::Nm {
                n: ((m as f64 * d).round() as usize).clamp(n, m - 1),
                m,
            }),
            (Target::VnmNested { per_row, .. }, Pattern::Vnm { v, m }) => {
                Target::vnm_at(v, m, d, *per_row)
            }
            (_, Pattern::Vnm { v, m }) => Target::vnm_at(v, m, d, 2),
            (_, Pattern::Dense) => Target::of(&Pattern::Dense),
        });
        d /= 2.0;
    }
    steps.dedup();
    if steps.last() == Some(target) {
        steps.pop();
    }
    steps.push(target.clone());
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn obs_substeps_halve_the_density() {
        let steps = |p: Pattern, current: f64| obs_substeps(&Target::of(&p), current);
        let u = steps(Pattern::Unstructured { sparsity: 0.875 }, 1.0);
        let d: Vec<f64> = u.iter().map(Target::density).collect();
        assert_eq!(d, [0.5, 0.25, 0.125]);
        let nm = steps(Pattern::Nm { n: 2, m: 16 }, 1.0);
        assert_eq!(nm, [8, 4, 2].map(|n| Target::of(&Pattern::Nm { n, m: 16 })));
        // V:2:M down its nested structure: the block's columns first, then 2 of them a row.
        let nested = |m, k, per_row| Target::VnmNested {
            v: 64,
            m,
            k,
            per_row,
        };
        let vnm = |m| Target::of(&Pattern::Vnm { v: 64, m });
        assert_eq!(
            steps(Pattern::Vnm { v: 64, m: 8 }, 1.0),
            [nested(8, 4, 4), vnm(8)]
        );
        assert_eq!(
            steps(Pattern::Vnm { v: 64, m: 16 }, 1.0),
            [nested(16, 8, 8), nested(16, 4, 4), vnm(16)]
        );
        assert_eq!(steps(Pattern::Vnm { v: 64, m: 4 }, 1.0), [vnm(4)]);
        // Towards a nested step of a gradual schedule, never below it.
        assert_eq!(
            obs_substeps(&nested(16, 4, 3), 1.0),
            [nested(16, 8, 8), nested(16, 4, 4), nested(16, 4, 3)]
        );
        // Per layer: V:2:M from the layer's own density (a layer an earlier gradual step took to
        // 3 of 8 a row is not widened to 4 again because the other layers are denser).
        let layers = layer_substeps(
            &[
                nested(8, 4, 3),
                Target::of(&Pattern::Unstructured { sparsity: 0.5 }),
            ],
            0.9,
            &[0.375, 1.0],
        );
        assert_eq!(layers.len(), 1);
        let layers = layer_substeps(&[vnm(8), nested(8, 4, 3)], 0.9, &[0.375, 0.5]);
        assert_eq!(layers, [[vnm(8), nested(8, 4, 3)]]);
        // From weights already at the target density (a gradual step), a single step.
        assert_eq!(
            steps(Pattern::Nm { n: 2, m: 8 }, 0.25),
            [Target::of(&Pattern::Nm { n: 2, m: 8 })]
        );
        assert_eq!(steps(Pattern::Unstructured { sparsity: 0.5 }, 1.0).len(), 1);
    }

    #[test]
    fn gradual_nm_decays_n_and_ends_on_the_target() {
        let p = plan(
            &Pattern::Nm { n: 2, m: 8 },
            &Schedule::Gradual { steps: 4 },
            10,
        );
        let ns: Vec<_> = p.iter().map(|(p, _)| p.clone()).collect();
        let want: Vec<_> = [5, 4, 3, 2]
            .map(|n| Target::of(&Pattern::Nm { n, m: 8 }))
            .to_vec();
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
            .all(|(p, _)| matches!(p.pattern(), Pattern::Nm { n, .. } if n < 4)));
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
        let ts: Vec<_> = v.iter().map(|(t, _)| t.clone()).collect();
        let nested = |k, per_row| Target::VnmNested {
            v: 16,
            m: 8,
            k,
            per_row,
        };
        let vnm = Target::of(&Pattern::Vnm { v: 16, m: 8 });
        assert_eq!(ts, [nested(5, 5), nested(4, 3), vnm.clone(), vnm]);
        assert_eq!(
            plan(&Pattern::Dense, &Schedule::Oneshot, 3),
            vec![(Target::of(&Pattern::Dense), 3)]
        );
    }
}
