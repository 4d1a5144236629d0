//! Choosing a round's trials: the candidates whose optimistic prediction (accuracy + σ,
//! latency − its relative σ) adds the most hypervolume to the front measured so far, one at a time, each added at its mean
//! prediction before the next is chosen (so that a round spreads along the front).

use super::front::{hypervolume, Objectives, Reference};

/// A candidate as the selection sees it.
#[derive(Clone, Debug)]
pub struct Scored {
    /// Index into the caller's candidates.
    pub index: usize,
    /// Its stable name (ties are broken by it).
    pub id: String,
    /// Predicted objectives (mean).
    pub predicted: Objectives,
    /// The accuracy predictor's σ.
    pub sigma: f64,
    /// The latency predictor's relative σ.
    pub latency_sigma: f64,
    /// Fine-tune epochs it costs.
    pub cost: u64,
}

impl Scored {
    /// Its prediction at one σ better on accuracy and latency.
    pub fn optimistic(&self) -> Objectives {
        Objectives {
            accuracy: self.predicted.accuracy + self.sigma,
            latency_us: self.predicted.latency_us * (1.0 - self.latency_sigma),
            ..self.predicted
        }
    }
}

/// One chosen candidate and why.
#[derive(Clone, Debug)]
pub struct Choice {
    /// Index into the caller's candidates.
    pub index: usize,
    /// The optimistic hypervolume it was predicted to add.
    pub gain: f64,
}

/// Up to `count` candidates within `budget` epochs, in the order chosen.
pub fn choose(
    reference: &Reference,
    measured: &[Objectives],
    candidates: &[Scored],
    count: usize,
    mut budget: u64,
) -> Vec<Choice> {
    let mut front: Vec<[f64; 3]> = measured.iter().map(|m| reference.gains(m)).collect();
    let mut taken = vec![false; candidates.len()];
    let mut out = vec![];
    while out.len() < count {
        let base = hypervolume(&front);
        let mut best: Option<(f64, usize)> = None;
        for (k, c) in candidates.iter().enumerate() {
            if taken[k] || c.cost > budget {
                continue;
            }
            let optimistic = c.optimistic();
            let g = reference.gains(&optimistic);
            // A point another already covers adds nothing: skip the volume computation.
            if g.iter().any(|&x| x <= 0.0)
                || front.iter().any(|f| f.iter().zip(&g).all(|(a, b)| a >= b))
            {
                continue;
            }
            front.push(g);
            let gain = hypervolume(&front) - base;
            front.pop();
            let better = match best {
                None => true,
                Some((bg, bk)) => {
                    gain > bg * (1.0 + 1e-12)
                        || (gain >= bg * (1.0 - 1e-12) && c.id < candidates[bk].id)
                }
            };
            if better {
                best = Some((gain, k));
            }
        }
        let Some((gain, k)) = best.filter(|b| b.0 > 1e-12) else {
            break;
        };
        taken[k] = true;
        budget -= candidates[k].cost;
        front.push(reference.gains(&candidates[k].predicted));
        out.push(Choice {
            index: candidates[k].index,
            gain,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(a: f64, l: f64) -> Objectives {
        Objectives {
            accuracy: a,
            latency_us: l,
            weight_bytes: 50.0,
        }
    }

    #[test]
    fn chooses_by_gain_within_budget_and_breaks_ties_by_name() {
        let r = Reference {
            accuracy: 0.5,
            latency_us: 100.0,
            weight_bytes: 100.0,
        };
        let c = |i: usize, id: &str, p: Objectives, cost| Scored {
            index: i,
            id: id.into(),
            predicted: p,
            sigma: 0.0,
            latency_sigma: 0.0,
            cost,
        };
        let cands = vec![
            c(0, "b", o(0.9, 50.0), 10),
            c(1, "a", o(0.9, 50.0), 10),
            c(2, "c", o(0.95, 95.0), 10),
            c(3, "d", o(0.95, 40.0), 30),
        ];
        let got: Vec<usize> = choose(&r, &[], &cands, 2, 20)
            .iter()
            .map(|x| x.index)
            .collect();
        assert_eq!(
            got,
            vec![1, 2],
            "the tie goes to `a`, then `b` adds nothing over `a`"
        );
        let got = choose(&r, &[o(0.99, 10.0)], &cands, 3, 100);
        assert!(
            got.is_empty(),
            "a measured point dominating all leaves nothing to gain"
        );
    }
}
