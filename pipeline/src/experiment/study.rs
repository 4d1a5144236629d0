//! `[model] kind = "checkpoint"`: a layer study of a user's safetensors file. The file is read
//! here, at validation, so that a missing, truncated or foreign file, a glob that matches
//! nothing, a tensor that is not a matrix (or a 4-D one without `conv = true`), a dtype cotune
//! cannot read, or calibration inputs of the wrong shape stop the run before anything runs,
//! with `path:line:col` and the file and tensor named.

use super::error::{ExperimentError, SourceMap};
use super::limits;
use super::schema::{LayersField, RawExperiment};
use super::validate::{check, values};
use crate::kinds::{CheckpointTrial, StudyTensor};
use stages::MethodKind;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Default Gaussian calibration tokens per tensor.
pub const CALIBRATION_TOKENS_DEFAULT: u64 = 256;

/// Most Gaussian calibration tokens per tensor (a 4096-wide tensor's inputs are then 1 GiB).
pub const MAX_CALIBRATION_TOKENS: u64 = 65_536;

/// The file at `written` (relative to the experiment file's folder): its resolved path, bytes
/// and blake3.
fn read(
    map: &SourceMap,
    written: &str,
    span: Range<usize>,
    what: &str,
) -> Result<(PathBuf, Vec<u8>, [u8; 32]), ExperimentError> {
    let base = map
        .path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = base.join(written);
    let bytes = std::fs::read(&path).map_err(|e| {
        map.error(
            span,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })?;
    let digest = *blake3::hash(&bytes).as_bytes();
    Ok((path, bytes, digest))
}

/// The checkpoint trial of a layer study, its file read and checked.
pub(super) fn checkpoint_trial(
    raw: &RawExperiment,
    map: &SourceMap,
) -> Result<CheckpointTrial, ExperimentError> {
    let Some(model) = raw.model.as_ref() else {
        return Err(map.error(0..0, "a checkpoint study needs [model]".to_string()));
    };
    let kind = model.kind.span();
    for (table, present) in [
        ("[dataset]", raw.dataset.is_some()),
        ("[train]", raw.train.is_some()),
    ] {
        check(!present, map, kind.clone(), || {
            format!("a checkpoint study trains nothing on no data: remove {table}")
        })?;
    }
    if let Some(h) = model.hidden.first().or(model.channels.first()) {
        return Err(map.error(
            h.span(),
            "`hidden` and `channels` do not apply to kind = \"checkpoint\"".to_string(),
        ));
    }
    for (name, span) in [
        ("d_model", model.d_model.as_ref().map(|x| x.span())),
        ("heads", model.heads.as_ref().map(|x| x.span())),
        ("d_ff", model.d_ff.as_ref().map(|x| x.span())),
        ("patch", model.patch.as_ref().map(|x| x.span())),
    ] {
        if let Some(span) = span {
            return Err(map.error(
                span,
                format!("`{name}` does not apply to kind = \"checkpoint\""),
            ));
        }
    }
    let path = model.path.as_ref().ok_or_else(|| {
        map.error(
            kind.clone(),
            "kind = \"checkpoint\" needs `path`".to_string(),
        )
    })?;
    let layers = model.layers.as_ref().ok_or_else(|| {
        map.error(
            kind.clone(),
            "kind = \"checkpoint\" needs `layers = [\"tensor.name.*.glob\", ...]`".to_string(),
        )
    })?;
    let globs = match layers.get_ref() {
        LayersField::Globs(g) if !g.is_empty() => g.clone(),
        _ => {
            return Err(map.error(
                layers.span(),
                "`layers` of a checkpoint study is a non-empty list of tensor-name globs"
                    .to_string(),
            ))
        }
    };
    let conv = model.conv.as_ref().is_some_and(|c| *c.get_ref());
    let (resolved, bytes, digest) = read(map, path.get_ref(), path.span(), "checkpoint")?;
    // A file that is not safetensors is the `path`'s fault; a glob or tensor, the `layers`'.
    stages::model::checkpoint_names(&bytes, &resolved)
        .map_err(|e| map.error(path.span(), e.to_string()))?;
    let tensors = stages::model::checkpoint_from_bytes(&bytes, &resolved, &globs, conv)
        .map_err(|e| map.error(layers.span(), e.to_string()))?;
    for t in &tensors {
        limits::matrix(
            (t.rows as u64, t.cols as u64),
            || format!("tensor {} of {}", t.name, resolved.display()),
            map,
            layers.span(),
        )?;
    }
    if let Some(t) = tensors.iter().find(|t| t.rows == 0 || t.cols == 0) {
        return Err(map.error(
            layers.span(),
            format!(
                "{} in {} has shape {:?}: nothing to prune",
                t.name,
                resolved.display(),
                t.shape
            ),
        ));
    }
    let tokens = match &model.calibration_tokens {
        Some(t) => {
            check(
                (1..=MAX_CALIBRATION_TOKENS).contains(t.get_ref()),
                map,
                t.span(),
                || format!("calibration_tokens must be in 1..={MAX_CALIBRATION_TOKENS}"),
            )?;
            *t.get_ref()
        }
        None => CALIBRATION_TOKENS_DEFAULT,
    };
    // A tensor's Gaussian inputs are tokens × cols, its outputs on them tokens × rows.
    if let Some(t) = tensors.iter().max_by_key(|t| t.rows.max(t.cols)) {
        let widest = t.rows.max(t.cols) as u64;
        limits::matrix(
            (tokens, widest),
            || {
                format!(
                    "the calibration inputs or outputs of tensor {} ({tokens} tokens)",
                    t.name
                )
            },
            map,
            model
                .calibration_tokens
                .as_ref()
                .map_or(kind.clone(), |t| t.span()),
        )?;
    }
    let calibration = match &model.calibration {
        Some(c) => {
            let (cpath, cbytes, cdigest) = read(map, c.get_ref(), c.span(), "calibration file")?;
            let cnames = stages::model::checkpoint_names(&cbytes, &cpath)
                .map_err(|e| map.error(c.span(), e.to_string()))?;
            let wanted: Vec<String> = tensors
                .iter()
                .filter(|t| cnames.contains(&t.name))
                .map(|t| t.name.clone())
                .collect();
            let inputs = stages::model::checkpoint_from_bytes(&cbytes, &cpath, &wanted, false)
                .map_err(|e| map.error(c.span(), e.to_string()))?;
            for x in &inputs {
                let Some(t) = tensors.iter().find(|t| t.name == x.name) else {
                    continue;
                };
                check(x.cols == t.cols && x.rows >= 1, map, c.span(), || {
                    format!(
                        "calibration inputs {} in {} are {}x{}: a {}x{} weight needs tokens x {} inputs",
                        x.name,
                        cpath.display(),
                        x.rows,
                        x.cols,
                        t.rows,
                        t.cols,
                        t.cols
                    )
                })?;
            }
            Some((cpath, c.get_ref().clone(), cdigest))
        }
        None => None,
    };
    check_prune_space(raw, map, &tensors)?;
    Ok(CheckpointTrial {
        path: resolved,
        file: path.get_ref().clone(),
        digest,
        globs,
        conv,
        calibration,
        tokens,
        seed: raw.seed,
        tensors: tensors
            .iter()
            .map(|t| StudyTensor {
                name: t.name.clone(),
                rows: t.rows as u64,
                cols: t.cols as u64,
            })
            .collect(),
    })
}

/// What a layer study cannot take from `[prune]`: OBS (it needs a network's gradients),
/// fine-tuning, a gradual schedule, a V that divides no studied tensor's rows.
fn check_prune_space(
    raw: &RawExperiment,
    map: &SourceMap,
    tensors: &[stages::model::CheckpointTensor],
) -> Result<(), ExperimentError> {
    let Some(p) = &raw.prune else {
        return Ok(());
    };
    let prune = p.get_ref();
    if let Some(m) = &prune.method {
        for (method, span) in values(m) {
            check(method != MethodKind::Obs, map, span.clone(), || {
                "a layer study prunes by magnitude, sparsegpt or wanda (OBS needs a network's gradients)".into()
            })?;
            // SparseGPT inverts a cols × cols Hessian per tensor.
            if let (MethodKind::SparseGpt, Some(t)) =
                (method, tensors.iter().max_by_key(|t| t.cols))
            {
                limits::matrix(
                    (t.cols as u64, t.cols as u64),
                    || format!("SparseGPT's Hessian of tensor {}", t.name),
                    map,
                    span,
                )?;
            }
        }
    }
    // A layer study's inputs are its `[model] calibration` file's or Gaussian ones.
    for (name, span) in [
        (
            "calibration_samples",
            prune.calibration_samples.as_ref().map(|x| x.span()),
        ),
        ("calibration", prune.calibration.as_ref().map(|x| x.span())),
        (
            "obs_gradients",
            prune.obs_gradients.as_ref().map(|x| x.span()),
        ),
        ("obs_block", prune.obs_block.as_ref().map(|x| x.span())),
        ("obs_damp", prune.obs_damp.as_ref().map(|x| x.span())),
    ] {
        if let Some(span) = span {
            return Err(map.error(
                span,
                format!(
                    "`{name}` does not apply to a layer study: its tensors calibrate on [model] \
                     `calibration` (a file of their inputs) or `calibration_tokens` Gaussian ones"
                ),
            ));
        }
    }
    if let Some(k) = &prune.keep_dense {
        return Err(map.error(
            k.span(),
            "a layer study prunes only the tensors `layers` names: keep_dense does not apply"
                .to_string(),
        ));
    }
    if let Some(e) = &prune.finetune_epochs {
        check(*e.get_ref() == 0, map, e.span(), || {
            "a layer study fine-tunes nothing: finetune_epochs must be 0".into()
        })?;
    }
    if let Some(s) = &prune.schedule {
        for (schedule, span) in values(s) {
            check(schedule == stages::ScheduleKind::Oneshot, map, span, || {
                "a layer study prunes one-shot (schedule = \"oneshot\")".into()
            })?;
        }
    }
    if let Some(v) = &prune.v {
        for (x, span) in values(v) {
            check(
                x >= 1 && tensors.iter().any(|t| (t.rows as u64).is_multiple_of(x)),
                map,
                span,
                || {
                    let rows: Vec<usize> = tensors.iter().map(|t| t.rows).collect();
                    format!("v = {x} divides none of the studied tensors' rows {rows:?}")
                },
            )?;
        }
    }
    Ok(())
}
