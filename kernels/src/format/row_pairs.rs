//! V:N:M rows in pairs that share B loads: the layout of the CPU tile kernel's pair path.
//!
//! In a group, each row of a V-block keeps 2 of the block's 4 columns, so two rows of one block
//! share at least one column in 5 groups of 6 when their pairs are random (they are disjoint
//! only when one pair is the other's complement). In such a group the kernel loads the shared
//! column's B vector once for both rows' FMAs: 3 loads for 4 FMAs instead of 4, 0.79 B loads
//! per FMA on average. The rows of each V-block are paired to share as much as they can (a
//! greedy matching on the number of disjoint groups: ~9 % of the groups left disjoint instead of
//! 1/6 at V = 64 with random codes). This layout lists, per pair, its two rows and its groups
//! as entries: the *shared* groups first (by group), then the disjoint ones (by group), each
//! with its four values in the order the kernel multiplies them.

use std::ops::Range;

/// The row-pair layout of a V:N:M matrix with even V (see the module documentation).
#[derive(Debug)]
pub(crate) struct RowPairs {
    /// Per pair, `groups` entries `g | qa << 16 | qb << 18 | qc << 20 | qd << 22`: the pair's
    /// first row takes `va·B[qa] + vb·B[qb]`, its second `vc·B[qc] + vd·B[qd]`, with `q*` the
    /// positions in the V-block's 4 kept columns of group `g` and `[va, vb, vc, vd]` the entry's
    /// values. A shared entry has `qa == qc`.
    pub(crate) entries: Vec<u32>,
    /// Four per entry.
    pub(crate) values: Vec<f32>,
    /// Per pair, its rows (V-block `b`'s pairs are `b · V/2 .. (b + 1) · V/2`).
    pub(crate) rows: Vec<[u32; 2]>,
    /// The same entries naming B's rows instead of the V-block's kept columns (see
    /// [`RowPairs::with_direct`]), or `None`.
    pub(crate) direct: Option<Vec<u32>>,
    /// Per pair, `groups + 1` counts: the shared entries among the groups before `g`.
    shared_before: Vec<u16>,
    groups: usize,
}

impl RowPairs {
    /// Builds the layout of `rows` rows in V-blocks of `v` (even) from the pair codes (`p0 |
    /// p1 << 2` per row and group, positions in the block's 4 kept columns) and the values
    /// (`k_sp` slots per row, a group's two at `2g` and `2g + 1`, in the order of their
    /// positions). `None` for an odd V or more groups than an entry can name.
    pub(crate) fn build(
        rows: usize,
        v: usize,
        groups: usize,
        k_sp: usize,
        codes: &[u8],
        values: &[f32],
    ) -> Option<Self> {
        if v == 0 || !v.is_multiple_of(2) || groups > usize::from(u16::MAX) {
            return None;
        }
        let pairs = rows / 2;
        let mut entries = Vec::with_capacity(pairs * groups);
        let mut vals = Vec::with_capacity(pairs * groups * 4);
        let mut shared_before = Vec::with_capacity(pairs * (groups + 1));
        let mut pair_rows = Vec::with_capacity(pairs);
        let mut disjoint: Vec<(u32, [f32; 4])> = Vec::with_capacity(groups);
        for block in 0..rows / v {
            for [r1, r2] in match_rows(block * v..block * v + v, groups, codes) {
                pair_rows.push([r1 as u32, r2 as u32]);
                disjoint.clear();
                let mut shared = 0u16;
                for g in 0..groups {
                    shared_before.push(shared);
                    let (c1, c2) = (codes[r1 * groups + g], codes[r2 * groups + g]);
                    let (a, b) = (u32::from(c1 & 3), u32::from(c1 >> 2));
                    let (x, y) = (u32::from(c2 & 3), u32::from(c2 >> 2));
                    let v1 = &values[r1 * k_sp + 2 * g..][..2];
                    let v2 = &values[r2 * k_sp + 2 * g..][..2];
                    // (shared, first row's other, second row's other), the values in that order.
                    let share = if a == x {
                        Some((a, b, y, [v1[0], v1[1], v2[0], v2[1]]))
                    } else if a == y {
                        Some((a, b, x, [v1[0], v1[1], v2[1], v2[0]]))
                    } else if b == x {
                        Some((b, a, y, [v1[1], v1[0], v2[0], v2[1]]))
                    } else if b == y {
                        Some((b, a, x, [v1[1], v1[0], v2[1], v2[0]]))
                    } else {
                        None
                    };
                    let g32 = g as u32;
                    match share {
                        Some((s, o1, o2, v)) => {
                            entries.push(g32 | s << 16 | o1 << 18 | s << 20 | o2 << 22);
                            vals.extend_from_slice(&v);
                            shared += 1;
                        }
                        None => disjoint.push((
                            g32 | a << 16 | b << 18 | x << 20 | y << 22,
                            [v1[0], v1[1], v2[0], v2[1]],
                        )),
                    }
                }
                shared_before.push(shared);
                for (e, v) in &disjoint {
                    entries.push(*e);
                    vals.extend_from_slice(v);
                }
            }
        }
        Some(RowPairs {
            entries,
            values: vals,
            rows: pair_rows,
            direct: None,
            shared_before,
            groups,
        })
    }

    /// Adds [`RowPairs::direct`]: each entry as `g·M | pa << 16 | pb << 20 | pc << 24 | pd << 28`,
    /// `p*` the offsets in group `g` of its four columns (`column_loc` of the pair's V-block
    /// `v`), so that a kernel can read B's rows `g·M + p*` where they stand instead of gathering
    /// them first. Left `None` where an entry cannot name its rows (M > 16, or K ≥ 65,536) or a
    /// row would not exist (K not a multiple of M: the last group's phantom columns have no B
    /// row, and the gather gives them zeros).
    pub(crate) fn with_direct(
        mut self,
        v: usize,
        m: usize,
        cols: usize,
        column_loc: &[u8],
    ) -> Self {
        if m > 16 || cols > usize::from(u16::MAX) || !cols.is_multiple_of(m) {
            return self;
        }
        // Each V-block has V / 2 pairs of `groups` entries, in block order.
        let per_block = self.groups * (v / 2);
        let direct = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, &e)| {
                let (blk, g) = (i / per_block, (e & 0xffff) as usize);
                let loc = &column_loc[(blk * self.groups + g) * 4..][..4];
                let at = |shift: u32| u32::from(loc[((e >> shift) & 3) as usize]);
                (g * m) as u32 | at(16) << 16 | at(18) << 20 | at(20) << 24 | at(22) << 28
            })
            .collect();
        self.direct = Some(direct);
        self
    }

    /// The entries of pair `p` (rows `self.rows[p]`) for the groups `gs`: (shared, disjoint), as
    /// indices into `entries` (`values` holds 4 per index).
    pub(crate) fn ranges(&self, p: usize, gs: Range<usize>) -> (Range<usize>, Range<usize>) {
        let before = &self.shared_before[p * (self.groups + 1)..][..self.groups + 1];
        let (s0, s1) = (usize::from(before[gs.start]), usize::from(before[gs.end]));
        let (base, total) = (p * self.groups, usize::from(before[self.groups]));
        // The disjoint entries before a group: the groups before it less the shared ones.
        let (d0, d1) = (gs.start - s0, gs.end - s1);
        (base + s0..base + s1, base + total + d0..base + total + d1)
    }
}

/// The largest V whose rows are matched (above it, a block's candidate pairs would take more
/// than a few MB and seconds); larger blocks pair their rows in order.
const MATCH_MAX_ROWS: usize = 512;

/// Pairs the rows of one V-block (an even number) greedily by the number of groups in which
/// their kept columns are disjoint, fewest first (ties by row), each pair in row order and the
/// pairs by first row. Groups' column sets are compared 16 at a time, as nibbles of a `u64`.
fn match_rows(block: Range<usize>, groups: usize, codes: &[u8]) -> Vec<[usize; 2]> {
    // The candidates are all V(V-1)/2 pairs of the block: past this many rows, rows in order.
    if block.len() > MATCH_MAX_ROWS {
        return block.step_by(2).map(|r| [r, r + 1]).collect();
    }
    let words = groups.div_ceil(16);
    // Each row's column sets, 4 bits per group; past the last group all 4 bits (never disjoint).
    let sets: Vec<u64> = block
        .clone()
        .flat_map(|r| {
            (0..words).map(move |w| {
                (0..16).fold(0u64, |acc, i| {
                    let g = 16 * w + i;
                    let set = if g < groups {
                        let c = codes[r * groups + g];
                        (1u64 << (c & 3)) | (1 << (c >> 2))
                    } else {
                        0xf
                    };
                    acc | set << (4 * i)
                })
            })
        })
        .collect();
    let n = block.len();
    let disjoint = |i: usize, j: usize| -> u32 {
        (0..words)
            .map(|w| {
                let x = sets[i * words + w] & sets[j * words + w];
                let nonzero = (x | x >> 1 | x >> 2 | x >> 3) & 0x1111_1111_1111_1111;
                16 - nonzero.count_ones()
            })
            .sum()
    };
    let mut candidates: Vec<(u32, usize, usize)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| (disjoint(i, j), i, j))
        .collect();
    candidates.sort_unstable();
    let mut taken = vec![false; n];
    let mut pairs = Vec::with_capacity(n / 2);
    for (_, i, j) in candidates {
        if !taken[i] && !taken[j] {
            taken[i] = true;
            taken[j] = true;
            pairs.push([block.start + i, block.start + j]);
        }
    }
    pairs.sort_unstable();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODES: [u8; 6] = [0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110];

    /// Every (row, group, position, value) of the layout, as the kernel multiplies them.
    fn products(pairs: &RowPairs, groups: usize) -> Vec<(usize, usize, u32, u32)> {
        let mut out = vec![];
        for (p, rows) in pairs.rows.iter().enumerate() {
            let (shared, disjoint) = pairs.ranges(p, 0..groups);
            assert_eq!(shared.len() + disjoint.len(), groups);
            for e in shared.clone().chain(disjoint) {
                let ent = pairs.entries[e];
                let q = |shift: u32| (ent >> shift) & 3;
                if shared.contains(&e) {
                    assert_eq!(
                        q(16),
                        q(20),
                        "a shared entry names one column for both rows"
                    );
                }
                let v = &pairs.values[4 * e..4 * e + 4];
                for (j, shift) in [16, 18, 20, 22].into_iter().enumerate() {
                    let row = rows[j / 2] as usize;
                    out.push((row, (ent & 0xffff) as usize, q(shift), v[j].to_bits()));
                }
            }
        }
        out.sort();
        out
    }

    /// Column sets of a row's pair code.
    fn set(c: u8) -> u8 {
        (1 << (c & 3)) | (1 << (c >> 2))
    }

    #[test]
    fn holds_every_value_once_and_shares_where_the_pairs_meet() {
        // 2 blocks of 4 rows, 21 groups (two words of column sets, the second partial).
        let (rows, v, groups, k_sp) = (8, 4, 21, 48);
        let codes: Vec<u8> = (0..rows * groups)
            .map(|i| CODES[(i * 5 + i / 3) % 6])
            .collect();
        let values: Vec<f32> = (0..rows * k_sp).map(|i| i as f32 + 0.5).collect();
        let pairs = RowPairs::build(rows, v, groups, k_sp, &codes, &values).unwrap();
        let mut want = vec![];
        for r in 0..rows {
            for g in 0..groups {
                let c = u32::from(codes[r * groups + g]);
                for (s, q) in [(0, c & 3), (1, c >> 2)] {
                    want.push((r, g, q, values[r * k_sp + 2 * g + s].to_bits()));
                }
            }
        }
        want.sort();
        assert_eq!(products(&pairs, groups), want);
        // Pairs stay in their block, and are disjoint exactly where their column sets are.
        for (p, &[r1, r2]) in pairs.rows.iter().enumerate() {
            let (r1, r2) = (r1 as usize, r2 as usize);
            assert_eq!((r1 / v, r2 / v), (p / (v / 2), p / (v / 2)));
            let apart = (0..groups)
                .filter(|&g| set(codes[r1 * groups + g]) & set(codes[r2 * groups + g]) == 0)
                .count();
            assert_eq!(pairs.ranges(p, 0..groups).1.len(), apart);
        }
    }

    #[test]
    fn direct_entries_name_the_b_rows_of_the_gathered_ones() {
        // 2 blocks of 4 rows, 7 groups of M = 8 (K = 56), each block its own kept columns.
        let (rows, v, groups, k_sp, m) = (8, 4, 7, 16, 8);
        let codes: Vec<u8> = (0..rows * groups)
            .map(|i| CODES[(i * 5 + i / 3) % 6])
            .collect();
        let values: Vec<f32> = (0..rows * k_sp).map(|i| i as f32).collect();
        let loc: Vec<u8> = (0..rows / v * groups)
            .flat_map(|i| [[0, 1, 2, 3], [1, 3, 4, 7], [0, 2, 5, 6]][i % 3])
            .collect();
        let build = || RowPairs::build(rows, v, groups, k_sp, &codes, &values).unwrap();
        let pairs = build().with_direct(v, m, groups * m, &loc);
        let direct = pairs.direct.as_ref().unwrap();
        assert_eq!(direct.len(), pairs.entries.len());
        for (i, (&e, &d)) in pairs.entries.iter().zip(direct).enumerate() {
            // The entry's V-block from its pair's first row.
            let (blk, g) = (
                pairs.rows[i / groups][0] as usize / v,
                (e & 0xffff) as usize,
            );
            assert_eq!(
                (d & 0xffff) as usize,
                g * m,
                "entry {i}: its group's first row"
            );
            for (q, p) in [(16, 16), (18, 20), (20, 24), (22, 28)] {
                let kept = loc[(blk * groups + g) * 4 + ((e >> q) & 3) as usize];
                assert_eq!((d >> p) & 15, u32::from(kept), "entry {i}, shift {q}");
            }
        }
        // No direct entries where a row would be missing or unnameable.
        assert!(build()
            .with_direct(v, m, groups * m - 1, &loc)
            .direct
            .is_none());
        assert!(build()
            .with_direct(v, 32, groups * 32, &loc)
            .direct
            .is_none());
        assert!(build().with_direct(v, 8, 70_000, &loc).direct.is_none());
    }

    #[test]
    fn rows_are_paired_to_share() {
        // Rows 0 and 2 always agree and rows 1 and 3 too, while 0 and 1 are complements: the
        // matching pairs (0, 2) and (1, 3), with no disjoint group.
        let (rows, v, groups, k_sp) = (4, 4, 5, 16);
        let codes: Vec<u8> = (0..rows * groups)
            .map(|i| {
                let (r, g) = (i / groups, i % groups);
                let c = CODES[g % 6];
                if r % 2 == 0 {
                    c
                } else {
                    CODES[5 - g % 6]
                }
            })
            .collect();
        let values = vec![1.0; rows * k_sp];
        let pairs = RowPairs::build(rows, v, groups, k_sp, &codes, &values).unwrap();
        assert_eq!(pairs.rows, vec![[0, 2], [1, 3]]);
        for p in 0..2 {
            assert!(pairs.ranges(p, 0..groups).1.is_empty());
        }
        assert!(RowPairs::build(3, 3, groups, k_sp, &codes[..15], &values).is_none());
        // A block past the matched size pairs its rows in order.
        let v = MATCH_MAX_ROWS + 2;
        let codes: Vec<u8> = (0..v).map(|r| CODES[r % 6]).collect();
        let pairs = RowPairs::build(v, v, 1, 16, &codes, &vec![1.0; v * 16]).unwrap();
        assert_eq!(pairs.rows[1], [2, 3]);
    }

    #[test]
    fn ranges_of_chunks_partition_the_pair() {
        let (rows, v, groups, k_sp) = (2, 2, 11, 32);
        let codes: Vec<u8> = (0..rows * groups).map(|i| CODES[(i * 7) % 6]).collect();
        let values: Vec<f32> = (0..rows * k_sp).map(|i| i as f32).collect();
        let pairs = RowPairs::build(rows, v, groups, k_sp, &codes, &values).unwrap();
        for chunk in [1, 3, 4, 11] {
            let mut seen = vec![];
            for g0 in (0..groups).step_by(chunk) {
                let gs = g0..(g0 + chunk).min(groups);
                let (s, d) = pairs.ranges(0, gs.clone());
                for e in s.chain(d) {
                    let g = (pairs.entries[e] & 0xffff) as usize;
                    assert!(gs.contains(&g), "entry of group {g} outside {gs:?}");
                    seen.push(g);
                }
            }
            seen.sort();
            assert_eq!(seen, (0..groups).collect::<Vec<_>>(), "chunk {chunk}");
        }
    }
}
