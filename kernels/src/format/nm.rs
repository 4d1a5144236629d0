//! The N:M format: each row stores exactly N slots per group of M consecutive columns.

use super::panels::{PanelCache, RowPanels};
use super::{meta_word_shift, vnm_k_sp, vnm_meta_words, SparseMatrix, VnmMatrix};
use crate::{KernelError, Mask};

/// Whether an N:M matrix of this shape runs in row pairs ([`NmMatrix::as_row_pairs`]).
pub(crate) fn pairs_fit(rows: usize, cols: usize, n: usize, m: usize) -> bool {
    n == 2
        && (4..=16).contains(&m)
        && rows.is_multiple_of(2)
        && cols.is_multiple_of(m)
        && cols < 65536
}

/// An N:M matrix: per row and per group of `m` columns (`groups = ⌈cols/m⌉`), `n` slots, each a
/// value and its position in the group.
///
/// Layout: `values[(r * groups + g) * n + s]`, `positions[...]` alike (u8, position in the group).
///
/// Invariants (checked by [`NmMatrix::new`]): `1 ≤ n < m ≤ 256`; within a group the positions
/// strictly increase and are `< m`. A group keeping fewer than `n` weights fills its spare slots
/// with `+0.0` at unkept positions (stored zeros: the kernels multiply them, so NaN/Inf in B at
/// those columns propagate as they would through a dense zero). In the last group, positions at
/// or beyond `cols` are *phantom*: their value must be `+0.0` and nobody reads B there.
#[derive(Debug, Clone, PartialEq)]
pub struct NmMatrix {
    rows: usize,
    cols: usize,
    n: usize,
    m: usize,
    values: Vec<f32>,
    positions: Vec<u8>,
    /// Derived for the batch-1 kernels, on first use.
    panels: PanelCache<RowPanels>,
    /// Derived for the tile kernel's row pairs, on first use (see [`NmMatrix::as_row_pairs`]).
    pairs: PanelCache<Option<Box<SparseMatrix>>>,
}

impl NmMatrix {
    /// Checked constructor.
    pub fn new(
        rows: usize,
        cols: usize,
        n: usize,
        m: usize,
        values: Vec<f32>,
        positions: Vec<u8>,
    ) -> Result<Self, KernelError> {
        let bad = |reason: String| Err(KernelError::format("N:M", reason));
        if n == 0 || n >= m || m > 256 {
            return bad(format!("needs 1 <= N < M <= 256, got {n}:{m}"));
        }
        let groups = cols.div_ceil(m);
        KernelError::check_len("N:M values", rows * groups * n, values.len())?;
        KernelError::check_len("N:M positions", rows * groups * n, positions.len())?;
        for r in 0..rows {
            for g in 0..groups {
                let at = (r * groups + g) * n;
                let pos = &positions[at..at + n];
                if pos.windows(2).any(|w| w[0] >= w[1]) || pos.iter().any(|&p| p as usize >= m) {
                    return bad(format!(
                        "row {r} group {g}: positions {pos:?} must strictly increase below {m}"
                    ));
                }
                for (s, &p) in pos.iter().enumerate() {
                    if g * m + p as usize >= cols && values[at + s].to_bits() != 0 {
                        return bad(format!(
                            "row {r} group {g}: phantom slot {s} must hold +0.0"
                        ));
                    }
                }
            }
        }
        Ok(NmMatrix {
            rows,
            cols,
            n,
            m,
            values,
            positions,
            panels: PanelCache::default(),
            pairs: PanelCache::default(),
        })
    }

    /// Packs `values ⊙ mask`; errors if a group keeps more than `n`.
    pub fn from_masked(
        values: &[f32],
        mask: &Mask,
        n: usize,
        m: usize,
    ) -> Result<Self, KernelError> {
        let (rows, cols) = (mask.rows(), mask.cols());
        KernelError::check_len("values", rows * cols, values.len())?;
        if n == 0 || n >= m || m > 256 {
            return Err(KernelError::format(
                "N:M",
                format!("needs 1 <= N < M <= 256, got {n}:{m}"),
            ));
        }
        let groups = cols.div_ceil(m);
        let mut vals = Vec::with_capacity(rows * groups * n);
        let mut poss = Vec::with_capacity(rows * groups * n);
        for r in 0..rows {
            for g in 0..groups {
                let (g0, len) = (g * m, m.min(cols - g * m));
                let kept: Vec<usize> = (0..len).filter(|&i| mask.keep(r, g0 + i)).collect();
                if kept.len() > n {
                    return Err(KernelError::format(
                        "N:M",
                        format!("row {r} group {g} keeps {} > N = {n}", kept.len()),
                    ));
                }
                let mut slots: Vec<(usize, f32)> = kept
                    .iter()
                    .map(|&i| (i, values[r * cols + g0 + i]))
                    .collect();
                // Spare slots: unkept positions, smallest first (phantom ones only if needed).
                let spare = (0..m).filter(|i| !kept.contains(i));
                slots.extend(spare.take(n - kept.len()).map(|i| (i, 0.0)));
                slots.sort_unstable_by_key(|s| s.0);
                for (p, v) in slots {
                    poss.push(p as u8);
                    vals.push(v);
                }
            }
        }
        NmMatrix::new(rows, cols, n, m, vals, poss)
    }

    /// The dense row-major matrix.
    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0.0; self.rows * self.cols];
        let groups = self.groups();
        for r in 0..self.rows {
            for g in 0..groups {
                let at = (r * groups + g) * self.n;
                for s in 0..self.n {
                    let c = g * self.m + self.positions[at + s] as usize;
                    if c < self.cols {
                        d[r * self.cols + c] = self.values[at + s];
                    }
                }
            }
        }
        d
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// M.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Groups per row, `⌈cols/m⌉`.
    pub fn groups(&self) -> usize {
        self.cols.div_ceil(self.m)
    }

    /// Slot values, `rows × groups × n`.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Slot positions within their group, same layout as [`NmMatrix::values`].
    pub fn positions(&self) -> &[u8] {
        &self.positions
    }

    /// Stored slots at real columns (phantom slots excluded).
    pub fn nnz(&self) -> usize {
        let groups = self.groups();
        (0..self.positions.len())
            .filter(|&i| {
                ((i / self.n) % groups) * self.m + (self.positions[i] as usize) < self.cols
            })
            .count()
    }

    /// Bytes of storage: 4 per value, 1 per position.
    pub fn bytes(&self) -> usize {
        5 * self.values.len()
    }

    /// The same matrix as V:N:M with V = 2, for the tile kernel's row pairs (built on the first
    /// call): with N = 2, two rows keep at most 4 columns of a group between them, so every
    /// 2:M matrix is a V:2:M one whose blocks are its row pairs, and the pairs load a column
    /// both rows keep once for both (at 2:4, 3 B loads per 4 FMAs against 4 in the row loop).
    /// Spare slots stay stored zeros at their positions, so the same B values are multiplied
    /// (NaN and Inf propagate alike; the pairs add in another order, so the sums may differ
    /// in the last bits). `None` for N ≠ 2 (1:M would gain a padding slot), odd rows, or where
    /// the pairs could not read B in place (M outside 4..=16, K not a multiple of M, or K ≥
    /// 65536; `RowPairs::with_direct`): a gather per pair would cost more than it saves.
    pub(crate) fn as_row_pairs(&self) -> Option<&SparseMatrix> {
        if !pairs_fit(self.rows, self.cols, self.n, self.m) {
            return None;
        }
        // The layout does not depend on the lanes: every caller asks under key 0.
        self.pairs
            .get(0, || {
                self.pairs_copy()
                    .ok()
                    .map(|x| Box::new(SparseMatrix::Vnm(x)))
            })?
            .as_deref()
    }

    /// The V = 2 copy of [`NmMatrix::as_row_pairs`], built from the slots (N = 2, M ≤ 16, even
    /// rows, no phantom columns): each pair's group keeps the union of its rows' positions,
    /// padded with the lowest unused offsets to 4 (as `VnmMatrix::from_masked` pads), and each
    /// slot becomes its column's index in that union.
    fn pairs_copy(&self) -> Result<VnmMatrix, KernelError> {
        let (rows, m, groups) = (self.rows, self.m, self.groups());
        let k_sp = vnm_k_sp(self.cols, m);
        let mut vals = vec![0.0f32; rows * k_sp];
        let mut meta = vec![0u32; vnm_meta_words(rows, k_sp)];
        let mut loc = Vec::with_capacity(rows / 2 * groups * 4);
        let mut set_pos = |r: usize, s: usize, p: u32| {
            let (w, sh) = meta_word_shift(r, s, k_sp);
            meta[w] |= p << sh;
        };
        for block in 0..rows / 2 * groups {
            let (pair, g) = (block / groups, block % groups);
            let at = |r: usize| (r * groups + g) * 2;
            let slots = [at(2 * pair), at(2 * pair + 1)];
            let mut used = slots
                .iter()
                .flat_map(|&i| [i, i + 1])
                .fold(0u32, |u, i| u | 1 << self.positions[i]);
            while used.count_ones() < 4 {
                used |= !used & (used + 1);
            }
            loc.extend((0..m as u8).filter(|&c| used >> c & 1 == 1));
            for (r, &i) in [2 * pair, 2 * pair + 1].iter().zip(&slots) {
                for s in 0..2 {
                    let below = (1u32 << self.positions[i + s]) - 1;
                    set_pos(*r, 2 * g + s, (used & below).count_ones());
                    vals[r * k_sp + 2 * g + s] = self.values[i + s];
                }
            }
        }
        // Padding groups and padding rows: positions (0, 1).
        for r in 0..rows.div_ceil(16) * 16 {
            let first_pad = if r < rows { groups } else { 0 };
            for g in first_pad..k_sp / 2 {
                set_pos(r, 2 * g + 1, 1);
            }
        }
        VnmMatrix::new(rows, self.cols, 2, m, vals, meta, loc)
    }

    /// The values in panels of `lanes` rows for the batch-1 kernels (built on the first call).
    pub(crate) fn row_panels(&self, lanes: usize) -> Option<&RowPanels> {
        let per_row = self.groups() * self.n;
        self.panels.get(lanes, || {
            RowPanels::build(self.rows, self.groups(), self.n, lanes, |r, s| {
                let i = r * per_row + s;
                (self.values[i], self.positions[i])
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build_mask, random_values, Pattern};

    fn nm(rows: usize, cols: usize, n: usize, m: usize, seed: u64) -> NmMatrix {
        let w = random_values(rows * cols, seed);
        let scores: Vec<f32> = random_values(rows * cols, seed + 1)
            .iter()
            .map(|x| x.abs())
            .collect();
        let mask = build_mask(&Pattern::Nm { n, m }, &scores, rows, cols).unwrap();
        NmMatrix::from_masked(&w, &mask, n, m).unwrap()
    }

    #[test]
    fn row_pairs_hold_the_same_matrix_and_the_same_stored_slots() {
        for (rows, cols, m) in [(2, 4, 4), (10, 256, 4), (32, 96, 8), (6, 48, 16)] {
            let mut a = nm(rows, cols, 2, m, 7);
            // A stored zero (a group keeping fewer than N) stays a slot of its row.
            a.values[1] = 0.0;
            let Some(SparseMatrix::Vnm(p)) = a.as_row_pairs() else {
                panic!("{rows}x{cols} 2:{m} runs in pairs");
            };
            assert_eq!((p.v(), p.m()), (2, m));
            assert_eq!(p.to_dense(), a.to_dense(), "{rows}x{cols} 2:{m}");
            // The copy from the slots is the one packing through a mask gives, buffer for buffer.
            let mut keep = vec![false; rows * cols];
            for r in 0..rows {
                for g in 0..a.groups() {
                    for s in 0..2 {
                        keep[r * cols
                            + g * m
                            + a.positions[(r * a.groups() + g) * 2 + s] as usize] = true;
                    }
                }
            }
            let mask = Mask::new(rows, cols, keep).unwrap();
            let oracle = VnmMatrix::from_masked(&a.to_dense(), &mask, 2, m).unwrap();
            assert_eq!(p.values(), oracle.values(), "{rows}x{cols} 2:{m}");
            assert_eq!(p.metadata(), oracle.metadata(), "{rows}x{cols} 2:{m}");
            assert_eq!(p.column_loc(), oracle.column_loc(), "{rows}x{cols} 2:{m}");
            for r in 0..rows {
                for g in 0..a.groups() {
                    let mut want: Vec<usize> = (0..2)
                        .map(|s| g * m + a.positions[(r * a.groups() + g) * 2 + s] as usize)
                        .collect();
                    let mut got: Vec<usize> = (2 * g..2 * g + 2)
                        .map(|s| p.slot_column(r, s).expect("a real column"))
                        .collect();
                    want.sort_unstable();
                    got.sort_unstable();
                    assert_eq!(got, want, "row {r} group {g}");
                }
            }
        }
    }

    #[test]
    fn a_pair_keeping_two_columns_is_padded_with_the_lowest_free_ones() {
        // Both rows keep columns 14 and 15 of a group of 16: the pair's 4 columns are
        // 0, 1, 14, 15 (as `VnmMatrix::from_masked` pads), the rows' slots at positions 2, 3;
        // the second group's rows keep {0, 5} and {5, 9}: columns 0, 5, 9 and the free 1.
        let a = NmMatrix::new(
            2,
            32,
            2,
            16,
            vec![1.0, 2.0, 3.0, f32::NAN, 5.0, 6.0, 7.0, 8.0],
            vec![14, 15, 0, 5, 14, 15, 5, 9],
        )
        .unwrap();
        let Some(SparseMatrix::Vnm(p)) = a.as_row_pairs() else {
            panic!("2x32 2:16 runs in pairs");
        };
        assert_eq!(p.column_loc(), &[0, 1, 14, 15, 0, 1, 5, 9]);
        let slots: Vec<(usize, usize)> = (0..2).flat_map(|r| (0..4).map(move |s| (r, s))).collect();
        let positions: Vec<usize> = slots.iter().map(|&(r, s)| p.position(r, s)).collect();
        assert_eq!(positions, [2, 3, 0, 2, 2, 3, 2, 3]);
        let bits: Vec<u32> = slots
            .iter()
            .map(|&(r, s)| p.values()[r * p.k_sp() + s].to_bits())
            .collect();
        let want: Vec<u32> = a.values().iter().map(|x| x.to_bits()).collect();
        assert_eq!(bits, want, "values, NaN included, bit for bit");
    }

    #[test]
    fn shapes_the_pairs_cannot_read_in_place_keep_the_row_loop() {
        assert!(nm(3, 8, 2, 4, 1).as_row_pairs().is_none(), "odd rows");
        assert!(
            nm(4, 10, 2, 4, 1).as_row_pairs().is_none(),
            "K not a multiple of M"
        );
        assert!(nm(4, 64, 2, 32, 1).as_row_pairs().is_none(), "M > 16");
        assert!(nm(4, 8, 1, 4, 1).as_row_pairs().is_none(), "N = 1");
        assert!(nm(4, 15, 3, 5, 1).as_row_pairs().is_none(), "N = 3");
    }
}
