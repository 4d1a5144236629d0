// A host emulator of the CUDA our kernels use, so that CI runs `spmm_vnm_f16.cu` and
// `spmm_csr_f32.cu` themselves on the CPU (run_vnm.cpp, run_csr.cpp): every thread of a block
// is an OS thread; `__syncthreads` is a barrier of the block; the warp-collective instructions (ldmatrix, mma.sp, shfl) exchange their operands through
// a per-warp area between two barriers of the warp and compute each lane's result from the
// PTX ISA's fragment layouts; cp.async copies are queued per thread in commit groups and land
// when `cp.async.wait_group` lets them (lazy mode, catches a read before its wait) or at issue
// (eager mode, catches a stage overwritten while still read).
//
// What it checks beyond the result: 16-byte alignment of cp.async and ldmatrix addresses,
// shared memory exactly the launch's size (a heap block per thread block: AddressSanitizer
// sees overruns), shared memory filled with fp16 NaNs at block start (a read of a word never
// written poisons the result), and the increasing metadata pairs `::ordered_metadata` needs.
//
// It says nothing about speed. The layouts it implements are the PTX ISA's (mma.sp m16n8k16 /
// m16n8k32 .f16 with sparsity selector 0, ldmatrix .x2/.x4 with and without .trans); the kernel
// was checked against the hardware on an H200, and against this emulator in CI.

#pragma once

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define COTUNE_EMULATE 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __ldg(p) (*(p))

namespace emu {

struct Dim3 {
    int x = 0, y = 0, z = 0;
};

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "emulator: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

// Operands a warp exchanges for one collective instruction.
struct Warp {
    std::barrier<> bar{32};
    const void* addr[32];
    uint32_t a[32][4];
    uint32_t b[32][4];
    uint32_t meta[32];
    uint32_t shfl[32];
};

struct Copy {
    void* dst;
    const void* src;
    int bytes;
};

// Operands a warpgroup (4 warps) exchanges for one wgmma (sm90.h).
struct WarpGroup {
    std::barrier<> bar{128};
    uint32_t a[128][4];
    uint32_t meta[128];
    uint64_t desc[128];
};

// An mbarrier: arrivals still expected in the current phase, the phases completed, and the
// current phase's transaction count (bytes expected minus bytes completed; the phase completes
// when both it and the pending arrivals are zero).
struct MBarrier {
    int expected;
    int pending;
    unsigned completed;
    long tx;
};

// A cp.async.bulk copy completing its bytes on an mbarrier: it lands when a thread waits on
// that barrier (lazy) or at issue (eager). A tensor copy's box is gathered at issue into
// `staged` (in its destination order), which lands in place of `src`.
struct BulkCopy {
    const void* bar;
    void* dst;
    const void* src;
    int bytes;
    std::vector<unsigned char> staged;
};

// cp.async copies a thread tied to an mbarrier (cp.async.mbarrier.arrive.noinc): they land,
// and then arrive on it, when a thread waits on that barrier (lazy) or at issue (eager).
struct AsyncArrival {
    const void* bar;
    int thread;
    std::vector<Copy> copies;
};

// What the threads of a block share for the sm_90 instructions (sm90.h).
struct Sm90State {
    std::mutex mu;
    std::map<const void*, MBarrier> bars;
    std::vector<AsyncArrival> arrivals;
    std::vector<BulkCopy> bulk;
};

// A named barrier (bar.sync / bar.arrive `id`, `count`): threads arrive, one at a time here
// (the hardware counts a warp's 32 at once); those that sync wait until `count` have, which
// completes this use and starts the next. A wait that never completes fails after 20 s.
struct NamedBarrier {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    int count = 0;
    unsigned generation = 0;

    void arrive(int n, bool wait) {
        std::unique_lock<std::mutex> lock(mu);
        if (arrived == 0) {
            count = n;
        } else if (count != n) {
            fail("named barrier: its threads name different counts");
        }
        const unsigned g = generation;
        if (++arrived == count) {
            arrived = 0;
            ++generation;
            cv.notify_all();
            return;
        }
        if (wait && !cv.wait_for(lock, std::chrono::seconds(20), [&] { return generation != g; }))
            fail("named barrier: a bar.sync never completed");
    }
};
constexpr int kNamedBarriers = 16;

// A thread block; with clusters (sm90.h) the blocks of one run at once, sharing one Sm90State
// (mbarriers are keyed by their host address, distinct across the blocks' shared memories).
struct Block {
    std::barrier<>* bar;
    Warp* warps;
    unsigned char* smem;
    size_t smem_bytes;
    WarpGroup* groups;
    Sm90State* sm90;
    int cluster_rank;
    int cluster_size;
    unsigned char* const* peers;  // each rank's shared memory
    std::barrier<>* cluster_bar;
    NamedBarrier* named;  // kNamedBarriers of them (0 is __syncthreads')
};

enum class CopyMode { Lazy, Eager };

inline CopyMode copy_mode = CopyMode::Lazy;
inline thread_local Dim3 thread_idx, block_idx;
inline Dim3 grid_dim;  // set by a harness whose kernel reads gridDim
inline thread_local Block block;
inline thread_local std::vector<Copy> open_group;
inline thread_local std::deque<std::vector<Copy>> committed;

inline int lane() { return thread_idx.x & 31; }
// A thread's identity across the blocks of a cluster (cp.async copies tied to mbarriers).
inline int thread_key() { return block.cluster_rank * 65536 + thread_idx.x; }
inline Warp& warp() { return block.warps[thread_idx.x >> 5]; }

inline void check_shared(const void* p, size_t bytes, const char* what) {
    auto at = static_cast<const unsigned char*>(p);
    if (at < block.smem || at + bytes > block.smem + block.smem_bytes) fail(what);
}

inline void apply(const Copy& c) {
    std::memcpy(c.dst, c.src, c.bytes);
    std::memset(static_cast<unsigned char*>(c.dst) + c.bytes, 0, 16 - c.bytes);
}

inline uint16_t half_at(const void* row, int i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const unsigned char*>(row) + 2 * i, 2);
    return h;
}

inline float f16_to_f32(uint16_t h) {
    _Float16 x;
    std::memcpy(&x, &h, 2);
    return static_cast<float>(x);
}

inline uint16_t f32_to_f16(float f) {
    _Float16 x = static_cast<_Float16>(f);
    uint16_t h;
    std::memcpy(&h, &x, 2);
    return h;
}

// ldmatrix .x`count`: matrix j's 8 row addresses come from lanes 8j .. 8j + 7. Without .trans
// a lane receives row lane/4, columns 2(lane%4) and +1 of each matrix; with .trans, rows
// 2(lane%4) and +1 of column lane/4 (the first in the low half).
inline void ldmatrix(uint32_t* r, const void* p, int count, bool trans) {
    Warp& w = warp();
    const int l = lane();
    // Lanes 8·count .. 31 give no address.
    if (l < 8 * count && reinterpret_cast<uintptr_t>(p) % 16 != 0) fail("ldmatrix: row address not 16-byte aligned");
    w.addr[l] = p;
    w.bar.arrive_and_wait();
    for (int j = 0; j < count; ++j) {
        uint16_t lo, hi;
        if (!trans) {
            const void* row = w.addr[8 * j + l / 4];
            check_shared(row, 16, "ldmatrix: row outside shared memory");
            lo = half_at(row, 2 * (l % 4));
            hi = half_at(row, 2 * (l % 4) + 1);
        } else {
            const void* r0 = w.addr[8 * j + 2 * (l % 4)];
            const void* r1 = w.addr[8 * j + 2 * (l % 4) + 1];
            check_shared(r0, 16, "ldmatrix: row outside shared memory");
            check_shared(r1, 16, "ldmatrix: row outside shared memory");
            lo = half_at(r0, l / 4);
            hi = half_at(r1, l / 4);
        }
        r[j] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
    }
    w.bar.arrive_and_wait();
}

// mma.sp.m16n8k{16,32}.row.col.f32.f16.f16.f32, sparsity selector 0. A (16 rows × k/2 kept
// values): register q of a lane holds row g + 8 (q & 1), kept columns 8 (q >> 1) + 2t, +1
// (g = lane / 4, t = lane % 4). B (k × 8): register q holds rows 8q + 2t, +1 of column g.
// Metadata: thread t < k/16 of quad g holds kept columns 8t .. 8t + 7 of rows g (bits 0..16)
// and g + 8 (bits 16..32), 2 bits each: a kept value's position within its group of 4.
// D: d0, d1 = row g, columns 2t, 2t + 1; d2, d3 = row g + 8.
inline void mma_sp(float* d, const uint32_t* a, const uint32_t* b, uint32_t meta, int k) {
    Warp& w = warp();
    const int l = lane();
    const int regs = k / 8;
    for (int q = 0; q < regs; ++q) {
        w.a[l][q] = a[q];
        w.b[l][q] = b[q];
    }
    w.meta[l] = meta;
    w.bar.arrive_and_wait();
    auto a_at = [&](int row, int kept) {
        const uint32_t word = w.a[(row % 8) * 4 + (kept % 8) / 2][(row / 8) + 2 * (kept / 8)];
        return f16_to_f32(static_cast<uint16_t>(word >> (16 * (kept % 2))));
    };
    auto b_at = [&](int kk, int col) {
        const uint32_t word = w.b[col * 4 + (kk % 8) / 2][kk / 8];
        return f16_to_f32(static_cast<uint16_t>(word >> (16 * (kk % 2))));
    };
    auto position = [&](int row, int kept) {
        const uint32_t word = w.meta[(row % 8) * 4 + kept / 8];
        return static_cast<int>((word >> (2 * (kept % 8) + 16 * (row / 8))) & 3);
    };
    const int g = l / 4, t = l % 4;
    float out[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        float acc = d[e];
        for (int kept = 0; kept < k / 2; kept += 2) {
            const int p0 = position(row, kept), p1 = position(row, kept + 1);
            if (p0 >= p1) fail("mma.sp::ordered_metadata: a group's positions do not increase");
            const int group = 4 * (kept / 2);
            acc += a_at(row, kept) * b_at(group + p0, col);
            acc += a_at(row, kept + 1) * b_at(group + p1, col);
        }
        out[e] = acc;
    }
    // No lane may publish its next operands before every lane has read these.
    w.bar.arrive_and_wait();
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// One block's own state while it runs.
struct BlockState {
    unsigned char* smem;
    std::unique_ptr<std::barrier<>> bar;
    std::unique_ptr<Warp[]> warps;
    std::unique_ptr<WarpGroup[]> groups;
    std::unique_ptr<NamedBarrier[]> named;
};

// Runs `kernel` (one call per thread) over a grid of grid_x × grid_y × grid_z blocks of
// `threads` threads, one block after another (with `cluster` > 1, one cluster of that many
// blocks along x after another, its blocks at once), each with `shared_bytes` of fresh shared
// memory filled with fp16 NaNs; every thread must have waited for its cp.async copies when it
// ends.
inline void run_grid(int grid_x, int grid_y, int grid_z, int threads, size_t shared_bytes,
                     const std::function<void()>& kernel, int cluster = 1) {
    if (threads % 32 != 0) fail("the block size is not a whole number of warps");
    if (cluster < 1 || grid_x % cluster != 0) fail("the grid's x is not a whole number of clusters");
    for (int bz = 0; bz < grid_z; ++bz) {
        for (int by = 0; by < grid_y; ++by) {
            for (int bx0 = 0; bx0 < grid_x; bx0 += cluster) {
                std::vector<BlockState> blocks(static_cast<size_t>(cluster));
                std::vector<unsigned char*> smems;
                for (BlockState& b : blocks) {
                    void* p = nullptr;
                    if (posix_memalign(&p, 128, shared_bytes + (shared_bytes == 0)) != 0) fail("out of memory");
                    b.smem = static_cast<unsigned char*>(p);
                    std::memset(b.smem, 0xff, shared_bytes);
                    b.bar = std::make_unique<std::barrier<>>(threads);
                    b.warps.reset(new Warp[threads / 32]);
                    b.groups.reset(new WarpGroup[(threads + 127) / 128]);
                    b.named.reset(new NamedBarrier[kNamedBarriers]);
                    smems.push_back(b.smem);
                }
                Sm90State sm90;
                std::barrier<> cluster_bar(cluster * threads);
                std::vector<std::thread> team;
                for (int r = 0; r < cluster; ++r) {
                    for (int t = 0; t < threads; ++t) {
                        team.emplace_back([&, r, t] {
                            BlockState& b = blocks[static_cast<size_t>(r)];
                            thread_idx = {t, 0, 0};
                            block_idx = {bx0 + r, by, bz};
                            block = {b.bar.get(), b.warps.get(), b.smem,     shared_bytes, b.groups.get(),
                                     &sm90,       r,             cluster,    smems.data(), &cluster_bar,
                                     b.named.get()};
                            kernel();
                            if (!open_group.empty() || !committed.empty()) fail("cp.async copies never waited for");
                            std::lock_guard<std::mutex> lock(sm90.mu);
                            for (const AsyncArrival& a : sm90.arrivals)
                                if (a.thread == thread_key()) fail("cp.async copies tied to an mbarrier never landed");
                        });
                    }
                }
                for (auto& t : team) t.join();
                for (BlockState& b : blocks)
                    for (int i = 0; i < kNamedBarriers; ++i)
                        if (b.named[i].arrived != 0) fail("a named barrier has arrivals no bar.sync completed at exit");
                if (!sm90.bulk.empty()) fail("cp.async.bulk copies never landed (no wait on their mbarrier)");
                for (unsigned char* p : smems) std::free(p);
            }
        }
    }
}

// An exactly sized, 256-byte aligned buffer (like cudaMalloc's), so that AddressSanitizer
// reports any access past its end.
template <typename T> T* device_buffer(size_t count) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, count * sizeof(T) + (count == 0)) != 0) fail("out of memory");
    return static_cast<T*>(p);
}

// The next `count` elements of the input file, in a device buffer.
template <typename T> T* read_array(std::ifstream& in, size_t count) {
    T* p = device_buffer<T>(count);
    in.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(count * sizeof(T)));
    if (!in) fail("input file too short");
    return p;
}

}  // namespace emu

#define threadIdx (emu::thread_idx)
#define blockIdx (emu::block_idx)
#define gridDim (emu::grid_dim)
#define DYNAMIC_SHARED(name) unsigned char* name = emu::block.smem

typedef unsigned short u16;
typedef unsigned int u32;

inline void __syncthreads() { emu::block.bar->arrive_and_wait(); }
inline void __syncwarp() { emu::warp().bar.arrive_and_wait(); }

// bar.sync / bar.arrive on named barrier `id` (1..15) with `count` threads (a multiple of 32).
inline void named_barrier(int id, int count, bool wait) {
    if (id < 1 || id >= emu::kNamedBarriers) emu::fail("named barrier: id outside 1..15");
    if (count <= 0 || count % 32 != 0) emu::fail("named barrier: count not a positive multiple of 32");
    emu::block.named[id].arrive(count, wait);
}
inline void named_barrier_sync(int id, int count) { named_barrier(id, count, true); }
inline void named_barrier_arrive(int id, int count) { named_barrier(id, count, false); }

// shfl.sync.bfly.b32 (all lanes): each lane posts its value, then takes lane ^ mask's.
inline u32 shfl_xor(u32 v, int mask) {
    emu::Warp& w = emu::warp();
    const int l = emu::lane();
    w.shfl[l] = v;
    w.bar.arrive_and_wait();
    const u32 r = w.shfl[(l ^ mask) & 31];
    w.bar.arrive_and_wait();
    return r;
}

// st.global.v4.b32 and st.global.v2.f32: vector stores need their size's alignment.
inline void st_global_v4(void* p, const u32* v) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) emu::fail("st.global.v4: address not 16-byte aligned");
    std::memcpy(p, v, 16);
}
inline void st_global_v2_f32(float* p, float x, float y) {
    if (reinterpret_cast<uintptr_t>(p) % 8 != 0) emu::fail("st.global.v2.f32: address not 8-byte aligned");
    p[0] = x;
    p[1] = y;
}

inline void cp_async16(void* dst, const void* src, int src_bytes) {
    if (reinterpret_cast<uintptr_t>(dst) % 16 != 0) emu::fail("cp.async: destination not 16-byte aligned");
    if (src_bytes != 0 && src_bytes != 16) emu::fail("cp.async: source size not 0 or 16");
    if (src_bytes > 0 && reinterpret_cast<uintptr_t>(src) % 16 != 0) emu::fail("cp.async: source not 16-byte aligned");
    emu::check_shared(dst, 16, "cp.async: destination outside shared memory");
    const emu::Copy c{dst, src, src_bytes};
    if (emu::copy_mode == emu::CopyMode::Eager) {
        emu::apply(c);
    } else {
        emu::open_group.push_back(c);
    }
}

inline void cp_async_commit() {
    emu::committed.push_back(std::move(emu::open_group));
    emu::open_group.clear();
}

template <int N> inline void cp_async_wait() {
    while (emu::committed.size() > static_cast<size_t>(N)) {
        for (const emu::Copy& c : emu::committed.front()) emu::apply(c);
        emu::committed.pop_front();
    }
}

inline u32 pack_f16x2(float lo, float hi) {
    return static_cast<u32>(emu::f32_to_f16(lo)) | static_cast<u32>(emu::f32_to_f16(hi)) << 16;
}

inline void ldmatrix_x4(u32* r, const void* p) { emu::ldmatrix(r, p, 4, false); }
inline void ldmatrix_x2(u32* r, const void* p) { emu::ldmatrix(r, p, 2, false); }
inline void ldmatrix_x4_trans(u32* r, const void* p) { emu::ldmatrix(r, p, 4, true); }
inline void ldmatrix_x2_trans(u32* r, const void* p) { emu::ldmatrix(r, p, 2, true); }
inline void mma_sp_k32(float* d, const u32* a, const u32* b, u32 meta) { emu::mma_sp(d, a, b, meta, 32); }
inline void mma_sp_k16(float* d, const u32* a, const u32* b, u32 meta) { emu::mma_sp(d, a, b, meta, 16); }
