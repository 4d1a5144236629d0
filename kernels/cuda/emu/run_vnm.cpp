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

#include <fstream>
#include <thread>

namespace {

// An exactly sized, 256-byte aligned buffer (like cudaMalloc's), so that AddressSanitizer
// reports any access past its end.
template <typename T> T* device_buffer(size_t count) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, count * sizeof(T) + (count == 0)) != 0) emu::fail("out of memory");
    return static_cast<T*>(p);
}

template <typename T> T* read_array(std::ifstream& in, size_t count) {
    T* p = device_buffer<T>(count);
    in.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(count * sizeof(T)));
    if (!in) emu::fail("input file too short");
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) emu::fail("usage: run_vnm INPUT OUTPUT");
    std::ifstream in(argv[1], std::ios::binary);
    int64_t h[18];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    if (!in) emu::fail("input file too short");
    const int rows = int(h[0]), n = int(h[1]), ks = int(h[2]), groups = int(h[3]), m = int(h[4]),
              k = int(h[5]), ldb = int(h[6]), ldc = int(h[7]);
    const int grid_x = int(h[8]), grid_y = int(h[9]), threads = int(h[10]);
    const size_t shared_bytes = size_t(h[11]);
    emu::copy_mode = h[12] == 1 ? emu::CopyMode::Eager : emu::CopyMode::Lazy;
    if (threads != THREADS) emu::fail("block size differs from the configuration's THREADS");
    const u16* a_vals = read_array<u16>(in, size_t(h[13]));
    const u32* a_meta = read_array<u32>(in, size_t(h[14]));
    const unsigned char* col_loc = read_array<unsigned char>(in, size_t(h[15]));
    const u16* b = read_array<u16>(in, size_t(h[16]));
    u16* c = read_array<u16>(in, size_t(h[17]));

    for (int by = 0; by < grid_y; ++by) {
        for (int bx = 0; bx < grid_x; ++bx) {
            unsigned char* smem = device_buffer<unsigned char>(shared_bytes);
            std::memset(smem, 0xff, shared_bytes);  // fp16 NaNs: unwritten words poison C
            std::barrier<> bar(threads);
            std::unique_ptr<emu::Warp[]> warps(new emu::Warp[threads / 32]);
            std::vector<std::thread> team;
            for (int t = 0; t < threads; ++t) {
                team.emplace_back([&, t] {
                    emu::thread_idx = {t, 0, 0};
                    emu::block_idx = {bx, by, 0};
                    emu::block = {&bar, warps.get(), smem, shared_bytes};
                    spmm_vnm_f16(a_vals, a_meta, col_loc, b, c, rows, n, ks, groups, m, k, ldb, ldc);
                    if (!emu::open_group.empty() || !emu::committed.empty())
                        emu::fail("cp.async copies never waited for");
                });
            }
            for (auto& t : team) t.join();
            std::free(smem);
        }
    }
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(c), static_cast<std::streamsize>(h[17] * sizeof(u16)));
    for (const void* p : {(const void*)a_vals, (const void*)a_meta, (const void*)col_loc, (const void*)b, (const void*)c})
        std::free(const_cast<void*>(p));
    return out ? 0 : 1;
}
