// Runs `spmm_csr_f32.cu` on the host emulator (emu.h) for one configuration, whose #defines
// (WARPS_PER_BLOCK COLS_PER_LANE) are given on the compiler's command line.
//
//   run_csr INPUT OUTPUT
//
// INPUT, little-endian: 10 int64 — rows n (the kernel's int arguments), grid_x grid_y
// threads, and the element counts of row_ptr col_idx vals b c — then those five arrays (u32,
// u32, f32, f32, f32) as uploaded to the device. OUTPUT: the c array.

#include "emu.h"

#include "../spmm_csr_f32.cu"

int main(int argc, char** argv) {
    if (argc != 3) emu::fail("usage: run_csr INPUT OUTPUT");
    std::ifstream in(argv[1], std::ios::binary);
    int64_t h[10];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    if (!in) emu::fail("input file too short");
    const int rows = int(h[0]), n = int(h[1]);
    if (h[4] != THREADS) emu::fail("block size differs from the configuration's THREADS");
    const unsigned* row_ptr = emu::read_array<unsigned>(in, size_t(h[5]));
    const unsigned* col_idx = emu::read_array<unsigned>(in, size_t(h[6]));
    const float* vals = emu::read_array<float>(in, size_t(h[7]));
    const float* b = emu::read_array<float>(in, size_t(h[8]));
    float* c = emu::read_array<float>(in, size_t(h[9]));
    emu::run_grid(int(h[2]), int(h[3]), 1, THREADS, 0, [&] { spmm_csr_f32(row_ptr, col_idx, vals, b, c, rows, n); });
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(c), static_cast<std::streamsize>(h[9] * sizeof(float)));
    for (const void* p : {(const void*)row_ptr, (const void*)col_idx, (const void*)vals, (const void*)b, (const void*)c})
        std::free(const_cast<void*>(p));
    return out ? 0 : 1;
}
