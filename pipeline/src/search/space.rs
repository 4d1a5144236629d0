//! The joint space of a unified search: the model's prunable layers, each layer's options,
//! the (method, schedule) pairs, the candidates, and the cheap proxies.

use super::measure::format_bytes;
use crate::experiment::{Experiment, SearchSpec, SourceMap};
use crate::kinds::{pattern_label, LayerFormat, Prune, PrunePoint, SearchNote};
use crate::plan::{Plan, PlanError};
use kernels::Pattern;
use stages::{Method, Schedule};
use std::collections::BTreeMap;

/// One GEMM layer of the model.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerInfo {
    /// Name.
    pub name: String,
    /// Output rows.
    pub rows: u64,
    /// Input columns.
    pub cols: u64,
    /// GEMM columns per sample.
    pub tokens: u64,
}

/// A candidate model: a (method, schedule) and every layer's pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Index into [`Space::methods`].
    pub group: usize,
    /// Each layer's pattern (dense where the layer is not pruned).
    pub patterns: Vec<Pattern>,
    /// The pruning that makes it.
    pub point: PrunePoint,
    /// A stable name (ties are broken by it).
    pub id: String,
}

/// Candidates enumerated per (method, schedule) at most; beyond, only the additive front.
pub const ENUMERATE_MAX: usize = 20_000;

/// The space.
#[derive(Clone, Debug)]
pub struct Space {
    /// Every GEMM layer, in forward order.
    pub layers: Vec<LayerInfo>,
    /// Per layer: the patterns it may take (empty for a layer that is never pruned).
    pub options: Vec<Vec<Pattern>>,
    /// The (method, schedule) pairs.
    pub methods: Vec<(Method, Schedule)>,
    /// The grid's sparse points (uniform patterns), with their layer patterns.
    pub uniform: Vec<(PrunePoint, Vec<Pattern>)>,
    /// Whether every layer takes its own point.
    pub per_layer: bool,
    /// Fine-tune epochs of one full trial.
    pub finetune_epochs: u64,
    /// Trials the grid of this space would run (the dense model included).
    pub grid_trials: f64,
    /// Per (layer, pattern label): the bytes the layer takes in that format (every option and
    /// dense), computed once.
    pub bytes: BTreeMap<(usize, String), f64>,
}

impl Space {
    /// The space of `exp`, whose grid plan is `grid` (it says which layer takes which pattern).
    pub fn new(
        exp: &Experiment,
        spec: &SearchSpec,
        map: &SourceMap,
        grid: &Plan,
    ) -> Result<Space, PlanError> {
        let mut uniform: Vec<(PrunePoint, Vec<LayerFormat>)> = vec![];
        for point in exp.prune_points.iter().filter(|p| p.method.is_some()) {
            let formats = grid
                .nodes
                .values()
                .filter_map(|n| n.planned::<Prune>())
                .find(|p| {
                    p.trial.spec.pattern == point.pattern
                        && p.trial.spec.method == point.method
                        && p.trial.spec.schedule == point.schedule
                })
                .map(|p| p.trial.layers.clone())
                .ok_or_else(|| map.error(0..0, "the grid plan lacks a prune point"))?;
            uniform.push((point.clone(), formats));
        }
        let first = &uniform
            .first()
            .ok_or_else(|| map.error(0..0, "unified search needs sparse prune points"))?
            .1;
        let layers: Vec<LayerInfo> = first
            .iter()
            .map(|l| LayerInfo {
                name: l.layer.clone(),
                rows: l.rows,
                cols: l.cols,
                tokens: l.tokens.max(1),
            })
            .collect();
        let dense_in_space = exp.prune_points.iter().any(|p| p.method.is_none());
        let mut options: Vec<Vec<Pattern>> = vec![vec![]; layers.len()];
        for (point, formats) in &uniform {
            for (i, f) in formats.iter().enumerate() {
                if f.pattern != Pattern::Dense && !options[i].contains(&point.pattern) {
                    options[i].push(point.pattern.clone());
                }
            }
        }
        let prunable = options.iter().filter(|o| !o.is_empty()).count();
        if spec.per_layer {
            if prunable < 2 {
                return Err(map.error(
                    spec.per_layer_span.clone(),
                    format!("per_layer = true needs a model with two or more prunable layers; this one has {prunable} (its layers: {:?})", layers.iter().map(|l| l.name.as_str()).collect::<Vec<_>>()),
                ));
            }
            if dense_in_space {
                for o in options.iter_mut().filter(|o| !o.is_empty()) {
                    o.insert(0, Pattern::Dense);
                }
            }
        }
        let mut methods: Vec<(Method, Schedule)> = vec![];
        for (p, _) in &uniform {
            let ms = (
                p.method.clone().unwrap_or(Method::Magnitude),
                p.schedule.clone().unwrap_or(Schedule::Oneshot),
            );
            if !methods.contains(&ms) {
                methods.push(ms);
            }
        }
        let finetune_epochs = uniform
            .iter()
            .map(|p| p.0.finetune_epochs)
            .max()
            .unwrap_or(0);
        let grid_trials = if spec.per_layer {
            let per: f64 = options
                .iter()
                .filter(|o| !o.is_empty())
                .map(|o| o.len() as f64)
                .product();
            // All-dense choices are the dense model, counted once.
            let sparse = if dense_in_space { per - 1.0 } else { per };
            methods.len() as f64 * sparse + 1.0
        } else {
            uniform.len() as f64 + 1.0
        };
        let uniform = uniform
            .into_iter()
            .map(|(p, f)| (p, f.into_iter().map(|l| l.pattern).collect()))
            .collect();
        let mut bytes = BTreeMap::new();
        for (i, l) in layers.iter().enumerate() {
            for p in options[i].iter().chain([&Pattern::Dense]) {
                bytes
                    .entry((i, pattern_label(p)))
                    .or_insert_with(|| format_bytes(p, l.rows, l.cols));
            }
        }
        Ok(Space {
            layers,
            options,
            methods,
            uniform,
            per_layer: spec.per_layer,
            finetune_epochs,
            grid_trials,
            bytes,
        })
    }

    /// The space without the (layer, pattern) options `drop` names; a layer left with none
    /// stays dense.
    pub fn without(&self, drop: &[(usize, Pattern)]) -> Space {
        let mut s = self.clone();
        for (i, o) in s.options.iter_mut().enumerate() {
            if o.is_empty() {
                continue;
            }
            o.retain(|p| !drop.contains(&(i, p.clone())));
            if o.is_empty() {
                o.push(Pattern::Dense);
            }
        }
        s
    }

    /// The bytes layer `i` takes in `p` (`p` one of its options, or dense).
    pub fn layer_bytes(&self, i: usize, p: &Pattern) -> f64 {
        let l = &self.layers[i];
        self.bytes
            .get(&(i, pattern_label(p)))
            .copied()
            .unwrap_or_else(|| format_bytes(p, l.rows, l.cols))
    }

    /// Indices of the layers that may be pruned.
    pub fn prunable(&self) -> Vec<usize> {
        (0..self.layers.len())
            .filter(|&i| !self.options[i].is_empty())
            .collect()
    }

    /// The fine-tune epochs the grid of this space would spend.
    pub fn grid_epochs(&self) -> f64 {
        (self.grid_trials - 1.0) * self.finetune_epochs as f64
    }

    fn group_of(&self, p: &PrunePoint) -> usize {
        self.methods
            .iter()
            .position(|(m, s)| Some(m) == p.method.as_ref() && Some(s) == p.schedule.as_ref())
            .unwrap_or(0)
    }

    /// A stable name of a candidate.
    fn id(&self, group: usize, patterns: &[Pattern]) -> String {
        let (m, s) = &self.methods[group];
        let each: Vec<String> = patterns.iter().map(pattern_label).collect();
        format!("{} {} [{}]", m.kind(), s.kind(), each.join(", "))
    }

    /// The uniform candidates (the grid's sparse points).
    pub fn uniform_candidates(&self) -> Vec<Candidate> {
        self.uniform
            .iter()
            .map(|(p, patterns)| {
                let group = self.group_of(p);
                Candidate {
                    group,
                    id: self.id(group, patterns),
                    patterns: patterns.clone(),
                    point: p.clone(),
                }
            })
            .collect()
    }

    /// The number of per-layer choices per (method, schedule).
    pub fn per_group(&self) -> f64 {
        self.prunable()
            .iter()
            .map(|&i| self.options[i].len() as f64)
            .product()
    }

    /// The candidate of `group` with `patterns`: the grid's own point when its layers take
    /// one pattern as the grid would (so that it shares the grid's key), else a per-layer
    /// point naming the layers that differ. `None` for the all-dense choice.
    pub fn candidate(&self, group: usize, patterns: Vec<Pattern>) -> Option<Candidate> {
        let mut counts: Vec<(&Pattern, usize)> = vec![];
        for p in patterns.iter().filter(|p| **p != Pattern::Dense) {
            match counts.iter_mut().find(|c| c.0 == p) {
                Some(c) => c.1 += 1,
                None => counts.push((p, 1)),
            }
        }
        let most = counts.iter().max_by_key(|c| c.1)?.0.clone();
        let (method, schedule) = self.methods[group].clone();
        let base = self
            .uniform
            .iter()
            .find(|(p, _)| {
                p.pattern == most
                    && p.method.as_ref() == Some(&method)
                    && p.schedule.as_ref() == Some(&schedule)
            })
            .or_else(|| self.uniform.iter().find(|(p, _)| p.pattern == most))?;
        let layers: Vec<(String, Pattern)> = patterns
            .iter()
            .zip(&base.1)
            .zip(&self.layers)
            .filter(|((want, grid), _)| want != grid)
            .map(|((want, _), l)| (l.name.clone(), want.clone()))
            .collect();
        let point = PrunePoint {
            pattern: most,
            method: Some(method),
            schedule: Some(schedule),
            finetune_epochs: self.finetune_epochs,
            layers,
            note: None,
        };
        Some(Candidate {
            group,
            id: self.id(group, &patterns),
            patterns,
            point,
        })
    }

    /// Every per-layer candidate of `group` (the caller checks [`Space::per_group`] first).
    pub fn enumerate(&self, group: usize) -> Vec<Candidate> {
        let prunable = self.prunable();
        let mut out = vec![];
        let mut idx = vec![0usize; prunable.len()];
        loop {
            let mut patterns = vec![Pattern::Dense; self.layers.len()];
            for (k, &i) in prunable.iter().enumerate() {
                patterns[i] = self.options[i][idx[k]].clone();
            }
            out.extend(self.candidate(group, patterns));
            let mut k = 0;
            loop {
                if k == prunable.len() {
                    return out;
                }
                idx[k] += 1;
                if idx[k] < self.options[prunable[k]].len() {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
        }
    }

    /// The accuracy proxies: per method, prunable layer and pattern, that layer alone pruned
    /// one-shot with no fine-tuning.
    pub fn proxies(&self) -> Vec<(usize, usize, Pattern, PrunePoint)> {
        let mut out = vec![];
        let mut seen: Vec<&Method> = vec![];
        let prunable = self.prunable();
        for (g, (method, _)) in self.methods.iter().enumerate() {
            if seen.contains(&method) {
                continue;
            }
            seen.push(method);
            for &i in &prunable {
                for p in self.options[i].iter().filter(|p| **p != Pattern::Dense) {
                    let layers = prunable
                        .iter()
                        .filter(|&&j| j != i)
                        .map(|&j| (self.layers[j].name.clone(), Pattern::Dense))
                        .collect();
                    let point = PrunePoint {
                        pattern: p.clone(),
                        method: Some(method.clone()),
                        schedule: Some(Schedule::Oneshot),
                        finetune_epochs: 0,
                        layers,
                        note: Some(SearchNote {
                            round: 0,
                            proxy: true,
                            predicted_accuracy: None,
                            predicted_latency_us: None,
                            reason: format!(
                                "sensitivity of {} to {} ({}, one-shot, no fine-tuning, other layers dense)",
                                self.layers[i].name,
                                pattern_label(p),
                                method.kind()
                            ),
                        }),
                    };
                    out.push((g, i, p.clone(), point));
                }
            }
        }
        out
    }

    /// The group whose proxies stand for `group` (the first with the same method).
    pub fn proxy_group(&self, group: usize) -> usize {
        let m = &self.methods[group].0;
        self.methods.iter().position(|x| &x.0 == m).unwrap_or(group)
    }
}
