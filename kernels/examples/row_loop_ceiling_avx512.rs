//! The V:N:M row loop at 512 bits: the kernel's inner loop (`cpu/kernels/vnm.rs`) with its panel
//! in L1 (32 groups, random pair codes), against dense `R × U` micro-kernels doing the same
//! number of FMAs. Each variant's fastest time over 60 interleaved rounds; the ratio is its FMA
//! rate as a fraction of the dense 12×2 kernel's. The panel starts on a 64-byte line, then 4
//! bytes past one (every 512-bit load then straddles two lines); "no value loads" keeps the
//! loop's B loads and address arithmetic but splats two constant values (a timing-only bound);
//! "row pairs" is the loop of `rows = 2` (`vnm_pair`), 3 B loads for 4 FMAs; "split
//! accumulators" gives each row's second FMA of an entry an accumulator of its own (twice the
//! chains; tried in the kernel and not kept: no gain in the products, kernels/BENCH.md).
//! Times loop shapes only, not `spmm` (see kernels/BENCH.md).
//!
//! `cargo run --release -p kernels --example row_loop_ceiling_avx512` (x86-64 with AVX-512F).

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Groups in the panel.
    pub const G: usize = 32;
    /// Passes over the panel per call (scaled by the shape so every variant does the same FMAs).
    const ITERS: usize = 20_000;

    #[target_feature(enable = "avx512f")]
    fn total(acc: &[__m512]) -> f32 {
        let mut s = _mm512_setzero_ps();
        for &x in acc {
            s = _mm512_add_ps(s, x);
        }
        _mm512_reduce_add_ps(s)
    }

    /// The row loop, `R` rows × `U` vectors, over a panel `[G][4][U·16]`: the codes of 8 groups
    /// in one load per row, and each value by a broadcast load (`VALUES`) or a constant.
    ///
    /// # Safety
    /// AVX-512F and FMA are available; `panel` holds `G·4·U·16` floats, `vals` `R·2·G`, `codes`
    /// `R·G` codes of two positions in 0..4.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn rows<const R: usize, const U: usize, const VALUES: bool>(
        panel: &[f32],
        vals: &[f32],
        codes: &[u8],
    ) -> f32 {
        let w = U * 16;
        let mut acc = [[_mm512_setzero_ps(); U]; R];
        let reps = ITERS * 12 / (R * U);
        let (pp, vp, cp) = (panel.as_ptr(), vals.as_ptr(), codes.as_ptr());
        let (x0, x1) = (_mm512_set1_ps(vals[0]), _mm512_set1_ps(vals[1]));
        // SAFETY: g < G, i < R, positions < 4 and u < U keep every access inside the slices.
        unsafe {
            for _ in 0..reps {
                for g8 in (0..G).step_by(8) {
                    let mut code8: [u64; R] = std::array::from_fn(|i| {
                        u64::from_le_bytes(*cp.add(i * G + g8).cast::<[u8; 8]>())
                    });
                    for h in (0..8).step_by(2) {
                        let gp = pp.add((g8 + h) * 4 * w);
                        for (i, a) in acc.iter_mut().enumerate() {
                            let v = vp.add(i * 2 * G + 2 * (g8 + h));
                            let c = code8[i] as usize;
                            code8[i] >>= 16;
                            let q = [c & 3, (c >> 2) & 3, 4 + ((c >> 8) & 3), 4 + ((c >> 10) & 3)];
                            for (s, q) in q.into_iter().enumerate() {
                                let x = match (VALUES, s % 2) {
                                    (true, _) => _mm512_set1_ps(*v.add(s)),
                                    (false, 0) => x0,
                                    (false, _) => x1,
                                };
                                let row = gp.add(q * w);
                                for (u, au) in a.iter_mut().enumerate() {
                                    *au = _mm512_fmadd_ps(x, _mm512_loadu_ps(row.add(u * 16)), *au);
                                }
                            }
                        }
                    }
                }
            }
            total(acc.as_flattened())
        }
    }

    /// The row-pair loop (`rows = 2` in the kernel, `vnm_pair`): per entry of a pair, the
    /// column both rows keep loaded once into a register for their two FMAs, each row's other
    /// column as a memory operand (3 B loads for 4 FMAs), the 4 values by broadcast loads.
    /// `entries` holds `G` per pair for `P` pairs (`g | shared << 8 | other1 << 10 | other2 <<
    /// 12`), `vals` 4 per entry.
    ///
    /// # Safety
    /// AVX-512F and FMA are available; `panel` holds `G·4·U·16` floats, `entries` `P·G` entries
    /// naming groups < G and positions < 4, `vals` `4·P·G`.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn pairs<const P: usize, const U: usize, const SPLIT: bool>(
        panel: &[f32],
        entries: &[u32],
        vals: &[f32],
    ) -> f32 {
        let w = U * 16;
        let mut acc = [[[_mm512_setzero_ps(); U]; 2]; P];
        // With SPLIT, each row's second FMA of an entry goes to an accumulator of its own.
        let mut acc2 = [[[_mm512_setzero_ps(); U]; 2]; P];
        let reps = ITERS * 12 / (2 * P * U);
        let (pp, ep, vp) = (panel.as_ptr(), entries.as_ptr(), vals.as_ptr());
        // SAFETY: per the contract every entry names a group and positions inside the panel.
        unsafe {
            for _ in 0..reps {
                for e in 0..G {
                    for (p, (a, a2)) in acc.iter_mut().zip(acc2.iter_mut()).enumerate() {
                        let ent = *ep.add(p * G + e) as usize;
                        let gp = pp.add((ent & 0xff) * 4 * w);
                        let v = vp.add((p * G + e) * 4);
                        let x: [__m512; 4] = std::array::from_fn(|i| _mm512_set1_ps(*v.add(i)));
                        let rs = gp.add(((ent >> 8) & 3) * w);
                        let r1 = gp.add(((ent >> 10) & 3) * w);
                        let r2 = gp.add(((ent >> 12) & 3) * w);
                        let ([a0, a1], [d0, d1]) = (a, a2);
                        for u in 0..U {
                            let bs = _mm512_loadu_ps(rs.add(u * 16));
                            let b1 = _mm512_loadu_ps(r1.add(u * 16));
                            let b2 = _mm512_loadu_ps(r2.add(u * 16));
                            a0[u] = _mm512_fmadd_ps(x[0], bs, a0[u]);
                            a1[u] = _mm512_fmadd_ps(x[2], bs, a1[u]);
                            if SPLIT {
                                d0[u] = _mm512_fmadd_ps(x[1], b1, d0[u]);
                                d1[u] = _mm512_fmadd_ps(x[3], b2, d1[u]);
                            } else {
                                a0[u] = _mm512_fmadd_ps(x[1], b1, a0[u]);
                                a1[u] = _mm512_fmadd_ps(x[3], b2, a1[u]);
                            }
                        }
                    }
                }
            }
            total(acc.as_flattened().as_flattened()) + total(acc2.as_flattened().as_flattened())
        }
    }

    /// A dense `R × U` micro-kernel (B vectors loaded once per k, A broadcast per row) with as
    /// many FMAs as [`rows`].
    ///
    /// # Safety
    /// AVX-512F and FMA are available; `b` holds `2G·U·16` floats and `a` `2G·R`.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn dense<const R: usize, const U: usize>(b: &[f32], a: &[f32]) -> f32 {
        let mut acc = [[_mm512_setzero_ps(); U]; R];
        let reps = ITERS * 12 / (R * U);
        // SAFETY: kk < 2G, u < U and i < R stay inside `b` and `a` per the contract.
        unsafe {
            for _ in 0..reps {
                for kk in 0..2 * G {
                    let bv: [__m512; U] =
                        std::array::from_fn(|u| _mm512_loadu_ps(b.as_ptr().add((kk * U + u) * 16)));
                    for (i, row) in acc.iter_mut().enumerate() {
                        let x = _mm512_set1_ps(*a.as_ptr().add(kk * R + i));
                        for (r, &bu) in row.iter_mut().zip(&bv) {
                            *r = _mm512_fmadd_ps(x, bu, *r);
                        }
                    }
                }
            }
            total(acc.as_flattened())
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use avx512::G;
    use std::time::Instant;
    if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma")) {
        println!("skipped: this CPU lacks AVX-512F or FMA");
        return;
    }
    // Room for the widest tile (U = 12) and 64 floats of slack to place the panel.
    let raw: Vec<f32> = (0..G * 4 * 192 + 64)
        .map(|i| (i % 7) as f32 * 1e-3)
        .collect();
    let line = raw.as_ptr().align_offset(64);
    let vals: Vec<f32> = (0..12 * 2 * G).map(|i| (i % 5) as f32 * 1e-3).collect();
    let pairs = [0b0100u8, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110];
    let codes: Vec<u8> = (0..12 * G).map(|i| pairs[(i * 7) % 6]).collect();
    let (b, a) = (vec![1e-3f32; 2 * G * 16 * 4], vec![1e-3f32; 2 * G * 14]);
    // Row-pair entries: groups in a shuffled order, (shared, other, other) positions distinct.
    let triples = [
        (0u32, 1, 2),
        (1, 0, 3),
        (2, 3, 1),
        (3, 2, 0),
        (0, 2, 3),
        (1, 3, 2),
    ];
    let entries: Vec<u32> = (0..2 * G)
        .map(|i| {
            let (s, o1, o2) = triples[(i * 5) % 6];
            ((i % G) * 13 % G) as u32 | s << 8 | o1 << 10 | o2 << 12
        })
        .collect();
    let pair_vals: Vec<f32> = (0..2 * 4 * G).map(|i| (i % 5) as f32 * 1e-3).collect();
    let timed = |f: &dyn Fn() -> f32| {
        let t = Instant::now();
        std::hint::black_box(f());
        t.elapsed().as_secs_f64()
    };
    for (name, skew) in [("on a 64-byte line", 0), ("4 bytes past a line", 1)] {
        let panel = &raw[line + skew..];
        // SAFETY (every call below): AVX-512F and FMA were detected; the buffers have the sizes
        // each function asks for.
        let variants: [(&str, &dyn Fn() -> f32); 12] = [
            ("dense 12x2", &|| unsafe { avx512::dense::<12, 2>(&b, &a) }),
            ("dense 6x4", &|| unsafe { avx512::dense::<6, 4>(&b, &a) }),
            ("row loop R3xU4", &|| unsafe {
                avx512::rows::<3, 4, true>(panel, &vals, &codes)
            }),
            ("row loop R2xU6", &|| unsafe {
                avx512::rows::<2, 6, true>(panel, &vals, &codes)
            }),
            ("row loop R1xU4", &|| unsafe {
                avx512::rows::<1, 4, true>(panel, &vals, &codes)
            }),
            ("row loop R1xU12", &|| unsafe {
                avx512::rows::<1, 12, true>(panel, &vals, &codes)
            }),
            ("row loop R3xU4, no value loads", &|| unsafe {
                avx512::rows::<3, 4, false>(panel, &vals, &codes)
            }),
            ("row loop R2xU4, no value loads", &|| unsafe {
                avx512::rows::<2, 4, false>(panel, &vals, &codes)
            }),
            ("row pairs P1xU4", &|| unsafe {
                avx512::pairs::<1, 4, false>(panel, &entries, &pair_vals)
            }),
            ("row pairs P2xU3", &|| unsafe {
                avx512::pairs::<2, 3, false>(panel, &entries, &pair_vals)
            }),
            ("row pairs P1xU4, split accumulators", &|| unsafe {
                avx512::pairs::<1, 4, true>(panel, &entries, &pair_vals)
            }),
            ("row pairs P1xU2, split accumulators", &|| unsafe {
                avx512::pairs::<1, 2, true>(panel, &entries, &pair_vals)
            }),
        ];
        let mut best = [f64::INFINITY; 12];
        for _ in 0..60 {
            for (t, (_, f)) in best.iter_mut().zip(&variants) {
                *t = t.min(timed(*f));
            }
        }
        println!("panel {name}: FMA rate / dense 12x2");
        for (t, (variant, _)) in best.iter().zip(&variants) {
            println!("  {variant:<38} {:.3}", best[0] / t);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("skipped: the row-loop micro-benchmark is written for x86-64 AVX-512");
}
