//! Checks of meaning that the TOML types cannot express, each pointing at the value at fault.
//! A value is validated once, here, into a type that cannot hold an invalid one.

use super::axis::Axis;
use super::error::{ExperimentError, SourceMap};
use super::limits;
use super::prune_space::prune_points;
use super::schema::*;
use crate::kinds::{CheckpointTrial, DatasetTrial, PrunePoint, TrainTrial};
use stages::kernel_tune::Strategy;
use stages::{ModelSpec, TrainSpec};
use std::ops::Range;
use toml::Spanned;

/// A validated experiment: typed, every value checked, not yet planned into keys.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Name (the result folder).
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// Dataset, model and training grid; `None` for a kernel-only study and a layer study.
    pub model_part: Option<ModelPart>,
    /// The checkpoint of a layer study (`[model] kind = "checkpoint"`).
    pub study: Option<CheckpointTrial>,
    /// Prune points (pattern and method axes expanded, include/exclude applied).
    pub prune_points: Vec<PrunePoint>,
    /// Kernel-only shapes.
    pub shapes: Vec<(u64, u64)>,
    /// Backends.
    pub backends: Vec<Backend>,
    /// Batch tokens.
    pub batch_tokens: Vec<u64>,
    /// Tuning strategy, with its budget and seed.
    pub strategy: Strategy,
    /// Whether CPU tunings rank with the device's calibration of the cost model
    /// (`[kernel_tune] calibrate`, default true) or with the analytical model alone.
    pub calibrate: bool,
    /// Evaluation batch sizes.
    pub batch_sizes: Vec<u64>,
    /// `[evaluate] dense_where_faster`: the sparse pass runs layers through their dense kernel
    /// where their sparse kernel loses (CPU backend only; `stages::evaluate::evaluate`).
    pub dense_where_faster: bool,
    /// `[search] strategy = "unified"`; `None` for grid.
    pub search: Option<super::search::SearchSpec>,
}

/// The training side of an experiment.
#[derive(Clone, Debug)]
pub struct ModelPart {
    /// Dataset.
    pub dataset: DatasetTrial,
    /// Where its keys are in the file (for errors only loading it finds).
    pub dataset_spans: super::dataset::DatasetSpans,
    /// Model.
    pub model: ModelSpec,
    /// Training grid.
    pub trains: Vec<TrainTrial>,
    /// Fine-tuning learning rate, if given (else each training's lr).
    pub finetune_lr: Option<f64>,
    /// `[prune] keep_dense`, if given (else the model's own choice).
    pub keep_dense: Option<Vec<String>>,
}

pub(super) fn values<T: Clone>(axis: &Spanned<Axis<T>>) -> Vec<(T, Range<usize>)> {
    let outer = axis.span();
    axis.get_ref()
        .values
        .iter()
        .map(|v| {
            let span = if v.span() == (0..0) {
                outer.clone()
            } else {
                v.span()
            };
            (v.get_ref().clone(), span)
        })
        .collect()
}

pub(super) fn check(
    ok: bool,
    map: &SourceMap,
    span: Range<usize>,
    msg: impl FnOnce() -> String,
) -> Result<(), ExperimentError> {
    if ok {
        Ok(())
    } else {
        Err(map.error(span, msg()))
    }
}

/// The longest experiment name.
const NAME_MAX: usize = 200;

/// Validates a parsed file.
pub fn validate(raw: &RawExperiment, map: &SourceMap) -> Result<Experiment, ExperimentError> {
    let name = raw.name.get_ref().clone();
    check(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !name.starts_with('.'),
        map,
        raw.name.span(),
        || {
            format!("name `{name}` must be non-empty and use only letters, digits, '-', '_' and '.' (it names a folder)")
        },
    )?;
    // `<out>/.<name>.generations` and the names a run moves aside must fit a file name (255
    // bytes on the usual file systems).
    check(name.len() <= NAME_MAX, map, raw.name.span(), || {
        format!(
            "name is {} characters long, more than {NAME_MAX} (it names folders)",
            name.len()
        )
    })?;
    let kt = raw.kernel_tune.as_ref();
    let shapes_raw = kt.and_then(|k| k.get_ref().shapes.as_ref());
    let model_part = match shapes_raw {
        Some(shapes) => {
            if raw.dataset.is_some() || raw.model.is_some() || raw.train.is_some() {
                return Err(map.error(
                    shapes.span(),
                    "`kernel_tune.shapes` makes a kernel-only study: remove [dataset], [model] and [train], or remove `shapes`",
                ));
            }
            None
        }
        None if is_study(raw) => None,
        None => Some(model_part(raw, map)?),
    };
    let study = if is_study(raw) && shapes_raw.is_none() {
        Some(super::study::checkpoint_trial(raw, map)?)
    } else {
        None
    };
    // Nothing evaluates a model there: the table would be read and ignored.
    if model_part.is_none() && raw.evaluate.is_some() {
        let what = if study.is_some() {
            "a layer study"
        } else {
            "a kernel-only study"
        };
        return Err(map.error(
            map.section("evaluate"),
            format!(
                "[evaluate] applies to a trained model: {what} evaluates none (its kernels are \
                 timed at [kernel_tune] batch_tokens); remove [evaluate]"
            ),
        ));
    }
    let mut shapes = Vec::new();
    if let Some(s) = shapes_raw {
        check(!s.get_ref().is_empty(), map, s.span(), || {
            "`shapes` is empty: give [[rows, cols], ...]".into()
        })?;
        for shape in s.get_ref() {
            let v = shape.get_ref();
            check(
                v.len() == 2 && v.iter().all(|&x| x > 0),
                map,
                shape.span(),
                || format!("a shape is [rows, cols] with both > 0, found {v:?}"),
            )?;
            limits::matrix(
                (v[0], v[1]),
                || format!("the shape {v:?}"),
                map,
                shape.span(),
            )?;
            shapes.push((v[0], v[1]));
        }
    }
    // V must divide every hidden width of an MLP (every layer but the classifier takes the
    // pattern), a transformer's d_model and d_ff, and every row count of a kernel-only study.
    let v_must_divide: Vec<u64> = match &model_part {
        Some(ModelPart {
            model: ModelSpec::Mlp { hidden },
            ..
        }) => hidden.iter().map(|&h| h as u64).collect(),
        // A transformer's pruned layers have d_model (Q, K, V, O, down) or d_ff (up) rows.
        Some(ModelPart {
            model: ModelSpec::Transformer { d_model, d_ff, .. },
            ..
        }) => vec![*d_model as u64, *d_ff as u64],
        Some(_) => vec![],
        // A layer study checks V against its tensors itself (it needs to divide one of them).
        None if study.is_some() => vec![],
        None => shapes.iter().map(|s| s.0).collect(),
    };
    let prune_points = match &raw.prune {
        Some(p) => prune_points(p, map, &v_must_divide)?,
        None => vec![PrunePoint::dense()],
    };
    let backends = match kt.and_then(|k| k.get_ref().backend.as_ref()) {
        Some(b) => dedup(values(b).into_iter().map(|x| x.0).collect()),
        None => vec![Backend::Cpu],
    };
    let mut batch_tokens = vec![];
    // Every batch with its place, for the check of the widest layer at each below.
    let mut batch_spans = vec![];
    if let Some(bt) = kt.and_then(|k| k.get_ref().batch_tokens.as_ref()) {
        for (b, span) in values(bt) {
            check(b >= 1, map, span.clone(), || {
                "batch_tokens must be ≥ 1".into()
            })?;
            limits::at_most(b, limits::BATCH_MAX, "batch_tokens", map, span.clone())?;
            batch_tokens.push(b);
            batch_spans.push((b, span));
        }
    } else {
        batch_tokens.push(64);
    }
    let batch_tokens = dedup(batch_tokens);
    let budget = match kt.and_then(|k| k.get_ref().budget.as_ref()) {
        Some(b) => {
            check(*b.get_ref() >= 1, map, b.span(), || {
                "budget must be ≥ 1 measurement".into()
            })?;
            // More than any space holds (and it is written as a signed 64-bit column).
            limits::at_most(*b.get_ref(), limits::BUDGET_MAX, "budget", map, b.span())?;
            *b.get_ref() as usize
        }
        None => 24,
    };
    let strategy = match kt
        .and_then(|k| k.get_ref().strategy.as_ref())
        .map_or(StrategyKind::Model, |s| *s.get_ref())
    {
        StrategyKind::Exhaustive => Strategy::Exhaustive,
        StrategyKind::Random => Strategy::Random {
            budget,
            seed: raw.seed,
        },
        StrategyKind::Model => Strategy::Model { budget },
        StrategyKind::Guided => Strategy::Guided { budget },
    };
    let calibrate = kt
        .and_then(|k| k.get_ref().calibrate.as_ref())
        .is_none_or(|c| *c.get_ref());
    let mut batch_sizes = vec![];
    if let Some(bs) = raw.evaluate.as_ref().and_then(|e| e.batch_sizes.as_ref()) {
        check(!bs.get_ref().is_empty(), map, bs.span(), || {
            "batch_sizes is empty".into()
        })?;
        for b in bs.get_ref() {
            check(*b.get_ref() >= 1, map, b.span(), || {
                "batch sizes must be ≥ 1".into()
            })?;
            limits::at_most(
                *b.get_ref(),
                limits::BATCH_MAX,
                "a batch size",
                map,
                b.span(),
            )?;
            batch_sizes.push(*b.get_ref());
            batch_spans.push((*b.get_ref(), b.span()));
        }
    } else {
        batch_sizes = vec![1, 256];
    }
    let batch_sizes = dedup(batch_sizes);
    let dense_where_faster = match raw
        .evaluate
        .as_ref()
        .and_then(|e| e.dense_where_faster.as_ref())
    {
        Some(d) => {
            check(
                !*d.get_ref() || !backends.contains(&Backend::Cuda),
                map,
                d.span(),
                || {
                    "dense_where_faster runs on the cpu backend only: the CUDA evaluation has no \
                     dense forward pass of its own yet (drop \"cuda\" from [kernel_tune] backend \
                     or this line)"
                        .into()
                },
            )?;
            *d.get_ref()
        }
        None => false,
    };
    // The widest layer's inputs or outputs at each batch (a kernel tuning's B and C).
    let widest = match &model_part {
        Some(ModelPart { model, .. }) => {
            let w = match model {
                ModelSpec::Mlp { hidden } => hidden.iter().copied().max().unwrap_or(0),
                ModelSpec::Cnn { channels, hidden } => {
                    channels.iter().chain(hidden).copied().max().unwrap_or(0)
                }
                ModelSpec::Transformer { d_model, d_ff, .. } => *d_model.max(d_ff),
            };
            w as u64
        }
        None => shapes.iter().map(|&(r, c)| r.max(c)).max().unwrap_or(0),
    };
    for (b, span) in batch_spans {
        limits::matrix(
            (widest, b),
            || format!("a layer of width {widest} at batch {b}"),
            map,
            span,
        )?;
    }
    let search = super::search::search_spec(
        raw,
        map,
        model_part.as_ref(),
        &prune_points,
        &batch_tokens,
        &batch_sizes,
    )?;
    Ok(Experiment {
        name,
        seed: raw.seed,
        model_part,
        study,
        prune_points,
        shapes,
        backends,
        batch_tokens,
        strategy,
        calibrate,
        batch_sizes,
        dense_where_faster,
        search,
    })
}

/// Whether the file is a layer study of a checkpoint.
fn is_study(raw: &RawExperiment) -> bool {
    raw.model
        .as_ref()
        .is_some_and(|m| *m.kind.get_ref() == ModelKind::Checkpoint)
}

pub(super) fn dedup<T: PartialEq>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn missing(map: &SourceMap, what: &str) -> ExperimentError {
    map.error(
        0..0,
        format!("missing [{what}] section (or give `kernel_tune.shapes` for a kernel-only study)"),
    )
}

/// `[model] kind = "transformer"`: every encoder field given and ≥ 1, `d_model` a multiple of
/// `heads`, no `hidden` or `channels`.
fn transformer(
    model: &RawModel,
    encoder: &[(&str, &Option<Spanned<u64>>); 5],
    map: &SourceMap,
) -> Result<ModelSpec, ExperimentError> {
    let mut v = [0usize; 5];
    for (slot, (name, x)) in v.iter_mut().zip(encoder) {
        let x = x.as_ref().ok_or_else(|| {
            map.error(
                model.kind.span(),
                format!("kind = \"transformer\" needs `{name}`"),
            )
        })?;
        check(*x.get_ref() >= 1, map, x.span(), || {
            format!("{name} must be ≥ 1")
        })?;
        let max = if *name == "layers" {
            limits::LAYERS_MAX
        } else {
            limits::WIDTH_MAX
        };
        limits::at_most(*x.get_ref(), max, name, map, x.span())?;
        *slot = *x.get_ref() as usize;
    }
    if let Some(h) = model.hidden.first().or(model.channels.first()) {
        return Err(map.error(
            h.span(),
            "`hidden` and `channels` do not apply to kind = \"transformer\"".to_string(),
        ));
    }
    let [layers, d_model, heads, d_ff, patch] = v;
    if let Some(f) = &model.d_ff {
        limits::matrix(
            (d_model as u64, d_ff as u64),
            || "the feed-forward layers".to_string(),
            map,
            f.span(),
        )?;
    }
    if let Some(h) = &model.heads {
        check(d_model % heads == 0, map, h.span(), || {
            format!("d_model = {d_model} is not divisible by heads = {heads}")
        })?;
    }
    Ok(ModelSpec::Transformer {
        layers,
        d_model,
        heads,
        d_ff,
        patch,
    })
}

fn model_part(raw: &RawExperiment, map: &SourceMap) -> Result<ModelPart, ExperimentError> {
    let ds = raw
        .dataset
        .as_ref()
        .ok_or_else(|| missing(map, "dataset"))?;
    let model = raw.model.as_ref().ok_or_else(|| missing(map, "model"))?;
    let train = raw.train.as_ref().ok_or_else(|| missing(map, "train"))?;
    let (dataset, dataset_spans) = super::dataset::dataset_trial(ds, map, raw.seed)?;
    let kind = *model.kind.get_ref();
    let hidden: Vec<usize> = model.hidden.iter().map(|h| *h.get_ref() as usize).collect();
    for h in &model.hidden {
        check(*h.get_ref() > 0, map, h.span(), || {
            "hidden widths must be > 0".into()
        })?;
        limits::at_most(
            *h.get_ref(),
            limits::WIDTH_MAX,
            "a hidden width",
            map,
            h.span(),
        )?;
    }
    for pair in model.hidden.windows(2) {
        let (a, b) = (*pair[0].get_ref(), *pair[1].get_ref());
        limits::matrix(
            (b, a),
            || format!("the layer from width {a} to {b}"),
            map,
            pair[1].span(),
        )?;
    }
    let channels: Vec<usize> = model
        .channels
        .iter()
        .map(|h| *h.get_ref() as usize)
        .collect();
    for c in &model.channels {
        check(*c.get_ref() > 0, map, c.span(), || {
            "channels must be > 0".into()
        })?;
        limits::at_most(
            *c.get_ref(),
            limits::WIDTH_MAX,
            "a channel count",
            map,
            c.span(),
        )?;
    }
    let blocks = match &model.layers {
        Some(l) => match l.get_ref() {
            LayersField::Count(n) => Some(Spanned::new(l.span(), *n)),
            LayersField::Globs(_) => {
                return Err(map.error(
                    l.span(),
                    "`layers` is a number of blocks here (a list of tensor globs is for kind = \"checkpoint\")".to_string(),
                ))
            }
        },
        None => None,
    };
    let encoder = [
        ("layers", &blocks),
        ("d_model", &model.d_model),
        ("heads", &model.heads),
        ("d_ff", &model.d_ff),
        ("patch", &model.patch),
    ];
    if kind != ModelKind::Transformer {
        if let Some((name, Some(x))) = encoder.iter().find(|(_, x)| x.is_some()) {
            return Err(map.error(
                x.span(),
                format!("`{name}` applies to kind = \"transformer\" only"),
            ));
        }
    }
    let study = [
        ("path", model.path.as_ref().map(Spanned::span)),
        ("conv", model.conv.as_ref().map(Spanned::span)),
        ("calibration", model.calibration.as_ref().map(Spanned::span)),
        (
            "calibration_tokens",
            model.calibration_tokens.as_ref().map(Spanned::span),
        ),
    ];
    if let Some((name, Some(span))) = study.into_iter().find(|(_, s)| s.is_some()) {
        return Err(map.error(
            span,
            format!("`{name}` applies to kind = \"checkpoint\" only"),
        ));
    }
    let model_spec = match kind {
        ModelKind::Mlp => {
            check(channels.is_empty(), map, model.kind.span(), || {
                "`channels` applies to kind = \"cnn\" only".into()
            })?;
            ModelSpec::Mlp { hidden }
        }
        ModelKind::Cnn => {
            check(!channels.is_empty(), map, model.kind.span(), || {
                "kind = \"cnn\" needs `channels = [c1, c2, ...]`".into()
            })?;
            ModelSpec::Cnn { channels, hidden }
        }
        ModelKind::Transformer => transformer(model, &encoder, map)?,
        ModelKind::Checkpoint => {
            return Err(map.error(
                model.kind.span(),
                "a checkpoint study trains nothing: it has no model part".to_string(),
            ))
        }
    };
    let mut trains = Vec::new();
    let optimizer = train
        .optimizer
        .as_ref()
        .map_or(Optimizer::Adamw, |o| *o.get_ref());
    let weight_decay = match &train.weight_decay {
        Some(w) => {
            check(
                w.get_ref().is_finite() && *w.get_ref() >= 0.0,
                map,
                w.span(),
                || "weight_decay must be ≥ 0".into(),
            )?;
            *w.get_ref()
        }
        None => 0.0,
    };
    for (epochs, es) in values(&train.epochs) {
        check(epochs >= 1, map, es, || "epochs must be ≥ 1".into())?;
        for (batch_size, bs) in values(&train.batch_size) {
            check(batch_size >= 1, map, bs.clone(), || {
                "batch_size must be ≥ 1".into()
            })?;
            limits::at_most(batch_size, limits::BATCH_MAX, "batch_size", map, bs)?;
            for (lr, ls) in values(&train.lr) {
                check(lr.is_finite() && lr > 0.0, map, ls, || {
                    format!("lr must be a finite number > 0, found {lr}")
                })?;
                let t = TrainTrial {
                    model: model_spec.clone(),
                    train: TrainSpec {
                        epochs: epochs as usize,
                        batch_size: batch_size as usize,
                        lr,
                        optimizer,
                        weight_decay,
                    },
                    seed: raw.seed,
                };
                if !trains.contains(&t) {
                    trains.push(t);
                }
            }
        }
    }
    let finetune_lr = match raw
        .prune
        .as_ref()
        .and_then(|p| p.get_ref().finetune_lr.as_ref())
    {
        Some(l) => {
            check(
                l.get_ref().is_finite() && *l.get_ref() > 0.0,
                map,
                l.span(),
                || "finetune_lr must be > 0".into(),
            )?;
            Some(*l.get_ref())
        }
        None => None,
    };
    let keep_dense = raw
        .prune
        .as_ref()
        .and_then(|p| p.get_ref().keep_dense.as_ref())
        .map(|k| k.get_ref().clone());
    Ok(ModelPart {
        dataset,
        dataset_spans,
        model: model_spec,
        trains,
        finetune_lr,
        keep_dense,
    })
}
