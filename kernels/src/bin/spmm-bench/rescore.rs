//! `spmm-bench --rescore`: the cost model scored on a dump of measured points, without
//! measuring (see the binary's documentation).

use kernels::*;

/// The signature a dump's pattern label names.
fn label_pattern(label: &str) -> Option<Pattern> {
    let (kind, rest) = label.split_once(' ')?;
    let nums = |s: &str| -> Option<Vec<usize>> { s.split(':').map(|x| x.parse().ok()).collect() };
    // "75%" here, "0.75" in the engine's labels.
    let fraction = |s: &str| -> Option<f64> {
        match s.strip_suffix('%') {
            Some(pc) => pc.parse::<f64>().ok().map(|x| x / 100.0),
            None => s.parse().ok(),
        }
    };
    // This binary's labels, or the engine's (`pattern_label`: a calibrate stage's sample.csv).
    match kind {
        "N:M" | "nm" => match nums(rest)?.as_slice() {
            [n, m] => Some(Pattern::Nm { n: *n, m: *m }),
            _ => None,
        },
        "V:N:M" | "vnm" => match nums(rest)?.as_slice() {
            [v, _, m] => Some(Pattern::Vnm { v: *v, m: *m }),
            _ => None,
        },
        "CSR" | "unstructured" => Some(Pattern::Unstructured {
            sparsity: fraction(rest)?,
        }),
        "vector" => {
            let (v, s) = rest.split_once("x1 ")?;
            Some(Pattern::Vector {
                v: v.parse().ok()?,
                sparsity: fraction(s)?,
            })
        }
        _ => None,
    }
}

/// One tuning of a dump: its signature, batch and measured points.
struct DumpGroup {
    key: String,
    shape: (usize, usize, usize),
    sig: FormatSignature,
    points: Vec<(ParamPoint, f64)>,
    /// The size of the tuning's space, where the dump says it (dumps since 2026-12-07).
    space: Option<usize>,
    /// The dump's rows of this tuning, with the points that failed or were not timed.
    rows: usize,
}

fn read_dump(path: &str) -> Result<Vec<DumpGroup>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut groups: Vec<DumpGroup> = Vec::new();
    // A calibrate stage's sample.csv: pattern,rows,cols,n,params (threads among them),
    // measured_s,analytical_s,calibrated_s.
    let sample = text
        .lines()
        .next()
        .is_some_and(|h| h.starts_with("pattern,rows,cols,n,params,measured_s"));
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let mut f: Vec<&str> = line.split(',').collect();
        let bad = || format!("{path}:{}: malformed row", i + 1);
        // Dumps since 2026-12-07 add space, confirmed_s and dense_s.
        let space = match f.len() {
            8 => None,
            11 if !sample => Some(f[8].parse::<usize>().map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        if sample {
            // Into this binary's columns: rows,cols,n,pattern,threads,point,predicted,measured.
            let threads = f[4]
                .split(';')
                .find_map(|kv| kv.strip_prefix("threads="))
                .ok_or_else(bad)?;
            f = vec![f[1], f[2], f[3], f[0], threads, f[4], f[6], f[5]];
        }
        let dims: Vec<usize> = f[..3]
            .iter()
            .map(|x| x.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let pattern = label_pattern(f[3]).ok_or_else(bad)?;
        let sig =
            FormatSignature::for_pattern(&pattern, dims[0], dims[1]).map_err(|e| e.to_string())?;
        let mut p: Vec<(&str, i64)> = vec![("threads", f[4].parse().map_err(|_| bad())?)];
        for kv in f[5].split(';').filter(|kv| !kv.starts_with("threads=")) {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            p.push((k, v.parse().map_err(|_| bad())?));
        }
        let point = ParamPoint::from_pairs(p);
        let measured: f64 = f[7].parse().map_err(|_| bad())?;
        let key = format!("{}x{}x{} {} t{}", dims[0], dims[1], dims[2], f[3], f[4]);
        let at = match groups.iter().position(|g| g.key == key) {
            Some(at) => at,
            None => {
                groups.push(DumpGroup {
                    key,
                    shape: (dims[0], dims[1], dims[2]),
                    sig,
                    points: vec![],
                    space,
                    rows: 0,
                });
                groups.len() - 1
            }
        };
        groups[at].rows += 1;
        // A point that failed or was not timed has nothing to rank.
        if measured > 0.0 && measured.is_finite() {
            groups[at].points.push((point, measured));
        }
    }
    Ok(groups)
}

/// The engine tunes the thread count with the other parameters: where a dump holds one shape and
/// pattern at several thread counts, their points together as one more tuning (`t*`), whose
/// regret is the one a kernel-tune stage of that budget would pay.
fn with_joint_tunings(mut groups: Vec<DumpGroup>) -> Vec<DumpGroup> {
    let mut joint: Vec<(DumpGroup, usize)> = Vec::new();
    for g in &groups {
        let Some((base, _)) = g.key.rsplit_once(' ') else {
            continue;
        };
        let key = format!("{base} t*");
        match joint.iter_mut().find(|(j, _)| j.key == key) {
            Some((j, parts)) => {
                j.points.extend(g.points.iter().cloned());
                j.space = j.space.zip(g.space).map(|(a, b)| a + b);
                j.rows += g.rows;
                *parts += 1;
            }
            None => joint.push((
                DumpGroup {
                    key,
                    shape: g.shape,
                    sig: g.sig,
                    points: g.points.clone(),
                    space: g.space,
                    rows: g.rows,
                },
                1,
            )),
        }
    }
    groups.extend(
        joint
            .into_iter()
            .filter(|(_, parts)| *parts > 1)
            .map(|(j, _)| j),
    );
    groups
}

/// `--picks`: the `picks` best points of a tuning by `ranked` (the calibrated model's costs, or
/// the analytical model's), and the rank of the measured best.
fn print_picks(g: &DumpGroup, pred: &[f64], ranked: &[f64], meas: &[f64], picks: usize) {
    if picks == 0 {
        return;
    }
    let mut order: Vec<usize> = (0..ranked.len()).collect();
    order.sort_by(|&a, &b| ranked[a].total_cmp(&ranked[b]));
    let line = |rank: usize, i: usize| {
        let point: Vec<String> = g.points[i]
            .0
             .0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "{rank:>4}  {:<52} analytical {:>8.1} us  ranked {:>8.1} us  measured {:>8.1} us",
            point.join(","),
            pred[i] * 1e6,
            ranked[i] * 1e6,
            meas[i] * 1e6
        )
    };
    println!("  {}:", g.key);
    for (rank, &i) in order.iter().enumerate().take(picks) {
        println!("  {}", line(rank + 1, i));
    }
    let best = (0..meas.len()).min_by(|&a, &b| meas[a].total_cmp(&meas[b]));
    if let Some(rank) = best.and_then(|b| order.iter().position(|&i| i == b)) {
        println!("  measured best: {}", line(rank + 1, order[rank]));
    }
}

/// `--rescore`: the current model's regret at 10 % and Spearman on a dump's measurements, and
/// with `calibrate_on` the calibrated model's beside it on the other shapes.
pub(crate) fn rescore(
    path: &str,
    calibrate_on: &[(usize, usize, usize)],
    sample: f64,
    calibrate_from: Option<&str>,
    picks: usize,
) -> Result<(), String> {
    let (groups, partial): (Vec<DumpGroup>, Vec<DumpGroup>) = with_joint_tunings(read_dump(path)?)
        .into_iter()
        .partition(|g| g.space.is_none_or(|s| g.rows >= s) && !g.points.is_empty());
    // A tuning that measured part of its space (a --full run's) has no measured best to
    // score a ranking against: its regret would be 0 by construction.
    for g in &partial {
        println!(
            "  {:<32} not scored: {} of its {} points measured (regret needs them all: a --targets dump)",
            g.key,
            g.rows,
            g.space.unwrap_or(0)
        );
    }
    if groups.is_empty() {
        return Err(format!(
            "{path}: no rows to score{}",
            if partial.is_empty() {
                ""
            } else {
                " (no tuning measured its whole space)"
            }
        ));
    }
    let (calibrate_on, sample, sampled) = match calibrate_from {
        Some(from) => (&[][..], 1.0, Some(read_dump(from)?)),
        None => (calibrate_on, sample, None),
    };
    // The (shape, format kind) the calibration saw: a tuning of one is scored in sample
    // (marked). A calibration of another family at the same shape did not see it.
    let seen = |g: &DumpGroup| (g.shape, format!("{:?}", g.sig.kind));
    let calibration_shapes: std::collections::BTreeSet<_> = match &sampled {
        Some(s) => s.iter().map(seen).collect(),
        None => groups
            .iter()
            .filter(|g| calibrate_on.contains(&g.shape))
            .map(seen)
            .collect(),
    };
    let calibration = if calibrate_on.is_empty() && sampled.is_none() {
        None
    } else {
        let every = (1.0 / sample.clamp(1e-3, 1.0)).round().max(1.0) as usize;
        let samples: Vec<CalibrationSample> = sampled
            .as_ref()
            .unwrap_or(&groups)
            .iter()
            // The `t*` tunings repeat the per-thread ones' points.
            .filter(|g| !g.key.ends_with(" t*"))
            .filter(|g| sampled.is_some() || calibrate_on.contains(&g.shape))
            .flat_map(|g| {
                g.points
                    .iter()
                    .step_by(every)
                    .map(|(p, s)| CalibrationSample {
                        sig: g.sig,
                        n: g.shape.2,
                        point: p.clone(),
                        seconds: *s,
                    })
            })
            .collect();
        if samples.is_empty() {
            return Err(match calibrate_from {
                Some(from) => format!("{from}: no rows to calibrate on"),
                None => format!("{path}: no rows at the --calibrate-on shapes"),
            });
        }
        let cost: f64 = samples.iter().map(|s| s.seconds).sum();
        let cal = Calibration::fit(&samples);
        let taken = match calibrate_from {
            Some(from) => format!("every row of {from}"),
            None => format!("{:.0} % of each space", 100.0 / every as f64),
        };
        println!(
            "calibration: {} points ({taken}) on {} shape(s), {:.1} ms of kernel time per repeat, {} terms",
            cal.samples,
            samples
                .iter()
                .map(|s| (s.sig.rows, s.sig.cols, s.n))
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            cost * 1e3,
            cal.terms.len()
        );
        Some(cal)
    };
    let mut worst: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    // Sums of ln(1 + regret) at 10 % and at 8 points, and the tunings scored, of the analytical
    // and the calibrated model, on the held-out shapes and on the calibration's own (a tuning
    // at a calibrated shape, as when a layer has a calibration shape), per thread count and
    // with the thread count tuned (`t*`) apart.
    let mut totals = [(0.0, 0.0, 0.0); 4];
    let mut cal_totals = [(0.0, 0.0, 0.0); 4];
    // Per slot, the tunings the calibration has no term for (its ranking is the analytical).
    let mut uncovered = [0usize; 4];
    for g in &groups {
        let in_sample = calibration_shapes.contains(&seen(g));
        let slot = in_sample as usize + 2 * g.key.ends_with(" t*") as usize;
        let n = g.shape.2;
        let meas: Vec<f64> = g.points.iter().map(|(_, m)| *m).collect();
        let pred: Vec<f64> = g
            .points
            .iter()
            .map(|(p, _)| predicted_cost(&g.sig, n, p))
            .collect();
        let budget = g.points.len().div_ceil(10);
        let (regret, rho) = (
            regret_at_budget(&pred, &meas, budget),
            spearman(&pred, &meas),
        );
        // The quickstart's budget: 8 points a tuning.
        let regret8 = regret_at_budget(&pred, &meas, 8);
        let t = &mut totals[slot];
        *t = (
            t.0 + (1.0 + regret).ln(),
            t.1 + (1.0 + regret8).ln(),
            t.2 + 1.0,
        );
        let ranked: Vec<f64> = match &calibration {
            Some(cal) => g
                .points
                .iter()
                .map(|(p, _)| cal.cost(&g.sig, n, p))
                .collect(),
            None => pred.clone(),
        };
        print_picks(g, &pred, &ranked, &meas, picks);
        match &calibration {
            None => println!(
                "  {:<32} regret@10% {:>6.1}%  @8 {:>6.1}%  spearman {rho:>5.2}",
                g.key,
                regret * 100.0,
                regret8 * 100.0
            ),
            Some(cal) => {
                let covered = g.points.iter().any(|(p, _)| cal.covers(&g.sig, n, p));
                uncovered[slot] += usize::from(!covered);
                let cp = &ranked;
                let (cr, crho) = (regret_at_budget(cp, &meas, budget), spearman(cp, &meas));
                let cr8 = regret_at_budget(cp, &meas, 8);
                let t = &mut cal_totals[slot];
                *t = (t.0 + (1.0 + cr).ln(), t.1 + (1.0 + cr8).ln(), t.2 + 1.0);
                println!(
                    "  {:<32} regret@10% {:>6.1}% -> {:>5.1}%  @8 {:>6.1}% -> {:>5.1}%  spearman {rho:>5.2} -> {crho:>5.2}{}",
                    g.key,
                    regret * 100.0,
                    cr * 100.0,
                    regret8 * 100.0,
                    cr8 * 100.0,
                    match (in_sample, covered) {
                        (true, _) => "  (calibration shape)",
                        (false, false) => "  (no calibration term: analytical)",
                        (false, true) => "",
                    }
                );
                if in_sample {
                    continue;
                }
                let threads = g.key.rsplit(' ').next().unwrap_or("").to_string();
                let w = worst.entry(threads).or_insert((0.0, 0.0));
                *w = (w.0.max(regret), w.1.max(cr));
            }
        }
    }
    // Geometric means of 1 + regret at 10 % and at 8 points, as percentages.
    let means = |t: &(f64, f64, f64)| {
        let pc = |sum: f64| ((sum / t.2).exp() - 1.0) * 100.0;
        format!(
            "{} tunings: regret@10% {:.1}%, @8 {:.1}%",
            t.2,
            pc(t.0),
            pc(t.1)
        )
    };
    let held_out = if calibrate_on.is_empty() {
        "the dump's tunings"
    } else {
        "held-out shapes"
    };
    let tuned = format!("{held_out} with the thread count tuned (t*)");
    let labels = [
        held_out,
        "calibration shapes",
        &tuned,
        "calibration shapes with the thread count tuned (t*)",
    ];
    for (i, label) in labels.into_iter().enumerate() {
        if totals[i].2 > 0.0 {
            println!(
                "  analytical model at {label}, geometric mean over {}",
                means(&totals[i])
            );
        }
        if calibration.is_some() && cal_totals[i].2 > 0.0 {
            let analytical = match uncovered[i] {
                0 => String::new(),
                u => format!(" ({u} of them with no calibration term, ranked analytically)"),
            };
            println!(
                "  calibrated model at {label}, geometric mean over {}{analytical}",
                means(&cal_totals[i])
            );
        }
    }
    if calibration.is_some() && uncovered.iter().sum::<usize>() == groups.len() {
        println!(
            "  warning: the calibration has no term for any tuning of {path} (a sample of \
             another kernel family, or of the batch-1 kernels?): its model is the analytical one here"
        );
    }
    for (threads, (a, c)) in worst {
        println!(
            "  worst regret@10% at {threads}: analytical {:.1}%, calibrated {:.1}%",
            a * 100.0,
            c * 100.0
        );
    }
    Ok(())
}
