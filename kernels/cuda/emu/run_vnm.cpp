// Runs `spmm_vnm_f16.cu` on the host emulator (emu.h) for one configuration, whose #defines
// (BM BN BK WM WN MMA_K STAGES) are given on the compiler's command line.
//
//   run_vnm INPUT OUTPUT
//
// INPUT, little-endian: 18 int64 — rows n ks groups m k ldb ldc (the kernel's int arguments),
// grid_x grid_y threads shared_bytes copy_mode (0 lazy, 1 eager), and the element counts of
// a_vals a_meta col_loc b c — then those five arrays (u16, u32, u8, u16, u16) as uploaded to
// the device. OUTPUT: the c array. Any fault aborts with a message on stderr.

#include "emu.h"

#include "../spmm_vnm_f16.cu"

int main(int argc, char** argv) {
    if (argc != 3) emu::fail("usage: run_vnm INPUT OUTPUT");
    std::ifstream in(argv[1], std::ios::binary);
    int64_t h[18];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    if (!in) emu::fail("input file too short");
    const int rows = int(h[0]), n = int(h[1]), ks = int(h[2]), groups = int(h[3]), m = int(h[4]),
              k = int(h[5]), ldb = int(h[6]), ldc = int(h[7]);
    if (h[10] != THREADS) emu::fail("block size differs from the configuration's THREADS");
    emu::copy_mode = h[12] == 1 ? emu::CopyMode::Eager : emu::CopyMode::Lazy;
    const u16* a_vals = emu::read_array<u16>(in, size_t(h[13]));
    const u32* a_meta = emu::read_array<u32>(in, size_t(h[14]));
    const unsigned char* col_loc = emu::read_array<unsigned char>(in, size_t(h[15]));
    const u16* b = emu::read_array<u16>(in, size_t(h[16]));
    u16* c = emu::read_array<u16>(in, size_t(h[17]));
    emu::run_grid(int(h[8]), int(h[9]), 1, THREADS, size_t(h[11]), [&] {
        spmm_vnm_f16(a_vals, a_meta, col_loc, b, c, rows, n, ks, groups, m, k, ldb, ldc);
    });
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(c), static_cast<std::streamsize>(h[17] * sizeof(u16)));
    for (const void* p : {(const void*)a_vals, (const void*)a_meta, (const void*)col_loc, (const void*)b, (const void*)c})
        std::free(const_cast<void*>(p));
    return out ? 0 : 1;
}
