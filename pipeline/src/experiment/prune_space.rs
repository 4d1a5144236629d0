//! The prune space: `[prune]` axes, include and exclude points, expanded into prune trials
//! that carry only the axes their pattern takes.

use super::error::{ExperimentError, SourceMap};
use super::schema::*;
use super::validate::{check, dedup, values};
use crate::kinds::PrunePoint;
use kernels::Pattern;
use stages::{Method, Schedule};
use std::ops::Range;
use toml::Spanned;

fn parse_nm(s: &str, map: &SourceMap, span: Range<usize>) -> Result<(u64, u64), ExperimentError> {
    let bad = || {
        map.error(
            span.clone(),
            format!("`{s}` is not N:M: expected two integers 0 < N < M such as \"2:8\""),
        )
    };
    let (n, m) = s.split_once(':').ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let m: u64 = m.trim().parse().map_err(|_| bad())?;
    if n == 0 || n >= m {
        return Err(bad());
    }
    Ok((n, m))
}

fn sparsity_to_nm(
    s: f64,
    map: &SourceMap,
    span: Range<usize>,
) -> Result<(u64, u64), ExperimentError> {
    let m = 2.0 / (1.0 - s);
    let mr = m.round();
    check((m - mr).abs() < 1e-6 && mr >= 3.0, map, span, || {
        format!("sparsity {s} has no 2:M pattern (2:4 = 0.5, 2:8 = 0.75, 2:16 = 0.875); give `nm = [\"N:M\", ...]` instead")
    })?;
    Ok((2, mr as u64))
}

struct PruneAxes {
    sparsity: Vec<(f64, Range<usize>)>,
    nm: Vec<((u64, u64), Range<usize>)>,
    v: Vec<(u64, Range<usize>)>,
    method: Vec<MethodKind>,
    schedule: Vec<ScheduleKind>,
}

pub(super) fn prune_points(
    p: &Spanned<RawPrune>,
    map: &SourceMap,
    v_divides: &[u64],
) -> Result<Vec<PrunePoint>, ExperimentError> {
    let raw = p.get_ref();
    let mut sparsity = vec![];
    if let Some(s) = &raw.sparsity {
        for (x, span) in values(s) {
            check(x > 0.0 && x < 1.0, map, span.clone(), || {
                format!("sparsity must be in (0, 1), found {x}")
            })?;
            sparsity.push((x, span));
        }
    }
    let mut nm = vec![];
    if let Some(s) = &raw.nm {
        for (x, span) in values(s) {
            nm.push((parse_nm(&x, map, span.clone())?, span));
        }
    }
    let mut v = vec![];
    if let Some(s) = &raw.v {
        for (x, span) in values(s) {
            check_v(x, &span, v_divides, map)?;
            v.push((x, span));
        }
    }
    let axes = PruneAxes {
        sparsity,
        nm,
        v,
        method: raw
            .method
            .as_ref()
            .map_or(vec![MethodKind::Magnitude], |m| {
                dedup(values(m).into_iter().map(|x| x.0).collect())
            }),
        schedule: raw
            .schedule
            .as_ref()
            .map_or(vec![ScheduleKind::Oneshot], |m| {
                dedup(values(m).into_iter().map(|x| x.0).collect())
            }),
    };
    let finetune_epochs = raw.finetune_epochs.as_ref().map_or(0, |x| *x.get_ref());
    let (grads, block, damp) = stages::prune::OBS_DEFAULTS;
    let obs = Method::Obs {
        grads: pos(&raw.obs_gradients, grads as u64, map, "obs_gradients")? as usize,
        block: pos(&raw.obs_block, block as u64, map, "obs_block")? as usize,
        damp: match &raw.obs_damp {
            Some(d) => {
                check(
                    *d.get_ref() > 0.0 && d.get_ref().is_finite(),
                    map,
                    d.span(),
                    || "obs_damp must be > 0".into(),
                )?;
                *d.get_ref()
            }
            None => damp,
        },
    };
    let steps = pos(
        &raw.gradual_steps,
        stages::prune::GRADUAL_STEPS_DEFAULT as u64,
        map,
        "gradual_steps",
    )? as usize;
    let (samples, damp, block) = stages::prune::ONE_SHOT_DEFAULTS;
    let calibration = stages::Calibration {
        samples: pos(
            &raw.calibration_samples,
            samples as u64,
            map,
            "calibration_samples",
        )? as usize,
        inputs: raw
            .calibration
            .as_ref()
            .map_or(stages::CalibrationInputs::Sequential, |c| *c.get_ref()),
    };
    let sparsegpt_damp = match &raw.sparsegpt_damp {
        Some(d) => {
            check(
                *d.get_ref() > 0.0 && d.get_ref().is_finite(),
                map,
                d.span(),
                || format!("sparsegpt_damp must be > 0, found {}", d.get_ref()),
            )?;
            *d.get_ref()
        }
        None => damp,
    };
    let sparsegpt_block = pos(&raw.sparsegpt_block, block as u64, map, "sparsegpt_block")? as usize;
    let scope = raw.unstructured_scope.as_ref().map(|s| *s.get_ref());
    let method_of = |m: MethodKind| match m {
        MethodKind::Magnitude => Method::Magnitude,
        MethodKind::Obs => obs.clone(),
        MethodKind::SparseGpt => Method::SparseGpt {
            calibration,
            damp: sparsegpt_damp,
            block: sparsegpt_block,
            scope: scope.unwrap_or(stages::Scope::Layer),
        },
        MethodKind::Wanda => Method::Wanda {
            calibration,
            scope: scope.unwrap_or(stages::Scope::Row),
        },
    };
    let schedule_of = |s: ScheduleKind| match s {
        ScheduleKind::Oneshot => Schedule::Oneshot,
        ScheduleKind::Gradual => Schedule::Gradual { steps },
    };
    let finish = |pattern: Pattern, how: Option<(MethodKind, ScheduleKind)>| match how {
        None => PrunePoint::dense(),
        Some((m, s)) => PrunePoint {
            pattern,
            method: Some(method_of(m)),
            schedule: Some(schedule_of(s)),
            finetune_epochs,
            layers: vec![],
            note: None,
        },
    };
    let mut points: Vec<PrunePoint> = vec![];
    let mut push = |t: PrunePoint| {
        if !points.contains(&t) {
            points.push(t);
        }
    };
    for (kind, span) in values(&raw.pattern) {
        for pattern in patterns_of(kind, span, &axes, map)? {
            if kind == PatternKind::Dense {
                push(finish(pattern, None));
                continue;
            }
            for &m in &axes.method {
                for &s in &axes.schedule {
                    push(finish(pattern.clone(), Some((m, s))));
                }
            }
        }
    }
    for inc in &raw.include {
        let pt = inc.get_ref();
        let kind = pt
            .pattern
            .as_ref()
            .ok_or_else(|| map.error(inc.span(), "an include point needs `pattern`"))?;
        let one = PruneAxes {
            sparsity: pt
                .sparsity
                .iter()
                .map(|s| (*s.get_ref(), s.span()))
                .collect(),
            nm: match &pt.nm {
                Some(s) => vec![(parse_nm(s.get_ref(), map, s.span())?, s.span())],
                None => vec![],
            },
            v: pt
                .v
                .iter()
                .map(|s| {
                    check_v(*s.get_ref(), &s.span(), v_divides, map)
                        .map(|_| (*s.get_ref(), s.span()))
                })
                .collect::<Result<_, _>>()?,
            method: vec![],
            schedule: vec![],
        };
        for pattern in patterns_of(*kind.get_ref(), kind.span(), &one, map)? {
            let dense = *kind.get_ref() == PatternKind::Dense;
            let method = pt
                .method
                .as_ref()
                .map_or(MethodKind::Magnitude, |m| *m.get_ref());
            let schedule = pt
                .schedule
                .as_ref()
                .map_or(ScheduleKind::Oneshot, |m| *m.get_ref());
            push(finish(pattern, (!dense).then_some((method, schedule))));
        }
    }
    for exc in &raw.exclude {
        let e = exc.get_ref();
        let nm = match &e.nm {
            Some(s) => Some(parse_nm(s.get_ref(), map, s.span())?),
            None => None,
        };
        points.retain(|t| {
            let (pt_nm, pt_v) = match t.pattern {
                Pattern::Nm { n, m } => (Some((n as u64, m as u64)), None),
                Pattern::Vnm { v, m } => (Some((2, m as u64)), Some(v as u64)),
                Pattern::Vector { v, .. } => (None, Some(v as u64)),
                _ => (None, None),
            };
            let hit = e
                .pattern
                .as_ref()
                .is_none_or(|x| *x.get_ref() == t.pattern.kind())
                && e.sparsity
                    .as_ref()
                    .is_none_or(|x| (t.pattern.sparsity() - x.get_ref()).abs() < 1e-9)
                && nm.is_none_or(|x| pt_nm == Some(x))
                && e.v.as_ref().is_none_or(|x| pt_v == Some(*x.get_ref()))
                && e.method
                    .as_ref()
                    .is_none_or(|x| t.method.as_ref().map(Method::kind) == Some(*x.get_ref()))
                && e.schedule
                    .as_ref()
                    .is_none_or(|x| t.schedule.as_ref().map(Schedule::kind) == Some(*x.get_ref()));
            !hit
        });
    }
    if points.is_empty() {
        return Err(map.error(p.span(), "the prune space is empty after [[prune.exclude]]"));
    }
    Ok(points)
}

/// A V of the `v` axis or of an include point: ≥ 1, and dividing the rows of every layer that
/// takes the pattern (`v_divides`).
fn check_v(
    x: u64,
    span: &Range<usize>,
    v_divides: &[u64],
    map: &SourceMap,
) -> Result<(), ExperimentError> {
    check(x >= 1, map, span.clone(), || "v must be ≥ 1".into())?;
    for &rows in v_divides {
        check(rows % x == 0, map, span.clone(), || {
            format!("v = {x} does not divide the layer rows {rows} (V must divide the rows of every layer that takes it: an MLP's hidden widths, a transformer's d_model and d_ff, a study's shape rows)")
        })?;
    }
    Ok(())
}

fn pos(
    v: &Option<Spanned<u64>>,
    default: u64,
    map: &SourceMap,
    name: &str,
) -> Result<u64, ExperimentError> {
    match v {
        Some(x) => {
            check(*x.get_ref() >= 1, map, x.span(), || {
                format!("{name} must be ≥ 1")
            })?;
            Ok(*x.get_ref())
        }
        None => Ok(default),
    }
}

/// An N:M value with the span it came from.
type SpannedNm = ((u64, u64), Range<usize>);

/// The patterns (with only the axes that apply) of one pattern kind, each checked.
fn patterns_of(
    kind: PatternKind,
    span: Range<usize>,
    a: &PruneAxes,
    map: &SourceMap,
) -> Result<Vec<Pattern>, ExperimentError> {
    let need = |ok: bool, what: &str| {
        check(ok, map, span.clone(), || {
            format!("pattern \"{kind}\" needs {what}")
        })
    };
    let nm_values = || -> Result<Vec<SpannedNm>, ExperimentError> {
        if !a.nm.is_empty() {
            return Ok(a.nm.clone());
        }
        need(!a.sparsity.is_empty(), "`nm = [\"N:M\"]` or `sparsity`")?;
        a.sparsity
            .iter()
            .map(|(s, sp)| Ok((sparsity_to_nm(*s, map, sp.clone())?, sp.clone())))
            .collect()
    };
    let mut out = vec![];
    match kind {
        PatternKind::Dense => out.push((Pattern::Dense, span.clone())),
        PatternKind::Unstructured => {
            need(!a.sparsity.is_empty(), "`sparsity`")?;
            for (s, sp) in &a.sparsity {
                out.push((Pattern::Unstructured { sparsity: *s }, sp.clone()));
            }
        }
        PatternKind::Nm => {
            for ((n, m), sp) in nm_values()? {
                let (n, m) = (n as usize, m as usize);
                out.push((Pattern::Nm { n, m }, sp));
            }
        }
        PatternKind::Vnm => {
            need(!a.v.is_empty(), "`v`")?;
            for ((n, m), sp) in nm_values()? {
                check(n == 2 && m >= 4, map, sp.clone(), || {
                    format!("V:N:M needs N = 2 and M ≥ 4 (each V×M block keeps 4 columns, each row 2 of them), found {n}:{m}")
                })?;
                for (v, _) in &a.v {
                    let (v, m) = (*v as usize, m as usize);
                    out.push((Pattern::Vnm { v, m }, sp.clone()));
                }
            }
        }
        PatternKind::Vector => {
            need(!a.v.is_empty(), "`v`")?;
            need(!a.sparsity.is_empty(), "`sparsity`")?;
            for (s, sp) in &a.sparsity {
                for (v, _) in &a.v {
                    let v = *v as usize;
                    out.push((Pattern::Vector { v, sparsity: *s }, sp.clone()));
                }
            }
        }
    }
    // The kernels' own limits (M ≤ 256, …), at the value that sets them.
    out.into_iter()
        .map(|(p, sp)| match p.validate() {
            Ok(()) => Ok(p),
            Err(e) => Err(map.error(sp, e.to_string())),
        })
        .collect()
}
