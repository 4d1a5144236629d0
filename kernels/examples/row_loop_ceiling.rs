//! The ceiling of the V:N:M row loop: its inner loop with everything in L1 (a panel of 16
//! groups, random pair codes), against a 6×16 dense micro-kernel doing the same number of FMAs.
//! Each variant's fastest time over 150 interleaved rounds; the ratio is the loop's FMA rate
//! as a fraction of dense. Times the kernels' loop shape only, not `spmm` (see kernels/BENCH.md).
//!
//! `cargo run --release -p kernels --example row_loop_ceiling` (x86-64 with AVX2 and FMA).

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Groups in the panel.
    pub const G: usize = 16;
    /// Passes over the panel per call.
    const ITERS: usize = 20_000;

    /// Sums the accumulators so that the work cannot be optimised away.
    #[target_feature(enable = "avx2,fma")]
    fn total(acc: &[__m256]) -> f32 {
        let mut s = _mm256_setzero_ps();
        for &x in acc {
            s = _mm256_add_ps(s, x);
        }
        let mut o = [0f32; 8];
        // SAFETY: `o` holds 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), s) };
        o.iter().sum()
    }

    /// The row loop, `R` rows × `U` vectors, over `G` groups of a panel `[G][4][U·8]`.
    /// `PACKED`: the codes of 8 groups in one load and each value by a broadcast load (the
    /// kernel now); else a code load per group and both values of a group from one 8-byte load
    /// split by shuffles (the kernel before).
    ///
    /// # Safety
    /// AVX2 and FMA are available; `panel` holds `G·4·U·8` floats, `vals` `R·2·G`, `codes`
    /// `R·G` codes of two positions in 0..4.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows<const R: usize, const U: usize, const PACKED: bool>(
        panel: &[f32],
        vals: &[f32],
        codes: &[u8],
    ) -> f32 {
        let w = U * 8;
        let mut acc = [[_mm256_setzero_ps(); U]; R];
        // The same number of FMAs for every shape: 3·4 accumulators' worth per group.
        let reps = ITERS * 12 / (R * U);
        let (pp, vp, cp) = (panel.as_ptr(), vals.as_ptr(), codes.as_ptr());
        // SAFETY: the indices below stay inside the slices per the contract (g < G, i < R,
        // positions < 4, u < U).
        unsafe {
            let fma_row = |acc: &mut [__m256; U], v: __m256, row: *const f32| {
                for (u, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(v, _mm256_loadu_ps(row.add(u * 8)), *a);
                }
            };
            for _ in 0..reps {
                if PACKED {
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
                                let q =
                                    [c & 3, (c >> 2) & 3, 4 + ((c >> 8) & 3), 4 + ((c >> 10) & 3)];
                                for (s, q) in q.into_iter().enumerate() {
                                    fma_row(a, _mm256_broadcast_ss(&*v.add(s)), gp.add(q * w));
                                }
                            }
                        }
                    }
                } else {
                    for g in 0..G {
                        let gp = pp.add(g * 4 * w);
                        for (i, a) in acc.iter_mut().enumerate() {
                            let c = *cp.add(i * G + g) as usize;
                            let pair = vp.add(i * 2 * G + 2 * g).cast::<f64>();
                            let d = _mm256_castpd_ps(_mm256_broadcast_sd(&*pair));
                            fma_row(a, _mm256_permute_ps::<0x00>(d), gp.add((c & 3) * w));
                            fma_row(a, _mm256_permute_ps::<0x55>(d), gp.add((c >> 2) * w));
                        }
                    }
                }
            }
            total(acc.as_flattened())
        }
    }

    /// A 6×16 dense micro-kernel with as many FMAs as [`rows`].
    ///
    /// # Safety
    /// AVX2 and FMA are available; `b` holds `32·16` floats and `a` `32·6`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dense(b: &[f32], a: &[f32]) -> f32 {
        let mut acc = [[_mm256_setzero_ps(); 2]; 6];
        // 3·4 accumulators × 2 FMAs × G groups = 12 FMAs × 32 k per pass.
        let k = G * 2;
        // SAFETY: kk < 32 and i < 6 stay inside `b` and `a` per the contract.
        unsafe {
            for _ in 0..ITERS {
                for kk in 0..k {
                    let b0 = _mm256_loadu_ps(b.as_ptr().add(kk * 16));
                    let b1 = _mm256_loadu_ps(b.as_ptr().add(kk * 16 + 8));
                    for (i, row) in acc.iter_mut().enumerate() {
                        let x = _mm256_broadcast_ss(&*a.as_ptr().add(kk * 6 + i));
                        row[0] = _mm256_fmadd_ps(x, b0, row[0]);
                        row[1] = _mm256_fmadd_ps(x, b1, row[1]);
                    }
                }
            }
            total(acc.as_flattened())
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use avx2::G;
    use std::time::Instant;
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        println!("skipped: this CPU lacks AVX2 or FMA");
        return;
    }
    let panel: Vec<f32> = (0..G * 4 * 96).map(|i| (i % 7) as f32 * 1e-3).collect();
    let vals: Vec<f32> = (0..3 * 2 * G).map(|i| (i % 5) as f32 * 1e-3).collect();
    let pairs = [0b0100u8, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110];
    let codes: Vec<u8> = (0..3 * G).map(|i| pairs[(i * 7) % 6]).collect();
    let (b, a) = (vec![1e-3f32; 32 * 16], vec![1e-3f32; 32 * 6]);
    let timed = |f: &dyn Fn() -> f32| {
        let t = Instant::now();
        std::hint::black_box(f());
        t.elapsed().as_secs_f64()
    };
    // SAFETY (every call below): AVX2 and FMA were detected; the buffers have the sizes each
    // function asks for (the panel is sized for the widest tile, U = 12).
    let variants: [(&str, &dyn Fn() -> f32); 5] = [
        (
            "R3xU4, code per group, shuffled pair (before)",
            &|| unsafe { avx2::rows::<3, 4, false>(&panel, &vals, &codes) },
        ),
        ("R3xU4, 8 codes per load, broadcasts (now)", &|| unsafe {
            avx2::rows::<3, 4, true>(&panel, &vals, &codes)
        }),
        ("R2xU6, 8 codes per load, broadcasts", &|| unsafe {
            avx2::rows::<2, 6, true>(&panel, &vals, &codes)
        }),
        ("R1xU12, 8 codes per load, broadcasts", &|| unsafe {
            avx2::rows::<1, 12, true>(&panel, &vals, &codes)
        }),
        ("R1xU12, code per group, shuffled pair", &|| unsafe {
            avx2::rows::<1, 12, false>(&panel, &vals, &codes)
        }),
    ];
    let mut dense = f64::INFINITY;
    let mut best = [f64::INFINITY; 5];
    for _ in 0..150 {
        // SAFETY: as above.
        dense = dense.min(timed(&|| unsafe { avx2::dense(&b, &a) }));
        for (t, (_, f)) in best.iter_mut().zip(&variants) {
            *t = t.min(timed(*f));
        }
    }
    println!("row loop variant                                   FMA rate / dense 6x16");
    for (t, (name, _)) in best.iter().zip(&variants) {
        println!("{name:<50} {:.3}", dense / t);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("skipped: the row-loop micro-benchmark is written for x86-64 AVX2");
}
