// V:N:M SpMM on Hopper's sparse warpgroup MMA (wgmma.mma_async.sp, sm_90a), fp16 storage, fp32
// accumulation.
//
//   C[rows x n] (fp16) = A[rows x K] (V:2:M) * B[K x n] (fp16, row-major, row stride ldb)
//
// As in spmm_vnm_f16.cu (Spatha's structure), the reduction runs over the *gathered* dimension:
// the 4 kept columns of every V x M block of A pull 4 rows of B, so that A is plain 2:4 over
// kp = 2 * ks gathered columns. A block's BM rows must share their column locations (BM | V).
//
// A thread block is warp-specialised:
//   warpgroup 0        the producer: cp.async copies of A's values and metadata (or bulk
//                      copies, BULK = 1) and of the gathered B rows into a STAGES-deep ring
//                      of shared-memory stages;
//                      `cp.async.mbarrier.arrive.noinc` makes stage s's `full` barrier complete
//                      when every producer thread's copies have landed;
//   warpgroups 1..BM/64  the consumers, each owning 64 rows x BN columns of C: wait on `full`,
//                      load their A fragments (ldmatrix) and metadata, issue BK/32
//                      `wgmma.mma_async.sp.m64n{BN}k32` reading B from shared memory through a
//                      matrix descriptor, wait for them, and arrive on the stage's `empty`
//                      barrier, which the producer waits on before refilling the stage.
//                      PINGPONG = 1 (BM = 128, BN <= 128): instead each consumer warpgroup
//                      owns whole tiles (two m64 wgmmas per k32 step), the block's tiles
//                      alternating between the two, their main loops taking turns through
//                      named barriers so that one's epilogue runs under the other's wgmmas
//                      (the host launches it with persistent grids only: with a block per
//                      tile the second warpgroup would idle).
//
// B's stage is BK x BN halves, read by wgmma N-major (imm-trans-b = 1) in one of two layouts:
// - SWIZZLE = 0: 8 x 8 core matrices (8 gathered rows x 8 columns = 128 contiguous bytes, one
//   16-byte row per gathered row), core matrix (kc, nc) at byte (kc * BN / 8 + nc) * 128, so
//   core matrices adjacent along n are 128 bytes apart and along k 16 * BN bytes apart; no
//   swizzle.
// - SWIZZLE = 1: the 128-byte swizzle. Column group cg (64 columns) of gathered row r is the
//   128 bytes at cg * BK * 128 + r * 128, its 16-byte pieces permuted: piece c at
//   (c ^ (r % 8)) * 16. 8-row atoms (1024 bytes, 1024-aligned) follow each other along k. A
//   gathered row's columns then come from 128 contiguous bytes of B, and this is the layout a
//   TMA tensor copy with 128-byte swizzle writes.
// - TMA = 1 (with SWIZZLE = 1 and BULK = 1, for M = 4 only: 2:4, whose column locations are
//   0..3 in every group, so the gathered rows of k-tile kt are B's rows kt * BK onwards): B's
//   stage arrives by BN / 64 TMA tensor copies, one per column group, each a box of 64
//   columns x BK rows of `tmap_b` (a 2-D tensor map over B encoded by the host: fp16, dims
//   (n, k), rows ldb * 2 bytes apart, box (64, BK), 128-byte swizzle, out-of-bounds elements
//   read as zero, so K's and n's ragged edges need no guard), issued by one producer thread
//   after raising the stage's `full` barrier's expected bytes by the stage's. The host refuses
//   TMA for M != 4.
// - CLUSTER = 2 or 4 (with TMA): thread-block clusters of CLUSTER blocks (`__cluster_dims__`),
//   the row blocks CLUSTER p .. CLUSTER p + CLUSTER - 1 of one column tile and split, which read
//   the same tiles of B: each block loads its share of every stage's boxes (BK / CLUSTER of its
//   rows, tensor-map boxes of 64 x BK / CLUSTER, whole 8-row swizzle atoms) and multicasts it
//   into every block's stage (`.multicast::cluster`), completing its bytes on each block's
//   `full` barrier, so B crosses from L2 once per cluster. A stage may be refilled only when
//   every block's consumers have released it: each consumer warp arrives (lane r, after the
//   warp's wgmmas are done) on the `empty` barrier of block r, for every r
//   (`mapa` + `mbarrier.arrive.shared::cluster`); the blocks meet at a cluster barrier after
//   initialising their mbarriers and again before exiting (no block leaves while a peer may
//   still arrive on its barriers). Where the row blocks are not a multiple of CLUSTER, the last
//   cluster's blocks past them load a valid row block's A (so their copies stay in bounds) and
//   store nothing.
// - CLUSTER_N = 2 or 4 (with BULK = 1, CLUSTER = 1): clusters along n instead, the column
//   tiles CLUSTER_N q .. CLUSTER_N q + CLUSTER_N - 1 of one row block and split, which read the
//   same tiles of A and the metadata (at M > 4 nothing multicasts B: the gathered rows differ
//   between row blocks, and A is the one stream left to share). Each block bulk-copies its
//   share of every stage's A rows (BM / CLUSTER_N) and metadata tiles (BM / 16 / CLUSTER_N)
//   and multicasts them into every block's stage; one thread of each block expects the whole
//   stage's A bytes on its own `full` barrier. Releases and cluster barriers as for CLUSTER.
//   Blocks past the last column tile gather zeros (columns >= n) and store nothing.
//   Either cluster runs with PINGPONG = 1: a cluster's blocks walk the same tiles, so the same
//   warpgroup of each consumes a stage, and `empty` counts that warpgroup's warps of each.
//
// A is read in the layout of the CPU type `kernels::VnmMatrix` (format/vnm.rs), with ks padded
// to a multiple of BK / 2 (see spmm_vnm_f16.cu for the arrays).
// Tunables, passed as #defines: BM BN BK STAGES KEEP (wgmma groups a consumer leaves in flight
// while it loads the next tile: 0 or 1) SWIZZLE (B's layout, above) TMA (B by tensor copies,
// above) CLUSTER CLUSTER_N PINGPONG (above) BULK (1: A's rows and the
// metadata's 16-row tiles, contiguous in global memory, arrive by `cp.async.bulk` (the TMA
// unit), one copy per row or tile, completing bytes on the stage's `full` barrier; 0: 16-byte
// `cp.async` like B); and at launch, `splits` (split-K, for grids with fewer blocks than SMs:
// f32 partials in `ws`, then spmm_vnm_wgmma_reduce_f16), `raster` (the tile order, below) and
// the grid's size: one block per tile, or fewer (persistent blocks, one per SM), each walking
// the tiles in turn so that its producer fills the next tile's stages while its consumers store
// the last one.
// No CUDA headers are needed: fp16 is carried as raw 16-bit words and converted with PTX.

#ifndef BM
#error "BM must be defined"
#endif
#ifndef KEEP
#error "KEEP must be defined"
#endif
#ifndef BULK
#error "BULK must be defined"
#endif
#ifndef SWIZZLE
#error "SWIZZLE must be defined"
#endif
#ifndef TMA
#error "TMA must be defined"
#endif
#if TMA && !(SWIZZLE && BULK)
#error "TMA copies write the 128-byte swizzle, and come with A's bulk copies: TMA = 1 needs SWIZZLE = 1 and BULK = 1"
#endif
#ifndef CLUSTER
#error "CLUSTER must be defined"
#endif
#if CLUSTER != 1 && !((CLUSTER == 2 || CLUSTER == 4) && TMA && BK / CLUSTER >= 8)
#error "CLUSTER is 1, or 2 or 4 with TMA = 1 (the cluster multicasts B's boxes, BK / CLUSTER >= 8 rows each)"
#endif
#ifndef CLUSTER_N
#error "CLUSTER_N must be defined"
#endif
#if CLUSTER_N != 1 && !((CLUSTER_N == 2 || CLUSTER_N == 4) && BULK && CLUSTER == 1)
#error "CLUSTER_N is 1, or 2 or 4 with BULK = 1 and CLUSTER = 1 (the cluster multicasts A's bulk copies)"
#endif
// (The host offers CLUSTER_N = 2 only, and only with TMA = 0: kernels/src/cuda/wgmma.rs.)
#ifndef PINGPONG
#error "PINGPONG must be defined"
#endif
#if PINGPONG && !(BM == 128 && BN <= 128)
#error "PINGPONG = 1 needs BM = 128 (two consumer warpgroups) and BN <= 128"
#endif
#if PINGPONG && BN == 128 && BK == 128 && KEEP
#error "PINGPONG = 1 at BN = 128 and BK = 128 needs KEEP = 0 (ptxas serialises the wgmmas)"
#endif

#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#define A_STRIDE (BK / 2 + 8)           // halves per smem row of A (padded against bank conflicts)
#define STEPS (BK / 16)                 // 16-column metadata steps per k-tile
#define KSTEPS (BK / 32)                // wgmma k32 steps per k-tile
#define B_STAGE (BK * BN)               // halves
#define A_STAGE (BM * A_STRIDE)         // halves
#define M_STAGE (BM / 16 * STEPS * 8)   // u32 metadata words per stage
#define A_CHUNKS (BM * BK / 16)         // 16-byte chunks of A per k-tile
#define B_CHUNKS (BK * BN / 8)          // 16-byte chunks of B per k-tile
#define M_CHUNKS (M_STAGE / 4)          // 16-byte chunks of metadata per k-tile
// Ping-pong: a consumer warpgroup owns whole BM-row tiles, MSUB = BM / 64 m64 sub-tiles (one
// wgmma each per k32 step); cooperative, 64 rows of every tile.
#define MSUB (PINGPONG ? BM / 64 : 1)
#define NACC (BN / 2)                   // f32 accumulators per consumer thread and sub-tile
#define B_BOX_ROWS (BK / CLUSTER)       // rows of B's boxes: each block of a cluster loads its share
#define CLUSTER_SIZE (CLUSTER * CLUSTER_N) // blocks per cluster (one of the two is 1)
#define A_SHARE (BM / CLUSTER_N)        // rows of A each block of a cluster along n copies
#define M_SHARE (BM / 16 / CLUSTER_N)   // metadata tiles each block of a cluster along n copies
// The B descriptor's byte offsets (NOTES.md, "wgmma layouts"). N-major without swizzle: the
// leading byte offset between core matrices adjacent along k, the stride byte offset along n
// (the PTX ISA's canonical layout ((8,1,m),(8,k)):((1,8,SBO),(8,LBO)) in halves). N-major with
// the 128-byte swizzle the roles trade: LBO between 64-column groups (along n), SBO between
// 8-row atoms (along k) (((64,m),(8,k)):((1,LBO),(64,SBO)) in halves). B_DESC_SWAP=1 swaps the
// two in either layout: the device check's probe of that reading. B_KSTEP: bytes between
// 8-row groups of gathered rows (the descriptor's start moves by 4 of them per k32 step);
// B_NSTEP: bytes between 8-column core matrices (unswizzled) or 64-column groups (swizzled).
#ifndef B_DESC_SWAP
#define B_DESC_SWAP 0
#endif
// META_SWAP=1 makes threads 0 and 1 of a quad trade their metadata words: the probe of the
// other reading of which thread holds which kept columns.
#ifndef META_SWAP
#define META_SWAP 0
#endif
// META_XHALF=1: a thread's metadata word holds one row's 32 kept columns (thread p: row
// g + 8p, columns 0..15 in bits 0..15 and 16..31 in bits 16..31) instead of 16 kept columns
// of rows g and g + 8. A_SWAP=1: A fragment registers 1 and 2 trade places. Both are the
// probe's, like the two above (kernels/src/cuda/wgmma_reading.rs); 0 is the emulator's reading.
#ifndef META_XHALF
#define META_XHALF 0
#endif
#ifndef A_SWAP
#define A_SWAP 0
#endif
// Timing ablations for the device benchmark, never for results: ABLATE_MMA=1 drops the
// consumers' wgmmas (what is left: the producer's copies and the pipeline's hand-offs),
// ABLATE_B=1 drops the producer's gather of B (what is left: the wgmmas on whatever the stage
// holds, A's and the metadata's copies, the hand-offs). Both keep every barrier, so neither
// can hang where the kernel does not.
#ifndef ABLATE_MMA
#define ABLATE_MMA 0
#endif
#ifndef ABLATE_B
#define ABLATE_B 0
#endif
// ABLATE_STORE=1 drops the epilogue's stores of C (and of the split-K partials): what is left
// is the main loop, so the difference is what the epilogue costs the tile. EPILOGUE_U32=1
// stores C as it once did, one 4-byte store per thread per row and column block (a warp's
// store: 8 rows x 16 bytes) instead of the quad's 16-byte ones: the benchmark's comparison.
#ifndef ABLATE_STORE
#define ABLATE_STORE 0
#endif
#ifndef EPILOGUE_U32
#define EPILOGUE_U32 0
#endif
#if SWIZZLE
#define B_KSTEP 1024
#define B_NSTEP (BK * 128)
#else
#define B_KSTEP (16 * BN)
#define B_NSTEP 128
#endif
// LBO is the step along k without swizzle, along n with it (the other way round if swapped).
#if SWIZZLE != B_DESC_SWAP
#define B_LBO B_NSTEP
#define B_SBO B_KSTEP
#else
#define B_LBO B_KSTEP
#define B_SBO B_NSTEP
#endif

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// The PTX this kernel uses, one helper per instruction. The host emulator (kernels/cuda/emu/)
// defines COTUNE_EMULATE and its own versions, so that CI runs this very source on the CPU.
#ifndef COTUNE_EMULATE
// 1024-aligned: the 128-byte swizzle's atoms (SWIZZLE = 1) must start at 1024-byte
// boundaries of the shared window (the descriptors' base offset is 0).
#define DYNAMIC_SHARED(name) extern __shared__ __align__(1024) unsigned char name[]

// The driver's tensor map (CUtensorMap: 128 opaque bytes, 64-aligned), encoded by the host
// (`cuTensorMapEncodeTiled`) and passed by value as a `__grid_constant__` parameter, so that
// the TMA unit reads it from the kernel's parameter space through its generic address.
struct __align__(64) TensorMap {
    u64 opaque[16];
};
#define GRID_CONSTANT __grid_constant__

static __device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

static __device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

static __device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// The barrier's pending count is not raised: it was initialised to count these arrivals.
static __device__ __forceinline__ void cp_async_mbar_arrive_noinc(u64* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Raises the barrier's expected transaction bytes for the current phase: the phase completes
// once its arrivals are in and as many bytes have been completed (cp.async.bulk below).
static __device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

// One bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to
// this block's shared memory by the TMA unit, completing its bytes on `bar`.
static __device__ __forceinline__ void cp_async_bulk(void* dst, const void* src, u32 bytes, u64* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}

// The same copy multicast to the blocks of the cluster in `mask`: it lands at `dst`'s offset in
// each one's shared memory and completes its bytes on the barrier at `bar`'s offset in each.
static __device__ __forceinline__ void cp_async_bulk_multicast(void* dst, const void* src, u32 bytes, u64* bar,
                                                               unsigned short mask) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1], %2, [%3], %4;\n"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)), "h"(mask) : "memory");
}

// One TMA tensor copy: the box of `map` whose first element is (column c0, row c1) to `dst`
// (1024-aligned for the 128-byte swizzle), completing its bytes (the whole box's, out-of-bounds
// elements zero-filled) on `bar`.
static __device__ __forceinline__ void cp_async_bulk_tensor_2d(void* dst, const TensorMap* map, int c0, int c1, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)) : "memory");
}

// The same box multicast to the blocks of the cluster in `mask`: it lands at `dst`'s offset in
// each one's shared memory and completes its bytes on the barrier at `bar`'s offset in each.
static __device__ __forceinline__ void cp_async_bulk_tensor_2d_multicast(void* dst, const TensorMap* map, int c0, int c1,
                                                                         u64* bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;\n"
        ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(mask) : "memory");
}

// This block's rank in its cluster.
static __device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// Every thread of every block of the cluster arrives, then waits for all: what was written to
// shared memory before (mbarrier inits among it) is visible cluster-wide after.
static __device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Arrives on the barrier at `bar`'s offset in the shared memory of the cluster's block `rank`
// (this block's own included). The default semantics (release at CTA scope), as CUTLASS's
// cluster barrier arrives: what it releases are reads of a stage already complete (the
// wgmmas waited for), and `.release.cluster` costs a GPU-wide memory barrier (MEMBAR.ALL.GPU
// in the SASS) before every arrival, per consumer warp per k-tile.
static __device__ __forceinline__ void mbar_arrive_cluster(u64* bar, u32 rank) {
    asm volatile(
        "{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote]; }\n" ::"r"(smem_addr(bar)),
        "r"(rank)
        : "memory");
}

static __device__ __forceinline__ void mbar_init(u64* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

static __device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

static __device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }\n" ::"r"(smem_addr(bar)) : "memory");
}

// Returns once the phase of parity `parity` has completed.
static __device__ __forceinline__ void mbar_wait(u64* bar, int parity) {
    asm volatile(
        "{ .reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// Orders this thread's view of shared memory written through the generic proxy (cp.async
// landing, seen through the barrier) before wgmma's reads through the async proxy.
static __device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Pins the accumulators in registers at this point of the program: wgmma writes them
// asynchronously, which the compiler does not see, so without this it could move their
// reads (the epilogue) above the wait or their writes (the zeroing) below the first wgmma.
static __device__ __forceinline__ void fence_accumulators(float* acc) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

static __device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

template <int R> static __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> static __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

// Named barrier `id` (1..15; 0 is __syncthreads'): the calling warps wait until `count`
// threads have arrived or waited on it; `arrive` counts without waiting.
static __device__ __forceinline__ void named_barrier_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
static __device__ __forceinline__ void named_barrier_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Lane `lane ^ mask`'s `v` (every lane of the warp takes part).
static __device__ __forceinline__ u32 shfl_xor(u32 v, int mask) {
    u32 r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n" : "=r"(r) : "r"(v), "r"(mask));
    return r;
}

// 16 bytes to global memory (16-byte aligned).
static __device__ __forceinline__ void st_global_v4(void* p, const u32* v) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
}

// 8 bytes (two floats) to global memory (8-byte aligned).
static __device__ __forceinline__ void st_global_v2_f32(float* p, float x, float y) {
    asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y) : "memory");
}

static __device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ldmatrix: 4 8x8 b16 matrices, lanes 8j .. 8j + 7 addressing matrix j's rows.
static __device__ __forceinline__ void ldmatrix_x4(u32* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

// d += A·B for this warpgroup's 64 rows: A (64 x 16 kept values) from registers, each warp its
// 16 rows in the mma.sp m16n8k32 fragment order; metadata from threads 0 and 1 of each quad
// (selector 0); B (32 gathered rows x BN) from shared memory, N-major (imm-trans-b = 1).
// Generated by a few lines of Python (one variant per BN: the accumulators are operands).
#if BN == 64
static __device__ __forceinline__ void wgmma_sp(float* d, const u32* a, unsigned long long desc_b, u32 meta) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, %37, 0, p, 1, 1, 1; }\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(meta));
}
#endif
#if BN == 128
static __device__ __forceinline__ void wgmma_sp(float* d, const u32* a, unsigned long long desc_b, u32 meta) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, %69, 0, p, 1, 1, 1; }\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(meta));
}
#endif
#if BN == 256
static __device__ __forceinline__ void wgmma_sp(float* d, const u32* a, unsigned long long desc_b, u32 meta) {
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, {%128, %129, %130, %131}, %132, %133, 0, p, 1, 1, 1; }\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(meta));
}
#endif
#endif

// B's shared-memory matrix descriptor: start address, leading and stride byte offsets (all
// >> 4), base offset 0 (bits 49-51: swizzled atoms start 1024-aligned), layout type in bits
// 62-63 (0: no swizzle, 1: 128-byte swizzle).
static __device__ __forceinline__ u64 matrix_descriptor(const void* p, u32 lbo, u32 sbo) {
    return (u64)((smem_addr(p) & 0x3FFFF) >> 4) | (u64)((lbo >> 4) & 0x3FFF) << 16 |
           (u64)((sbo >> 4) & 0x3FFF) << 32 | (u64)SWIZZLE << 62;
}

// The 4 x 4 transpose of a quad's words: lane q's v[i] (its two columns 2q, 2q + 1 of column
// block i of 8) becomes v[i] = lane i's two columns of block q, so that a lane then holds the
// 8 columns of one block, 16 contiguous bytes of a row. Two exchanges of half the words, each
// trading one bit of the lane for one bit of the slot: across lanes q ^ 1 the words whose
// slot bit 0 differs from the lane's bit 0 (they stay in their slots), then across q ^ 2 those
// whose slot bit 1 differs from the lane's bit 1. Every lane of the warp takes part.
static __device__ __forceinline__ void quad_transpose(u32* v, int q) {
    const bool odd = q & 1, upper = q & 2;
#pragma unroll
    for (int hi = 0; hi < 4; hi += 2) {
        const u32 got = shfl_xor(odd ? v[hi] : v[hi + 1], 1);
        if (odd) v[hi] = got; else v[hi + 1] = got;
    }
#pragma unroll
    for (int lo = 0; lo < 2; ++lo) {
        const u32 got = shfl_xor(upper ? v[lo] : v[2 + lo], 2);
        if (upper) v[lo] = got; else v[2 + lo] = got;
    }
}

// One tile of the product: rows row0 .. row0 + BM, columns col0 .. col0 + BN, and of split z
// the k-tiles kt0 .. kt0 + ktiles of the row's 2 ks / BK.
struct Tile {
    int row0, col0, z, kt0, ktiles;
};

// The launch's tiles in the order the blocks walk them: split z slowest, then by `raster`: 0
// column tiles fastest, 1 row blocks fastest (then the blocks at work at once share B's column
// tiles, so a B larger than L2 streams from DRAM about once instead of once per wave of row
// blocks).
// With clusters a tile of the walk is a cluster's: CLUSTER row blocks (`row_blocks` counts
// their groups) or CLUSTER_N column tiles (`col_tiles` counts theirs), of which the block of
// rank `rank` takes one.
struct TileGrid {
    int row_blocks, col_tiles, splits, raster, total, rank;

    __device__ __forceinline__ int tiles() const { return row_blocks * col_tiles * splits; }

    __device__ __forceinline__ Tile at(int t) const {
        const int plane = row_blocks * col_tiles;
        const int z = t / plane, i = t % plane;
        const int rb = raster ? i % row_blocks : i / col_tiles;
        const int ct = raster ? i / row_blocks : i % col_tiles;
        const int per = (total + splits - 1) / splits;
        const int kt0 = min(total, z * per);
        return Tile{(rb * CLUSTER + rank % CLUSTER) * BM, (ct * CLUSTER_N + rank / CLUSTER) * BN, z, kt0,
                    min(total, kt0 + per) - kt0};
    }
};

// A consumer's release of a stage it has finished reading (its wgmmas done): one arrival per
// thread on this block's `empty` barrier, or with a cluster one per warp on each block's (the
// peers multicast into this block's stages too): lane r arrives on block r's once the warp's
// lanes are all past their waits.
static __device__ __forceinline__ void release_stage(u64* bar) {
#if CLUSTER_SIZE > 1
    __syncwarp();
    if ((threadIdx.x & 31) < CLUSTER_SIZE) mbar_arrive_cluster(bar, threadIdx.x & 31);
#else
    mbar_arrive(bar);
#endif
}

#if CLUSTER_SIZE > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER_SIZE, 1, 1)
#else
#define CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS spmm_vnm_wgmma_f16(
    const u16* __restrict__ a_vals, const u32* __restrict__ a_meta,
    const unsigned char* __restrict__ col_loc, const u16* __restrict__ b, u16* __restrict__ c,
    float* __restrict__ ws, int rows, int n, int ks, int groups, int m, int k, int ldb, int ldc,
    int v, int splits, int raster, const GRID_CONSTANT TensorMap tmap_b) {
    DYNAMIC_SHARED(smem);
    // B stages first: descriptors want 16-byte aligned core matrices (and, swizzled,
    // 1024-aligned atoms; every stage is a multiple of 4 KiB), and B is the largest.
    u16* sB = reinterpret_cast<u16*>(smem);
    u16* sA = sB + STAGES * B_STAGE;
    u32* sM = reinterpret_cast<u32*>(sA + STAGES * A_STAGE);
    u64* full = reinterpret_cast<u64*>(sM + STAGES * M_STAGE);
    u64* empty = full + STAGES;

    const int tid = threadIdx.x;
    // The launch's tiles, (split z, row block, column tile), walked by the blocks in turn:
    // block b takes tiles b, b + gridDim.x, ... (one tile each when the grid has as many blocks
    // as tiles; fewer blocks, `persistent` at launch, keep the pipeline running across tiles).
    // With clusters the clusters walk them: cluster c (blocks CLUSTER_SIZE c ..) takes c,
    // c + gridDim.x / CLUSTER_SIZE, ...
#if CLUSTER_SIZE > 1
    const int rank = (int)cluster_rank();
#else
    const int rank = 0;
#endif
    const int first = blockIdx.x / CLUSTER_SIZE, step = gridDim.x / CLUSTER_SIZE;
    const TileGrid grid{(rows / BM + CLUSTER - 1) / CLUSTER, ((n + BN - 1) / BN + CLUSTER_N - 1) / CLUSTER_N, splits,
                        raster, 2 * ks / BK, rank};
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 128);             // one arrival per producer thread
#if CLUSTER_SIZE > 1
            // One per consumer warp of the cluster reading the stage: ping-pong, one
            // warpgroup's (the same one in every block: the cluster's blocks walk the same
            // sequence of tiles).
            mbar_init(&empty[s], 4 * (PINGPONG ? 1 : CONSUMERS) * CLUSTER_SIZE);
#else
            // One per consumer thread reading the stage: ping-pong, one warpgroup's.
            mbar_init(&empty[s], 128 * (PINGPONG ? 1 : CONSUMERS));
#endif
        }
        mbar_init_fence();
    }
#if CLUSTER_SIZE > 1
    // The peers' barriers are initialised before this block's copies or arrivals reach them.
    cluster_sync();
#else
    __syncthreads();
#endif

    if (tid < 128) {
        // Producer. Two consumer warpgroups need more registers than an even split gives:
        // 56 here, 224 each there, the block's 384 x 168 (the swizzled gather spills in 40).
#if CONSUMERS == 2
        setmaxnreg_dec<56>();
#endif
        // `it` counts this block's k-tiles over all its tiles: stage it % STAGES, round
        // it / STAGES.
        int it = 0;
        for (int tile = first; tile < grid.tiles(); tile += step) {
            const Tile x = grid.at(tile);
            // A cluster's blocks past the last row block (row blocks not a multiple of
            // CLUSTER) copy the last valid one's A, in bounds, and store nothing.
            const int row0 = min(x.row0, rows - BM), col0 = x.col0, kt0 = x.kt0;
            // The row block's column locations (4 per group): every k-tile's gather reads them.
            const unsigned char* loc = col_loc + (size_t)(row0 / v) * groups * 4;
            for (int kt = 0; kt < x.ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                // Round r of a stage waits for the consumers' release of round r - 1.
                if (it >= STAGES) mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
                u16* dA = sA + s * A_STAGE;
                u16* dB = sB + s * B_STAGE;
                u32* dM = sM + s * M_STAGE;
#if BULK && CLUSTER_N > 1
                // This block's share, rows rank * A_SHARE .. and metadata tiles rank * M_SHARE
                // .., into every block's stage. Thread 0 expects the whole stage's bytes, the
                // peers' shares among them, before its own arrival below (a peer's bytes may
                // land first: the count then dips below zero, and the phase still waits for
                // the arrivals).
                if (tid == 0) mbar_expect_tx(&full[s], BM * BK + BM / 16 * STEPS * 32);
                if (tid < A_SHARE) {
                    const int r = rank * A_SHARE + tid;
                    cp_async_bulk_multicast(dA + r * A_STRIDE, a_vals + (size_t)(row0 + r) * ks + (kt0 + kt) * (BK / 2), BK,
                                            &full[s], (1 << CLUSTER_N) - 1);
                }
                if (tid < M_SHARE) {
                    const int t = rank * M_SHARE + tid;
                    cp_async_bulk_multicast(dM + t * STEPS * 8,
                                            a_meta + ((size_t)(row0 / 16 + t) * (ks / 8) + (kt0 + kt) * STEPS) * 8,
                                            STEPS * 32, &full[s], (1 << CLUSTER_N) - 1);
                }
#elif BULK
                // Thread r copies A's row r (BK bytes) and, for r < BM / 16, the metadata of
                // the 16-row tile r (STEPS * 32 bytes: the tile's STEPS steps of this k-tile are
                // consecutive). Each raises `full`'s expected bytes before its copy, and before
                // its own arrival below, so the phase cannot complete without them.
                if (tid < BM) {
                    mbar_expect_tx(&full[s], BK);
                    cp_async_bulk(dA + tid * A_STRIDE, a_vals + (size_t)(row0 + tid) * ks + (kt0 + kt) * (BK / 2), BK, &full[s]);
                }
                if (tid < BM / 16) {
                    mbar_expect_tx(&full[s], STEPS * 32);
                    cp_async_bulk(dM + tid * STEPS * 8, a_meta + ((size_t)(row0 / 16 + tid) * (ks / 8) + (kt0 + kt) * STEPS) * 8,
                                  STEPS * 32, &full[s]);
                }
#else
                // Loops not unrolled: unrolled, their addresses spill in the producer's 56
                // registers with two consumers (the tile loop's state is live across them).
#pragma unroll 1
                for (int chunk = tid; chunk < A_CHUNKS; chunk += 128) {
                    const int r = chunk / (BK / 16);
                    const int cc = chunk % (BK / 16);
                    cp_async16(dA + r * A_STRIDE + cc * 8, a_vals + (size_t)(row0 + r) * ks + (kt0 + kt) * (BK / 2) + cc * 8, 16);
                }
                // Metadata: per 16-row tile, the STEPS steps of this k-tile are 8 * STEPS
                // consecutive words.
#pragma unroll 1
                for (int chunk = tid; chunk < M_CHUNKS; chunk += 128) {
                    const int t = chunk / (STEPS * 2);
                    const int cc = chunk % (STEPS * 2);
                    const u32* src = a_meta + ((size_t)(row0 / 16 + t) * (ks / 8) + (kt0 + kt) * STEPS) * 8 + cc * 4;
                    cp_async16(dM + t * STEPS * 8 + cc * 4, src, 16);
                }
#endif
#if TMA
                // One thread announces the stage's B bytes and issues its column groups' boxes
                // (gathered row r of this k-tile is B's row (kt0 + kt) * BK + r: M = 4).
                if (tid == 0 && !ABLATE_B) {
                    mbar_expect_tx(&full[s], B_STAGE * 2);
#pragma unroll
                    for (int cg = 0; cg < BN / 64; ++cg) {
#if CLUSTER > 1
                        // This block's share: rows rank * BK / CLUSTER .. of the k-tile, into
                        // every block's stage (whole 8-row atoms: BK / CLUSTER >= 8).
                        cp_async_bulk_tensor_2d_multicast(dB + (cg * BK + rank * B_BOX_ROWS) * 64, &tmap_b, col0 + cg * 64,
                                                          (kt0 + kt) * BK + rank * B_BOX_ROWS, &full[s], (1 << CLUSTER) - 1);
#else
                        cp_async_bulk_tensor_2d(dB + cg * BK * 64, &tmap_b, col0 + cg * 64, (kt0 + kt) * BK, &full[s]);
#endif
                    }
                }
#else
                // A gathered row's source: row `src_row` of B, or none (-1: padding, or columns
                // past K), which lands as zeros.
                auto copy_b = [&](u16* dst, int src_row, int col) {
                    const bool ok = src_row >= 0 && col < n;
                    cp_async16(dst, ok ? b + (size_t)src_row * ldb + col : b, ok ? 16 : 0);
                };
#if SWIZZLE
                // Thread t copies piece t % 8 of the 4 gathered rows of the k-tile's groups
                // t / 8, t / 8 + 16, ... in every column group: one 32-bit load gives a group's 4
                // column locations (the 4 rows of B it gathers), where a lookup per row made each
                // row's copies wait for a load of their own. The 8 lanes of a group read 128
                // contiguous bytes of a B row and write one 128-byte row of the stage, its pieces
                // permuted by the row's index mod 8 (so the banks differ). Groups not unrolled
                // (the producer has 56 registers with two consumers).
                const int piece = tid % 8;
#pragma unroll 1
                for (int q = tid / 8; q < BK / 4 * !ABLATE_B; q += 16) {
                    const int g = (kt0 + kt) * (BK / 4) + q;
                    const u32 locs = g < groups ? __ldg(reinterpret_cast<const u32*>(loc + g * 4)) : 0u;
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int r = 4 * q + j;
                        const int col = g * m + (int)((locs >> (8 * j)) & 0xFFu);
                        const int src_row = g < groups && col < k ? col : -1;
                        const int swizzled = (piece ^ (r % 8)) * 8;
#pragma unroll
                        for (int cg = 0; cg < BN / 64; ++cg)
                            copy_b(dB + (cg * BK + r) * 64 + swizzled, src_row, col0 + cg * 64 + piece * 8);
                    }
                }
#else
                // B's gathered row kg (of all the row's 2 ks) is row `source_row(kg)` of B.
                auto source_row = [&](int kg) {
                    const int g = kg >> 2;
                    if (g >= groups) return -1;
                    const int col = g * m + (int)__ldg(loc + g * 4 + (kg & 3));
                    return col < k ? col : -1;
                };
                // Chunk i is row i % 8 of core matrix i / 8 = (kc, nc): 16-byte rows in chunk
                // order, so that the 8 lanes of each quarter-warp write 8 different banks'
                // groups, while global reads stay 64 bytes contiguous per gathered row.
                for (int chunk = tid; chunk < B_CHUNKS * !ABLATE_B; chunk += 128) {
                    const int kg = (kt0 + kt) * BK + (chunk / BN) * 8 + chunk % 8;
                    copy_b(dB + chunk * 8, source_row(kg), col0 + ((chunk / 8) % (BN / 8)) * 8);
                }
#endif
#endif
                cp_async_mbar_arrive_noinc(&full[s]);
            }
        }
        // Copies in flight when a thread exits would land in a block that may be gone.
        cp_async_wait_all();
#if CLUSTER_SIZE > 1
        cluster_sync();
#endif
        return;
    }

    // Consumers.
#if CONSUMERS == 2
    setmaxnreg_inc<224>();
#endif
    const int wg = tid / 128 - 1;          // consumer warpgroup
    const int warp = (tid % 128) / 32;
    const int lane = tid & 31;
    const int group = lane >> 2;
    const int quad = lane & 3;
    // This warp's first row within the tile, in sub-tile 0: cooperative, warpgroup wg owns
    // rows 64 wg .. 64 wg + 63 of every tile; ping-pong, all of its own tiles' rows, in MSUB
    // sub-tiles of 64 (sub-tile s: rows 64 s + 16 warp ..).
    const int r16 = (PINGPONG ? 0 : wg * 64) + warp * 16;

    float acc[MSUB][NACC];
    // Fragment registers in two sets, alternating by k-tile: with KEEP = 1 a tile's wgmmas may
    // still read one set while the next tile loads the other.
    u32 afrag[2][KSTEPS][MSUB][4];
    u32 meta[2][KSTEPS][MSUB];
    // k-tile kt of the current tile, the block's it-th: stage it % STAGES, round it / STAGES.
    auto consume = [&](int it, int kt, u32 (&af)[KSTEPS][MSUB][4], u32 (&me)[KSTEPS][MSUB]) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        fence_proxy_async();
        const u16* tA = sA + s * A_STAGE;
        const u16* tB = sB + s * B_STAGE;
        const u32* tM = sM + s * M_STAGE;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
            for (int sub = 0; sub < MSUB; ++sub) {
                const int rows16 = r16 + sub * 64;
                u32* a = af[kk][sub];
                ldmatrix_x4(a, tA + (rows16 + (lane & 15)) * A_STRIDE + kk * 16 + (lane >> 4) * 8);
#if A_SWAP
                {
                    const u32 t = a[1];
                    a[1] = a[2];
                    a[2] = t;
                }
#endif
                // Threads 0 and 1 of each quad carry the metadata (selector 0): thread p holds
                // gathered columns [16p, 16p + 16) of rows `group` and `group + 8`: step 2 kk + p.
#if META_XHALF
                {
                    const u32* w = tM + ((rows16 / 16) * STEPS + kk * 2) * 8 + group;
                    const int half = 16 * ((quad & 1) ^ META_SWAP);
                    me[kk][sub] = ((w[0] >> half) & 0xFFFFu) | ((w[8] >> half) << 16);
                }
#else
                me[kk][sub] = tM[((rows16 / 16) * STEPS + kk * 2 + ((quad & 1) ^ META_SWAP)) * 8 + group];
#endif
            }
        }
        // The fence orders the fragment registers written above before the wgmmas read them.
#pragma unroll
        for (int sub = 0; sub < MSUB; ++sub) fence_accumulators(acc[sub]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < KSTEPS * !ABLATE_MMA; ++kk) {
            // Gathered rows 32 kk .. 32 kk + 31: 8-row groups 4 kk .. 4 kk + 3.
            const u64 desc = matrix_descriptor(tB + kk * 4 * (B_KSTEP / 2), B_LBO, B_SBO);
#pragma unroll
            for (int sub = 0; sub < MSUB; ++sub) wgmma_sp(acc[sub], af[kk][sub], desc, me[kk][sub]);
        }
        wgmma_commit();
#if KEEP
        // Once at most this tile's group is pending, the previous tile's is done: its stage and
        // its fragment registers (the other set) are free.
        wgmma_wait<1>();
        if (kt > 0) release_stage(&empty[(it - 1) % STAGES]);
#else
        // The stage (and the fragment registers) may be reused once the wgmmas are done.
        wgmma_wait<0>();
#pragma unroll
        for (int sub = 0; sub < MSUB; ++sub) fence_accumulators(acc[sub]);
        release_stage(&empty[s]);
#endif
    };
    // `it` counts the block's k-tiles over all its tiles, as the producer's does: a ping-pong
    // warpgroup skips the other's tiles (j, the block's tile index, of the other parity) but
    // counts their k-tiles.
    int it = 0;
    for (int tile = first, j = 0; tile < grid.tiles(); tile += step, ++j) {
        const Tile x = grid.at(tile);
        if (PINGPONG && (j & 1) != wg) {
            it += x.ktiles;
            continue;
        }
#if PINGPONG
        // The main loops take turns: tile j's starts once tile j - 1's (the other warpgroup's)
        // has issued its wgmmas, so that the tensor cores run one main loop at a time and
        // each warpgroup's epilogue runs under the other's. Named barrier 1 + (j & 1): this
        // warpgroup's 128 threads wait, the other's 128 arrive (below, after tile j - 1).
        if (j > 0) named_barrier_sync(1 + (j & 1), 256);
#endif
#pragma unroll
        for (int sub = 0; sub < MSUB; ++sub)
#pragma unroll
            for (int i = 0; i < NACC; ++i) acc[sub][i] = 0.0f;
        int kt = 0;
        for (; kt + 1 < x.ktiles; kt += 2) {
            consume(it + kt, kt, afrag[0], meta[0]);
            consume(it + kt + 1, kt + 1, afrag[1], meta[1]);
        }
        if (kt < x.ktiles) consume(it + kt, kt, afrag[0], meta[0]);
#if PINGPONG
        // Tile j + 1 (the other warpgroup's), if the block has one, may start its main loop.
        // Every wait above is matched by exactly one arrival: none is left at exit.
        if (tile + step < grid.tiles()) named_barrier_arrive(1 + ((j + 1) & 1), 256);
#endif
#if KEEP
        // The tile's last group, and so its stage, is done once none is pending.
        wgmma_wait<0>();
#pragma unroll
        for (int sub = 0; sub < MSUB; ++sub) fence_accumulators(acc[sub]);
        if (x.ktiles > 0) release_stage(&empty[(it + x.ktiles - 1) % STAGES]);
#endif
        it += x.ktiles;

        // Epilogue: accumulator 4 jb + e of a thread's sub-tile s is row `group` + 8 (e / 2) of
        // its warp's 16 there, column 8 jb + 2 quad + e % 2. Split-K blocks write f32 partials
        // to their slice of `ws` (rows x ldc floats each), which spmm_vnm_wgmma_reduce_f16 sums
        // in order; C's rows are 16-byte aligned (ldc a multiple of 8) and columns past n up to
        // ldc are padding.
        if (ABLATE_STORE) continue;
#pragma unroll
        for (int sub = 0; sub < MSUB; ++sub) {
            const float* d = acc[sub];
            const int row = x.row0 + r16 + sub * 64 + group;
            if (splits > 1) {
                float* part = ws + (size_t)x.z * rows * ldc;
#pragma unroll
                for (int jb = 0; jb < BN / 8; ++jb) {
                    const int col = x.col0 + jb * 8 + quad * 2;
                    if (col < n) {
                        if (row < rows) st_global_v2_f32(part + (size_t)row * ldc + col, d[4 * jb], d[4 * jb + 1]);
                        if (row + 8 < rows) st_global_v2_f32(part + (size_t)(row + 8) * ldc + col, d[4 * jb + 2], d[4 * jb + 3]);
                    }
                }
                continue;
            }
#if EPILOGUE_U32
#pragma unroll
            for (int jb = 0; jb < BN / 8; ++jb) {
                const int col = x.col0 + jb * 8 + quad * 2;
                if (col < n) {
                    if (row < rows) *reinterpret_cast<u32*>(c + (size_t)row * ldc + col) = pack_f16x2(d[4 * jb], d[4 * jb + 1]);
                    if (row + 8 < rows) *reinterpret_cast<u32*>(c + (size_t)(row + 8) * ldc + col) = pack_f16x2(d[4 * jb + 2], d[4 * jb + 3]);
                }
            }
#else
            // Per row (h: `group`, `group` + 8) and 4 column blocks at a time, the quad trades
            // words (quad_transpose) so that each lane stores one block's 16 bytes: a warp's
            // store is 8 rows x 64 contiguous bytes, a quarter of the stores of 4 bytes each.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row + 8 * h;
#pragma unroll
                for (int j0 = 0; j0 < BN / 8; j0 += 4) {
                    u32 w[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) w[i] = pack_f16x2(d[4 * (j0 + i) + 2 * h], d[4 * (j0 + i) + 2 * h + 1]);
                    quad_transpose(w, quad);
                    const int col = x.col0 + 8 * (j0 + quad);
                    if (r < rows && col < n) st_global_v4(c + (size_t)r * ldc + col, w);
                }
            }
#endif
        }
    }
#if CLUSTER_SIZE > 1
    // The peers' consumers may still arrive on this block's barriers: stay until they are done.
    cluster_sync();
#endif
}

// C = the sum of the `splits` partial products in `ws`, in split order (deterministic), as fp16:
// REDUCE_THREADS per block, each thread REDUCE_PER_THREAD elements of the rows x n product
// strided by the grid's threads (coalesced).
#define REDUCE_THREADS 256
#define REDUCE_PER_THREAD 8
extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) spmm_vnm_wgmma_reduce_f16(
    const float* __restrict__ ws, u16* __restrict__ c, int rows, int n, int ldc, int splits) {
    const long long total = (long long)rows * n;
    const long long stride = (long long)gridDim.x * REDUCE_THREADS;
    for (long long i = (long long)blockIdx.x * REDUCE_THREADS + threadIdx.x; i < total; i += stride) {
        const int r = (int)(i / n);
        const int col = (int)(i % n);
        float sum = 0.0f;
        for (int z = 0; z < splits; ++z) sum += ws[((size_t)z * rows + r) * ldc + col];
        c[(size_t)r * ldc + col] = (u16)(pack_f16x2(sum, 0.0f) & 0xFFFF);
    }
}
