//! Row panels: a copy of an N:M or V:N:M matrix's kept values laid out for the batch-1 kernels,
//! built on first use and kept beside the matrix.
//!
//! A matrix–vector product that walks one row at a time along K must pick each value's x from
//! a different column per lane (a gather, or permutes of the group's columns per step); on Zen 3
//! that kept N:M at 0.4–0.7× and 64:2:8 at ~1.0× of dense at batch 1. Across rows the structure
//! is regular: slot `j` of group `g` lies in the same `m` columns for every row (for V:N:M's
//! gathered panels, in the same 4 gathered columns for every row of a V-block). So a panel of
//! `lanes` consecutive rows stores, per group and slot, the `lanes` rows' values side by side, with each row's
//! position in the group as one byte: a vector of values, one permute of the group's x values by
//! the positions, one FMA — and the `lanes` results are the panel's rows of y.

use std::sync::OnceLock;

/// The panel layout of one matrix: `values[((p · groups + g) · n + j) · lanes + l]` is row
/// `p · lanes + l`'s slot `j` of group `g` (`+0.0` past the last row), `positions[...]` alike its
/// position in the group (`< m`, or `< 4` for V:N:M's gathered panels; 0 past the last row).
#[derive(Debug, Clone)]
pub(crate) struct RowPanels {
    lanes: usize,
    values: Vec<f32>,
    positions: Vec<u8>,
}

impl RowPanels {
    /// Lays out `rows` rows of `groups · n` slots each, read through `slot(row, s)` → (value,
    /// position), in panels of `lanes` rows (the last padded with zero rows).
    pub(crate) fn build(
        rows: usize,
        groups: usize,
        n: usize,
        lanes: usize,
        slot: impl Fn(usize, usize) -> (f32, u8),
    ) -> RowPanels {
        let per_panel = groups * n * lanes;
        let len = rows.div_ceil(lanes) * per_panel;
        let (mut values, mut positions) = (vec![0.0f32; len], vec![0u8; len]);
        for r in 0..rows {
            let (p, l) = (r / lanes, r % lanes);
            for s in 0..groups * n {
                let (v, at) = slot(r, s);
                let i = p * per_panel + s * lanes + l;
                values[i] = v;
                positions[i] = at;
            }
        }
        RowPanels {
            lanes,
            values,
            positions,
        }
    }

    /// Rows per panel.
    pub(crate) fn lanes(&self) -> usize {
        self.lanes
    }

    /// All panels' values.
    pub(crate) fn values(&self) -> &[f32] {
        &self.values
    }

    /// All panels' positions.
    pub(crate) fn positions(&self) -> &[u8] {
        &self.positions
    }
}

/// Unstructured rows (CSR) in panels of `lanes` rows over windows of `lanes − 1` columns: per
/// panel and window, as many slots as the panel's fullest row has entries in the window. Slot
/// `s` holds the offset of its window in the windowed copy of x ([`CsrPanels::window_x`]), and
/// `values[s · lanes + l]`, `positions[...]` the entry of row `p · lanes + l` (a position
/// `< lanes − 1`), or `+0.0` at position `lanes − 1`, the window's zero, where that row has no
/// further entry there — so a padded lane multiplies zeros, never an x value that might be NaN.
#[derive(Debug, Clone)]
pub(crate) struct CsrPanels {
    lanes: usize,
    /// First slot of each panel, and the total at the end.
    starts: Vec<u32>,
    windows: Vec<u32>,
    values: Vec<f32>,
    positions: Vec<u8>,
}

impl CsrPanels {
    /// Lays out a CSR matrix (`row_ptr`, `col_idx` with increasing columns per row, `values`).
    pub(crate) fn build(
        rows: usize,
        row_ptr: &[u32],
        col_idx: &[u32],
        vals: &[f32],
        lanes: usize,
    ) -> CsrPanels {
        let width = lanes - 1;
        let mut out = CsrPanels {
            lanes,
            starts: vec![0],
            windows: Vec::new(),
            values: Vec::new(),
            positions: Vec::new(),
        };
        for p in 0..rows.div_ceil(lanes) {
            let live = (rows - p * lanes).min(lanes);
            // Each live row's cursor into its entries, walked window by window.
            let mut at: Vec<usize> = (0..live).map(|l| row_ptr[p * lanes + l] as usize).collect();
            let end: Vec<usize> = (0..live)
                .map(|l| row_ptr[p * lanes + l + 1] as usize)
                .collect();
            // The next window any row of the panel has an entry in, until none has.
            while let Some(w) = (0..live)
                .filter(|&l| at[l] < end[l])
                .map(|l| col_idx[at[l]] as usize / width)
                .min()
            {
                let taken: Vec<usize> = (0..live)
                    .map(|l| {
                        col_idx[at[l]..end[l]]
                            .iter()
                            .take_while(|&&c| c as usize / width == w)
                            .count()
                    })
                    .collect();
                let slots = taken.iter().copied().max().unwrap_or(0);
                for j in 0..slots {
                    out.windows.push((w * lanes) as u32);
                    // Rows past the matrix's last (no cursor) are padding, like spent rows.
                    for l in 0..lanes {
                        let (v, q) = match (taken.get(l), at.get(l)) {
                            (Some(&t), Some(&first)) if j < t => {
                                let e = first + j;
                                (vals[e], (col_idx[e] as usize - w * width) as u8)
                            }
                            _ => (0.0, width as u8),
                        };
                        out.values.push(v);
                        out.positions.push(q);
                    }
                }
                for (a, t) in at.iter_mut().zip(&taken) {
                    *a += t;
                }
            }
            out.starts.push(out.windows.len() as u32);
        }
        out
    }

    /// Rows per panel.
    pub(crate) fn lanes(&self) -> usize {
        self.lanes
    }

    /// First slot of each panel, then the total.
    pub(crate) fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// Each slot's window offset in the windowed x.
    pub(crate) fn windows(&self) -> &[u32] {
        &self.windows
    }

    /// Each slot's values, `lanes` per slot.
    pub(crate) fn values(&self) -> &[f32] {
        &self.values
    }

    /// Each slot's positions, `lanes` per slot.
    pub(crate) fn positions(&self) -> &[u8] {
        &self.positions
    }

    /// Writes x in windows of `lanes − 1` values, each followed by a zero, into `out`
    /// (resized to `⌈cols / (lanes − 1)⌉ · lanes` floats).
    pub(crate) fn window_x(&self, x: &[f32], out: &mut Vec<f32>) {
        let width = self.lanes - 1;
        out.clear();
        for chunk in x.chunks(width) {
            out.extend_from_slice(chunk);
            out.resize(out.len() + self.lanes - chunk.len(), 0.0);
        }
    }
}

/// A matrix's panels (`T` is [`RowPanels`] or [`CsrPanels`]), built on first use for one lane
/// count (the process's ISA is chosen once). Derived data: equality ignores it, and a clone
/// starts empty.
pub(crate) struct PanelCache<T>(OnceLock<(usize, T)>);

impl<T> Default for PanelCache<T> {
    fn default() -> Self {
        PanelCache(OnceLock::new())
    }
}

impl<T> PanelCache<T> {
    /// The panels for `lanes`, built by `build` the first time; `None` if they were built for
    /// another lane count.
    pub(crate) fn get(&self, lanes: usize, build: impl FnOnce() -> T) -> Option<&T> {
        let (built_for, panels) = self.0.get_or_init(|| (lanes, build()));
        (*built_for == lanes).then_some(panels)
    }
}

impl<T> Clone for PanelCache<T> {
    fn clone(&self) -> Self {
        PanelCache::default()
    }
}

impl<T> PartialEq for PanelCache<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> std::fmt::Debug for PanelCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "PanelCache(built)"
        } else {
            "PanelCache(empty)"
        })
    }
}
