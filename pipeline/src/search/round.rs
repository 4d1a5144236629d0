//! One round of a unified search, observed: its results read back from the store, the
//! predictors refitted on them, the next round's trials chosen, and the round's record.

use super::front::{self, Objectives, Reference, ACCURACY_MARGIN};
use super::layers::LayerTimes;
use super::measure::{self, Measured};
use super::predict::{AccuracyFit, LatencyFit};
use super::select::{self, Scored};
use super::source::{note, Entry, Prediction, Role, Unified};
use super::space::{Candidate, ENUMERATE_MAX};
use crate::kinds::pattern_label;
use crate::plan::Plan;
use kernels::Pattern;
use results::{Row, Value};
use std::collections::BTreeMap;

impl Unified {
    /// An entry's measured objectives. Its latency is `reference_us` (the dense reference's
    /// dense latency, [`Unified::reference_us`]) divided by the entry's speedup over its own
    /// dense pass where both are known: the speedups are measured in pairs and cancel the
    /// machine's drift between evaluations, which the raw latencies carry (issue 18).
    pub(super) fn measured(
        &self,
        plan: &Plan,
        e: &Entry,
        reference_us: Option<f64>,
    ) -> Option<Measured> {
        let mut m = self.raw_measured(plan, e)?;
        if let (Some(d), Some(s)) = (reference_us, m.speedup) {
            m.latency_us = d / s;
        }
        Some(m)
    }

    /// The dense reference evaluation's own dense latency, which every latency is scaled to.
    fn reference_us(&self, plan: &Plan) -> Option<f64> {
        self.entries
            .iter()
            .find(|e| matches!(e.role, Role::Dense))
            .and_then(|d| self.raw_measured(plan, d))
            .and_then(|d| d.dense_latency_us)
    }

    fn raw_measured(&self, plan: &Plan, e: &Entry) -> Option<Measured> {
        let key = measure::prune_key(plan, &e.point)?;
        let largest = self.exp.batch_sizes.iter().max() == Some(&self.spec.batch_size);
        measure::evaluation(
            &self.store,
            plan,
            key,
            self.backend(),
            self.spec.batch_size,
            largest,
        )
    }

    fn budget_used(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| matches!(e.role, Role::Trial(_)))
            .map(|e| e.point.finetune_epochs)
            .sum()
    }

    /// Reads the round's results, refits, chooses the next round and writes its record.
    pub(super) fn observe(&mut self) -> Row {
        let plan = self.plan.clone().unwrap_or_default();
        let store = &self.store;
        let b = self.spec.batch_size;
        let reference_us = self.reference_us(&plan);
        let dense = self
            .entries
            .iter()
            .find(|e| matches!(e.role, Role::Dense))
            .and_then(|e| self.measured(&plan, e, reference_us));
        let dense_accuracy = self
            .entries
            .iter()
            .find(|e| matches!(e.role, Role::Dense))
            .and_then(|e| measure::prune_key(&plan, &e.point))
            .and_then(|k| measure::prune_accuracy(store, k));
        // One-shot drops per (method group, layer, pattern).
        let mut drops: BTreeMap<(usize, usize, String), f64> = BTreeMap::new();
        for e in &self.entries {
            if let Role::Proxy { layer, pattern } = &e.role {
                let acc = measure::prune_key(&plan, &e.point)
                    .and_then(|k| measure::prune_accuracy(store, k));
                let group = self
                    .space
                    .methods
                    .iter()
                    .position(|(m, _)| Some(m) == e.point.method.as_ref())
                    .unwrap_or(0);
                if let (Some(acc), Some(d)) = (acc, dense_accuracy) {
                    drops.insert((group, *layer, pattern_label(pattern)), d - acc);
                }
            }
        }
        // Trials measured so far, with what was predicted when they were chosen.
        let mut trials: Vec<(&Entry, Option<Measured>)> = vec![];
        for e in &self.entries {
            if matches!(e.role, Role::Trial(_)) {
                trials.push((e, self.measured(&plan, e, reference_us)));
            }
        }
        let tuned = measure::tunings(store, &plan, self.backend());
        let tuned_us = |i: usize, p: &Pattern| {
            let l = &self.space.layers[i];
            tuned
                .get(&(pattern_label(p), l.rows, l.cols, b * l.tokens))
                .copied()
        };
        let n_layers = self.space.layers.len();
        let mut in_pass: Vec<(Vec<Pattern>, Vec<f64>)> = vec![];
        for (e, m) in &trials {
            if let (
                Role::Trial(c),
                Some(Measured {
                    layer_us: Some(t), ..
                }),
            ) = (&e.role, m)
            {
                in_pass.push((c.patterns.clone(), t.clone()));
            }
        }
        if let Some(Measured {
            layer_us: Some(t), ..
        }) = &dense
        {
            in_pass.push((vec![Pattern::Dense; n_layers], t.clone()));
        }
        let times = LayerTimes::new(
            n_layers,
            |i| self.space.options[i].clone(),
            tuned_us,
            &in_pass,
        );
        let layer_us = |i: usize, p: &Pattern| times.us(i, p);
        // Formats that cannot beat dense on a layer at the batch size, by the layer times the
        // latency predictor adds up (in-pass where measured, else tuned and scaled).
        let mut slow: Vec<(usize, Pattern)> = vec![];
        let mut slow_why: Vec<String> = vec![];
        for i in self.space.prunable() {
            let Some(dense_us) = layer_us(i, &Pattern::Dense) else {
                continue;
            };
            for p in self.space.options[i]
                .iter()
                .filter(|p| **p != Pattern::Dense)
            {
                if let Some(us) = layer_us(i, p).filter(|&us| us >= dense_us) {
                    slow.push((i, p.clone()));
                    slow_why.push(format!(
                        "{} {}: {us:.1} µs, dense {dense_us:.1} µs, at batch {b}",
                        self.space.layers[i].name,
                        pattern_label(p)
                    ));
                }
            }
        }
        // The time outside the GEMMs: the median over the measured models.
        let mut outside: Vec<f64> = trials
            .iter()
            .filter_map(|t| t.1.as_ref().and_then(|m| m.non_gemm_us))
            .chain(dense.as_ref().and_then(|d| d.non_gemm_us))
            .collect();
        outside.sort_by(f64::total_cmp);
        let non_gemm = outside.get(outside.len() / 2).copied().unwrap_or(0.0);
        let dense_gemm: Option<f64> = (0..self.space.layers.len())
            .map(|i| layer_us(i, &Pattern::Dense))
            .sum();
        let groups = self.space.methods.len();
        let predict_raw = |c: &Candidate| -> Option<(f64, f64, f64)> {
            let g = self.space.proxy_group(c.group);
            let (mut drop, mut gemm, mut bytes) = (0.0, 0.0, 0.0);
            for (i, p) in c.patterns.iter().enumerate() {
                if *p != Pattern::Dense {
                    drop += drops.get(&(g, i, pattern_label(p)))?;
                }
                gemm += layer_us(i, p)?;
                bytes += self.space.layer_bytes(i, p);
            }
            Some((drop, gemm, bytes))
        };
        let mut acc_data = vec![];
        let mut lat_data = vec![];
        for (e, m) in &trials {
            if let (Role::Trial(c), Some(m)) = (&e.role, m) {
                if let Some((drop, gemm, _)) = predict_raw(c) {
                    acc_data.push((c.group, drop, m.accuracy));
                    lat_data.push((gemm, m.latency_us));
                }
            }
        }
        if let (Some(d), Some(g)) = (&dense, dense_gemm) {
            lat_data.push((g, d.latency_us));
        }
        let acc_fit = AccuracyFit::fit(dense_accuracy.unwrap_or(1.0), groups, &acc_data);
        let lat_fit = LatencyFit::fit(non_gemm, &lat_data);
        let reference = dense.as_ref().map(|d| Reference {
            accuracy: (d.accuracy - ACCURACY_MARGIN).max(0.0),
            latency_us: d.latency_us,
            weight_bytes: d.weight_bytes,
        });
        let dense_latency = dense
            .as_ref()
            .map(|d| d.dense_latency_us.unwrap_or(d.latency_us));
        let c = &self.spec.constraints;
        let feasible = |o: &Objectives| {
            c.min_accuracy.is_none_or(|x| o.accuracy >= x)
                && c.max_latency_us.is_none_or(|x| o.latency_us <= x)
                && c.min_speedup
                    .is_none_or(|x| dense_latency.is_some_and(|d| d / o.latency_us >= x))
        };
        let objectives = |m: &Measured| Objectives {
            accuracy: m.accuracy,
            latency_us: m.latency_us,
            weight_bytes: m.weight_bytes,
        };
        let mut measured: Vec<Objectives> = trials
            .iter()
            .filter_map(|(_, m)| m.as_ref().map(objectives))
            .collect();
        if let Some(d) = &dense {
            measured.push(objectives(d));
        }
        let feasible_pts: Vec<Objectives> =
            measured.iter().copied().filter(|o| feasible(o)).collect();
        let front_idx = front::front(&feasible_pts);
        let hv = reference.map(|r| {
            let g: Vec<[f64; 3]> = front_idx
                .iter()
                .map(|&i| r.gains(&feasible_pts[i]))
                .collect();
            front::hypervolume(&g)
        });
        // Rank agreement of what was predicted at choice time with what was measured.
        let (mut pa, mut ma, mut pl, mut ml) = (vec![], vec![], vec![], vec![]);
        for (e, m) in &trials {
            if let (Some(n), Some(m)) = (&e.point.note, m) {
                if let (Some(a), Some(l)) = (n.predicted_accuracy, n.predicted_latency_us) {
                    pa.push(a);
                    ma.push(m.accuracy);
                    pl.push(l);
                    ml.push(m.latency_us);
                }
            }
        }
        let rho = |x: &[f64], y: &[f64]| {
            let r = kernels::spearman(x, y);
            if r.is_finite() {
                Value::F64(r)
            } else {
                Value::Null
            }
        };
        // Choose the next round.
        let used = self.budget_used();
        let left = self.spec.budget_epochs.saturating_sub(used);
        let next_round = self.round + 1;
        let mut chosen: Vec<Entry> = vec![];
        let mut stop = None;
        match (reference, dense_gemm) {
            (None, _) | (_, None) => {
                stop = Some(
                    "the dense reference or its layer tunings failed: nothing to predict from"
                        .to_string(),
                );
            }
            (Some(reference), Some(_)) => {
                let run: Vec<&str> = self
                    .entries
                    .iter()
                    .filter_map(|e| match &e.role {
                        Role::Trial(c) => Some(c.id.as_str()),
                        _ => None,
                    })
                    .collect();
                let cands = self.candidates(&slow, &drops, &layer_us);
                let mut scored = vec![];
                let mut preds = vec![];
                for (k, cand) in cands.iter().enumerate() {
                    if run.contains(&cand.id.as_str()) {
                        preds.push(None);
                        continue;
                    }
                    let p = predict_raw(cand).map(|(drop, gemm, bytes)| Prediction {
                        drop,
                        gemm_us: gemm,
                        objectives: Objectives {
                            accuracy: acc_fit.predict(cand.group, drop),
                            latency_us: lat_fit.predict(gemm),
                            weight_bytes: bytes,
                        },
                    });
                    if let Some(p) = p {
                        let s = Scored {
                            index: k,
                            id: cand.id.clone(),
                            predicted: p.objectives,
                            sigma: acc_fit.sigma,
                            latency_sigma: lat_fit.sigma_rel,
                            cost: cand.point.finetune_epochs,
                        };
                        if feasible(&s.optimistic()) {
                            scored.push(s);
                        }
                    }
                    preds.push(p);
                }
                let measured_front: Vec<Objectives> =
                    front_idx.iter().map(|&i| feasible_pts[i]).collect();
                let picks = select::choose(
                    &reference,
                    &measured_front,
                    &scored,
                    self.spec.per_round,
                    left,
                );
                for pick in &picks {
                    let cand = cands[pick.index].clone();
                    let pred = preds[pick.index].expect("scored candidates have predictions");
                    let reason = format!(
                        "optimistic hypervolume gain {:.5}: predicted accuracy {:.4} ± {:.4} (one-shot drop {:.4}), latency {:.1} µs ± {:.0} % ({:.1} µs of tuned GEMMs)",
                        pick.gain,
                        pred.objectives.accuracy,
                        acc_fit.sigma,
                        pred.drop,
                        pred.objectives.latency_us,
                        100.0 * lat_fit.sigma_rel,
                        pred.gemm_us
                    );
                    let mut point = cand.point.clone();
                    point.note = Some(note(next_round, reason, Some(&pred)));
                    chosen.push(Entry {
                        point,
                        role: Role::Trial(Box::new(cand)),
                    });
                }
                if chosen.is_empty() {
                    stop = Some(
                        if left < self.space.finetune_epochs.max(1)
                            && self.space.finetune_epochs > 0
                        {
                            format!(
                                "budget spent: {used} of {} fine-tune epochs",
                                self.spec.budget_epochs
                            )
                        } else {
                            "the front stopped moving: no candidate within the budget is predicted to add hypervolume, even one σ better".to_string()
                        },
                    );
                }
            }
        }
        let count = |stage: &str| plan.nodes.values().filter(|n| n.stage == stage).count() as i64;
        let cheap = self
            .entries
            .iter()
            .filter(|e| e.point.finetune_epochs == 0 && e.point.method.is_some())
            .count() as i64;
        let opt = |x: Option<f64>| x.map_or(Value::Null, Value::F64);
        let mut row = Row::new();
        let mut put = |k: &str, v: Value| {
            row.insert(k.to_owned(), v);
        };
        put("round", Value::I64(self.round as i64));
        put(
            "trials_this_round",
            Value::I64(
                self.entries
                    .iter()
                    .filter(|e| {
                        matches!(e.role, Role::Trial(_))
                            && e.point.note.as_ref().is_some_and(|n| n.round == self.round)
                    })
                    .count() as i64,
            ),
        );
        put("trials_total", Value::I64(trials.len() as i64));
        put(
            "trials_failed",
            Value::I64(trials.iter().filter(|t| t.1.is_none()).count() as i64),
        );
        put("budget_epochs_used", Value::I64(used as i64));
        put("budget_epochs", Value::I64(self.spec.budget_epochs as i64));
        put("cheap_prunes", Value::I64(cheap));
        put("kernel_tunes", Value::I64(count("kernel_tune")));
        put("evaluates", Value::I64(count("evaluate")));
        put("front_size", Value::I64(front_idx.len() as i64));
        put("hypervolume", opt(hv));
        put("reference_accuracy", opt(reference.map(|r| r.accuracy)));
        put("reference_latency_us", opt(reference.map(|r| r.latency_us)));
        put(
            "reference_weight_bytes",
            opt(reference.map(|r| r.weight_bytes)),
        );
        put("spearman_accuracy", rho(&pa, &ma));
        put("spearman_latency", rho(&pl, &ml));
        put("predictor_trials", Value::I64(acc_fit.n as i64));
        put("accuracy_intercept", Value::F64(acc_fit.intercept));
        put("accuracy_slope", Value::F64(acc_fit.slope));
        put("accuracy_sigma", Value::F64(acc_fit.sigma));
        put("latency_scale", Value::F64(lat_fit.scale));
        put("latency_sigma_rel", Value::F64(lat_fit.sigma_rel));
        put("non_gemm_us", Value::F64(non_gemm));
        put(
            "layer_formats_measured_in_pass",
            Value::I64(times.observed() as i64),
        );
        put("in_pass_over_tuned", Value::F64(times.ratio()));
        put("next_round_trials", Value::I64(chosen.len() as i64));
        // Per layer, the formats slower than dense there (a per-layer search leaves them out).
        put("formats_slower_than_dense", Value::ListStr(slow_why));
        put("stop", stop.clone().map_or(Value::Null, Value::Str));
        if stop.is_some() {
            self.finish(&trials, dense, dense_latency, &feasible_pts);
        }
        self.stop = stop;
        self.pending = chosen;
        row
    }

    /// The candidates: the grid's points, or every per-layer choice (or, for a space too
    /// large to enumerate, each group's additive front).
    /// A per-layer space leaves out each layer's `slow` formats.
    fn candidates(
        &self,
        slow: &[(usize, Pattern)],
        drops: &BTreeMap<(usize, usize, String), f64>,
        layer_us: &dyn Fn(usize, &Pattern) -> Option<f64>,
    ) -> Vec<Candidate> {
        if !self.space.per_layer {
            return self.space.uniform_candidates();
        }
        let space = self.space.without(slow);
        let mut out = vec![];
        for g in 0..space.methods.len() {
            if space.per_group() <= ENUMERATE_MAX as f64 {
                out.extend(space.enumerate(g));
            } else {
                out.extend(super::additive::front(&space, g, drops, layer_us));
            }
        }
        out
    }

    /// Records the constraints no trial met, with the best trial found for each.
    fn finish(
        &self,
        trials: &[(&Entry, Option<Measured>)],
        dense: Option<Measured>,
        dense_latency: Option<f64>,
        feasible: &[Objectives],
    ) {
        let mut measured: Vec<(String, Measured)> = trials
            .iter()
            .filter_map(|(e, m)| match &e.role {
                Role::Trial(c) => m.clone().map(|m| (c.id.clone(), m)),
                _ => None,
            })
            .collect();
        measured.extend(dense.map(|d| ("dense".to_string(), d)));
        let unmet = if feasible.is_empty() {
            super::verdict::unmet(&self.spec.constraints, &measured, dense_latency)
        } else {
            vec![]
        };
        if let Ok(mut v) = self.verdict.lock() {
            v.unmet = unmet;
        }
    }
}
