// Runs `spmm_vnm_wgmma_f16.cu` on the host emulator (emu.h, sm90.h) for one configuration,
// whose #defines (BM BN BK STAGES KEEP BULK SWIZZLE TMA CLUSTER
// CLUSTER_N PINGPONG) are given on the compiler's command
// line: the product kernel, and with split-K its reduction.
//
//   run_wgmma INPUT OUTPUT
//
// INPUT, little-endian: 23 int64 — rows n ks groups m k ldb ldc v splits raster (the kernel's
// int arguments), grid_x grid_y grid_z threads shared_bytes workspace_floats copy_mode (0 lazy,
// 1 eager), and the element counts of a_vals a_meta col_loc b c — then those five arrays (u16,
// u32, u8, u16, u16) as uploaded to the device. OUTPUT: the c array. Any fault aborts with a
// message on stderr. The kernel's tensor map over B is built here as `CudaDevice` encodes it
// (dims (n, k), rows ldb halves apart, box (64, BK / CLUSTER), 128-byte swizzle), whether TMA is on or not.

#include "emu.h"
#include "sm90.h"

#include "../spmm_vnm_wgmma_f16.cu"

int main(int argc, char** argv) {
    if (argc != 3) emu::fail("usage: run_wgmma INPUT OUTPUT");
    std::ifstream in(argv[1], std::ios::binary);
    int64_t h[23];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    if (!in) emu::fail("input file too short");
    const int rows = int(h[0]), n = int(h[1]), ks = int(h[2]), groups = int(h[3]), m = int(h[4]),
              k = int(h[5]), ldb = int(h[6]), ldc = int(h[7]), v = int(h[8]), splits = int(h[9]),
              raster = int(h[10]);
    if (h[14] != THREADS) emu::fail("block size differs from the configuration's THREADS");
    emu::copy_mode = h[17] == 1 ? emu::CopyMode::Eager : emu::CopyMode::Lazy;
    const u16* a_vals = emu::read_array<u16>(in, size_t(h[18]));
    const u32* a_meta = emu::read_array<u32>(in, size_t(h[19]));
    const unsigned char* col_loc = emu::read_array<unsigned char>(in, size_t(h[20]));
    const u16* b = emu::read_array<u16>(in, size_t(h[21]));
    u16* c = emu::read_array<u16>(in, size_t(h[22]));
    // The workspace starts as NaNs: a partial never written poisons C.
    float* ws = emu::device_buffer<float>(size_t(h[16]));
    std::fill(ws, ws + h[16], std::numeric_limits<float>::quiet_NaN());
    // The driver refuses a map whose base or row stride is not a multiple of 16 bytes.
    if (reinterpret_cast<uintptr_t>(b) % 16 != 0 || (ldb * 2) % 16 != 0)
        emu::fail("tensor map: B's base or row stride not a multiple of 16 bytes");
    const TensorMap tmap_b{b, {n, k}, long(ldb) * 2, {64, BK / CLUSTER}, 128};
    // The product kernel's blocks walk the tiles in steps of gridDim.x.
    emu::grid_dim = {int(h[11]), int(h[12]), int(h[13])};
    emu::run_grid(int(h[11]), int(h[12]), int(h[13]), THREADS, size_t(h[15]), [&] {
        spmm_vnm_wgmma_f16(a_vals, a_meta, col_loc, b, c, ws, rows, n, ks, groups, m, k, ldb, ldc, v, splits,
                           raster, tmap_b);
    }, CLUSTER_SIZE);
    if (splits > 1) {
        const long long per_block = REDUCE_THREADS * REDUCE_PER_THREAD;
        emu::grid_dim = {int(((long long)rows * n + per_block - 1) / per_block), 1, 1};
        emu::run_grid(emu::grid_dim.x, 1, 1, REDUCE_THREADS, 0,
                      [&] { spmm_vnm_wgmma_reduce_f16(ws, c, rows, n, ldc, splits); });
    }
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(c), static_cast<std::streamsize>(h[22] * sizeof(u16)));
    for (const void* p : {(const void*)a_vals, (const void*)a_meta, (const void*)col_loc, (const void*)b, (const void*)c,
                          (const void*)ws})
        std::free(const_cast<void*>(p));
    return out ? 0 : 1;
}
