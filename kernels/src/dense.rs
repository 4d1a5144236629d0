//! The dense baseline: SGEMM through `faer` (backend 0) or `gemm` with x86-v4 (backend 1). The
//! kernel-tune stage measures both per shape and keeps the faster, so that speedups are always
//! against a tuned dense kernel.
//!
//! Up to 4 columns past a multiple of 16 (and products of 2 to 4 columns) are computed as
//! matrix-vector products of their own (see `strided`), since both backends would pad them to
//! a whole tile.
//!
//! With more than one thread, N (or, when N does not split into equal bands of 16 columns, the
//! rows of A) is split into that many bands, each a sequential product, on the same pool as
//! the sparse kernels, which split their N tiles the same way (`cpu::split`): the dense baseline
//! and the sparse kernels pay the same for their threads (rayon's parked workers cost 80–100 µs
//! to wake inside a model pass, see `cpu::pool`).

use crate::cpu::{run_parts, split_rows, Epilogue, SharedC};
use crate::{dense_space, KernelError, ParamPoint};

/// `C (rows×n) = A (rows×cols) · B (cols×n)`, all row-major, `C` overwritten, with a point of
/// [`dense_space`].
pub fn dense_gemm(
    a: &[f32],
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
) -> Result<(), KernelError> {
    dense_gemm_with(a, rows, cols, b, n, c, p, Epilogue::default())
}

/// [`dense_gemm`], then `epilogue`: on each thread's band as soon as it is computed, or, after
/// a product split into column bands with a C of 16 Ki floats or more, over contiguous rows once
/// every band is done.
#[allow(clippy::too_many_arguments)] // dense_gemm's operands and the epilogue.
pub fn dense_gemm_with(
    a: &[f32],
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
    epilogue: Epilogue,
) -> Result<(), KernelError> {
    KernelError::check_len("A", rows * cols, a.len())?;
    KernelError::check_len("B", cols * n, b.len())?;
    KernelError::check_len("C", rows * n, c.len())?;
    if let Some(bias) = epilogue.bias {
        KernelError::check_len("bias", rows, bias.len())?;
    }
    let sig = crate::FormatSignature {
        kind: crate::PatternKind::Dense,
        n: 0,
        m: 0,
        v: 0,
        rows,
        cols,
        density_ppm: 0,
    };
    crate::space::check_point(sig, n, || dense_space(rows, cols, n), p)?;
    let (backend, threads) = (p.get("backend")?, p.count("threads")?);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if cols == 0 {
        c.fill(0.0);
        epilogue.apply(0, c, n);
        return Ok(());
    }
    if let Some(bands) = column_bands(threads, (rows, cols, n)) {
        // A large C's bias and activation go over contiguous rows once every band is done (a
        // second pass of the pool), not over each thread's columns of every row: there the
        // threads read and wrote alternate 512-byte stretches of each 1 KiB row at once, and
        // the bias and ReLU of a 256×256 C took 15 µs where its product took 27 (Intel Xeon,
        // AVX-512, 2 threads, family 6 model 167). By rows, the quickstart MLP's dense pass at
        // batch 256 took 9-10 % less time (kernels/BENCH.md, 2026-12-07); a small C keeps it
        // in its bands, where a second pass would cost more than it saves.
        let by_rows = !epilogue.is_none() && rows * n >= EPILOGUE_BY_ROWS_FROM;
        let c0 = SharedC(c.as_mut_ptr());
        run_parts(bands.len(), threads, &|i| {
            let cols_of = bands[i].clone();
            // SAFETY: B holds cols × n and C rows × n floats (checked above), the band lies in
            // 0..n, and only this part writes C's columns of it.
            unsafe {
                strided(
                    backend,
                    a,
                    (rows, cols, cols_of.len()),
                    (b.as_ptr().add(cols_of.start), n),
                    (c0.get().add(cols_of.start), n),
                );
                if !by_rows {
                    epilogue.apply_columns(c0.get(), rows, n, cols_of);
                }
            }
        });
        if by_rows {
            split_rows(
                &row_bands(rows, threads),
                n,
                c,
                threads,
                &|_, _| {},
                &epilogue,
            );
        }
        return Ok(());
    }
    let parts = row_bands(rows, threads);
    let run = |range: std::ops::Range<usize>, c: &mut [f32]| {
        let a = &a[range.start * cols..range.end * cols];
        // SAFETY: `b` holds cols × n floats and `c` the range's rows × n (checked above).
        unsafe {
            strided(
                backend,
                a,
                (range.len(), cols, n),
                (b.as_ptr(), n),
                (c.as_mut_ptr(), n),
            );
        }
    };
    split_rows(&parts, n, c, threads, &run, &epilogue);
    Ok(())
}

/// The size of C (floats) from which a column-band product applies its epilogue by rows.
const EPILOGUE_BY_ROWS_FROM: usize = 16 * 1024;

/// `threads` ranges of consecutive rows covering `0..rows` (fewer when rows are few).
fn row_bands(rows: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let band = rows.div_ceil(threads.max(1)).max(1);
    (0..rows)
        .step_by(band)
        .map(|r| r..(r + band).min(rows))
        .collect()
}

/// Bands of N for the threads, as the sparse kernels split their tiles (see `cpu::split`):
/// `threads` bands of equal width, a multiple of 16 columns, when N allows and A (`rows·cols`)
/// is no larger than B (`cols·n`); else `None` (rows are split).
fn column_bands(
    threads: usize,
    (rows, cols, n): (usize, usize, usize),
) -> Option<Vec<std::ops::Range<usize>>> {
    const STEP: usize = 16;
    if threads < 2 || !n.is_multiple_of(STEP * threads) || rows * cols > cols * n {
        return None;
    }
    let per = n / threads;
    Some((0..threads).map(|i| i * per..(i + 1) * per).collect())
}

/// One sequential product on `backend`: `C (rows×n) = A (rows×cols) · B (cols×n)`, A row-major
/// and contiguous, B and C row-major with row strides `ldb` and `ldc`.
///
/// # Safety
/// `b` is valid for reads of `cols` rows of `ldb` floats (the first `n` read), `c` for writes of
/// `rows` rows of `ldc` floats (the first `n` written), C aliases neither input, and no other
/// thread accesses those columns of C meanwhile.
unsafe fn strided(
    backend: i64,
    a: &[f32],
    (rows, cols, n): (usize, usize, usize),
    (b, ldb): (*const f32, usize),
    (c, ldc): (*mut f32, usize),
) {
    // Both backends pad N to whole micro-kernel tiles: on Zen 4 (AVX-512) 192×768×17 took as
    // long as ×32, twice ×16, and ×2 as long as ×16, six times ×1. The last few columns past a
    // multiple of 16 run one by one as matrix-vector products (a ViT's 17 tokens: 1.6×
    // faster; 2 columns: 3×), so that the baseline pays only for the columns it has.
    let rest = n % 16;
    if n > 1 && (1..=SPLIT_REST).contains(&rest) {
        let main = n - rest;
        if main > 0 {
            // SAFETY: both parts lie inside the contract's columns, C's parts are disjoint.
            unsafe { strided_once(backend, a, (rows, cols, main), (b, ldb), (c, ldc)) };
        }
        let (mut x, mut y) = (vec![0.0f32; cols], vec![0.0f32; rows]);
        for j in main..n {
            for (k, v) in x.iter_mut().enumerate() {
                // SAFETY: row k of B holds column j (contract).
                *v = unsafe { *b.add(k * ldb + j) };
            }
            // SAFETY: x and y are contiguous columns of cols and rows floats.
            unsafe {
                strided_once(
                    backend,
                    a,
                    (rows, cols, 1),
                    (x.as_ptr(), 1),
                    (y.as_mut_ptr(), 1),
                )
            };
            for (r, v) in y.iter().enumerate() {
                // SAFETY: row r of C holds column j (contract).
                unsafe { *c.add(r * ldc + j) = *v };
            }
        }
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { strided_once(backend, a, (rows, cols, n), (b, ldb), (c, ldc)) }
}

/// The most columns past a multiple of 16 that [`strided`] runs as a product of their own.
const SPLIT_REST: usize = 4;

/// [`strided`] as one call to the backend.
///
/// # Safety
/// As [`strided`].
unsafe fn strided_once(
    backend: i64,
    a: &[f32],
    (rows, cols, n): (usize, usize, usize),
    (b, ldb): (*const f32, usize),
    (c, ldc): (*mut f32, usize),
) {
    match backend {
        0 => {
            let lhs = faer::MatRef::from_row_major_slice(a, rows, cols);
            // SAFETY: the contract: B's and C's rows of `n` floats at strides ldb and ldc.
            let (rhs, dst) = unsafe {
                (
                    faer::MatRef::from_raw_parts(b, cols, n, ldb as isize, 1),
                    faer::MatMut::from_raw_parts_mut(c, rows, n, ldc as isize, 1),
                )
            };
            faer::linalg::matmul::matmul(
                dst,
                faer::Accum::Replace,
                lhs,
                rhs,
                1.0f32,
                faer::Par::Seq,
            );
        }
        _ => {
            // SAFETY: the contract (`a` is rows×cols, row-major); `read_dst = false` overwrites
            // C.
            unsafe {
                gemm::gemm(
                    rows,
                    n,
                    cols,
                    c,
                    1,
                    ldc as isize,
                    false,
                    a.as_ptr(),
                    1,
                    cols as isize,
                    b,
                    1,
                    ldb as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        }
    }
}
