// V:N:M SpMM on sparse tensor cores (mma.sp), fp16 storage, fp32 accumulation.
//
//   C[rows x n] (fp16) = A[rows x K] (V:2:M) * B[K x n] (fp16, row-major, row stride ldb)
//
// The structure follows Spatha: one thread block owns BM = V rows (one V-row block of A)
// and BN columns of C; the reduction runs over the *gathered* dimension: for every V x M
// block of A its 4 kept columns pull 4 rows of B, so that A becomes plain 2:4 over
// kp = 2 * ks gathered columns and feeds `mma.sp` directly.
//
// The mma uses `.sp::ordered_metadata`: each group's two positions increase (a `VnmMatrix`
// invariant; padding groups are (0, 1)). ptxas 12.9 emits the same cubin for it as for plain
// `.sp` on sm_80 and sm_90, and advises it because plain `.sp` is expected to be much slower
// on later architectures, which run this PTX through the driver's JIT.
//
// A is read in the layout of the CPU type `kernels::VnmMatrix` (see format/vnm.rs), with the
// slot dimension ks padded to a multiple of BK / 2:
//   a_vals   rows x ks fp16            slots 2g, 2g+1 hold group g's two kept values
//   a_meta   (rows/16) x (ks/8) x 8 u32  word i of (tile, step) holds the 2-bit positions of
//                                      row 16 tile + i (bits 0..16) and row + 8 (bits 16..32)
//                                      for slots 8 step .. 8 step + 7: the m16n8k16 fragment
//   col_loc  (rows/V) x groups x 4 u8  the 4 kept column offsets of every V x M block
// Tunables, passed as #defines: BM BN BK WM WN MMA_K STAGES.
// No CUDA headers are needed: fp16 is carried as raw 16-bit words and converted with PTX.

#ifndef BM
#error "BM must be defined"
#endif

#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define THREADS (WARPS_M * WARPS_N * 32)
#define MT (WM / 16)            // mma tiles per warp along rows
#define NT (WN / 8)             // mma tiles per warp along columns
#define A_STRIDE (BK / 2 + 8)   // halves per smem row of A (padded against bank conflicts)
#define B_STRIDE (BN + 8)       // halves per smem row of B
#define STEPS (BK / 16)         // 16-column metadata steps per k-tile
#define A_STAGE (BM * A_STRIDE) // halves
#define B_STAGE (BK * B_STRIDE) // halves
#define M_STAGE (BM / 16 * STEPS * 8) // u32 metadata words per stage
#define A_CHUNKS (BM * BK / 16) // 16-byte chunks of A per k-tile
#define B_CHUNKS (BK * BN / 8)  // 16-byte chunks of B per k-tile
#define B_ITERS ((B_CHUNKS + THREADS - 1) / THREADS)
#define M_CHUNKS (M_STAGE / 4)  // 16-byte chunks of metadata per k-tile

typedef unsigned short u16;
typedef unsigned int u32;

// The PTX this kernel uses, one helper per instruction. A host emulator of these helpers
// (kernels/cuda/emu/) defines COTUNE_EMULATE and its own versions, so that CI runs this very
// source on the CPU, warp-collective instructions included.
#ifndef COTUNE_EMULATE
#define DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]

static __device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

static __device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ldmatrix: X 8x8 b16 matrices, lanes 8j .. 8j + 7 addressing matrix j's rows.
static __device__ __forceinline__ void ldmatrix_x4(u32* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldmatrix_x2(u32* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldmatrix_x2_trans(u32* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(p)));
}

// d += A·B on sparse tensor cores, metadata from threads 0 (and 1 for k32) of each quad.
static __device__ __forceinline__ void mma_sp_k32(float* d, const u32* a, const u32* b, u32 meta) {
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(meta));
}

static __device__ __forceinline__ void mma_sp_k16(float* d, const u32* a, const u32* b, u32 meta) {
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5}, {%6,%7}, {%0,%1,%2,%3}, %8, 0x0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(meta));
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS) spmm_vnm_f16(
    const u16* __restrict__ a_vals, const u32* __restrict__ a_meta,
    const unsigned char* __restrict__ col_loc, const u16* __restrict__ b, u16* __restrict__ c,
    int rows, int n, int ks, int groups, int m, int k, int ldb, int ldc) {
    DYNAMIC_SHARED(smem);
    u16* sA = reinterpret_cast<u16*>(smem);
    u16* sB = sA + STAGES * A_STAGE;
    u32* sM = reinterpret_cast<u32*>(sB + STAGES * B_STAGE);
    // This row block's column locations (4 * groups bytes), staged once: the gather of every
    // k-tile reads them, and a global load there would sit on the pipeline's critical path.
    unsigned char* sLoc = reinterpret_cast<unsigned char*>(sM + STAGES * M_STAGE);

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int warp_m = warp / WARPS_N;
    const int warp_n = warp % WARPS_N;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int ktiles = 2 * ks / BK;
    {
        const unsigned char* loc = col_loc + (size_t)blockIdx.y * groups * 4;
        for (int i = tid; i < groups * 4; i += THREADS) sLoc[i] = __ldg(loc + i);
        __syncthreads();
    }

    // The row of B that gathered column kg reads, or -1 (padding group or phantom column).
    auto gathered_row = [&](int kg) -> int {
        const int g = kg >> 2;
        if (g >= groups) return -1;
        const int col = g * m + (int)sLoc[g * 4 + (kg & 3)];
        return col < k ? col : -1;
    };

    // Gathered B rows of the next tile to load, fetched one iteration ahead so that the
    // index load's latency hides behind the mma work.
    int gather[B_ITERS];
    int load_tile = 0;
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
        const int chunk = tid + i * THREADS;
        const int r = chunk / (BN / 8);
        gather[i] = (chunk < B_CHUNKS && load_tile < ktiles) ? gathered_row(r) : -1;
    }

    auto issue_loads = [&](int stage) {
        const int kt = load_tile;
        u16* dA = sA + stage * A_STAGE;
        u16* dB = sB + stage * B_STAGE;
        u32* dM = sM + stage * M_STAGE;
        for (int chunk = tid; chunk < A_CHUNKS; chunk += THREADS) {
            const int r = chunk / (BK / 16);
            const int cc = chunk % (BK / 16);
            cp_async16(dA + r * A_STRIDE + cc * 8, a_vals + (size_t)(row0 + r) * ks + kt * (BK / 2) + cc * 8, 16);
        }
        // Metadata: per 16-row tile, the STEPS steps of this k-tile are 8 * STEPS consecutive words.
        for (int chunk = tid; chunk < M_CHUNKS; chunk += THREADS) {
            const int t = chunk / (STEPS * 2);
            const int cc = chunk % (STEPS * 2);
            const u32* src = a_meta + ((size_t)(row0 / 16 + t) * (ks / 8) + kt * STEPS) * 8 + cc * 4;
            cp_async16(dM + t * STEPS * 8 + cc * 4, src, 16);
        }
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int chunk = tid + i * THREADS;
            if (chunk < B_CHUNKS) {
                const int r = chunk / (BN / 8);
                const int cc = chunk % (BN / 8);
                const int col = col0 + cc * 8;
                const int g = gather[i];
                const bool ok = g >= 0 && col < n;
                const u16* src = ok ? b + (size_t)g * ldb + col : b;
                cp_async16(dB + r * B_STRIDE + cc * 8, src, ok ? 16 : 0);
            }
        }
        // Fetch the gathered rows of the following tile.
        load_tile += 1;
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            const int chunk = tid + i * THREADS;
            const int r = chunk / (BN / 8);
            gather[i] = (chunk < B_CHUNKS && load_tile < ktiles) ? gathered_row(load_tile * BK + r) : -1;
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (load_tile < ktiles) issue_loads(s);
        cp_async_commit();
    }

    const int group = lane >> 2;    // row within an 8-row half of an mma tile
    const int quad = lane & 3;      // thread within its group of four

    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        // The stage refilled now was consumed in the previous iteration; the barrier above
        // guarantees every warp is done with it.
        if (load_tile < ktiles) issue_loads(load_tile % STAGES);
        cp_async_commit();

        const int stage = kt % STAGES;
        const u16* tA = sA + stage * A_STAGE;
        const u16* tB = sB + stage * B_STAGE;
        const u32* tM = sM + stage * M_STAGE;

#pragma unroll
        for (int kk = 0; kk < BK / MMA_K; ++kk) {
            u32 afrag[MT][MMA_K / 8];
            u32 meta[MT];
            u32 bfrag[NT][MMA_K / 8];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int r = warp_m * WM + i * 16;
#if MMA_K == 32
                ldmatrix_x4(afrag[i], tA + (r + (lane & 15)) * A_STRIDE + kk * 16 + (lane >> 4) * 8);
                // Threads 0 and 1 of each group carry the metadata (selector 0): thread p
                // holds gathered columns [16p, 16p + 16) of rows `group` and `group + 8`,
                // which is the word of step 2 kk + p.
                meta[i] = tM[((r / 16) * STEPS + kk * 2 + (quad & 1)) * 8 + group];
#else
                ldmatrix_x2(afrag[i], tA + (r + (lane & 15)) * A_STRIDE + kk * 8);
                // Thread 0 of each group carries the metadata (selector 0) of rows
                // `group` (low half) and `group + 8` (high half): the word of step kk.
                meta[i] = tM[((r / 16) * STEPS + kk) * 8 + group];
#endif
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int cidx = warp_n * WN + j * 8;
#if MMA_K == 32
                ldmatrix_x4_trans(bfrag[j], tB + (kk * 32 + lane) * B_STRIDE + cidx);
#else
                ldmatrix_x2_trans(bfrag[j], tB + (kk * 16 + (lane & 15)) * B_STRIDE + cidx);
#endif
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) {
#if MMA_K == 32
                    mma_sp_k32(acc[i][j], afrag[i], bfrag[j], meta[i]);
#else
                    mma_sp_k16(acc[i][j], afrag[i], bfrag[j], meta[i]);
#endif
                }
        }
    }
    cp_async_wait<0>();

    // Epilogue: each thread holds C[group][2 quad .. +1] and C[group + 8][...] per tile.
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int r = row0 + warp_m * WM + i * 16 + group;
            const int col = col0 + warp_n * WN + j * 8 + quad * 2;
            if (col < n) {
                if (r < rows) {
                    *reinterpret_cast<u32*>(c + (size_t)r * ldc + col) = pack_f16x2(acc[i][j][0], acc[i][j][1]);
                }
                if (r + 8 < rows) {
                    *reinterpret_cast<u32*>(c + (size_t)(r + 8) * ldc + col) = pack_f16x2(acc[i][j][2], acc[i][j][3]);
                }
            }
        }
}
