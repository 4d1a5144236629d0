//! One launch of the Hopper kernel (`spmm_vnm_wgmma_f16`, and its split-K reduction): the grid,
//! the kernel's integer arguments and the workspace a configuration needs for a product. Pure
//! data: no CUDA needed.

use super::wgmma::WgmmaConfig;
use super::{CudaError, VnmDims};

/// Threads per block of the split-K reduction `spmm_vnm_wgmma_reduce_f16`.
pub const WGMMA_REDUCE_THREADS: u32 = 256;
/// Elements of the product each thread of the reduction sums.
pub const WGMMA_REDUCE_PER_THREAD: u32 = 8;

/// One launch of `spmm_vnm_wgmma_f16` (and, with split-K, of its reduction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WgmmaLaunch {
    /// The tiles: column tiles of C (BN each) × row blocks (BM each) × splits of K; with
    /// clusters, a tile is a cluster's (`CLUSTER` row blocks or `CLUSTER_N` column tiles, the
    /// last cluster's last blocks past the rows or columns where they are not a multiple).
    pub tiles: u32,
    /// Thread blocks (a 1-D grid): one per tile, or with `PERSISTENT` 1 at most one per SM,
    /// each walking the tiles in turn (the kernel's `TileGrid`, in the order `RASTER` says);
    /// with clusters, a cluster's blocks per tile (or per cluster walking them).
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes: [`WgmmaConfig::shared_bytes`].
    pub shared_bytes: usize,
    /// The kernel's integer arguments in order: rows, n, ks, groups, m, k, ldb, ldc, v, splits,
    /// raster.
    pub ints: [i32; 11],
    /// f32 elements of the split-K workspace (`splits × rows × ldc`; 0 without split-K).
    pub workspace: usize,
    /// Blocks of the reduction (0 without split-K), each of [`WGMMA_REDUCE_THREADS`] threads
    /// summing [`WGMMA_REDUCE_PER_THREAD`] elements; its integer arguments are rows, n, ldc,
    /// splits.
    pub reduce_blocks: u32,
}

impl WgmmaLaunch {
    /// The launch of `cfg` for A = `a` (packed for `cfg.bk`) times a B of `n` columns with row
    /// strides `ldb` (B) and `ldc` (C), in elements; both strides must be multiples of 8
    /// (16-byte rows for cp.async). Errors if `cfg` is invalid, BM does not divide V, the
    /// packing does not fit BK, `cfg` copies B by TMA and M is not 4, or a size exceeds the
    /// kernel's `int`s. A persistent grid has at most `resident` clusters (blocks without
    /// clusters): as many as the device runs at once ([`WgmmaConfig::resident_clusters`], or
    /// the driver's count), so that no cluster waits for a second wave.
    pub fn new(
        a: VnmDims,
        n: usize,
        ldb: usize,
        ldc: usize,
        cfg: &WgmmaConfig,
        resident: usize,
    ) -> Result<Self, CudaError> {
        cfg.validate()?;
        if a.v == 0 || !a.v.is_multiple_of(cfg.bm) || !(2 * a.ks).is_multiple_of(cfg.bk) {
            return Err(CudaError::Shape(format!(
                "{cfg} does not fit a matrix packed with V={} and {} slots per row",
                a.v, a.ks
            )));
        }
        if cfg.tma == 1 && a.m != 4 {
            return Err(CudaError::Shape(format!(
                "{cfg} copies B's tiles as boxes (TMA): only M = 4 (2:4) has a k-tile's rows \
                 consecutive in B, this matrix has M = {}",
                a.m
            )));
        }
        if !ldb.is_multiple_of(8) || !ldc.is_multiple_of(8) {
            return Err(CudaError::Shape(format!(
                "row strides {ldb} (B) and {ldc} (C) must be multiples of 8 halves"
            )));
        }
        let int = |x: usize| {
            i32::try_from(x).map_err(|_| CudaError::Shape(format!("{x} exceeds the kernel's int")))
        };
        let mut ints = [0; 11];
        for (slot, x) in ints.iter_mut().zip([
            a.rows,
            n,
            a.ks,
            a.groups,
            a.m,
            a.cols,
            ldb,
            ldc,
            a.v,
            cfg.split_k,
            cfg.raster,
        ]) {
            *slot = int(x)?;
        }
        let split = cfg.split_k > 1;
        let row_groups = (a.rows / cfg.bm).div_ceil(cfg.cluster);
        let col_groups = n.div_ceil(cfg.bn).div_ceil(cfg.cluster_n);
        let tiles = int(col_groups * row_groups * cfg.split_k)? as u32;
        let clusters = if cfg.persistent == 1 {
            tiles.min(int(resident.max(1))? as u32)
        } else {
            tiles
        };
        Ok(WgmmaLaunch {
            tiles,
            blocks: int(clusters as usize * cfg.cluster_size())? as u32,
            threads: cfg.threads() as u32,
            shared_bytes: cfg.shared_bytes(),
            ints,
            workspace: if split { cfg.split_k * a.rows * ldc } else { 0 },
            reduce_blocks: if split {
                let per_block = (WGMMA_REDUCE_THREADS * WGMMA_REDUCE_PER_THREAD) as usize;
                int((a.rows * n).div_ceil(per_block))? as u32
            } else {
                0
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{pack_vnm, padded_ld, random_vnm};

    #[test]
    fn the_launch_covers_every_row_block_and_column_tile() {
        let a = random_vnm(256, 100, 128, 8, 1).unwrap();
        let cfg = WgmmaConfig {
            bm: 64,
            bn: 128,
            bk: 64,
            stages: 3,
            keep: 1,
            split_k: 1,
            bulk: 0,
            swizzle: 0,
            tma: 0,
            raster: 0,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        let p = pack_vnm(&a, cfg.bk).unwrap();
        let ld = padded_ld(70);
        let new =
            |cfg: &WgmmaConfig| WgmmaLaunch::new(p.dims, 70, ld, ld, cfg, cfg.resident_clusters(3));
        let l = new(&cfg).unwrap();
        // BM = 64 inside V = 128: four row blocks, two per V-block; one column tile.
        assert_eq!((l.tiles, l.blocks), (4, 4));
        assert_eq!(l.threads, 256);
        assert_eq!(l.shared_bytes, cfg.shared_bytes());
        assert_eq!(
            l.ints,
            [
                256,
                70,
                p.dims.ks as i32,
                13,
                8,
                100,
                ld as i32,
                ld as i32,
                128,
                1,
                0
            ]
        );
        assert_eq!((l.workspace, l.reduce_blocks), (0, 0));
        // Row blocks fastest: the kernel is told.
        let rows_first = WgmmaConfig { raster: 1, ..cfg };
        assert_eq!(new(&rows_first).unwrap().ints[10], 1);
        // Persistent: at most one block per SM (3 here), walking the 4 tiles.
        let persistent = WgmmaConfig {
            persistent: 1,
            ..cfg
        };
        let l = new(&persistent).unwrap();
        assert_eq!((l.tiles, l.blocks), (4, 3));
        // Split-K: tiles along K, a workspace of f32 partials, a reduction over the product.
        let split = WgmmaConfig { split_k: 4, ..cfg };
        let l = new(&split).unwrap();
        assert_eq!((l.tiles, l.blocks, l.ints[9]), (16, 16, 4));
        assert_eq!(l.workspace, 4 * 256 * ld);
        assert_eq!(l.reduce_blocks, (256 * 70u32).div_ceil(256 * 8));
        let v64 = random_vnm(128, 100, 64, 8, 2).unwrap();
        let p64 = pack_vnm(&v64, 64).unwrap();
        let tall = WgmmaConfig { bm: 128, ..cfg };
        assert!(WgmmaLaunch::new(p64.dims, 70, ld, ld, &tall, 3).is_err());
        assert!(WgmmaLaunch::new(p.dims, 70, 70, ld, &cfg, 3).is_err());
        // TMA copies B's k-tiles as boxes: M = 4 only (this matrix is 2:8), and only swizzled.
        let tma = WgmmaConfig {
            swizzle: 1,
            bulk: 1,
            tma: 1,
            ..cfg
        };
        assert!(WgmmaConfig { swizzle: 0, ..tma }.validate().is_err());
        assert!(WgmmaConfig { bulk: 0, ..tma }.validate().is_err());
        assert!(new(&tma).is_err());
        let m4 = VnmDims { m: 4, ..p.dims };
        assert!(WgmmaLaunch::new(m4, 70, ld, ld, &tma, 3).is_ok());
        // Clusters of two (TMA only): a tile is a pair of row blocks, two blocks each, and a
        // persistent grid has at most SMs / 2 pairs; 3 row blocks make 2 pairs, the second
        // half past the rows.
        assert!(WgmmaConfig { cluster: 2, ..cfg }.validate().is_err());
        let pair = WgmmaConfig { cluster: 2, ..tma };
        let pairs = |dims, cfg: &WgmmaConfig, resident| {
            let l = WgmmaLaunch::new(dims, 70, ld, ld, cfg, resident).unwrap();
            (l.tiles, l.blocks)
        };
        assert_eq!(pair.resident_clusters(3), 1);
        assert_eq!(pairs(m4, &pair, 1), (2, 4));
        let persistent_pairs = WgmmaConfig {
            persistent: 1,
            ..pair
        };
        assert_eq!(pairs(m4, &persistent_pairs, 1), (2, 2));
        // As many pairs as the device holds at once (its count, not SMs / 2), never more than
        // the tiles.
        assert_eq!(pairs(m4, &persistent_pairs, 2), (2, 4));
        assert_eq!(pairs(m4, &persistent_pairs, 5), (2, 4));
        assert_eq!(pairs(VnmDims { rows: 192, ..m4 }, &pair, 1), (2, 4));
        // Clusters of four: 4 row blocks make one cluster, 5 two (the second's last three
        // blocks past the rows); a persistent grid has at most as many clusters as the device
        // holds, four blocks each.
        let four = WgmmaConfig { cluster: 4, ..tma };
        assert_eq!(four.resident_clusters(9), 2);
        assert_eq!(pairs(m4, &four, 1), (1, 4));
        assert_eq!(pairs(VnmDims { rows: 320, ..m4 }, &four, 1), (2, 8));
        let persistent_fours = WgmmaConfig {
            persistent: 1,
            ..four
        };
        assert_eq!(
            pairs(VnmDims { rows: 320, ..m4 }, &persistent_fours, 1),
            (2, 4)
        );
        // Each block's share of a stage is whole 8-row swizzle atoms: BK / 4 >= 8.
        assert!(WgmmaConfig { bk: 32, ..four }.validate().is_ok());
        assert!(WgmmaConfig { cluster: 3, ..tma }.validate().is_err());
        // Clusters along n (bulk copies of A, any M): a tile is CLUSTER_N column tiles of one
        // row block. 300 columns are 3 tiles of 128: 2 pairs (the second's last block past
        // the columns) × 4 row blocks, 16 blocks. Not with TMA (its clusters are along the
        // rows), nor without bulk copies of A.
        assert!(WgmmaConfig {
            cluster_n: 2,
            ..cfg
        }
        .validate()
        .is_err());
        assert!(WgmmaConfig {
            cluster_n: 2,
            ..tma
        }
        .validate()
        .is_err());
        let bulk = WgmmaConfig { bulk: 1, ..cfg };
        let along_n = |cluster_n, persistent, resident| {
            let c = WgmmaConfig {
                cluster_n,
                persistent,
                ..bulk
            };
            let l = WgmmaLaunch::new(p.dims, 300, 304, 304, &c, resident).unwrap();
            (l.tiles, l.blocks)
        };
        assert_eq!(along_n(1, 0, 1), (12, 12));
        assert_eq!(along_n(2, 0, 1), (8, 16));
        assert_eq!(along_n(2, 1, 3), (8, 6));
        assert_eq!(
            WgmmaConfig {
                cluster_n: 2,
                ..bulk
            }
            .resident_clusters(9),
            4
        );
        assert!(WgmmaConfig {
            cluster_n: 4,
            ..bulk
        }
        .validate()
        .is_err());
    }
}
