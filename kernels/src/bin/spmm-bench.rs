//! Benchmark of the CPU SpMM kernels against the dense baseline measured in the same run.
//!
//! `cargo run --release -p kernels --bin spmm-bench -- [--targets | --full] [--threads 1,2]
//! [--reps 5] [--budget 0.1] [--dump points.csv] [--only TEXT]`
//!
//! - `--targets` (default): 3072×768×512 (or `--shapes 768x768x128,...`), the target
//!   patterns, every point of each space measured (exhaustive), plus the regret of the cost
//!   model at a budget of 10 % of the space.
//! - `--full`: BERT-like shapes 768×768, 3072×768, 768×3072, 4096×4096 with N = 128 and 512;
//!   N:M 2:4..2:32, V:N:M with V ∈ {16, 32, 64, 128}, CSR at equal sparsity; each tuned by the
//!   cost model's top `budget` fraction of the space (at least 4 points); `--shapes` replaces
//!   the shapes here too.
//!
//! `--only TEXT` keeps the patterns whose label contains TEXT (e.g. `"V:N:M 64"`).
//!
//! `--dump FILE` writes every measured point as CSV (shape, pattern, threads, parameters,
//! predicted and measured seconds), to study the cost model; `--rescore FILE` reads such a dump
//! and prints, per pattern, the regret of the *current* cost model at 10 % and at 8 points (the
//! quickstart's budget) and its Spearman correlation with the measurements, without measuring
//! anything, then their geometric means over the tunings. With `--calibrate-on
//! 768x768x128,...` it first fits a [`Calibration`] on a sample (`--sample 0.2` of each space's
//! points) of the dump's rows at those shapes, then scores the analytical and the calibrated
//! model on the other shapes' rows (and, marked, on those shapes' own), and reports what the
//! sample cost to measure. `--calibrate-from FILE` fits it on every row of another dump or of a
//! calibrate stage's `sample.csv` instead: the engine's own calibration replayed on a dump.
//!
//! Times are the fastest of `reps` runs after one warm-up (the machine is shared); GFLOP/s counts
//! useful FLOPs (2·nnz·N); speedups are against the faster dense backend for the same threads,
//! re-measured before every pattern and taken as the best seen in the run. The 5 fastest points
//! of each pattern are re-measured in 3 rounds interleaved with dense, so that both sides of a
//! ratio see the same phases of the machine.

use std::io::Write;
use std::time::Instant;

use kernels::*;

/// Large buffers on 64-byte lines, so that kernels read B where it lies without split loads
/// (see `kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

struct Opts {
    full: bool,
    threads: Vec<usize>,
    reps: usize,
    budget: f64,
    dump: Option<std::fs::File>,
    rescore: Option<String>,
    /// `--shapes` (rows, cols, n), instead of the mode's own.
    shapes: Option<Vec<(usize, usize, usize)>>,
    /// `--rescore`: shapes whose rows calibrate the model.
    calibrate_on: Vec<(usize, usize, usize)>,
    /// `--rescore`: fraction of each space the calibration samples.
    sample: f64,
    /// `--rescore`: a second dump whose every row calibrates the model (a calibrate stage's
    /// sample, say), scoring every tuning of the first.
    calibrate_from: Option<String>,
    /// Only the patterns whose label contains this.
    only: Option<String>,
}

/// What `--help` prints (the module documentation says more).
const USAGE: &str = "\
usage: spmm-bench [--targets | --full] [--shapes RxKxN,...] [--threads 1,2] [--reps 5]
                  [--budget 0.1] [--only TEXT] [--dump points.csv]
       spmm-bench --rescore points.csv [--calibrate-on RxKxN,... [--sample 0.2]
                                         | --calibrate-from sample.csv]

  --targets           (default) every point of each target pattern's space at 3072x768x512
                      (or --shapes), with the cost model's regret at a 10 % budget
  --full              BERT-like shapes, N:M 2:4..2:32, V:N:M V in 16..128, CSR; each tuned by
                      the cost model's top --budget fraction of its space
  --shapes LIST       shapes instead of the mode's own, ROWSxCOLSxN, comma-separated
  --threads LIST      thread counts (default 1 and 2)
  --reps N            timed runs per point after a warm-up (the fastest is kept)
  --only TEXT         only the patterns whose label contains TEXT (\"V:N:M 64\")
  --dump FILE         every measured point as CSV (shape, pattern, threads, point, predicted
                      and measured seconds)
  --rescore FILE      the current cost model's regret at 10 % and Spearman correlation on a
                      dump, measuring nothing; --calibrate-on fits a calibration on a --sample
                      of those shapes' rows first and scores both models on the other shapes
                      (and on its own, marked); --calibrate-from fits it on every row of
                      another dump, or of a calibrate stage's sample.csv from the store,
                      instead and scores every tuning; regret at 10 % and at 8 points
";

fn parse_shapes(list: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    list.split(',')
        .map(|t| {
            let d: Vec<usize> = t
                .split('x')
                .map(|x| x.parse().map_err(|e| format!("shape {t}: {e}")))
                .collect::<Result<_, _>>()?;
            match d.as_slice() {
                [r, k, n] => Ok((*r, *k, *n)),
                _ => Err(format!("shape {t}: expected ROWSxCOLSxN")),
            }
        })
        .collect()
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        full: false,
        threads: vec![1, 2.min(available_cores())],
        reps: 5,
        budget: 0.1,
        dump: None,
        rescore: None,
        shapes: None,
        calibrate_on: vec![],
        sample: 0.2,
        calibrate_from: None,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--targets" => o.full = false,
            "--full" => o.full = true,
            "--threads" => {
                o.threads = val()?
                    .split(',')
                    .map(|t| t.parse().map_err(|e| format!("--threads: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => o.reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--budget" => o.budget = val()?.parse().map_err(|e| format!("--budget: {e}"))?,
            "--rescore" => o.rescore = Some(val()?),
            "--shapes" => o.shapes = Some(parse_shapes(&val()?)?),
            "--calibrate-on" => o.calibrate_on = parse_shapes(&val()?)?,
            "--only" => o.only = Some(val()?),
            "--calibrate-from" => o.calibrate_from = Some(val()?),
            "--sample" => o.sample = val()?.parse().map_err(|e| format!("--sample: {e}"))?,
            "--dump" => {
                let path = val()?;
                let mut f = std::fs::File::create(&path).map_err(|e| format!("{path}: {e}"))?;
                writeln!(
                    f,
                    "rows,cols,n,pattern,threads,point,predicted_s,measured_s"
                )
                .map_err(|e| format!("{path}: {e}"))?;
                o.dump = Some(f);
            }
            "--help" | "-h" => {
                let _ = std::io::stdout().write_all(USAGE.as_bytes());
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    o.threads.dedup();
    if o.rescore.is_none() && (o.calibrate_from.is_some() || !o.calibrate_on.is_empty()) {
        return Err("--calibrate-on and --calibrate-from go with --rescore".into());
    }
    if o.calibrate_from.is_some() && !o.calibrate_on.is_empty() {
        return Err("--calibrate-on and --calibrate-from exclude each other: give one".into());
    }
    Ok(o)
}

/// Fastest of `reps` runs after a warm-up: on a shared machine the minimum is the measurement
/// least disturbed by other work.
fn time(reps: usize, mut f: impl FnMut() -> Result<(), KernelError>) -> Result<f64, KernelError> {
    f()?;
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        ts.push(t.elapsed().as_secs_f64());
    }
    Ok(ts.into_iter().fold(f64::INFINITY, f64::min))
}

/// Best dense time for `threads` over both backends, and each backend's time.
fn dense_best(
    rows: usize,
    cols: usize,
    n: usize,
    threads: usize,
    reps: usize,
) -> Result<(f64, f64, f64), KernelError> {
    let a = random_values(rows * cols, 1);
    let b = random_values(cols * n, 2);
    let mut c = vec![0.0; rows * n];
    let mut t = [0.0; 2];
    for (backend, slot) in t.iter_mut().enumerate() {
        let p = ParamPoint::from_pairs([("backend", backend as i64), ("threads", threads as i64)]);
        *slot = time(reps, || dense_gemm(&a, rows, cols, &b, n, &mut c, &p))?;
    }
    Ok((t[0].min(t[1]), t[0], t[1]))
}

struct Tuned {
    /// Every measured point with its predicted and measured seconds.
    points: Vec<(ParamPoint, f64, f64)>,
    best: f64,
    best_point: ParamPoint,
    /// The best of the first pass, which the model's regret is measured against.
    pass_best: f64,
    /// Best among the model's top `budget` fraction (only when every point was measured).
    model_best: Option<f64>,
    measured: usize,
    space: usize,
}

/// Tunes `a` for `threads`: all points of the space with that thread count (exhaustive), or the
/// cost model's top fraction.
fn tune(
    a: &SparseMatrix,
    n: usize,
    threads: usize,
    reps: usize,
    budget: f64,
    exhaustive: bool,
) -> Result<Tuned, KernelError> {
    let sig = a.signature();
    let b = random_values(a.cols() * n, 3);
    let mut c = vec![0.0; a.rows() * n];
    let mut points: Vec<ParamPoint> = cpu_space(&sig, n)
        .points()
        .into_iter()
        .filter(|p| p.0.get("threads") == Some(&(threads as i64)))
        .collect();
    let space = points.len();
    points.sort_by(|p, q| predicted_cost(&sig, n, p).total_cmp(&predicted_cost(&sig, n, q)));
    let top = ((budget * space as f64).ceil() as usize).clamp(1, space.max(1));
    let measure_n = if exhaustive {
        space
    } else {
        top.max(4).min(space)
    };
    let mut times = Vec::with_capacity(measure_n);
    for p in &points[..measure_n] {
        times.push(time(reps, || spmm(a, &b, n, &mut c, p))?);
    }
    let (i, &best) = times
        .iter()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .ok_or_else(|| KernelError::Backend("empty space".into()))?;
    let model_best = exhaustive.then(|| times[..top].iter().copied().fold(f64::INFINITY, f64::min));
    Ok(Tuned {
        points: points
            .iter()
            .zip(&times)
            .map(|(p, &t)| (p.clone(), predicted_cost(&sig, n, p), t))
            .collect(),
        best,
        best_point: points[i].clone(),
        pass_best: best,
        model_best,
        measured: measure_n,
        space,
    })
}

/// Points of a tuning re-measured by [`confirm`], and the rounds they are re-measured in.
const CONFIRM_POINTS: usize = 5;
const CONFIRM_ROUNDS: usize = 3;

/// Re-measures the fastest [`CONFIRM_POINTS`] points of `t` in [`CONFIRM_ROUNDS`] rounds, each
/// after a dense measurement, keeping the fastest time of each side: the machine's speed drifts
/// by ±15 % over minutes, and a ratio of two times taken minutes apart would carry that drift.
fn confirm(
    a: &SparseMatrix,
    n: usize,
    threads: usize,
    reps: usize,
    t: &mut Tuned,
    dense: &mut f64,
) -> Result<(), KernelError> {
    let b = random_values(a.cols() * n, 3);
    let mut c = vec![0.0; a.rows() * n];
    let mut order: Vec<usize> = (0..t.points.len()).collect();
    order.sort_by(|&i, &j| t.points[i].2.total_cmp(&t.points[j].2));
    order.truncate(CONFIRM_POINTS);
    for _ in 0..CONFIRM_ROUNDS {
        *dense = dense.min(dense_best(a.rows(), a.cols(), n, threads, reps)?.0);
        for &i in &order {
            let p = &t.points[i].0;
            let s = time(reps, || spmm(a, &b, n, &mut c, p))?;
            if s < t.best {
                t.best = s;
                t.best_point = p.clone();
            }
        }
    }
    Ok(())
}

fn point_str(p: &ParamPoint) -> String {
    p.0.iter()
        .filter(|(k, _)| k.as_str() != "threads")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn row(label: &str, a: &SparseMatrix, n: usize, t: &Tuned, dense: f64) {
    let gflops = 2.0 * a.nnz() as f64 * n as f64 / t.best / 1e9;
    let regret = t
        .model_best
        .map(|m| format!("{:>6.1}%", (m / t.pass_best - 1.0) * 100.0))
        .unwrap_or_else(|| "     -".into());
    println!(
        "  {label:<16} {:>9.1} us {:>7.1} GF/s {:>6.2}x  model@10% regret {regret}  ({}/{} pts) best: {}",
        t.best * 1e6,
        gflops,
        dense / t.best,
        t.measured,
        t.space,
        point_str(&t.best_point)
    );
}

fn run(o: &mut Opts) -> Result<(), KernelError> {
    println!("cpu: {}", cpu_fingerprint());
    let shapes: Vec<(usize, usize, usize)> = match (&o.shapes, o.full) {
        (Some(shapes), _) => shapes.clone(),
        (None, true) => [(768, 768), (3072, 768), (768, 3072), (4096, 4096)]
            .into_iter()
            .flat_map(|(r, k)| [128, 512].map(|n| (r, k, n)))
            .collect(),
        (None, false) => vec![(3072, 768, 512)],
    };
    for &(rows, cols, n) in &shapes {
        let mut patterns: Vec<(String, Pattern)> = Vec::new();
        let ms: &[usize] = if o.full { &[4, 8, 16, 32] } else { &[8, 16] };
        for &m in ms {
            patterns.push((format!("N:M 2:{m}"), Pattern::Nm { n: 2, m }));
            let vs: &[usize] = if o.full {
                &[16, 32, 64, 128]
            } else {
                &[16, 64, 128]
            };
            for &v in vs {
                patterns.push((format!("V:N:M {v}:2:{m}"), Pattern::Vnm { v, m }));
            }
            let sparsity = 1.0 - 2.0 / m as f64;
            patterns.push((
                format!("CSR {:.1}%", sparsity * 100.0),
                Pattern::Unstructured { sparsity },
            ));
        }
        if !o.full {
            patterns.push((
                "vector 16x1 75%".into(),
                Pattern::Vector {
                    v: 16,
                    sparsity: 0.75,
                },
            ));
        }
        if let Some(only) = &o.only {
            patterns.retain(|(label, _)| label.contains(only.as_str()));
        }
        for &threads in &o.threads {
            let (mut dense, faer, gemm) = dense_best(rows, cols, n, threads, o.reps)?;
            let dense_gf = 2.0 * (rows * cols * n) as f64 / dense / 1e9;
            println!(
                "\n{rows}x{cols}x{n}, {threads} thread(s): dense {:.1} us ({dense_gf:.1} GF/s; faer {:.1} us, gemm {:.1} us)",
                dense * 1e6,
                faer * 1e6,
                gemm * 1e6
            );
            for (label, pattern) in &patterns {
                // A pattern that does not fit this shape (V = 128 over 192 rows) is skipped.
                let sig = match FormatSignature::for_pattern(pattern, rows, cols) {
                    Ok(sig) => sig,
                    Err(e) => {
                        println!("  {label:<18} skipped: {e}");
                        continue;
                    }
                };
                let a = synthetic(&sig, 7)?;
                dense = dense.min(dense_best(rows, cols, n, threads, o.reps)?.0);
                let mut t = tune(&a, n, threads, o.reps, o.budget, !o.full)?;
                confirm(&a, n, threads, o.reps, &mut t, &mut dense)?;
                row(label, &a, n, &t, dense);
                if let Some(f) = &mut o.dump {
                    for (p, pred, meas) in &t.points {
                        let line = format!(
                            "{rows},{cols},{n},{label},{threads},{},{pred:e},{meas:e}",
                            point_str(p).replace(',', ";")
                        );
                        writeln!(f, "{line}").map_err(|e| KernelError::Backend(e.to_string()))?;
                    }
                }
            }
            println!("  (dense best over the run: {:.1} us)", dense * 1e6);
        }
    }
    Ok(())
}

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
        if f.len() != 8 {
            return Err(bad());
        }
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
        // A point that failed or was not timed has nothing to rank.
        if !(measured > 0.0 && measured.is_finite()) {
            continue;
        }
        let key = format!("{}x{}x{} {} t{}", dims[0], dims[1], dims[2], f[3], f[4]);
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => g.points.push((point, measured)),
            None => groups.push(DumpGroup {
                key,
                shape: (dims[0], dims[1], dims[2]),
                sig,
                points: vec![(point, measured)],
            }),
        }
    }
    Ok(groups)
}

/// `--rescore`: the current model's regret at 10 % and Spearman on a dump's measurements, and
/// with `calibrate_on` the calibrated model's beside it on the other shapes.
fn rescore(
    path: &str,
    calibrate_on: &[(usize, usize, usize)],
    sample: f64,
    calibrate_from: Option<&str>,
) -> Result<(), String> {
    let groups = read_dump(path)?;
    if groups.is_empty() {
        return Err(format!("{path}: no rows to score"));
    }
    let (calibrate_on, sample, sampled) = match calibrate_from {
        Some(from) => (&[][..], 1.0, Some(read_dump(from)?)),
        None => (calibrate_on, sample, None),
    };
    let calibration = if calibrate_on.is_empty() && sampled.is_none() {
        None
    } else {
        let every = (1.0 / sample.clamp(1e-3, 1.0)).round().max(1.0) as usize;
        let samples: Vec<CalibrationSample> = sampled
            .as_ref()
            .unwrap_or(&groups)
            .iter()
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
    // at a calibrated shape, as when a layer has a calibration shape).
    let mut totals = [(0.0, 0.0, 0.0); 2];
    let mut cal_totals = [(0.0, 0.0, 0.0); 2];
    for g in &groups {
        let in_sample = calibrate_on.contains(&g.shape);
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
        let t = &mut totals[in_sample as usize];
        *t = (
            t.0 + (1.0 + regret).ln(),
            t.1 + (1.0 + regret8).ln(),
            t.2 + 1.0,
        );
        match &calibration {
            None => println!(
                "  {:<32} regret@10% {:>6.1}%  @8 {:>6.1}%  spearman {rho:>5.2}",
                g.key,
                regret * 100.0,
                regret8 * 100.0
            ),
            Some(cal) => {
                let cp: Vec<f64> = g
                    .points
                    .iter()
                    .map(|(p, _)| cal.cost(&g.sig, n, p))
                    .collect();
                let (cr, crho) = (regret_at_budget(&cp, &meas, budget), spearman(&cp, &meas));
                let cr8 = regret_at_budget(&cp, &meas, 8);
                let t = &mut cal_totals[in_sample as usize];
                *t = (t.0 + (1.0 + cr).ln(), t.1 + (1.0 + cr8).ln(), t.2 + 1.0);
                println!(
                    "  {:<32} regret@10% {:>6.1}% -> {:>5.1}%  @8 {:>6.1}% -> {:>5.1}%  spearman {rho:>5.2} -> {crho:>5.2}{}",
                    g.key,
                    regret * 100.0,
                    cr * 100.0,
                    regret8 * 100.0,
                    cr8 * 100.0,
                    if in_sample { "  (calibration shape)" } else { "" }
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
    for (i, label) in [held_out, "calibration shapes"].into_iter().enumerate() {
        if totals[i].2 > 0.0 {
            println!(
                "  analytical model at {label}, geometric mean over {}",
                means(&totals[i])
            );
        }
        if calibration.is_some() && cal_totals[i].2 > 0.0 {
            println!(
                "  calibrated model at {label}, geometric mean over {}",
                means(&cal_totals[i])
            );
        }
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

fn main() {
    let mut opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("spmm-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Some(path) = opts.rescore.clone() {
        if let Err(e) = rescore(
            &path,
            &opts.calibrate_on,
            opts.sample,
            opts.calibrate_from.as_deref(),
        ) {
            eprintln!("spmm-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(&mut opts) {
        eprintln!("spmm-bench: {e}");
        std::process::exit(1);
    }
}
