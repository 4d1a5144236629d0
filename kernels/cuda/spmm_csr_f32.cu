// Unstructured SpMM, CSR row split, fp32: C[rows x n] = A_csr[rows x K] * B[K x n].
//
// One warp owns one row of A and 32 * COLS_PER_LANE consecutive columns of C; it walks the
// row's nonzeros and reads the matching rows of B coalesced across the warp. This is the
// Sputnik-style baseline for unstructured sparsity, in fp32 so that it checks exactly
// against the CPU reference. Tunables (-D): WARPS_PER_BLOCK, COLS_PER_LANE.

#define THREADS (WARPS_PER_BLOCK * 32)
#define COLS_PER_WARP (32 * COLS_PER_LANE)

extern "C" __global__ void __launch_bounds__(THREADS) spmm_csr_f32(
    const unsigned* __restrict__ row_ptr, const unsigned* __restrict__ col_idx, const float* __restrict__ vals,
    const float* __restrict__ b, float* __restrict__ c, int rows, int n) {
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.y * WARPS_PER_BLOCK + warp;
    if (row >= rows) return;
    const int col0 = blockIdx.x * COLS_PER_WARP + lane;

    float acc[COLS_PER_LANE];
#pragma unroll
    for (int j = 0; j < COLS_PER_LANE; ++j) acc[j] = 0.0f;

    const int begin = (int)__ldg(row_ptr + row);
    const int end = (int)__ldg(row_ptr + row + 1);
    for (int e = begin; e < end; ++e) {
        const float v = __ldg(vals + e);
        const float* brow = b + (size_t)__ldg(col_idx + e) * n;
#pragma unroll
        for (int j = 0; j < COLS_PER_LANE; ++j) {
            const int col = col0 + j * 32;
            if (col < n) acc[j] += v * __ldg(brow + col);
        }
    }
#pragma unroll
    for (int j = 0; j < COLS_PER_LANE; ++j) {
        const int col = col0 + j * 32;
        if (col < n) c[(size_t)row * n + col] = acc[j];
    }
}
