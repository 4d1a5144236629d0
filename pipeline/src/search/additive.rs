//! The predicted front of a per-layer space too large to enumerate: the predictors are
//! additive over layers (one-shot drops, tuned latencies, bytes), so the front of whole models
//! is built layer by layer, keeping only the partial sums no other partial sum dominates.

use super::space::{Candidate, Space};
use crate::kinds::pattern_label;
use kernels::Pattern;
use std::collections::BTreeMap;

/// Partial fronts are thinned to this many points (evenly along latency) when they grow past it.
const KEEP: usize = 2_000;

#[derive(Clone)]
struct Partial {
    drop: f64,
    us: f64,
    bytes: f64,
    choice: Vec<Pattern>,
}

fn dominated(a: &Partial, by: &Partial) -> bool {
    by.drop <= a.drop
        && by.us <= a.us
        && by.bytes <= a.bytes
        && (by.drop < a.drop || by.us < a.us || by.bytes < a.bytes)
}

/// The candidates of `group` on the additive front of (Σ drop, Σ latency, Σ bytes).
pub fn front(
    space: &Space,
    group: usize,
    drops: &BTreeMap<(usize, usize, String), f64>,
    layer_us: &dyn Fn(usize, &Pattern) -> Option<f64>,
) -> Vec<Candidate> {
    let g = space.proxy_group(group);
    let mut partial = vec![Partial {
        drop: 0.0,
        us: 0.0,
        bytes: 0.0,
        choice: vec![],
    }];
    for i in 0..space.layers.len() {
        let options: Vec<Pattern> = if space.options[i].is_empty() {
            vec![Pattern::Dense]
        } else {
            space.options[i].clone()
        };
        let mut costs = vec![];
        for p in options {
            let d = if p == Pattern::Dense {
                Some(0.0)
            } else {
                drops.get(&(g, i, pattern_label(&p))).copied()
            };
            if let (Some(d), Some(t)) = (d, layer_us(i, &p)) {
                let y = space.layer_bytes(i, &p);
                costs.push((p, d, t, y));
            }
        }
        let mut next = Vec::with_capacity(partial.len() * costs.len());
        for a in &partial {
            for (p, d, t, y) in &costs {
                let mut choice = a.choice.clone();
                choice.push(p.clone());
                next.push(Partial {
                    drop: a.drop + d,
                    us: a.us + t,
                    bytes: a.bytes + y,
                    choice,
                });
            }
        }
        next.sort_by(|a, b| a.us.total_cmp(&b.us).then(a.drop.total_cmp(&b.drop)));
        let mut kept: Vec<Partial> = vec![];
        for c in next {
            if !kept.iter().any(|k| dominated(&c, k)) {
                kept.retain(|k| !dominated(k, &c));
                kept.push(c);
            }
        }
        if kept.len() > KEEP {
            let step = kept.len() as f64 / KEEP as f64;
            kept = (0..KEEP)
                .map(|k| kept[(k as f64 * step) as usize].clone())
                .collect();
        }
        partial = kept;
    }
    partial
        .into_iter()
        .filter(|p| p.choice.len() == space.layers.len())
        .filter_map(|p| space.candidate(group, p.choice))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::PrunePoint;
    use crate::search::measure::format_bytes;
    use crate::search::space::LayerInfo;
    use stages::{Method, Schedule};

    /// The layer-by-layer front equals the front of every combination, enumerated.
    #[test]
    fn additive_front_equals_the_enumerated_front() {
        let pats = vec![
            Pattern::Dense,
            Pattern::Unstructured { sparsity: 0.5 },
            Pattern::Unstructured { sparsity: 0.75 },
            Pattern::Nm { n: 2, m: 4 },
        ];
        let layers: Vec<LayerInfo> = (0..4)
            .map(|i| LayerInfo {
                name: format!("fc{i}"),
                rows: 16,
                cols: 16 + 8 * i,
                tokens: 1,
            })
            .collect();
        let uniform = pats[1..]
            .iter()
            .map(|p| {
                let point = PrunePoint {
                    pattern: p.clone(),
                    method: Some(Method::Magnitude),
                    schedule: Some(Schedule::Oneshot),
                    finetune_epochs: 1,
                    layers: vec![],
                    note: None,
                };
                (point, vec![p.clone(); 4])
            })
            .collect();
        let space = Space {
            layers: layers.clone(),
            options: vec![pats.clone(); 4],
            methods: vec![(Method::Magnitude, Schedule::Oneshot)],
            uniform,
            per_layer: true,
            finetune_epochs: 1,
            grid_trials: 0.0,
            bytes: BTreeMap::new(),
        };
        let mut s = 7u64;
        let mut r = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            (s >> 33) as f64 / (1u64 << 31) as f64
        };
        let mut drops = BTreeMap::new();
        let mut us = BTreeMap::new();
        for i in 0..4 {
            us.insert((i, pattern_label(&Pattern::Dense)), 10.0);
            for p in &pats[1..] {
                drops.insert((0, i, pattern_label(p)), r() * 0.1);
                us.insert((i, pattern_label(p)), 2.0 + 8.0 * r());
            }
        }
        let layer_us = |i: usize, p: &Pattern| us.get(&(i, pattern_label(p))).copied();
        let got: std::collections::BTreeSet<String> = front(&space, 0, &drops, &layer_us)
            .into_iter()
            .map(|c| c.id)
            .collect();
        let all = space.enumerate(0);
        let cost = |c: &Candidate| {
            let mut t = (0.0, 0.0, 0.0);
            for (i, p) in c.patterns.iter().enumerate() {
                if *p != Pattern::Dense {
                    t.0 += drops[&(0, i, pattern_label(p))];
                }
                t.1 += layer_us(i, p).unwrap();
                t.2 += format_bytes(p, layers[i].rows, layers[i].cols);
            }
            t
        };
        let mut costs: Vec<(f64, f64, f64)> = all.iter().map(cost).collect();
        // The all-dense choice is no candidate (it is the dense reference) but it dominates.
        let dense: f64 = layers
            .iter()
            .map(|l| format_bytes(&Pattern::Dense, l.rows, l.cols))
            .sum();
        let with_dense = {
            let mut c = costs.clone();
            c.push((0.0, 40.0, dense));
            c
        };
        costs.truncate(all.len());
        let want: std::collections::BTreeSet<String> = all
            .iter()
            .zip(&costs)
            .filter(|(_, a)| {
                !with_dense.iter().any(|b| {
                    b.0 <= a.0 && b.1 <= a.1 && b.2 <= a.2 && (b.0 < a.0 || b.1 < a.1 || b.2 < a.2)
                })
            })
            .map(|(c, _)| c.id.clone())
            .collect();
        assert_eq!(got, want);
        assert!(want.len() > 3);
    }
}
