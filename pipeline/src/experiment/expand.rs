//! Expansion: a validated experiment becomes a [`Plan`] of keyed stage instances.

use super::error::{ExperimentError, SourceMap};
use super::validate::{eval_trials, Experiment};
use crate::key::{self, AnyKey, CanonConfig, StageMarker};
use crate::plan::{Node, Plan, Spec};
use crate::stage::StageSet;
use crate::trial::{LayerFormat, PatternTrial, TuneTrial};

fn add<S: StageMarker>(
    plan: &mut Plan,
    stages: &dyn StageSet,
    spec: Spec,
    canon: CanonConfig,
    parents: Vec<AnyKey>,
) -> AnyKey {
    let version = stages.version(S::NAME);
    let key = key::stage_key::<S>(version, &canon, &parents).any();
    plan.nodes.entry(key).or_insert(Node {
        spec,
        parents,
        version,
        canon,
    });
    key
}

/// Expands an experiment into its plan.
pub fn expand(
    exp: &Experiment,
    stages: &dyn StageSet,
    map: &SourceMap,
) -> Result<Plan, ExperimentError> {
    let mut plan = Plan {
        experiment: exp.name.clone(),
        ..Plan::default()
    };
    let device = |b| {
        stages
            .device(b)
            .unwrap_or_else(|e| format!("unavailable: {e}"))
    };
    let tune = |pattern: &PatternTrial, rows, cols, bt, backend| TuneTrial {
        pattern: pattern.clone(),
        rows,
        cols,
        batch_tokens: bt,
        backend,
        dtype: stages.dtype(backend, pattern, rows, cols),
        strategy: exp.strategy,
        budget: exp.budget,
        seed: exp.seed,
        device: device(backend),
        kernel_digest: stages.kernel_digest(backend),
    };
    let Some(mp) = &exp.model_part else {
        for point in &exp.prune_points {
            for &(rows, cols) in &exp.shapes {
                for &bt in &exp.batch_tokens {
                    for &backend in &exp.backends {
                        let t = tune(&point.trial.pattern, rows, cols, bt, backend);
                        let canon = t.canon();
                        let k =
                            add::<key::KernelTune>(&mut plan, stages, Spec::Tune(t), canon, vec![]);
                        plan.edges.root_tunes.insert(k);
                    }
                }
            }
        }
        return Ok(plan);
    };
    let ds = &mp.dataset;
    let dims = stages
        .dataset_dims(ds)
        .map_err(|e| map.error(0..0, format!("[dataset]: {e}")))?;
    let ds_key = add::<key::Dataset>(
        &mut plan,
        stages,
        Spec::Dataset(ds.clone()),
        ds.canon(),
        vec![],
    );
    plan.edges.datasets.insert(ds_key);
    let evals = eval_trials(exp, device);
    for train in &mp.trains {
        let tr_key = add::<key::Train>(
            &mut plan,
            stages,
            Spec::Train(train.clone()),
            train.canon(),
            vec![ds_key],
        );
        plan.edges.trains.insert((ds_key, tr_key));
        for point in &exp.prune_points {
            let mut p = point.trial.clone();
            p.finetune_lr = mp.finetune_lr.unwrap_or(train.lr);
            let layers: Vec<LayerFormat> = stages.layer_formats(&mp.model, dims, &p.pattern);
            let canon = p.canon();
            let pr_key = add::<key::Prune>(
                &mut plan,
                stages,
                Spec::Prune(p, layers.clone()),
                canon,
                vec![tr_key],
            );
            plan.edges.prunes.insert((tr_key, pr_key));
            for eval in &evals {
                let mut tunes = vec![];
                for layer in &layers {
                    for &bt in &exp.batch_tokens {
                        let t = tune(&layer.pattern, layer.rows, layer.cols, bt, eval.backend);
                        let canon = t.canon();
                        let k =
                            add::<key::KernelTune>(&mut plan, stages, Spec::Tune(t), canon, vec![]);
                        plan.edges.prune_tunes.insert((pr_key, k));
                        tunes.push(k);
                    }
                }
                let mut parents = vec![pr_key];
                parents.extend(tunes.iter().copied());
                let ev_key = add::<key::Evaluate>(
                    &mut plan,
                    stages,
                    Spec::Eval(eval.clone()),
                    eval.canon(),
                    parents,
                );
                plan.edges.evals.insert((pr_key, ev_key));
                for t in tunes {
                    plan.edges.eval_tunes.insert((t, ev_key));
                }
            }
        }
    }
    Ok(plan)
}
