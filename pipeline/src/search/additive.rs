//! The predicted front of a per-layer space too large to enumerate: the predictors are
//! additive over layers (one-shot drops, tuned latencies, bytes), so the front of whole models
//! is built layer by layer, keeping only the partial sums no other partial sum dominates.

use super::measure::format_bytes;
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
    for (i, l) in space.layers.iter().enumerate() {
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
                let y = format_bytes(&p, l.rows, l.cols);
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
