//! V:N:M rows in pairs that share B loads: the layout of the CPU tile kernel's pair path.
//!
//! In a group, each row of a V-block keeps 2 of the block's 4 columns, so two rows of one block
//! share at least one column in 5 groups of 6 when their pairs are random (they are disjoint
//! only when one pair is the other's complement). In such a group the kernel loads the shared
//! column's B vector once for both rows' FMAs: 3 loads for 4 FMAs instead of 4, 0.79 B loads
//! per FMA on average. This layout lists, per pair of rows `(2p, 2p + 1)`, its groups as
//! entries: the *shared* groups first (by group), then the disjoint ones (by group), each with
//! its four values in the order the kernel multiplies them.

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
    /// Per pair, `groups + 1` counts: the shared entries among the groups before `g`.
    shared_before: Vec<u16>,
    groups: usize,
}

impl RowPairs {
    /// Builds the layout of `rows` rows (even) from the pair codes (`p0 | p1 << 2` per row and
    /// group, positions in the block's 4 kept columns) and the values (`k_sp` slots per row, a
    /// group's two at `2g` and `2g + 1`, in the order of their positions). `None` if the
    /// groups are more than an entry can name.
    pub(crate) fn build(
        rows: usize,
        groups: usize,
        k_sp: usize,
        codes: &[u8],
        values: &[f32],
    ) -> Option<Self> {
        if groups > usize::from(u16::MAX) {
            return None;
        }
        let pairs = rows / 2;
        let mut entries = Vec::with_capacity(pairs * groups);
        let mut vals = Vec::with_capacity(pairs * groups * 4);
        let mut shared_before = Vec::with_capacity(pairs * (groups + 1));
        let mut disjoint: Vec<(u32, [f32; 4])> = Vec::with_capacity(groups);
        for p in 0..pairs {
            let (r1, r2) = (2 * p, 2 * p + 1);
            disjoint.clear();
            let mut shared = 0u16;
            for g in 0..groups {
                shared_before.push(shared);
                let (c1, c2) = (codes[r1 * groups + g], codes[r2 * groups + g]);
                let (a, b) = (u32::from(c1 & 3), u32::from(c1 >> 2));
                let (x, y) = (u32::from(c2 & 3), u32::from(c2 >> 2));
                let v1 = &values[r1 * k_sp + 2 * g..][..2];
                let v2 = &values[r2 * k_sp + 2 * g..][..2];
                // (shared, first row's other, second row's other) and the values in that order.
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
        Some(RowPairs {
            entries,
            values: vals,
            shared_before,
            groups,
        })
    }

    /// The entries of pair `p` (rows `2p`, `2p + 1`) for the groups `gs`: (shared, disjoint), as
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (row, position, value) of the layout, as the row kernel would take it.
    fn products(pairs: &RowPairs, groups: usize, rows: usize) -> Vec<(usize, usize, u32, u32)> {
        let mut out = vec![];
        for p in 0..rows / 2 {
            let (shared, disjoint) = pairs.ranges(p, 0..groups);
            assert_eq!(shared.len() + disjoint.len(), groups);
            for e in shared.clone().chain(disjoint.clone()) {
                let ent = pairs.entries[e];
                let g = (ent & 0xffff) as usize;
                let q = |shift: u32| (ent >> shift) & 3;
                if shared.contains(&e) {
                    assert_eq!(q(16), q(20), "a shared entry names one column twice");
                }
                let v = &pairs.values[4 * e..4 * e + 4];
                for (j, shift) in [16, 18, 20, 22].into_iter().enumerate() {
                    out.push((2 * p + j / 2, g, q(shift), v[j].to_bits()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn holds_every_value_once_and_shares_where_the_pairs_meet() {
        // 4 rows, 7 groups: every combination of codes appears for some pair and group.
        let (rows, groups, k_sp) = (4, 7, 16);
        let codes_of = [0b0100u8, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110];
        let codes: Vec<u8> = (0..rows * groups)
            .map(|i| codes_of[(i * 5 + i / 3) % 6])
            .collect();
        let values: Vec<f32> = (0..rows * k_sp).map(|i| i as f32 + 0.5).collect();
        let pairs = RowPairs::build(rows, groups, k_sp, &codes, &values).unwrap();
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
        assert_eq!(products(&pairs, groups, rows), want);
        // A pair is disjoint exactly where its codes are complements.
        for p in 0..rows / 2 {
            let complements = (0..groups)
                .filter(|&g| {
                    let (c1, c2) = (codes[2 * p * groups + g], codes[(2 * p + 1) * groups + g]);
                    let set = |c: u8| (1u8 << (c & 3)) | (1 << (c >> 2));
                    set(c1) & set(c2) == 0
                })
                .count();
            assert_eq!(pairs.ranges(p, 0..groups).1.len(), complements);
        }
    }

    #[test]
    fn ranges_of_chunks_partition_the_pair() {
        let (rows, groups, k_sp) = (2, 11, 32);
        let codes_of = [0b0100u8, 0b1110, 0b1100, 0b1001, 0b1101, 0b1000];
        let codes: Vec<u8> = (0..rows * groups).map(|i| codes_of[(i * 7) % 6]).collect();
        let values: Vec<f32> = (0..rows * k_sp).map(|i| i as f32).collect();
        let pairs = RowPairs::build(rows, groups, k_sp, &codes, &values).unwrap();
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
