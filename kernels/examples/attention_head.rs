//! One transformer layer's attention heads (`kernels::attention_head`): the ViT of
//! `experiments/vit-digits.toml` (d_model 64, 4 heads of 16, 17 tokens) over a batch of samples,
//! hot, the fastest of as many passes as fit in the given seconds. For finding where the
//! attention's time goes: build it with parts of the head left out and compare (kernels/BENCH.md,
//! forty-third session: packing q, k, v ~25 %, softmax ~28 %, scores ~18 %, output product and
//! its stores ~29 % of a layer at AVX-512). `COTUNE_ISA=avx2` runs it at AVX2.
//!
//! `cargo run --release -p kernels --example attention_head [-- SECONDS SAMPLES]` (3 s, 128)

use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOC: kernels::LineAligned = kernels::LineAligned;

fn main() {
    let samples: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(128);
    let (d, tokens, dh) = (64usize, 17usize, 16usize);
    let n = tokens * samples;
    let q = kernels::random_values(d * n, 1);
    let k = kernels::random_values(d * n, 2);
    let v = kernels::random_values(d * n, 3);
    let mut out = vec![0.0f32; d * n];
    let shape = kernels::HeadShape {
        tokens,
        samples,
        head_dim: dh,
    };
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(3.0);
    let t0 = Instant::now();
    let mut best = f64::MAX;
    while t0.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        for h in 0..d / dh {
            let o = &mut out[h * dh * n..][..dh * n];
            kernels::attention_head((&q, &k, &v), shape, h * dh..(h + 1) * dh, o).unwrap();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6);
    }
    println!("one layer, {samples} samples: best {best:.1} us");
}
