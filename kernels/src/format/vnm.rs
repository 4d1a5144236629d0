//! The V:N:M format (N = 2) in the Spatha layout, shared with the CUDA backend.
//!
//! With `G = ⌈cols/m⌉` groups and `K_sp = round_up(2·G, 16)` value slots per row:
//! - `values`: `rows × K_sp` f32, row-major. Row `r` holds the values of group `g` in slots
//!   `2g` (first kept column) and `2g + 1` (second); slots `2G..K_sp` are padding (`+0.0`).
//! - `column_loc`: `(rows/v) × G × 4` u8, row-major: for V×M block `(b, g)` the 4 columns it keeps,
//!   as offsets `0..m` into the group, strictly increasing. In a last group narrower than 4 (or
//!   generally at offsets with `g·m + offset ≥ cols`) the entries are *phantom*: no B row exists.
//! - `metadata`: u32 words, 16 two-bit positions each; the position of slot `s` of row `r` says which
//!   of the block's 4 `column_loc` entries the value belongs to. Positions of a group's two slots
//!   strictly increase (as `mma.sp` requires). The word order follows the `mma.sp.m16n8k16` A
//!   fragment: see [`meta_word_shift`]. Rows are padded to a multiple of 16 with positions (0, 1).
//!
//! Invariants (checked by [`VnmMatrix::new`]): `v ≥ 1` divides `rows`; `4 ≤ m ≤ 256`; buffer
//! lengths as above; `column_loc` increasing and `< m`; each group's two positions increasing;
//! padding slots and slots at phantom columns hold `+0.0`. A row that keeps fewer than 2 of its
//! block's columns stores `+0.0` at a spare position (a stored zero, multiplied like any value).

use super::panels::{PanelCache, RowPanels};
use super::row_pairs::RowPairs;
use crate::{KernelError, Mask};

/// Where the 2-bit position of value slot `slot` of row `row` lives in the metadata of a matrix
/// with `k_sp` slots per row: `(word index, bit shift)`.
///
/// Order: rows in tiles of 16, slots in steps of 8 (one `m16n8k16` sparse A fragment: 16 logical
/// columns = 4 groups = 8 kept values per row). For tile `t` and step `k`, 8 consecutive words start
/// at `(t · k_sp/8 + k) · 8`; word `i` of them holds row `16t + i` in bits 0..16 and row `16t + i + 8`
/// in bits 16..32, slot `8k + j` of the row at bits `2j` (+16 for the upper row). So the thread
/// of a warp with group id `i` loads one word and has the metadata of both rows it owns.
pub fn meta_word_shift(row: usize, slot: usize, k_sp: usize) -> (usize, u32) {
    let (tile, i) = (row / 16, row % 16);
    let (step, j) = (slot / 8, slot % 8);
    let word = (tile * (k_sp / 8) + step) * 8 + i % 8;
    let shift = 2 * j as u32 + if i >= 8 { 16 } else { 0 };
    (word, shift)
}

/// Slots per row: `round_up(2·⌈cols/m⌉, 16)`.
pub fn vnm_k_sp(cols: usize, m: usize) -> usize {
    (2 * cols.div_ceil(m)).div_ceil(16) * 16
}

/// Metadata words for `rows` rows and `k_sp` slots (rows padded to 16).
pub fn vnm_meta_words(rows: usize, k_sp: usize) -> usize {
    rows.div_ceil(16) * 16 * k_sp / 16
}

/// A V:2:M matrix in the Spatha layout (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct VnmMatrix {
    rows: usize,
    cols: usize,
    v: usize,
    m: usize,
    values: Vec<f32>,
    metadata: Vec<u32>,
    column_loc: Vec<u8>,
    /// Derived for the CPU kernels: per (row, group) the two positions as `p0 | p1 << 2`.
    pairs: Vec<u8>,
    /// Derived: stored slots at real columns.
    nnz: usize,
    /// Derived for the batch-1 and few-column kernels where they gather (see
    /// `cpu::panel_layout::batch_one_layout`), on first use.
    panels: PanelCache<RowPanels>,
    /// Derived for the batch-1 and few-column kernels, on first use (positions in the group of
    /// M).
    group_panels: PanelCache<RowPanels>,
    /// Derived for the tile kernel's row pairs, on first use (even V only; boxed, so that the
    /// matrix stays small before it is built).
    row_pairs: PanelCache<Option<Box<RowPairs>>>,
}

impl VnmMatrix {
    /// Checked constructor over the raw buffers.
    pub fn new(
        rows: usize,
        cols: usize,
        v: usize,
        m: usize,
        values: Vec<f32>,
        metadata: Vec<u32>,
        column_loc: Vec<u8>,
    ) -> Result<Self, KernelError> {
        let bad = |reason: String| Err(KernelError::format("V:N:M", reason));
        if v == 0 || !rows.is_multiple_of(v) {
            return bad(format!("V = {v} must be >= 1 and divide the {rows} rows"));
        }
        if !(4..=256).contains(&m) {
            return bad(format!("M = {m} must be in 4..=256"));
        }
        let (groups, k_sp) = (cols.div_ceil(m), vnm_k_sp(cols, m));
        KernelError::check_len("V:N:M values", rows * k_sp, values.len())?;
        KernelError::check_len("V:N:M metadata", vnm_meta_words(rows, k_sp), metadata.len())?;
        KernelError::check_len("V:N:M column_loc", rows / v * groups * 4, column_loc.len())?;
        let mut a = VnmMatrix {
            rows,
            cols,
            v,
            m,
            values,
            metadata,
            column_loc,
            pairs: Vec::new(),
            nnz: 0,
            panels: PanelCache::default(),
            group_panels: PanelCache::default(),
            row_pairs: PanelCache::default(),
        };
        for (i, loc) in a.column_loc.chunks_exact(4).enumerate() {
            if loc.windows(2).any(|w| w[0] >= w[1]) || loc[3] as usize >= m {
                return bad(format!(
                    "block {} group {}: column_loc {loc:?} must strictly increase below {m}",
                    i / groups.max(1),
                    i % groups.max(1)
                ));
            }
        }
        for r in 0..rows.div_ceil(16) * 16 {
            for g in 0..k_sp / 2 {
                let (p0, p1) = (a.position(r, 2 * g), a.position(r, 2 * g + 1));
                let spare = r >= rows || g >= groups;
                if p0 >= p1 || (spare && (p0, p1) != (0, 1)) {
                    return bad(format!(
                        "row {r} group {g}: positions ({p0}, {p1}) are invalid"
                    ));
                }
                if r >= rows {
                    continue;
                }
                for s in [2 * g, 2 * g + 1] {
                    let phantom = spare || a.slot_column(r, s).is_none();
                    if phantom && a.values[r * k_sp + s].to_bits() != 0 {
                        return bad(format!("row {r} slot {s}: padding must hold +0.0"));
                    }
                }
            }
        }
        a.pairs = (0..rows * groups)
            .map(|i| {
                let (r, g) = (i / groups, i % groups);
                (a.position(r, 2 * g) | a.position(r, 2 * g + 1) << 2) as u8
            })
            .collect();
        a.nnz = (0..rows)
            .map(|r| {
                (0..2 * groups)
                    .filter(|&s| a.slot_column(r, s).is_some())
                    .count()
            })
            .sum();
        Ok(a)
    }

    /// Packs `values ⊙ mask`; errors if a V×M block keeps more than 4 distinct columns or a row
    /// more than 2 in a group.
    pub fn from_masked(
        values: &[f32],
        mask: &Mask,
        v: usize,
        m: usize,
    ) -> Result<Self, KernelError> {
        let (rows, cols) = (mask.rows(), mask.cols());
        KernelError::check_len("values", rows * cols, values.len())?;
        if v == 0 || !rows.is_multiple_of(v) || !(4..=256).contains(&m) {
            return Err(KernelError::format(
                "V:N:M",
                format!(
                    "V = {v}, M = {m} do not fit {rows} rows (V must divide rows, 4 <= M <= 256)"
                ),
            ));
        }
        let (groups, k_sp) = (cols.div_ceil(m), vnm_k_sp(cols, m));
        let mut vals = vec![0.0f32; rows * k_sp];
        let mut meta = vec![0u32; vnm_meta_words(rows, k_sp)];
        let mut loc = Vec::with_capacity(rows / v * groups * 4);
        let mut set_pos = |r: usize, s: usize, p: usize| {
            let (w, sh) = meta_word_shift(r, s, k_sp);
            meta[w] |= (p as u32) << sh;
        };
        for b in 0..rows / v {
            for g in 0..groups {
                let (g0, len) = (g * m, m.min(cols - g * m));
                let used: Vec<usize> = (0..len)
                    .filter(|&c| (0..v).any(|i| mask.keep(b * v + i, g0 + c)))
                    .collect();
                if used.len() > 4 {
                    return Err(KernelError::format(
                        "V:N:M",
                        format!(
                            "block {b} group {g} keeps {} > 4 distinct columns",
                            used.len()
                        ),
                    ));
                }
                let mut quad = used.clone();
                quad.extend((0..m).filter(|c| !used.contains(c)).take(4 - used.len()));
                quad.sort_unstable();
                loc.extend(quad.iter().map(|&c| c as u8));
                for i in 0..v {
                    let r = b * v + i;
                    let kept: Vec<usize> = (0..4)
                        .filter(|&p| quad[p] < len && mask.keep(r, g0 + quad[p]))
                        .collect();
                    if kept.len() > 2 {
                        return Err(KernelError::format(
                            "V:N:M",
                            format!("row {r} group {g} keeps {} > 2 columns", kept.len()),
                        ));
                    }
                    let mut pos = kept.clone();
                    pos.extend((0..4).filter(|p| !kept.contains(p)).take(2 - kept.len()));
                    pos.sort_unstable();
                    for (j, &p) in pos.iter().enumerate() {
                        set_pos(r, 2 * g + j, p);
                        if kept.contains(&p) {
                            vals[r * k_sp + 2 * g + j] = values[r * cols + g0 + quad[p]];
                        }
                    }
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
        VnmMatrix::new(rows, cols, v, m, vals, meta, loc)
    }

    /// The 2-bit position (0..4) of slot `slot` of row `row` (rows up to the 16-padded count).
    pub fn position(&self, row: usize, slot: usize) -> usize {
        let (w, sh) = meta_word_shift(row, slot, self.k_sp());
        ((self.metadata[w] >> sh) & 3) as usize
    }

    /// The matrix column of slot `slot` of row `row`, or `None` for padding and phantom slots.
    pub fn slot_column(&self, row: usize, slot: usize) -> Option<usize> {
        let g = slot / 2;
        if row >= self.rows || g >= self.groups() {
            return None;
        }
        let b = row / self.v;
        let off = self.column_loc[(b * self.groups() + g) * 4 + self.position(row, slot)];
        let c = g * self.m + off as usize;
        (c < self.cols).then_some(c)
    }

    /// The dense row-major matrix.
    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0.0; self.rows * self.cols];
        let k_sp = self.k_sp();
        for r in 0..self.rows {
            for s in 0..2 * self.groups() {
                if let Some(c) = self.slot_column(r, s) {
                    d[r * self.cols + c] = self.values[r * k_sp + s];
                }
            }
        }
        d
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (K).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// V, rows per block.
    pub fn v(&self) -> usize {
        self.v
    }

    /// M, group width.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Groups per row, `⌈cols/m⌉`.
    pub fn groups(&self) -> usize {
        self.cols.div_ceil(self.m)
    }

    /// Value slots per row, `K_sp`.
    pub fn k_sp(&self) -> usize {
        vnm_k_sp(self.cols, self.m)
    }

    /// Values, `rows × K_sp` row-major.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Packed 2-bit positions in `mma.sp` order (see [`meta_word_shift`]).
    pub fn metadata(&self) -> &[u32] {
        &self.metadata
    }

    /// Column locations, `(rows/V) × groups × 4` offsets into each group.
    pub fn column_loc(&self) -> &[u8] {
        &self.column_loc
    }

    /// Stored slots at real columns (padding and phantom slots excluded).
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Per (row, group), row-major `rows × groups`: the group's two positions as `p0 | p1 << 2`
    /// (derived from the metadata for the CPU kernels; not part of the Spatha buffers).
    pub fn pair_codes(&self) -> &[u8] {
        &self.pairs
    }

    /// Bytes of storage: values, metadata and column locations.
    pub fn bytes(&self) -> usize {
        4 * self.values.len() + 4 * self.metadata.len() + self.column_loc.len()
    }

    /// The values in panels of `lanes` rows for the batch-1 kernels (built on the first call),
    /// each slot's position naming one of its group's 4 kept columns.
    pub(crate) fn row_panels(&self, lanes: usize) -> Option<&RowPanels> {
        let (groups, k_sp) = (self.groups(), self.k_sp());
        self.panels.get(lanes, || {
            RowPanels::build(self.rows, groups, 2, lanes, |r, s| {
                (self.values[r * k_sp + s], self.position(r, s) as u8)
            })
        })
    }

    /// The rows in pairs sharing B loads (see `row_pairs`), built on the first call; `None` for
    /// odd V (a V-block's rows would not pair up) or more groups than the layout can name.
    pub(crate) fn row_pairs(&self) -> Option<&RowPairs> {
        if !self.v.is_multiple_of(2) {
            return None;
        }
        let (groups, k_sp) = (self.groups(), self.k_sp());
        // The layout does not depend on the lanes: every caller asks under key 0.
        self.row_pairs
            .get(0, || {
                RowPairs::build(self.rows, self.v, groups, k_sp, &self.pairs, &self.values)
                    .map(|p| Box::new(p.with_direct(self.v, self.m, self.cols, &self.column_loc)))
            })?
            .as_deref()
    }

    /// The values in panels of `lanes` rows, each slot's position being its column's offset in
    /// its group of M (`< M`), as N:M panels have them: read from x directly, without gathering
    /// each V-block's 4 kept columns first. Only for M ≤ 16 (one window of x per group).
    pub(crate) fn group_panels(&self, lanes: usize) -> Option<&RowPanels> {
        if self.m > 16 {
            return None;
        }
        let (groups, k_sp) = (self.groups(), self.k_sp());
        self.group_panels.get(lanes, || {
            RowPanels::build(self.rows, groups, 2, lanes, |r, s| {
                let at = ((r / self.v) * groups + s / 2) * 4 + self.position(r, s);
                (self.values[r * k_sp + s], self.column_loc[at])
            })
        })
    }
}
