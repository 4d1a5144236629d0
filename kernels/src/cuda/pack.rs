//! Host-side packing of sparse operands into what the CUDA kernels read, and the fp16
//! conversions around them. Pure CPU code, tested without a GPU, including an emulation of
//! exactly the index arithmetic of `spmm_vnm_f16.cu`.
//!
//! The V:N:M kernel reads [`VnmMatrix`]'s own buffers: its metadata words are already in the
//! order of the `mma.sp.m16n8k16` A fragment (word `i` of a 16-row tile and 8-slot step holds
//! rows `i` and `i + 8`), which is also what `m16n8k32` wants from its two metadata threads
//! (their steps `2s` and `2s + 1`), and its column locations are used as they are. Two
//! conversions remain, both forced by the device: values go from f32 to fp16 (the tensor cores'
//! input type), and the slot dimension K_sp is padded to a multiple of BK/2 (every pipeline
//! stage copies whole BK tiles), which re-strides the metadata; padding groups get positions
//! (0, 1) like the CPU type's own padding.

use half::f16;

use super::CudaError;
use crate::{vnm_k_sp, Mask, NmMatrix, VnmMatrix};

/// A V:N:M matrix packed for `spmm_vnm_f16` configurations with one BK.
#[derive(Debug, Clone, PartialEq)]
pub struct VnmPacked {
    /// Rows, columns, V, M, groups and value slots per row (K_sp padded to a multiple of
    /// BK/2): what the launch needs.
    pub dims: super::VnmDims,
    /// `rows × ks` fp16 bit patterns.
    pub values: Vec<u16>,
    /// `rows/16 × ks/8 × 8` metadata words in `VnmMatrix`'s order.
    pub meta: Vec<u32>,
    /// `rows/V × groups × 4` column offsets, as in `VnmMatrix`.
    pub col_loc: Vec<u8>,
}

impl VnmPacked {
    /// Values, metadata and column locations as uploaded to the device: each with one trailing
    /// element, which keeps empty matrices allocatable and is never read.
    pub fn device_arrays(self) -> (Vec<u16>, Vec<u32>, Vec<u8>) {
        let (mut values, mut meta, mut col_loc) = (self.values, self.meta, self.col_loc);
        values.push(0);
        meta.push(0);
        col_loc.push(0);
        (values, meta, col_loc)
    }
}

/// A metadata word of padding: all 8 slots of both rows at positions (0, 1) per group.
const PAD_WORD: u32 = 0x4444_4444;

/// Packs `a` for V:N:M configurations with this `bk`. Errors if V is not a multiple of 16
/// (`mma.sp` works on 16-row tiles and a block of V rows is one thread block).
pub fn pack_vnm(a: &VnmMatrix, bk: usize) -> Result<VnmPacked, CudaError> {
    if !a.v().is_multiple_of(16) {
        return Err(CudaError::Shape(format!(
            "V={} is not a multiple of 16: the mma.sp kernel needs 16-row tiles",
            a.v()
        )));
    }
    let k_sp = a.k_sp();
    let half_bk = (bk / 2).max(8);
    let ks = k_sp.div_ceil(half_bk) * half_bk;
    let mut values = vec![0u16; a.rows() * ks];
    for (dst, src) in values
        .chunks_exact_mut(ks)
        .zip(a.values().chunks_exact(k_sp))
    {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f16::from_f32(*s).to_bits();
        }
    }
    let tiles = a.rows() / 16;
    let meta = if ks == k_sp {
        a.metadata()[..tiles * ks].to_vec()
    } else {
        let mut meta = vec![PAD_WORD; tiles * ks];
        for t in 0..tiles {
            let src = &a.metadata()[t * k_sp..][..k_sp];
            meta[t * ks..][..k_sp].copy_from_slice(src);
        }
        meta
    };
    Ok(VnmPacked {
        dims: super::VnmDims {
            rows: a.rows(),
            cols: a.cols(),
            v: a.v(),
            m: a.m(),
            groups: a.groups(),
            ks,
        },
        values,
        meta,
        col_loc: a.column_loc().to_vec(),
    })
}

/// The row of B that gathered column `kg` of row block `rb` reads (kernel's `gathered_row`).
fn gathered_row(p: &VnmPacked, rb: usize, kg: usize) -> Option<usize> {
    let (g, d) = (kg / 4, &p.dims);
    if g >= d.groups {
        return None;
    }
    let col = g * d.m + p.col_loc[(rb * d.groups + g) * 4 + kg % 4] as usize;
    (col < d.cols).then_some(col)
}

/// What `spmm_vnm_f16` computes from a packed matrix, on the CPU, in f32 from the fp16 values
/// and fp16-rounded B: C = A·B with B `cols × n` row-major. Tests the packing without a GPU.
pub fn emulate_vnm(p: &VnmPacked, b: &[f32], n: usize) -> Vec<f32> {
    let (rows, ks, v) = (p.dims.rows, p.dims.ks, p.dims.v);
    let mut c = vec![0.0f32; rows * n];
    for r in 0..rows {
        for slot in 0..ks {
            // Same word and shift as the kernel's fragment: tile, 8-slot step, row within 8.
            let word = p.meta[((r / 16) * (ks / 8) + slot / 8) * 8 + r % 8];
            let shift = 2 * (slot % 8) + if r % 16 >= 8 { 16 } else { 0 };
            let pos = ((word >> shift) & 3) as usize;
            let val = f16::from_bits(p.values[r * ks + slot]).to_f32();
            if let Some(brow) = gathered_row(p, r / v, 4 * (slot / 2) + pos) {
                for (cv, bv) in c[r * n..][..n].iter_mut().zip(&b[brow * n..][..n]) {
                    *cv += val * f16::from_f32(*bv).to_f32();
                }
            }
        }
    }
    c
}

/// 2:4 (or 1:4) as the M = 4 case of V:N:M with row blocks of `v`: every block keeps columns
/// 0..4 of its group, and each row's stored slots become its 2 positions.
pub fn vnm_from_nm(a: &NmMatrix, v: usize) -> Result<VnmMatrix, CudaError> {
    if a.m() != 4 || a.n() > 2 {
        return Err(CudaError::Shape(format!(
            "{}:{} is not 2:4 or 1:4; the sparse tensor-core path takes only those",
            a.n(),
            a.m()
        )));
    }
    let (rows, cols, groups) = (a.rows(), a.cols(), a.groups());
    let mut keep = vec![false; rows * cols];
    let mut dense = vec![0.0f32; rows * cols];
    for r in 0..rows {
        for g in 0..groups {
            for s in 0..a.n() {
                let i = (r * groups + g) * a.n() + s;
                let col = g * 4 + a.positions()[i] as usize;
                if col < cols {
                    keep[r * cols + col] = true;
                    dense[r * cols + col] = a.values()[i];
                }
            }
        }
    }
    let shape = |e: crate::KernelError| CudaError::Shape(e.to_string());
    let mask = Mask::new(rows, cols, keep).map_err(shape)?;
    VnmMatrix::from_masked(&dense, &mask, v, 4).map_err(shape)
}

/// Slots per row of a V:N:M matrix packed for `bk` (K_sp padded to BK/2).
pub fn packed_slots(cols: usize, m: usize, bk: usize) -> usize {
    let half_bk = (bk / 2).max(8);
    vnm_k_sp(cols, m).div_ceil(half_bk) * half_bk
}

/// f32 values to fp16 bit patterns (round to nearest even).
pub fn to_f16_bits(x: &[f32]) -> Vec<u16> {
    x.iter().map(|v| f16::from_f32(*v).to_bits()).collect()
}

/// fp16 bit patterns to f32 values.
pub fn from_f16_bits(x: &[u16]) -> Vec<f32> {
    x.iter().map(|v| f16::from_bits(*v).to_f32()).collect()
}

/// A row-major `rows × cols` f32 matrix as fp16 with rows padded to `ld` elements (zeros).
pub fn pad_rows_f16(x: &[f32], rows: usize, cols: usize, ld: usize) -> Vec<u16> {
    let mut out = vec![0u16; rows * ld];
    for r in 0..rows {
        for c in 0..cols {
            out[r * ld + c] = f16::from_f32(x[r * cols + c]).to_bits();
        }
    }
    out
}

/// A row-major f32 `rows × cols` matrix as the device holds it for the fp16 kernels: fp16, rows
/// padded to [`padded_ld`], one trailing element (never read). Returns the row stride and data.
pub fn f16_device_layout(x: &[f32], rows: usize, cols: usize) -> (usize, Vec<u16>) {
    let ld = padded_ld(cols);
    let mut data = pad_rows_f16(x, rows, cols, ld);
    data.push(0);
    (ld, data)
}

/// `n` rounded up to a multiple of 8 (16-byte rows for cp.async).
pub fn padded_ld(n: usize) -> usize {
    n.div_ceil(8) * 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::random::{exact_values, random_vnm};
    use crate::{spmm_reference, SparseMatrix};

    fn reference(a: &VnmMatrix, b: &[f32], n: usize) -> Vec<f32> {
        let mut c = vec![0.0; a.rows() * n];
        spmm_reference(&SparseMatrix::Vnm(a.clone()), b, n, &mut c).unwrap();
        c
    }

    /// The packed layout, read with the kernel's index arithmetic, computes the same product
    /// as the CPU reference, exactly (the values are exact in fp16 and their sums in f32).
    #[test]
    fn emulated_kernel_matches_reference_on_awkward_shapes() {
        let shapes = [
            // rows, cols, v, m, n
            (16, 1, 16, 4, 1),
            (16, 3, 16, 4, 5),
            (16, 7, 16, 5, 3),
            (32, 100, 16, 10, 9),
            (64, 257, 64, 8, 4),
            (128, 64, 32, 16, 7),
            (64, 130, 64, 32, 2),
            (48, 95, 16, 40, 3),
            (128, 300, 128, 100, 2),
        ];
        for (i, &(rows, cols, v, m, n)) in shapes.iter().enumerate() {
            let a = random_vnm(rows, cols, v, m, i as u64).unwrap();
            let b = exact_values(cols * n, 100 + i as u64);
            let want = reference(&a, &b, n);
            for bk in [32, 64] {
                let p = pack_vnm(&a, bk).unwrap();
                assert_eq!((2 * p.dims.ks) % bk, 0);
                assert_eq!(p.meta.len(), rows / 16 * p.dims.ks);
                assert_eq!(
                    emulate_vnm(&p, &b, n),
                    want,
                    "shape {:?} bk {bk}",
                    shapes[i]
                );
            }
        }
    }

    #[test]
    fn padding_keeps_metadata_valid_and_values_zero() {
        let a = random_vnm(32, 40, 16, 8, 1).unwrap(); // 5 groups: K_sp = 16
        let p = pack_vnm(&a, 64).unwrap(); // ks = 32
        assert_eq!((a.k_sp(), p.dims.ks), (16, 32));
        for r in 0..32 {
            assert!(p.values[r * 32 + 16..r * 32 + 32].iter().all(|&v| v == 0));
        }
        for t in 0..2 {
            // Steps 2 and 3 of each tile are padding.
            assert!(p.meta[t * 32 + 16..t * 32 + 32]
                .iter()
                .all(|&w| w == PAD_WORD));
            assert_eq!(
                &p.meta[t * 32..t * 32 + 16],
                &a.metadata()[t * 16..t * 16 + 16]
            );
        }
    }

    #[test]
    fn v_not_multiple_of_16_is_rejected() {
        let a = random_vnm(24, 16, 8, 4, 0).unwrap();
        assert!(matches!(pack_vnm(&a, 32), Err(CudaError::Shape(_))));
    }

    #[test]
    fn two_four_becomes_vnm_with_the_same_product() {
        use crate::{build_mask, NmMatrix, Pattern};
        // 128 rows: every block height the 2:4 space tunes (16, 32, 64, 128).
        let (rows, cols, n) = (128, 22, 3);
        let vals = exact_values(rows * cols, 5);
        let scores: Vec<f32> = vals.iter().map(|v| v.abs()).collect();
        let mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, rows, cols).unwrap();
        let nm = NmMatrix::from_masked(&vals, &mask, 2, 4).unwrap();
        let b = exact_values(cols * n, 6);
        for v in crate::cuda::nm24_block_rows(rows) {
            let vnm = vnm_from_nm(&nm, v).unwrap();
            assert_eq!(vnm.to_dense(), nm.to_dense(), "V = {v}");
            for bk in [32, 64] {
                let p = pack_vnm(&vnm, bk).unwrap();
                assert_eq!(emulate_vnm(&p, &b, n), reference(&vnm, &b, n), "V = {v}");
            }
        }
    }

    #[test]
    fn fp16_round_trip_and_row_padding() {
        let x = [1.0, -0.5, 3.0e-5, 65504.0, 1.0e6];
        let back = from_f16_bits(&to_f16_bits(&x));
        assert_eq!(&back[..2], &[1.0, -0.5]);
        assert_eq!(back[3], 65504.0);
        assert!(back[4].is_infinite());
        assert_eq!(padded_ld(0), 0);
        assert_eq!(padded_ld(9), 16);
        let p = pad_rows_f16(&[1.0, 2.0, 3.0, 4.0], 2, 2, 8);
        assert_eq!(p.len(), 16);
        assert_eq!(from_f16_bits(&p[8..10]), vec![3.0, 4.0]);
        assert!(p[2..8].iter().all(|&v| v == 0));
    }
}
