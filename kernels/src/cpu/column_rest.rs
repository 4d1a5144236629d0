//! A few columns past whole vectors (`n = k · LANES + r`, `1 ≤ r ≤ LANES / 4`): the tile
//! kernels compute the first `k · LANES` columns with every lane used, and the last `r` go to
//! the kernels for a few columns (matrix-vector for one, `few_columns` for more), through a
//! copy of those columns of B and C. Without it the last `r` columns took a whole vector of
//! their own: at 192×768×17 on Zen 4 the tile kernels spent as long on 17 columns as on 32.

use super::{batch_one, few_columns, Epilogue};
use crate::{Isa, SparseMatrix};

/// Computes C's last `r` columns (with the epilogue) where `n` ends in such a rest and a
/// kernel for `r` columns runs `a` on `isa`, and returns the columns left to the tile kernels
/// (`n − r`); else does nothing and returns `None`. Shapes are checked by the caller.
pub(super) fn run(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    threads: usize,
    epilogue: &Epilogue,
    isa: Isa,
) -> Option<usize> {
    let main = super::tile_columns(isa, n);
    if main == n {
        return None;
    }
    let (rest, rows) = (n - main, a.rows());
    let mut b_rest = Vec::with_capacity(a.cols() * rest);
    for row in b.chunks_exact(n) {
        b_rest.extend_from_slice(&row[main..]);
    }
    let mut c_rest = vec![0.0f32; rows * rest];
    let ran = if rest == 1 {
        batch_one::run(a, &b_rest, &mut c_rest, threads, epilogue, isa)
    } else {
        few_columns::run(a, &b_rest, rest, &mut c_rest, threads, epilogue, isa)
    };
    if !ran {
        return None;
    }
    for (row, part) in c.chunks_exact_mut(n).zip(c_rest.chunks_exact(rest)) {
        row[main..].copy_from_slice(part);
    }
    Some(main)
}
