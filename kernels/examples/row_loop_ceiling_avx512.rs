//! The V:N:M row loop at 512 bits: the kernel's inner loop (`cpu/kernels/vnm.rs`) with its panel
//! in L1 (32 groups, random pair codes), against dense `R × U` micro-kernels doing the same
//! number of FMAs. Each variant's fastest time over 60 interleaved rounds; the ratio is its FMA
//! rate as a fraction of the dense 12×2 kernel's. The panel starts on a 64-byte line, then 4
//! bytes past one (every 512-bit load then straddles two lines); "no value loads" keeps the
//! loop's B loads and address arithmetic but splats two constant values (a timing-only bound);
//! "row pairs" is the loop of `rows = 2` (`vnm_pair`), 3 B loads for 4 FMAs; "split
//! accumulators" gives each row's second FMA of an entry an accumulator of its own (twice the
//! chains; tried in the kernel and not kept: no gain in the products, kernels/BENCH.md);
//! "32 pairs x G groups, C" runs the pairs as `spmm` does, 32 pairs per chunk of G groups (a
//! V = 64 block at 2:8 and `k_chunk` 256 or 128), each pair loading and storing its two C rows
//! (contiguous, or 2 KiB apart as in a 512-column C), so the panel, the pairs' entries and C
//! share L1 as in the products.
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

    /// Pairs as the products run them: `NP` pairs per chunk of `GC` groups, each pair loading
    /// its two C rows, running its `GC` entries (all shared) and storing the rows, so that the
    /// panel (`GC` groups), the pairs' entries and values and C's rows compete for L1 as in
    /// `spmm` (at 64:2:8, V = 64: 32 pairs; `k_chunk` 256 is 32 groups).
    ///
    /// # Safety
    /// AVX-512F and FMA are available; `panel` holds `GC·4·U·16` floats, `entries` `NP·GC`
    /// entries naming groups below `GC`, `vals` `4·NP·GC` and `c` `2·NP·U·16` floats.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn pair_chunks<const NP: usize, const GC: usize, const U: usize, const CS: usize>(
        panel: &[f32],
        entries: &[u32],
        vals: &[f32],
        c: &mut [f32],
    ) -> f32 {
        let w = U * 16;
        let reps = ITERS * 12 * 2 * G / (NP * GC * 4 * U);
        let (pp, ep, vp, cp) = (
            panel.as_ptr(),
            entries.as_ptr(),
            vals.as_ptr(),
            c.as_mut_ptr(),
        );
        // SAFETY: per the contract every entry names a group and positions inside the panel,
        // and every pair's two rows of C are inside `c`.
        unsafe {
            for _ in 0..reps {
                for p in 0..NP {
                    let (c0, c1) = (cp.add(2 * p * CS), cp.add((2 * p + 1) * CS));
                    let mut a0: [__m512; U] =
                        std::array::from_fn(|u| _mm512_loadu_ps(c0.add(u * 16)));
                    let mut a1: [__m512; U] =
                        std::array::from_fn(|u| _mm512_loadu_ps(c1.add(u * 16)));
                    for e in 0..GC {
                        let ent = *ep.add(p * GC + e) as usize;
                        let gp = pp.add((ent & 0xff) * 4 * w);
                        let v = vp.add((p * GC + e) * 4);
                        let x: [__m512; 4] = std::array::from_fn(|i| _mm512_set1_ps(*v.add(i)));
                        let rs = gp.add(((ent >> 8) & 3) * w);
                        let r1 = gp.add(((ent >> 10) & 3) * w);
                        let r2 = gp.add(((ent >> 12) & 3) * w);
                        for u in 0..U {
                            let bs = _mm512_loadu_ps(rs.add(u * 16));
                            a0[u] = _mm512_fmadd_ps(x[0], bs, a0[u]);
                            a1[u] = _mm512_fmadd_ps(x[2], bs, a1[u]);
                            a0[u] = _mm512_fmadd_ps(x[1], _mm512_loadu_ps(r1.add(u * 16)), a0[u]);
                            a1[u] = _mm512_fmadd_ps(x[3], _mm512_loadu_ps(r2.add(u * 16)), a1[u]);
                        }
                    }
                    for u in 0..U {
                        _mm512_storeu_ps(c0.add(u * 16), a0[u]);
                        _mm512_storeu_ps(c1.add(u * 16), a1[u]);
                    }
                }
            }
            *c.first().unwrap_or(&0.0)
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
    // 32 pairs' entries for chunks of 32 and 16 groups (each pair its own shuffled order).
    let chunk_entries = |gc: usize| -> Vec<u32> {
        (0..32 * gc)
            .map(|i| {
                let (s, o1, o2) = triples[(i * 5) % 6];
                let (p, e) = (i / gc, i % gc);
                ((e * 13 + p * 7) % gc) as u32 | s << 8 | o1 << 10 | o2 << 12
            })
            .collect()
    };
    let (ent32, ent16) = (chunk_entries(32), chunk_entries(16));
    let chunk_vals: Vec<f32> = (0..4 * 32 * 32).map(|i| (i % 5) as f32 * 1e-3).collect();
    let c_rows = std::cell::RefCell::new(vec![0f32; 2 * 32 * 528]);
    let timed = |f: &dyn Fn() -> f32| {
        let t = Instant::now();
        std::hint::black_box(f());
        t.elapsed().as_secs_f64()
    };
    for (name, skew) in [("on a 64-byte line", 0), ("4 bytes past a line", 1)] {
        let panel = &raw[line + skew..];
        // SAFETY (every call below): AVX-512F and FMA were detected; the buffers have the sizes
        // each function asks for.
        let variants: [(&str, &dyn Fn() -> f32); 16] = [
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
            ("row pairs, 32 pairs x 32 groups, C", &|| unsafe {
                avx512::pair_chunks::<32, 32, 4, 64>(
                    panel,
                    &ent32,
                    &chunk_vals,
                    &mut c_rows.borrow_mut(),
                )
            }),
            ("row pairs, 32 pairs x 16 groups, C", &|| unsafe {
                avx512::pair_chunks::<32, 16, 4, 64>(
                    panel,
                    &ent16,
                    &chunk_vals,
                    &mut c_rows.borrow_mut(),
                )
            }),
            ("row pairs, 32 x 32, C rows 2 KiB apart", &|| unsafe {
                avx512::pair_chunks::<32, 32, 4, 512>(
                    panel,
                    &ent32,
                    &chunk_vals,
                    &mut c_rows.borrow_mut(),
                )
            }),
            ("row pairs, 32 x 32, C rows 2 KiB + 64 B", &|| unsafe {
                avx512::pair_chunks::<32, 32, 4, 528>(
                    panel,
                    &ent32,
                    &chunk_vals,
                    &mut c_rows.borrow_mut(),
                )
            }),
        ];
        let mut best = [f64::INFINITY; 16];
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
