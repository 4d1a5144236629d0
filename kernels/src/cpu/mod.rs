//! CPU SpMM: `C = A · B` for every sparse format, multi-threaded, with the ISA chosen once at
//! run time. [`spmm`] validates the parameter point, lays B out in N tiles, splits the rows over
//! threads and runs the selected micro-kernel per (row range, tile). The host operations of a
//! model's pass live beside them (`host_isa`, `activation`, `attention`, `layer_norm`), on the
//! same SIMD layer.

mod activation;
mod attention;
mod batch_one;
mod column_rest;
mod dispatch;
mod epilogue;
mod few_columns;
mod host_isa;
mod kernels;
mod layer_norm;
mod line_aligned;
pub(crate) mod panel_layout;
mod pool;
mod simd;
mod tiles;
mod transpose;

pub(crate) use pool::run_parts;
pub(crate) use tiles::{fitted_tile, rest_in_place, tile_columns};
use tiles::{rest_kernel, Panels};

pub use activation::{exp_f32, gelu_f32, Activation};
pub use attention::{attention_head, attention_head_at, HeadShape};
pub use epilogue::Epilogue;
pub use host_isa::{run_host_parts, with_isa, HostOp, HostParts};
pub use layer_norm::{layer_norm_columns, layer_norm_columns_at};
pub use line_aligned::LineAligned;

use std::ops::Range;

use crate::reference::check_shapes;
use crate::{
    cpu_space, dense_gemm_with, isa, FormatSignature, Isa, KernelError, ParamPoint, SparseMatrix,
};
use kernels::{CTile, Step};

/// The signature fields the CPU space depends on, without the O(nnz) density count.
fn space_signature(a: &SparseMatrix) -> FormatSignature {
    let (n, m, v) = match a {
        SparseMatrix::Nm(x) => (x.n(), x.m(), 0),
        SparseMatrix::Vnm(x) => (2, x.m(), x.v()),
        SparseMatrix::Vector(x) => (0, 0, x.v()),
        _ => (0, 0, 0),
    };
    FormatSignature {
        kind: match a {
            SparseMatrix::Dense(_) => crate::PatternKind::Dense,
            SparseMatrix::Csr(_) => crate::PatternKind::Unstructured,
            SparseMatrix::Nm(_) => crate::PatternKind::Nm,
            SparseMatrix::Vnm(_) => crate::PatternKind::Vnm,
            SparseMatrix::Vector(_) => crate::PatternKind::Vector,
        },
        n,
        m,
        v,
        rows: a.rows(),
        cols: a.cols(),
        density_ppm: 0,
    }
}

/// The K chunks of a product: `k_chunk` columns each (0 = all of K), rounded up to whole groups
/// of M for N:M and V:N:M. Always at least one chunk, so that C is written even when K = 0.
fn k_chunks(a: &SparseMatrix, k_chunk: usize) -> Vec<Range<usize>> {
    let cols = a.cols();
    let m = match a {
        SparseMatrix::Nm(x) => x.m(),
        SparseMatrix::Vnm(x) => x.m(),
        _ => 1,
    };
    let len = if k_chunk == 0 {
        cols.max(1)
    } else {
        k_chunk.div_ceil(m) * m
    };
    let mut out: Vec<Range<usize>> = (0..cols)
        .step_by(len)
        .map(|k| k..(k + len).min(cols))
        .collect();
    if out.is_empty() {
        out.push(0..0);
    }
    out
}

/// Points each row's (CSR) or V-block's (vector-wise) cursor at its first entry.
fn reset_cursors(a: &SparseMatrix, range: &Range<usize>, cursors: &mut Vec<u32>) {
    cursors.clear();
    match a {
        SparseMatrix::Csr(x) => cursors.extend(range.clone().map(|r| x.row_ptr()[r])),
        SparseMatrix::Vector(x) => {
            cursors.extend((range.start / x.v()..range.end / x.v()).map(|b| x.block_ptr()[b]))
        }
        _ => {}
    }
}

/// Splits `0..rows` into at most `parts` ranges aligned to `unit` rows, balancing `work(range)`.
fn partition(
    rows: usize,
    unit: usize,
    parts: usize,
    work: impl Fn(usize) -> usize,
) -> Vec<Range<usize>> {
    let units = rows / unit;
    // One part needs no balancing (and a small product's call would spend ~5 % walking it).
    if parts <= 1 {
        return if units > 0 {
            std::iter::once(0..units * unit).collect()
        } else {
            vec![]
        };
    }
    let total = work(units);
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 1..=parts {
        let target = total * i / parts;
        let mut end = start;
        while end < units && (work(end) < target || i == parts) {
            end += 1;
        }
        if end > start {
            out.push(start * unit..end * unit);
        }
        start = end;
    }
    out
}

/// `C (rows×n) = A (rows×cols) · B (cols×n)`, row-major, `C` overwritten, with the kernel
/// parameters `p` (a point of [`cpu_space`]; for dense A, of [`crate::dense_space`]).
///
/// With `pack_b = 0` the kernels read B where it lies: give them a B that starts on a 64-byte
/// line (and `n` a multiple of 16), as [`LineAligned`] does for every large `Vec`, or each
/// vector load of B touches two lines (N:M 2:4 at 10×256×256 ran 1.8× as long).
pub fn spmm(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
) -> Result<(), KernelError> {
    spmm_with(a, b, n, c, p, Epilogue::default())
}

/// [`spmm`] with `epilogue`: the sparse kernels apply it as they store C; the dense baseline
/// as [`crate::dense_gemm_with`] does.
pub fn spmm_with(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
    epilogue: Epilogue,
) -> Result<(), KernelError> {
    check_shapes(a, b, n, c)?;
    if let Some(bias) = epilogue.bias {
        KernelError::check_len("bias", a.rows(), bias.len())?;
    }
    if let SparseMatrix::Dense(d) = a {
        return dense_gemm_with(d.values(), d.rows(), d.cols(), b, n, c, p, epilogue);
    }
    let sig = space_signature(a);
    crate::space::check_point(sig, n, || cpu_space(&sig, n), p)?;
    let (threads, mut w, pack) = (
        p.count("threads")?,
        p.count("tile_n")?,
        p.get("pack_b")? == 1,
    );
    let (r, kernel_isa) = (p.count("rows")?, isa());
    // Batch 1: the matrix-vector kernels (see `batch_one`); the tile parameters do not apply to
    // them, the thread count does.
    if n == 1 && batch_one::run(a, b, c, threads, &epilogue, kernel_isa) {
        return Ok(());
    }
    // A few columns: the same kernels over several columns at once (see `few_columns`).
    if few_columns::run(a, b, n, c, threads, &epilogue, kernel_isa) {
        return Ok(());
    }
    // A few columns past whole vectors go to those kernels too (see `column_rest`); the tile
    // kernels compute the first `width` columns.
    let width = column_rest::run(a, b, n, c, threads, &epilogue, kernel_isa).unwrap_or(n);
    w = fitted_tile(kernel_isa, r, width, w);
    // Fewer columns than a vector's lanes (batch 1 and other GEMV-like products): the space
    // offers one tile of one vector, which would waste most lanes; the scalar kernels run
    // instead, with a tile of the next instantiated width ≥ n and the largest instantiated row
    // block ≤ `rows`.
    let (r, kernel_isa) = if n < kernel_isa.lanes() {
        w = (n..=8)
            .find(|&u| dispatch::select(Isa::Scalar, 1, u).is_some())
            .unwrap_or(8);
        let r = (1..=r)
            .rev()
            .find(|&q| dispatch::select(Isa::Scalar, q, w).is_some())
            .unwrap_or(1);
        (r, Isa::Scalar)
    } else {
        (r, kernel_isa)
    };
    // N:M 2:M with `rows = 2` runs as V:N:M with V = 2 through the row pairs (see
    // `NmMatrix::as_row_pairs`), in V:N:M's bands (`vnm_band`).
    let pairs = match a {
        SparseMatrix::Nm(x) if r == 2 && kernel_isa != Isa::Scalar && kernels::pairs_enabled() => {
            x.as_row_pairs()
        }
        _ => None,
    };
    // V:N:M, and N:M's row pairs (V:N:M with V = 2), run in bands of whole V-blocks
    // (`vnm_band`): a band walks every tile of N before the next, so that its values and codes
    // stay in L2 across the tiles where all of A would stream from L3 once per tile. The other
    // formats keep the whole range per tile, so that a tile of B stays in L2 while every row
    // streams past it.
    let a = pairs.unwrap_or(a);
    let tiles = width.div_ceil(w);
    // A last tile narrower than `w` (the columns do not divide into tiles) is read in place by
    // the kernel of its own width, where its columns are whole vectors and that width is
    // instantiated, rather than copied into a padded panel of `w` on every call: at 10×256×256
    // with `tile_n = 96` (a last tile of 64) the copy doubled the product's time, and the cost
    // model had ranked that point first (Intel Xeon, AVX-512; kernels/BENCH.md, 2026-12-07).
    let rest = width % w;
    let rest_kernel = if pack {
        None
    } else {
        rest_kernel(kernel_isa, r, rest)
    };
    let packed_from = match (pack, rest_kernel) {
        (true, _) => 0,
        (false, Some(_)) => tiles,
        (false, None) => width / w,
    };
    let how = split(threads, tiles, a.bytes(), 4 * a.cols() * n);
    let band = match a {
        SparseMatrix::Vnm(x) => {
            let b_bytes = 4 * a.cols() * width;
            // A thread of a tile split walks its share of the tiles and of B.
            let each = match &how {
                Split::Tiles(parts) => (b_bytes / parts.len(), parts[0].len()),
                Split::Rows => (b_bytes, tiles),
            };
            vnm_band(
                x.v(),
                a.rows(),
                a.bytes(),
                each,
                crate::cost::l2_bytes() as usize,
            )
        }
        _ => a.rows(),
    }
    .max(1);
    let k_chunk = p.count("k_chunk")?;
    // V:N:M chunks inside its kernel, per V-block (see `kernels::vnm`).
    let (chunks, scratch_len) = match a {
        SparseMatrix::Vnm(x) => {
            let per = if k_chunk == 0 {
                x.groups()
            } else {
                k_chunk.div_ceil(x.m())
            };
            // No panel where nothing is gathered: it is zeroed on every call (32 KiB at
            // 10×256×256 with k_chunk = 64 and 8-vector tiles, 1.5 MiB at K = 3072 and 2:4).
            let scratch = if kernels::gathers_nothing(x, r) {
                0
            } else {
                4 * w * per.min(x.groups()) + 16
            };
            (std::iter::once(0..a.cols()).collect(), scratch)
        }
        _ => (k_chunks(a, k_chunk), 0),
    };
    let (rows, cols, lanes) = (a.rows(), a.cols(), kernel_isa.lanes());
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let kernel =
        dispatch::select(kernel_isa, r, w / lanes).ok_or_else(|| KernelError::ParamConstraint {
            name: "tile_n".to_string(),
            value: w as i64,
            reason: format!("no kernel instantiated for rows = {r}"),
        })?;
    let (unit, prefix): (usize, Box<dyn Fn(usize) -> usize + Sync>) = match a {
        SparseMatrix::Csr(x) => (1, Box::new(|u| x.row_ptr()[u] as usize)),
        SparseMatrix::Vector(x) => (x.v(), Box::new(|u| x.block_ptr()[u] as usize)),
        SparseMatrix::Vnm(x) => (x.v(), Box::new(|u| u)),
        _ => (1, Box::new(|u| u)),
    };
    let pack_fn = dispatch::select_pack(kernel_isa);
    // The epilogue's bias and activation are applied by the kernels as they store C (`CTile`).
    let bias = epilogue.bias;
    // `rows` × `tiles` of C, from `c0` (C's row `rows.start`, column 0), with `panels`.
    let run = |range: Range<usize>, tiles: Range<usize>, panels: &Panels, c0: *mut f32| {
        let mut cursors = Vec::new();
        let mut scratch = vec![0.0f32; scratch_len];
        // Start the gathered panel on a 64-byte line.
        let at = scratch.as_ptr().align_offset(64).min(scratch.len().min(16));
        let scratch = &mut scratch[at..];
        let first_row = range.start;
        for lo in range.clone().step_by(band) {
            let band_rows = lo..(lo + band).min(range.end);
            let cband = c0.wrapping_add((lo - first_row) * n);
            for t in tiles.clone() {
                reset_cursors(a, &band_rows, &mut cursors);
                for (i, k) in chunks.iter().enumerate() {
                    let ct = CTile {
                        ptr: cband.wrapping_add(t * w),
                        stride: n,
                        width: w.min(width - t * w),
                        bias: bias.map_or(std::ptr::null(), |b| b.as_ptr().wrapping_add(lo)),
                        activation: epilogue.activation,
                    };
                    let ct = if i + 1 == chunks.len() {
                        ct
                    } else {
                        ct.plain()
                    };
                    let kernel = match rest_kernel {
                        Some(k) if (t + 1) * w > width => k,
                        _ => kernel,
                    };
                    let mut step = Step {
                        k: k.clone(),
                        first: i == 0,
                        cursors: &mut cursors,
                        k_chunk,
                        scratch: &mut *scratch,
                    };
                    // SAFETY: `kernel` was selected for this process's ISA; the point was checked
                    // against the space (rows divides V for V:N:M and vector-wise, whose ranges
                    // and bands are aligned to V); every tile of `panels` has `w` readable floats
                    // per row for `cols` rows, but a last tile read in place, which has its
                    // `rest` and runs `rest_kernel`, of that width; `cband` holds the rows of
                    // `band_rows`, n floats each, and the tile's `width` columns from t·w, which
                    // only this call writes (the callers hand each thread its own rows or
                    // tiles); chunks are aligned to M and visited in order from the first, with
                    // cursors reset at the start of each tile.
                    unsafe { kernel(a, band_rows.clone(), &mut step, panels.tile(t), ct) };
                }
            }
        }
    };
    match how {
        Split::Tiles(parts) => {
            let c0 = SharedC(c.as_mut_ptr());
            pool::run_parts(parts.len(), threads, &|i| {
                let panels = Panels::new(
                    b,
                    cols,
                    (n, width),
                    w,
                    packed_from,
                    parts[i].clone(),
                    pack_fn,
                );
                run(0..rows, parts[i].clone(), &panels, c0.get());
            });
        }
        Split::Rows => {
            let panels = Panels::new(b, cols, (n, width), w, packed_from, 0..tiles, pack_fn);
            let parts = partition(rows, unit, threads, prefix);
            let run_rows = |range: Range<usize>, cpart: &mut [f32]| {
                run(range, 0..tiles, &panels, cpart.as_mut_ptr())
            };
            split_rows(&parts, n, c, threads, &run_rows, &Epilogue::default());
        }
    }
    Ok(())
}

/// Rows per band of a V:N:M matrix (V-blocks of `v` rows; N:M's row pairs are its V = 2), of
/// `rows` rows and `a_bytes` bytes, times a B of `b_bytes` in `tiles` tiles of N (a thread's
/// share, in a tile split). In one band, every row walks each tile of B in turn: A streams from
/// L3 once per tile while a tile of B stays in L2. In bands of a quarter of L2 (`l2` bytes;
/// whole V-blocks, at least one) a band's values and codes stay in L2 across the tiles, and B
/// streams once per band instead. The bands are taken where A exceeds the quarter, there are
/// two tiles or more, and B is smaller than `tiles` quarters (A's stream per tile,
/// `tiles · a_bytes`, above B's per band, `a_bytes / (l2 / 4) · b_bytes`); otherwise one band of
/// every row. Measured (`spmm-bench --full`, kernels/BENCH.md):
/// - N:M's pairs (Intel Xeon EMR, AVX-512, 2 MiB L2, 2026-12-06): at 3072×768×512, 2:4 0.90–0.91×
///   → 1.20–1.21× of dense and 2:8 1.49–1.52× → 1.89–1.90× on one thread; at 768×3072×128 (one
///   or two tiles of a 1.5 MB B) a fixed band of 256 rows lost 5–8 %, hence the rule.
/// - V:N:M ran one V-block per band until 2026-12-06: at 768×3072×512 16:2:8 (Intel EMR) 1.21×
///   against 1.79× with every row per tile; on AMD Zen 4 (1 MiB L2) this rule against one block
///   per band, V = 16, 2:4 and 2:8 at seven shapes, one and two threads: geometric mean 1.07×,
///   the quickstart's whole-A-in-L2 shapes (256×256×256, 256×2048×64) 1.04–1.05×.
///
/// Banding the row loop or CSR changed nothing.
fn vnm_band(
    v: usize,
    rows: usize,
    a_bytes: usize,
    (b_bytes, tiles): (usize, usize),
    l2: usize,
) -> usize {
    let budget = l2 / 4;
    if a_bytes <= budget || rows == 0 || tiles < 2 || b_bytes >= tiles.saturating_mul(budget) {
        return rows;
    }
    let v = v.max(1);
    let per_row = a_bytes.div_ceil(rows).max(1);
    (budget / per_row / v * v).max(v)
}

/// The kernel switches (environment variables that change which code runs, for measuring one
/// kernel against another at the same points) that this process runs with, as `NAME=value`:
/// only those that change something, so that a switch set to its default (`COTUNE_VNM_PAIRS=1`)
/// keys nothing apart from the default kernels.
pub(crate) fn switches_in_effect() -> Vec<String> {
    let mut out = Vec::new();
    // The direct reads are the row pairs' own: with the pairs off they change nothing.
    if !kernels::direct_enabled() && kernels::pairs_enabled() {
        out.push("COTUNE_VNM_DIRECT=0".to_string());
    }
    if !kernels::pairs_enabled() {
        out.push("COTUNE_VNM_PAIRS=0".to_string());
    }
    if few_columns::max_columns() != few_columns::MAX_COLUMNS {
        out.push(format!(
            "COTUNE_PANEL_COLUMNS={}",
            few_columns::max_columns()
        ));
    }
    out
}

/// How a product's work goes to its threads.
enum Split {
    /// Consecutive row ranges (balanced by stored values), every tile of N each.
    Rows,
    /// Consecutive ranges of N tiles, all rows each.
    Tiles(Vec<Range<usize>>),
}

/// The tiles split when they divide evenly among the threads and A takes no more bytes than B
/// (`a_bytes ≤ b_bytes`), so that each thread writes the same columns of every layer's output in
/// a pass and the next layer's thread finds them in its own core's cache. Split by rows, half
/// of each layer's input sat in the other core's cache: on the quickstart's MLP at batch 256
/// (Intel Xeon, AVX-512, 2 threads) each layer ran 25-140 % slower inside the pass than alone.
/// A tile split makes every thread read all of A (a row split: all of B), so it is kept to
/// products whose A is the smaller: dense 3072×768×512 took 9.2 ms split by tiles and 6.8 ms by
/// rows.
fn split(threads: usize, tiles: usize, a_bytes: usize, b_bytes: usize) -> Split {
    if threads < 2 || tiles < threads || !tiles.is_multiple_of(threads) || a_bytes > b_bytes {
        return Split::Rows;
    }
    let per = tiles / threads;
    Split::Tiles((0..threads).map(|i| i * per..(i + 1) * per).collect())
}

/// C's pointer, shared by the threads of a tile split, each writing only its own columns.
#[derive(Clone, Copy)]
pub(crate) struct SharedC(pub(crate) *mut f32);

// SAFETY: the threads of a tile split write disjoint columns of C through it (see `Split`), and
// C outlives the parallel section (`run_parts` returns when every part is done).
unsafe impl Sync for SharedC {}
unsafe impl Send for SharedC {}

impl SharedC {
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

/// Runs `run(range, rows of c)` then `epilogue` for each of `parts` (consecutive row ranges
/// from row 0, `row` floats of `c` per row) on up to `threads` threads (`pool::run_parts`).
pub(crate) fn split_rows(
    parts: &[Range<usize>],
    row: usize,
    c: &mut [f32],
    threads: usize,
    run: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
    epilogue: &Epilogue,
) {
    let mut slots = Vec::with_capacity(parts.len());
    let mut rest = c;
    for range in parts {
        let (mine, tail) = rest.split_at_mut(range.len() * row);
        rest = tail;
        slots.push(std::sync::Mutex::new(Some(mine)));
    }
    pool::run_parts(parts.len(), threads, &|i| {
        let mine = slots[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("each part runs once");
        run(parts[i].clone(), mine);
        epilogue.apply(parts[i].start, mine, row);
    });
}

#[cfg(test)]
mod tests {
    use super::vnm_band;

    #[test]
    fn row_blocks_run_in_bands_that_fit_a_quarter_of_l2() {
        let l2 = 2 << 20;
        // 3072 rows of N:M 2:4 in pairs (V = 2) at K = 768 (~2 KB a row of values, metadata and
        // column locations) times 768 × 512 floats in 4 tiles: the even number of rows that fit
        // a quarter of L2.
        let per_row = 2000;
        let b = (768 * 512 * 4, 4);
        let band = vnm_band(2, 3072, 3072 * per_row, b, l2);
        assert_eq!(band, 262);
        assert!(band.is_multiple_of(2) && band * per_row <= l2 / 4);
        assert!((band + 2) * per_row > l2 / 4);
        // V:N:M: whole V-blocks, at least one.
        assert_eq!(vnm_band(16, 3072, 3072 * per_row, b, l2), 256);
        assert_eq!(vnm_band(128, 3072, 3072 * per_row, b, l2), 256);
        assert_eq!(vnm_band(64, 3072, 3072 * 5000, b, l2), 64);
        // A within a quarter of L2: one band of every row.
        assert_eq!(vnm_band(2, 256, 100_000, b, l2), 256);
        assert_eq!(vnm_band(16, 1024, l2 / 4, b, l2), 1024);
        // One tile: a band walks it as the whole range would.
        assert_eq!(
            vnm_band(2, 3072, 3072 * per_row, (768 * 128 * 4, 1), l2),
            3072
        );
        // B's stream once per band would outweigh A's once per tile: 768 rows of 2:4 at
        // K = 3072 (~8 KB a row) times two tiles of a 1.5 MB B; with eight tiles, bands.
        let a = 768 * 8100;
        assert_eq!(vnm_band(2, 768, a, (3072 * 128 * 4, 2), l2), 768);
        assert_eq!(vnm_band(16, 768, a, (3072 * 128 * 4, 2), l2), 768);
        assert_eq!(vnm_band(2, 768, a, (3072 * 128 * 4, 8), l2), 64);
        assert_eq!(vnm_band(16, 768, a, (3072 * 128 * 4, 8), l2), 64);
        // Rows larger than the budget: one block at a time; no rows: nothing to band.
        assert_eq!(vnm_band(2, 8, 8 * l2, b, l2), 2);
        assert_eq!(vnm_band(32, 64, 64 * l2, b, l2), 32);
        assert_eq!(vnm_band(16, 0, 0, b, l2), 0);
    }
}
