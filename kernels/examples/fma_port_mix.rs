//! What can feed the FMAs on this core: register-only FMAs against FMAs mixed with in-register
//! selections (`vpermilps`, the instruction a "hold B in registers and pick per row" V:N:M
//! loop needs), with loads (the kernels' B operands) and with additions. Each variant is a
//! loop of independent instructions; its time per iteration is shown in cycles of the
//! register-only loop (8 FMAs on 8 accumulators, taken as 4 cycles: 2 FMAs per cycle), each
//! the fastest of 40 interleaved rounds.
//!
//! On the AMD EPYC Zen 3 (AVX2) of 2026-12-02: `vpermilps` shares the FMA pipes (8 FMAs + 8
//! permutes ≈ 8 cycles, as 16 FMAs would), so a permute per FMA halves the FMA rate, and a
//! load per FMA runs at ~1.85 loads per cycle; additions are free (their own pipes). See
//! kernels/BENCH.md, 2026-12-02.
//!
//! `cargo run --release -p kernels --example fma_port_mix` (x86-64 with AVX2 and FMA).

#[cfg(target_arch = "x86_64")]
mod mix {
    use std::arch::asm;

    /// Loop iterations per call.
    pub const ITERS: u64 = 1_000_000;

    /// A variant: a name and a loop of `ITERS` iterations.
    pub type Variant = (&'static str, fn(*const f32));

    /// Declares a variant whose loop body is the given instructions (ymm0–7: accumulators,
    /// ymm8/ymm9: operands, ymm10–13: selection results, ymm15: a permute control; `{p}`
    /// points at 4 KiB of floats).
    macro_rules! variant {
        ($name:ident, $($ins:literal),+ $(,)?) => {
            pub fn $name(p: *const f32) {
                // SAFETY: the caller checked AVX2 and FMA; the loads read inside the 4 KiB at
                // `p`; every register written is declared clobbered.
                unsafe {
                    asm!(
                        // Once, so that every variant names `p`.
                        "prefetcht0 [{p}]",
                        "2:",
                        $($ins,)+
                        "dec {n}",
                        "jnz 2b",
                        n = inout(reg) ITERS => _,
                        p = in(reg) p,
                        out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
                        out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
                        out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
                        out("ymm12") _, out("ymm13") _, out("ymm15") _,
                        options(nostack, readonly),
                    );
                }
            }
        };
    }

    variant!(
        fma8,
        "vfmadd231ps ymm0, ymm8, ymm9",
        "vfmadd231ps ymm1, ymm8, ymm9",
        "vfmadd231ps ymm2, ymm8, ymm9",
        "vfmadd231ps ymm3, ymm8, ymm9",
        "vfmadd231ps ymm4, ymm8, ymm9",
        "vfmadd231ps ymm5, ymm8, ymm9",
        "vfmadd231ps ymm6, ymm8, ymm9",
        "vfmadd231ps ymm7, ymm8, ymm9"
    );
    variant!(
        fma8_perm8,
        "vfmadd231ps ymm0, ymm8, ymm9",
        "vpermilps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm1, ymm8, ymm9",
        "vpermilps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm2, ymm8, ymm9",
        "vpermilps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm3, ymm8, ymm9",
        "vpermilps ymm13, ymm8, ymm15",
        "vfmadd231ps ymm4, ymm8, ymm9",
        "vpermilps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm5, ymm8, ymm9",
        "vpermilps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm6, ymm8, ymm9",
        "vpermilps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm7, ymm8, ymm9",
        "vpermilps ymm13, ymm8, ymm15"
    );
    variant!(
        fma8_perm4,
        "vfmadd231ps ymm0, ymm8, ymm9",
        "vpermilps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm1, ymm8, ymm9",
        "vfmadd231ps ymm2, ymm8, ymm9",
        "vpermilps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm3, ymm8, ymm9",
        "vfmadd231ps ymm4, ymm8, ymm9",
        "vpermilps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm5, ymm8, ymm9",
        "vfmadd231ps ymm6, ymm8, ymm9",
        "vpermilps ymm13, ymm8, ymm15",
        "vfmadd231ps ymm7, ymm8, ymm9"
    );
    variant!(
        perm8,
        "vpermilps ymm0, ymm8, ymm15",
        "vpermilps ymm1, ymm8, ymm15",
        "vpermilps ymm2, ymm8, ymm15",
        "vpermilps ymm3, ymm8, ymm15",
        "vpermilps ymm4, ymm8, ymm15",
        "vpermilps ymm5, ymm8, ymm15",
        "vpermilps ymm6, ymm8, ymm15",
        "vpermilps ymm7, ymm8, ymm15"
    );
    variant!(
        fma8_load,
        "vfmadd231ps ymm0, ymm8, [{p}]",
        "vfmadd231ps ymm1, ymm8, [{p}+64]",
        "vfmadd231ps ymm2, ymm8, [{p}+128]",
        "vfmadd231ps ymm3, ymm8, [{p}+192]",
        "vfmadd231ps ymm4, ymm8, [{p}+256]",
        "vfmadd231ps ymm5, ymm8, [{p}+320]",
        "vfmadd231ps ymm6, ymm8, [{p}+384]",
        "vfmadd231ps ymm7, ymm8, [{p}+448]"
    );
    variant!(
        fma8_load_bcast4,
        "vbroadcastss ymm10, [{p}+4]",
        "vfmadd231ps ymm0, ymm8, [{p}]",
        "vfmadd231ps ymm1, ymm8, [{p}+64]",
        "vbroadcastss ymm11, [{p}+8]",
        "vfmadd231ps ymm2, ymm8, [{p}+128]",
        "vfmadd231ps ymm3, ymm8, [{p}+192]",
        "vbroadcastss ymm12, [{p}+12]",
        "vfmadd231ps ymm4, ymm8, [{p}+256]",
        "vfmadd231ps ymm5, ymm8, [{p}+320]",
        "vbroadcastss ymm13, [{p}+16]",
        "vfmadd231ps ymm6, ymm8, [{p}+384]",
        "vfmadd231ps ymm7, ymm8, [{p}+448]"
    );
    variant!(
        fma8_load_perm4,
        "vpermilps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm0, ymm8, [{p}]",
        "vfmadd231ps ymm1, ymm8, [{p}+64]",
        "vpermilps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm2, ymm8, [{p}+128]",
        "vfmadd231ps ymm3, ymm8, [{p}+192]",
        "vpermilps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm4, ymm8, [{p}+256]",
        "vfmadd231ps ymm5, ymm8, [{p}+320]",
        "vpermilps ymm13, ymm8, ymm15",
        "vfmadd231ps ymm6, ymm8, [{p}+384]",
        "vfmadd231ps ymm7, ymm8, [{p}+448]"
    );
    variant!(
        fma8_add8,
        "vfmadd231ps ymm0, ymm8, ymm9",
        "vaddps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm1, ymm8, ymm9",
        "vaddps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm2, ymm8, ymm9",
        "vaddps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm3, ymm8, ymm9",
        "vaddps ymm13, ymm8, ymm15",
        "vfmadd231ps ymm4, ymm8, ymm9",
        "vaddps ymm10, ymm8, ymm15",
        "vfmadd231ps ymm5, ymm8, ymm9",
        "vaddps ymm11, ymm8, ymm15",
        "vfmadd231ps ymm6, ymm8, ymm9",
        "vaddps ymm12, ymm8, ymm15",
        "vfmadd231ps ymm7, ymm8, ymm9",
        "vaddps ymm13, ymm8, ymm15"
    );

    /// Every variant, the register-only FMA loop first.
    pub const VARIANTS: [Variant; 8] = [
        ("8 FMA (registers)", fma8),
        ("8 FMA + 8 vpermilps", fma8_perm8),
        ("8 FMA + 4 vpermilps", fma8_perm4),
        ("8 vpermilps", perm8),
        ("8 FMA, each with a load", fma8_load),
        ("8 FMA with loads + 4 broadcast loads", fma8_load_bcast4),
        ("8 FMA with loads + 4 vpermilps", fma8_load_perm4),
        ("8 FMA + 8 vaddps", fma8_add8),
    ];
}

#[cfg(target_arch = "x86_64")]
fn main() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        eprintln!("this example needs AVX2 and FMA");
        return;
    }
    let floats = vec![1.0f32; 1024];
    let mut best = [f64::INFINITY; mix::VARIANTS.len()];
    for _ in 0..40 {
        for (slot, (_, run)) in best.iter_mut().zip(mix::VARIANTS) {
            let t = std::time::Instant::now();
            run(floats.as_ptr());
            *slot = slot.min(t.elapsed().as_secs_f64());
        }
    }
    let cycle = best[0] / 4.0;
    println!("cpu: {}", kernels::cpu_fingerprint());
    println!(
        "clock if the register-only loop runs 2 FMAs a cycle: {:.2} GHz",
        mix::ITERS as f64 / cycle / 1e9
    );
    for ((name, _), t) in mix::VARIANTS.iter().zip(best) {
        println!("{name:40} {:5.2} cycles per iteration", t / cycle);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("this example is for x86-64");
}
