//! The device benchmark of the Hopper kernel that `scripts/device-check.sh` runs first (see
//! the test's notes). Ignored by default; run with `--ignored`. Environment as in
//! `cuda_bench.rs`, plus `COTUNE_BENCH_WGMMA_M`.
#![cfg(feature = "cuda")]

mod bench_support;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use bench_support::wgmma::{neighbours, screening_order, Point, SCREEN_SHARE};
use bench_support::{
    csv, cublas_point, env_list, prepare_all, reference, rel_err, screen_and_time,
    screen_and_time_until, setup, Row, Setup, BATCH, REPS, SETS, WARMUP,
};
use kernels::cuda::{
    env_exclusions, exact_values, ptxas_summary, random_vnm, vnm_configs, wgmma_configs,
    wgmma_cycles, DeviceMatrixF16, Gpu, GpuModel, Timing, VnmConfig, WgmmaConfig,
};

/// The Hopper kernel (sparse `wgmma`) against cuBLAS fp16 and the `mma.sp` kernel, in the same
/// run, on the BERT shapes: every Hopper configuration per point (V = 128, so BM 64 and 128),
/// the `mma.sp` kernel over its 3-stage configurations, each screened briefly and the
/// `FINALISTS` fastest of each kernel timed in full; the fastest finalist that computes the
/// right product (checked against cuBLAS on the same matrix) wins. Also reports each speedup's
/// fraction of min(M/2, memory cap), the cap being cuBLAS's time over the time to move the
/// sparse product's bytes (A's kept values and metadata, B, C) at the device-to-device copy
/// bandwidth measured in this run. Writes `wgmma.csv` (every configuration: the full timing
/// for finalists, the screening sample for the rest) and `wgmma_summary.csv`, then the
/// winners' ablations ([`ablations`]) and each winner's one-parameter neighbours timed beside
/// it (`wgmma_neighbours.csv`, [`neighbours`]); `COTUNE_BENCH_WGMMA_M` (default 4,8,16) and
/// `COTUNE_BENCH_N` choose the points, `COTUNE_BENCH_QUICK=1` one point, and
/// `COTUNE_BENCH_DEADLINE_S` the seconds after which no new (shape, N) is started (the table
/// and ablations of what was measured follow; the device check sets it inside its timeout).
/// With a deadline, each point's screening gets an equal share of the time left
/// ([`SCREEN_SHARE`] of it; the rest is the finalists', the reference's and the `mma.sp`
/// kernel's) and screens in [`screening_order`] until its share is spent, so that every point
/// is measured even when the space is larger than the session allows; without one, every
/// configuration is screened. At M = 4 the configurations copying B by TMA compete too,
/// screened after the others with half of the point's share (a malformed tensor map would
/// fault the context). `COTUNE_WGMMA_EXCLUDE` leaves configurations out (the device
/// check sets it to the features whose small test failed; the engine's tunings leave them
/// out too).
#[test]
#[ignore = "device benchmark: run by scripts/device-check.sh"]
fn bench_wgmma_vs_cublas_bert() {
    let Setup {
        dev,
        quick,
        out,
        ns,
        shapes,
    } = setup("bench_wgmma_vs_cublas_bert", (3072, 768));
    let ms = if quick {
        vec![8]
    } else {
        env_list("COTUNE_BENCH_WGMMA_M", &[4, 8, 16])
    };
    let v = 128;
    let excluded = env_exclusions().unwrap();
    let mut hopper: Vec<WgmmaConfig> = wgmma_configs(v)
        .into_iter()
        .filter(|c| (c.tma == 0 || ms.contains(&4)) && !excluded.excludes(c))
        .collect();
    // TMA last, at M = 4 only (below).
    hopper.sort_by_key(|c| c.tma);
    let mut ampere: Vec<VnmConfig> = vnm_configs(v)
        .into_iter()
        .filter(|c| c.stages == 3)
        .collect();
    if quick {
        hopper.retain(|c| c.stages == 4);
        ampere.retain(|c| c.bn == 128);
    }
    let t0 = Instant::now();
    prepare_all(&dev, &ampere).unwrap();
    // The device ptxas's report of every Hopper program (`wgmma_programs.csv`, beside the
    // table by `config`): registers, spills, serialised wgmmas.
    // A program that does not compile or load (the device's ptxas may give a two-consumer
    // program fewer registers than its setmaxnreg split needs) is left out of the table with
    // its reason, not the end of it.
    let mut reports = vec![];
    let mut refused = vec![];
    for (c, r) in dev.prepare_wgmma_all(&hopper) {
        match r {
            Ok(r) => reports.push((c.to_string(), r)),
            Err(e) => refused.push((c.defines(), format!("{c}: {e}"))),
        }
    }
    if !refused.is_empty() {
        eprintln!(
            "{} Hopper programs refused, left out:\n{}",
            refused.len(),
            refused
                .iter()
                .take(5)
                .map(|r| r.1.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        hopper.retain(|c| !refused.iter().any(|r| r.0 == c.defines()));
    }
    eprintln!(
        "compiled {} + {} configurations in {:.1} s",
        hopper.len(),
        ampere.len(),
        t0.elapsed().as_secs_f64()
    );
    eprintln!("device {}", ptxas_summary(&reports));
    let mut programs = String::from("config,registers,spill_bytes,wgmma_serialized\n");
    for (config, r) in reports.iter().filter_map(|(c, r)| r.map(|r| (c, r))) {
        let _ = writeln!(
            programs,
            "\"{config}\",{},{},{}",
            r.registers, r.spill_bytes, r.wgmma_serialized
        );
    }
    std::fs::write(out.join("wgmma_programs.csv"), programs).unwrap();

    // Copy bandwidth: 256 MB device to device, read once and written once.
    let big = 64 << 20;
    let src = dev.zeros_f16(1, 2 * big).unwrap();
    let mut dst = dev.zeros_f16(1, 2 * big).unwrap();
    let copy = dev
        .time(2, REPS, 2, |_| dev.copy_f16(&src, &mut dst))
        .unwrap();
    let bandwidth = 2.0 * (4 * big) as f64 / (copy.median_us * 1e-6);
    eprintln!("device-to-device copy: {:.2} TB/s", bandwidth * 1e-12);
    drop((src, dst));

    let mut rows: Vec<Row> = Vec::new();
    let mut cublas = std::collections::BTreeMap::new();
    let mut summary = String::from(
        "rows,cols,n,m,cublas_us,wgmma_us,wgmma_speedup,mma_sp_us,mma_sp_speedup,ideal,memory_cap,wgmma_fraction,wgmma_config,mma_sp_config\n",
    );
    let mut table = Vec::new();
    let mut winners = Vec::new();
    let mut near_csv =
        String::from("rows,cols,n,m,param,value,winner_us,neighbour_us,ratio,winner,config\n");
    // Per (parameter, value): the neighbours' times over their winners', for the summary.
    let mut near_ratios: std::collections::BTreeMap<(&str, usize), Vec<f64>> = Default::default();
    // Batch sizes outermost, so that a run cut short by its deadline has whole means.
    let deadline = std::env::var("COTUNE_BENCH_DEADLINE_S")
        .ok()
        .and_then(|d| d.parse::<f64>().ok());
    let mut skipped = vec![];
    let gpu = GpuModel::for_device(dev.info());
    let mut points_left = ns.len() * shapes.len() * ms.len();
    for &n in &ns {
        for &(r, k) in &shapes {
            if let Some(d) = deadline.filter(|d| t0.elapsed().as_secs_f64() > *d) {
                eprintln!("deadline {d} s passed: {r}x{k} n={n} skipped");
                skipped.push(format!("{r}x{k} n={n}"));
                points_left -= ms.len();
                continue;
            }
            let (bs, mut cs, baseline) = cublas_point(&dev, (r, k, n));
            let base = baseline.t.median_us;
            cublas.insert((r, k, n), base);
            rows.push(baseline);
            for &m in &ms {
                // This point's share of the time left before the deadline, if there is one.
                let share = deadline.map(|d| {
                    let left = (d - t0.elapsed().as_secs_f64()).max(0.0);
                    Duration::from_secs_f64(left / points_left.max(1) as f64 * SCREEN_SHARE)
                });
                points_left -= 1;
                let a = random_vnm(r, k, v, m, (r * 7 + k * 3 + m) as u64).unwrap();
                let want = reference(&dev, &a, &bs[0]);
                // Each kernel's fastest configuration that computes the right product.
                let best_of = |kind: &'static str,
                               timed: Vec<(f64, String, usize)>,
                               run: &dyn Fn(usize, &mut DeviceMatrixF16),
                               c: &mut DeviceMatrixF16|
                 -> Option<(f64, String, usize)> {
                    let mut sorted = timed;
                    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
                    for (us, name, i) in sorted {
                        run(i, c);
                        let err = rel_err(&dev.download_f16(c).unwrap(), &want);
                        if err < 2e-3 {
                            return Some((us, name, i));
                        }
                        eprintln!(
                            "WRONG RESULT {kind} {r}x{k} n={n} M={m} [{name}]: rel err {err:.2e}"
                        );
                    }
                    None
                };
                let mut timed_h = vec![];
                let packed: Vec<(usize, kernels::cuda::DeviceVnm)> = [32, 64, 128]
                    .into_iter()
                    .map(|bk| (bk, dev.upload_vnm(&a, bk).unwrap()))
                    .collect();
                let packed_for = |bk: usize| &packed.iter().find(|p| p.0 == bk).unwrap().1;
                // The gathered configurations, then at M = 4 the TMA ones, each in its
                // screening order; the second segment may use what the first left of the share.
                let segments: Vec<Vec<WgmmaConfig>> = [0, 1]
                    .into_iter()
                    .filter(|&tma| tma == 0 || m == 4)
                    .map(|tma| {
                        let seg: Vec<WgmmaConfig> =
                            hopper.iter().filter(|c| c.tma == tma).copied().collect();
                        let order = screening_order(&seg, (r, k, n, m), &gpu);
                        order.into_iter().map(|i| seg[i]).collect()
                    })
                    .filter(|seg: &Vec<WgmmaConfig>| !seg.is_empty())
                    .collect();
                let offered: usize = segments.iter().map(Vec::len).sum();
                let mut screened: Vec<WgmmaConfig> = vec![];
                let start = Instant::now();
                for (si, seg) in segments.iter().enumerate() {
                    let until =
                        share.map(|d| start + d.mul_f64((si + 1) as f64 / segments.len() as f64));
                    let times = screen_and_time_until(&dev, seg.len(), until, |i, j| {
                        let cfg = &seg[i];
                        let s = j % SETS;
                        dev.launch_wgmma(packed_for(cfg.bk), &bs[s], &mut cs[s], cfg)
                    })
                    .unwrap();
                    for (cfg, (t, full)) in seg.iter().zip(times) {
                        // Only finalists compete: a screening sample is too short to win on.
                        if full {
                            timed_h.push((t.median_us, cfg.to_string(), screened.len()));
                        }
                        screened.push(*cfg);
                        rows.push(Row {
                            kind: "wgmma",
                            rows: r,
                            cols: k,
                            n,
                            v,
                            m,
                            config: cfg.to_string(),
                            t,
                            rel_err: None,
                        });
                    }
                }
                eprintln!(
                    "{r}x{k} n={n} M={m}: screened {} of {offered} Hopper configurations in {:.1} s{}",
                    screened.len(),
                    start.elapsed().as_secs_f64(),
                    share.map_or(String::new(), |d| format!(" (share {:.1} s)", d.as_secs_f64()))
                );
                let run_h = |i: usize, c: &mut DeviceMatrixF16| {
                    let cfg: &WgmmaConfig = &screened[i];
                    dev.launch_wgmma(packed_for(cfg.bk), &bs[0], c, cfg)
                        .unwrap();
                };
                let best_h = best_of("wgmma", timed_h, &run_h, &mut cs[0]);
                // The winner's one-parameter neighbours among the point's configurations, each
                // timed in full, with the winner timed again before and after them: what every
                // parameter is worth at the optimum (ping-pong or not, a cluster of 1, 2 or 4,
                // ...), whatever the screening reached.
                if let Some(b) = &best_h {
                    let win = screened[b.2];
                    let offered: Vec<WgmmaConfig> = segments.concat();
                    let mut time = |cfg: &WgmmaConfig| {
                        dev.time(WARMUP, REPS, BATCH, |j| {
                            let s = j % SETS;
                            dev.launch_wgmma(packed_for(cfg.bk), &bs[s], &mut cs[s], cfg)
                        })
                        .map(|t| t.median_us)
                    };
                    let before = time(&win).unwrap_or(f64::NAN);
                    let near: Vec<_> = neighbours(&win, &offered)
                        .into_iter()
                        .map(|(param, value, cfg)| (param, value, cfg, time(&cfg)))
                        .collect();
                    let after = time(&win).unwrap_or(f64::NAN);
                    let winner_us = (before + after) / 2.0;
                    for (param, value, cfg, t) in near {
                        let us = t.unwrap_or_else(|e| {
                            eprintln!("neighbour {param}={value} of [{win}]: {e}");
                            f64::NAN
                        });
                        let ratio = us / winner_us;
                        if ratio.is_finite() {
                            near_ratios.entry((param, value)).or_default().push(ratio);
                        }
                        let _ = writeln!(
                            near_csv,
                            "{r},{k},{n},{m},{param},{value},{winner_us:.3},{us:.3},{ratio:.4},\"{win}\",\"{cfg}\""
                        );
                    }
                }
                let mut timed_a = vec![];
                let times = screen_and_time(&dev, ampere.len(), |i, j| {
                    let cfg = &ampere[i];
                    let s = j % SETS;
                    dev.launch_vnm(packed_for(cfg.bk), &bs[s], &mut cs[s], cfg)
                })
                .unwrap();
                for (i, (cfg, (t, full))) in ampere.iter().zip(times).enumerate() {
                    if full {
                        timed_a.push((t.median_us, cfg.to_string(), i));
                    }
                    rows.push(Row {
                        kind: "mma_sp",
                        rows: r,
                        cols: k,
                        n,
                        v,
                        m,
                        config: cfg.to_string(),
                        t,
                        rel_err: None,
                    });
                }
                let run_a = |i: usize, c: &mut DeviceMatrixF16| {
                    let cfg = &ampere[i];
                    dev.launch_vnm(packed_for(cfg.bk), &bs[0], c, cfg).unwrap();
                };
                let best_a = best_of("mma_sp", timed_a, &run_a, &mut cs[0]);
                // The bytes a perfect sparse kernel moves: kept values and metadata, B, C.
                let bytes = (r * k / m * 2 * 2 + r * k / m * 2 / 4 + k * n * 2 + r * n * 2) as f64;
                let cap = base / (bytes / bandwidth * 1e6);
                let ideal = m as f64 / 2.0;
                let (hu, hc) = best_h
                    .as_ref()
                    .map_or((f64::NAN, "none correct".into()), |b| (b.0, b.1.clone()));
                let (au, ac) = best_a.map_or((f64::NAN, "none correct".into()), |b| (b.0, b.1));
                if let Some(b) = &best_h {
                    winners.push(((r, k, n, m), screened[b.2]));
                }
                let fraction = base / hu / ideal.min(cap);
                let _ = writeln!(
                    summary,
                    "{r},{k},{n},{m},{base:.3},{hu:.3},{:.3},{au:.3},{:.3},{ideal},{cap:.2},{fraction:.3},\"{hc}\",\"{ac}\"",
                    base / hu,
                    base / au
                );
                table.push((r, k, n, m, base, hu, au, ideal, cap, hc));
            }
            eprintln!("done {r}x{k} n={n} at {:.1} s", t0.elapsed().as_secs_f64());
            std::fs::write(
                out.join("wgmma.csv"),
                csv(&rows, |r, k, n| cublas[&(r, k, n)]),
            )
            .unwrap();
            std::fs::write(out.join("wgmma_summary.csv"), &summary).unwrap();
            std::fs::write(out.join("wgmma_neighbours.csv"), &near_csv).unwrap();
        }
    }
    println!(
        "\nV:N:M V=128 on wgmma.sp (Hopper) and mma.sp (sm_80 kernel) vs cuBLAS fp16 on {}:",
        dev.info().fingerprint()
    );
    println!(
        "{:>11} {:>6} {:>3} {:>9} {:>9} {:>7} {:>9} {:>7} {:>5} {:>5} {:>5}  wgmma config",
        "shape",
        "N",
        "M",
        "cublas_us",
        "wgmma_us",
        "speedup",
        "mma_sp_us",
        "speedup",
        "ideal",
        "cap",
        "frac"
    );
    for (r, k, n, m, base, hu, au, ideal, cap, hc) in &table {
        println!(
            "{:>11} {n:>6} {m:>3} {base:>9.1} {hu:>9.1} {:>7.2} {au:>9.1} {:>7.2} {ideal:>5.1} {cap:>5.1} {:>5.2}  {hc}",
            format!("{r}x{k}"),
            base / hu,
            base / au,
            base / hu / ideal.min(*cap)
        );
    }
    if !skipped.is_empty() {
        println!(
            "not measured (COTUNE_BENCH_DEADLINE_S passed): {}",
            skipped.join(", ")
        );
    }
    for &n in &ns {
        for &m in &ms {
            // Per point: the speedups of both kernels and the Hopper kernel's fraction.
            let pts: Vec<[f64; 3]> = table
                .iter()
                .filter(|t| t.2 == n && t.3 == m)
                .map(|t| [t.4 / t.5, t.4 / t.6, t.4 / t.5 / t.7.min(t.8)])
                .collect();
            if pts.is_empty() {
                continue;
            }
            let mean = |i: usize| pts.iter().map(|p| p[i]).sum::<f64>() / pts.len() as f64;
            println!(
                "mean N={n:>5} 2:{m:<3} wgmma {:.2}x  mma.sp {:.2}x  ideal {:.1}x  wgmma fraction of min(ideal, cap) {:.2}",
                mean(0),
                mean(1),
                m as f64 / 2.0,
                mean(2)
            );
        }
    }
    println!(
        "\nThe winners' one-parameter neighbours (wgmma_neighbours.csv): a parameter moved to a \
         value, its time over the winner's (geometric mean over the points where it was a \
         valid neighbour; > 1: the winner's value is better; a lowest below 1: somewhere a \
         neighbour the screening did not finalise beat the winner):"
    );
    for ((param, value), ratios) in &near_ratios {
        let gmean = (ratios.iter().map(|x| x.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let lowest = ratios.iter().copied().fold(f64::NAN, f64::min);
        println!(
            "{:>18} {gmean:>6.3}x over {:>2} points (lowest {lowest:.3}x)",
            format!("{param}={value}"),
            ratios.len()
        );
    }
    assert!(
        table.iter().any(|t| t.5.is_finite()),
        "no Hopper configuration gave a correct result"
    );
    ablations(&dev, v, &winners, &out);
}

/// Where each point's winning Hopper configuration spends its time, from two timing-only
/// builds of it timed beside it (interleaved, same inputs): without the consumers' wgmmas
/// (`ABLATE_MMA`: the producer's copies and the hand-offs) and without the producer's gather
/// of B (`ABLATE_B`: the wgmmas, A's copies and the hand-offs). Close to the first: the gather
/// bounds it; close to the second: the tensor cores or the consumers do. Beside them the
/// epilogue's share: without C's stores (`ABLATE_STORE`), and with the 4-byte stores the
/// quad's 16-byte ones replaced (`EPILOGUE_U32`). One operand set (B stays in L2 where it
/// fits, for all alike). Writes `wgmma_ablation.csv` and prints a table.
fn ablations(
    dev: &kernels::cuda::CudaDevice,
    v: usize,
    winners: &[(Point, WgmmaConfig)],
    out: &std::path::Path,
) {
    // The kernel, then its ablations (full, no_mma, no_b, no_store) and the old epilogue
    // (u32_store).
    let variants: [Option<&'static str>; 5] = [
        None,
        Some("ABLATE_MMA"),
        Some("ABLATE_B"),
        Some("ABLATE_STORE"),
        Some("EPILOGUE_U32"),
    ];
    let Some(first) = winners.first() else {
        return;
    };
    let reading = kernels::cuda::CudaDevice::wgmma_reading(&first.1).unwrap();
    let defines = |ablate: Option<&'static str>| {
        let mut d = reading.clone();
        d.extend(ablate.map(|a| (a, 1)));
        d
    };
    let t0 = Instant::now();
    let mut configs: Vec<WgmmaConfig> = winners.iter().map(|w| w.1).collect();
    configs.sort_by_key(|c| c.to_string());
    configs.dedup();
    // Compile the ablated builds in parallel (a launch compiles on first use).
    std::thread::scope(|s| {
        for cfg in &configs {
            for ablate in &variants[1..] {
                let d = defines(*ablate);
                s.spawn(move || dev.prepare_wgmma_with(cfg, d).unwrap());
            }
        }
    });
    eprintln!(
        "compiled the ablations of {} configurations in {:.1} s",
        configs.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut csv =
        String::from("rows,cols,n,m,config,full_us,no_mma_us,no_b_us,no_store_us,u32_store_us\n");
    println!(
        "\nWhere the Hopper winners' time goes (µs; no_mma: copies only, no_b: wgmmas only, \
         no_store: without C's stores, u32_store: 4-byte stores):"
    );
    println!(
        "{:>11} {:>6} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9}  config",
        "shape", "N", "M", "full", "no_mma", "no_b", "no_store", "u32_store"
    );
    for &((r, k, n, m), cfg) in winners {
        let a = random_vnm(r, k, v, m, (r * 7 + k * 3 + m) as u64).unwrap();
        let da = dev.upload_vnm(&a, cfg.bk).unwrap();
        let b = dev.upload_f16(&exact_values(k * n, 10), k, n).unwrap();
        let mut c = dev.zeros_f16(r, n).unwrap();
        // Rounds of the builds in turn; each one's median over the rounds.
        let mut samples = variants.map(|_| vec![]);
        for _ in 0..5 {
            for (i, ablate) in variants.iter().enumerate() {
                let d = defines(*ablate);
                let t = dev
                    .time(2, 3, BATCH, |_| {
                        dev.launch_wgmma_with(&da, &b, &mut c, &cfg, &d)
                    })
                    .unwrap();
                samples[i].push(t.median_us);
            }
        }
        let [full, no_mma, no_b, no_store, u32_store] =
            samples.map(|s| Timing::from_samples(s).median_us);
        csv.push_str(&format!(
            "{r},{k},{n},{m},\"{cfg}\",{full:.3},{no_mma:.3},{no_b:.3},{no_store:.3},{u32_store:.3}\n"
        ));
        println!(
            "{:>11} {n:>6} {m:>3} {full:>9.1} {no_mma:>9.1} {no_b:>9.1} {no_store:>9.1} {u32_store:>9.1}  {cfg}",
            format!("{r}x{k}")
        );
        std::fs::write(out.join("wgmma_ablation.csv"), &csv).unwrap();
    }
}

#[test]
fn the_screening_order_takes_the_prior_and_a_spread_in_turn() {
    let gpu = GpuModel::h200();
    let cfgs = wgmma_configs(128);
    let point = (3072, 768, 16384, 4);
    let order = screening_order(&cfgs, point, &gpu);
    // A permutation of the configurations.
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..cfgs.len()).collect::<Vec<_>>());
    // The prior's 50 best within the first 100.
    let cycles = |i: usize| wgmma_cycles(&cfgs[i], (3072, 768, 4), 16384, &gpu);
    let mut prior: Vec<usize> = (0..cfgs.len()).collect();
    prior.sort_by(|&x, &y| cycles(x).total_cmp(&cycles(y)));
    assert_eq!(order[0], prior[0]);
    assert!(prior[..50].iter().all(|i| order[..100].contains(i)));
    // The spread half reaches every value of every parameter within the first 200.
    let head: Vec<_> = order[..200].iter().map(|&i| cfgs[i].values()).collect();
    let all: Vec<_> = cfgs.iter().map(|c| c.values()).collect();
    for p in 0..WgmmaConfig::PARAMS.len() {
        for value in all.iter().map(|v| v[p]) {
            assert!(
                head.iter().any(|v| v[p] == value),
                "{}={value} not among the first 200 of {}",
                WgmmaConfig::PARAMS[p],
                cfgs.len()
            );
        }
    }
}

#[test]
fn a_neighbour_differs_in_one_parameter_and_is_offered() {
    let all = wgmma_configs(128);
    let cfg = *all
        .iter()
        .find(|c| c.bm == 128 && c.bn == 128 && c.pingpong == 1 && c.keep == 1)
        .unwrap();
    let near = neighbours(&cfg, &all);
    for (param, value, c) in &near {
        let p = WgmmaConfig::PARAMS.iter().position(|x| x == param).unwrap();
        let (a, b) = (c.values(), cfg.values());
        assert_eq!(a[p], *value);
        assert_eq!(
            (0..WgmmaConfig::PARAMS.len())
                .filter(|&i| a[i] != b[i])
                .count(),
            1,
            "{c}"
        );
        assert!(all.contains(c));
    }
    // Ping-pong off is a neighbour; a block per tile is not (ping-pong needs persistent
    // blocks), nor is BN 256 (ping-pong's BN <= 128).
    assert!(near.iter().any(|n| (n.0, n.1) == ("pingpong", 0)));
    assert!(!near.iter().any(|n| n.0 == "persistent"));
    assert!(!near.iter().any(|n| (n.0, n.1) == ("bn", 256)));
    // Only what is offered: without TMA in the list, no TMA neighbour.
    let gathered: Vec<WgmmaConfig> = all.iter().filter(|c| c.tma == 0).copied().collect();
    assert!(neighbours(&cfg, &gathered).iter().all(|n| n.2.tma == 0));
}
