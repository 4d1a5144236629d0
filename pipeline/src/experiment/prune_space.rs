//! The prune space: `[prune]` axes, include and exclude points, expanded into prune trials
//! that carry only the axes their pattern takes.

use super::error::{ExperimentError, SourceMap};
use super::schema::*;
use super::validate::{check, dedup, values, PrunePoint};
use crate::trial::{ObsParams, PatternTrial, PruneTrial};
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

pub(super) fn dense_trial() -> PruneTrial {
    PruneTrial {
        pattern: PatternTrial::dense(),
        method: None,
        schedule: None,
        obs: None,
        gradual_steps: None,
        finetune_epochs: 0,
        finetune_lr: f64::NAN,
    }
}

struct PruneAxes {
    sparsity: Vec<(f64, Range<usize>)>,
    nm: Vec<((u64, u64), Range<usize>)>,
    v: Vec<(u64, Range<usize>)>,
    method: Vec<Method>,
    schedule: Vec<Schedule>,
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
            check(x >= 1, map, span.clone(), || "v must be ≥ 1".into())?;
            for &rows in v_divides {
                check(rows % x == 0, map, span.clone(), || {
                    format!("v = {x} does not divide the layer rows {rows} (V must divide every hidden width / shape rows)")
                })?;
            }
            v.push((x, span));
        }
    }
    let axes = PruneAxes {
        sparsity,
        nm,
        v,
        method: raw.method.as_ref().map_or(vec![Method::Magnitude], |m| {
            dedup(values(m).into_iter().map(|x| x.0).collect())
        }),
        schedule: raw.schedule.as_ref().map_or(vec![Schedule::Oneshot], |m| {
            dedup(values(m).into_iter().map(|x| x.0).collect())
        }),
    };
    let finetune_epochs = raw.finetune_epochs.as_ref().map_or(0, |x| *x.get_ref());
    let obs = ObsParams {
        gradients: pos(&raw.obs_gradients, 256, map, "obs_gradients")?,
        block: pos(&raw.obs_block, 64, map, "obs_block")?,
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
            None => 0.01,
        },
    };
    let steps = pos(&raw.gradual_steps, 4, map, "gradual_steps")?;
    let finish =
        |pattern: PatternTrial, method: Option<Method>, schedule: Option<Schedule>| PruneTrial {
            pattern,
            obs: (method == Some(Method::Obs)).then(|| obs.clone()),
            gradual_steps: (schedule == Some(Schedule::Gradual)).then_some(steps),
            method,
            schedule,
            finetune_epochs: if method.is_some() { finetune_epochs } else { 0 },
            finetune_lr: f64::NAN,
        };
    let mut points: Vec<PruneTrial> = vec![];
    let mut push = |t: PruneTrial| {
        if !points.contains(&t) {
            points.push(t);
        }
    };
    for (kind, span) in values(&raw.pattern) {
        for pattern in patterns_of(kind, span, &axes, map)? {
            if kind == PatternKind::Dense {
                push(finish(pattern, None, None));
                continue;
            }
            for &m in &axes.method {
                for &s in &axes.schedule {
                    push(finish(pattern.clone(), Some(m), Some(s)));
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
            v: pt.v.iter().map(|s| (*s.get_ref(), s.span())).collect(),
            method: vec![],
            schedule: vec![],
        };
        for pattern in patterns_of(*kind.get_ref(), kind.span(), &one, map)? {
            let dense = *kind.get_ref() == PatternKind::Dense;
            let method = (!dense).then(|| {
                pt.method
                    .as_ref()
                    .map_or(Method::Magnitude, |m| *m.get_ref())
            });
            let schedule = (!dense).then(|| {
                pt.schedule
                    .as_ref()
                    .map_or(Schedule::Oneshot, |m| *m.get_ref())
            });
            push(finish(pattern, method, schedule));
        }
    }
    for exc in &raw.exclude {
        let e = exc.get_ref();
        let nm = match &e.nm {
            Some(s) => Some(parse_nm(s.get_ref(), map, s.span())?),
            None => None,
        };
        points.retain(|t| {
            let hit = e
                .pattern
                .as_ref()
                .is_none_or(|x| *x.get_ref() == t.pattern.kind)
                && e.sparsity
                    .as_ref()
                    .is_none_or(|x| (t.pattern.nominal_sparsity() - x.get_ref()).abs() < 1e-9)
                && nm.is_none_or(|x| t.pattern.nm == Some(x))
                && e.v
                    .as_ref()
                    .is_none_or(|x| t.pattern.v == Some(*x.get_ref()))
                && e.method
                    .as_ref()
                    .is_none_or(|x| t.method == Some(*x.get_ref()))
                && e.schedule
                    .as_ref()
                    .is_none_or(|x| t.schedule == Some(*x.get_ref()));
            !hit
        });
    }
    if points.is_empty() {
        return Err(map.error(p.span(), "the prune space is empty after [[prune.exclude]]"));
    }
    Ok(points
        .into_iter()
        .map(|trial| PrunePoint { trial })
        .collect())
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

/// The patterns (with only the axes that apply) of one pattern kind.
fn patterns_of(
    kind: PatternKind,
    span: Range<usize>,
    a: &PruneAxes,
    map: &SourceMap,
) -> Result<Vec<PatternTrial>, ExperimentError> {
    let need = |ok: bool, what: &str| {
        check(ok, map, span.clone(), || {
            format!(
                "pattern \"{}\" needs {what}",
                format!("{kind:?}").to_lowercase()
            )
        })
    };
    let nm_values = || -> Result<Vec<(u64, u64)>, ExperimentError> {
        if !a.nm.is_empty() {
            return Ok(a.nm.iter().map(|x| x.0).collect());
        }
        need(!a.sparsity.is_empty(), "`nm = [\"N:M\"]` or `sparsity`")?;
        a.sparsity
            .iter()
            .map(|(s, sp)| sparsity_to_nm(*s, map, sp.clone()))
            .collect()
    };
    let mut out = vec![];
    match kind {
        PatternKind::Dense => out.push(PatternTrial::dense()),
        PatternKind::Unstructured => {
            need(!a.sparsity.is_empty(), "`sparsity`")?;
            for (s, _) in &a.sparsity {
                out.push(PatternTrial {
                    kind,
                    sparsity: Some(*s),
                    nm: None,
                    v: None,
                });
            }
        }
        PatternKind::Nm => {
            for nm in nm_values()? {
                out.push(PatternTrial {
                    kind,
                    sparsity: None,
                    nm: Some(nm),
                    v: None,
                });
            }
        }
        PatternKind::Vnm => {
            need(!a.v.is_empty(), "`v`")?;
            for (n, m) in nm_values()? {
                let sp =
                    a.nm.iter()
                        .find(|x| x.0 == (n, m))
                        .map_or(span.clone(), |x| x.1.clone());
                check(n == 2 && m >= 4, map, sp, || {
                    format!("V:N:M needs N = 2 and M ≥ 4 (each V×M block keeps 4 columns, each row 2 of them), found {n}:{m}")
                })?;
                for (v, _) in &a.v {
                    out.push(PatternTrial {
                        kind,
                        sparsity: None,
                        nm: Some((n, m)),
                        v: Some(*v),
                    });
                }
            }
        }
        PatternKind::Vector => {
            need(!a.v.is_empty(), "`v`")?;
            need(!a.sparsity.is_empty(), "`sparsity`")?;
            for (s, _) in &a.sparsity {
                for (v, _) in &a.v {
                    out.push(PatternTrial {
                        kind,
                        sparsity: Some(*s),
                        nm: None,
                        v: Some(*v),
                    });
                }
            }
        }
    }
    Ok(out)
}
