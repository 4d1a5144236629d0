// The sm_90 instructions of `spmm_vnm_wgmma_f16.cu` on the host emulator (emu.h): mbarriers,
// cp.async tied to an mbarrier, and the sparse warpgroup MMA with B read from shared memory
// through a matrix descriptor.
//
// - mbarrier: init / arrive / expect_tx / try_wait.parity on a block-wide table keyed by the
//   barrier's shared address; a phase completes when its arrivals are in and its transaction
//   count (bytes expected minus bytes completed) is zero. `cp.async.bulk` (global to shared,
//   completing its bytes on a barrier) lands, lazily, when some thread waits on that barrier,
//   or at issue (eager); a bulk copy never landed fails at the block's end. A TMA tensor copy
//   (`cp.async.bulk.tensor.2d`, a box of a 2-D tensor map: `TensorMap` below, built by the
//   harness as the host encodes the driver's) reads its box at issue, zero outside the
//   tensor, lays it out under the 128-byte swizzle of its destination's shared address, and
//   lands like a bulk copy; multicast to a cluster's blocks, it (like a multicast bulk copy)
//   lands at the same offsets of each one's shared memory and completes its bytes on each
//   one's barrier.
// - Clusters (`run_grid`'s `cluster`: the blocks of a cluster run at once and share the
//   barrier table): `%cluster_ctarank`, `barrier.cluster` arrive + wait, and an arrive on the
//   barrier at the same offset of another block's shared memory (`mapa` + a remote
//   `mbarrier.arrive`).
//   `cp.async.mbarrier.arrive.noinc` ties the thread's pending copies to the barrier: in lazy
//   mode they land, and then arrive, only when some thread waits on that barrier (or the
//   issuing thread waits for all its copies); in eager mode they landed at issue and the
//   arrival is immediate. A wait that never completes fails after 20 s.
// - wgmma.mma_async.sp m64nNk32 f32.f16.f16, A from registers, sparsity selector 0, B N-major
//   (imm-trans-b = 1) without swizzle or with the 128-byte one: each warp gives the A fragment
//   of its 16 rows in the mma.sp m16n8k32 order (register q: row g + 8 (q & 1), kept columns 8
//   (q >> 1) + 2t, +1) and the metadata of threads 0 and 1 of each quad (thread p: kept
//   columns 8p .. 8p + 7, row g in bits 0..16, row g + 8 in bits 16..32); a kept value's
//   logical column is 4 (kept / 2) plus its 2-bit position, and the two positions of a group
//   must differ. B element (k, n) is at start + (n / 8) SBO + (k / 8) LBO + (k % 8) 16
//   + (n % 8) 2 bytes (or, with the 128-byte swizzle, as `b_at` says). Accumulator 4j + e of
//   a thread is row g + 8 (e / 2) of its warp's 16, column 8j + 2t + e % 2. In lazy mode a
//   wgmma reads B and writes its accumulators at the `wgmma.wait_group` that covers it (so a stage
//   released too early, or accumulators read too early, show in C, and A fragment registers
//   written before then fail); in eager mode, at issue. Every wgmma needs a `wgmma.fence`
//   since the thread's last wait.
//
// These layouts are the PTX ISA's as read in kernels/cuda/NOTES.md ("wgmma layouts"), some of
// them through CUTLASS's encodings where the ISA gives only a figure; the device check is the
// judge.

#pragma once

#include <algorithm>
#include <chrono>

#include "emu.h"

namespace emu {

typedef unsigned long long u64;

struct WgmmaOp {
    float* acc;
    int n;
    int quad;
    float rows[2][32];  // this thread's two rows of A, dense over the 32 logical columns
    uint64_t desc;
    const uint32_t* a_regs;  // the thread's A fragment registers, which must not change
    uint32_t a_seen[4];      // until the wgmma completes: their values at issue
};

inline thread_local bool wgmma_fenced = false;
inline thread_local std::vector<WgmmaOp> wgmma_open;
inline thread_local std::deque<std::vector<WgmmaOp>> wgmma_committed;

inline MBarrier& barrier_at(const void* bar) {
    auto it = block.sm90->bars.find(bar);
    if (it == block.sm90->bars.end()) fail("mbarrier: used before mbarrier.init");
    return it->second;
}

// The hardware's transaction count range (PTX ISA: mbarrier, tx-count).
constexpr long TX_LIMIT = (1L << 20) - 1;

inline void complete_if_done(MBarrier& b) {
    if (b.pending == 0 && b.tx == 0) {
        b.completed += 1;
        b.pending = b.expected;
    }
}

inline void arrive_locked(const void* bar) {
    MBarrier& b = barrier_at(bar);
    if (b.pending <= 0) fail("mbarrier: arrival on a completed phase");
    --b.pending;
    complete_if_done(b);
}

inline void add_tx_locked(const void* bar, long bytes) {
    MBarrier& b = barrier_at(bar);
    b.tx += bytes;
    if (b.tx > TX_LIMIT || b.tx < -TX_LIMIT) fail("mbarrier: tx-count out of range");
    complete_if_done(b);
}

// Lands the copies tied to `bar` (all barriers if null) by `thread` (any if negative), each
// entry followed by its arrival, and (for any thread) the bulk copies completing on `bar`,
// each followed by its bytes' completion. The caller holds the lock.
inline void land_locked(const void* bar, int thread) {
    if (thread < 0) {
        auto& bulk = block.sm90->bulk;
        for (size_t i = 0; i < bulk.size();) {
            if (bar == nullptr || bulk[i].bar == bar) {
                const BulkCopy c = std::move(bulk[i]);
                bulk.erase(bulk.begin() + static_cast<long>(i));
                std::memcpy(c.dst, c.staged.empty() ? c.src : c.staged.data(), static_cast<size_t>(c.bytes));
                add_tx_locked(c.bar, -c.bytes);
            } else {
                ++i;
            }
        }
    }
    auto& list = block.sm90->arrivals;
    for (size_t i = 0; i < list.size();) {
        if ((bar == nullptr || list[i].bar == bar) && (thread < 0 || list[i].thread == thread)) {
            AsyncArrival a = std::move(list[i]);
            list.erase(list.begin() + static_cast<long>(i));
            for (const Copy& c : a.copies) apply(c);
            arrive_locked(a.bar);
        } else {
            ++i;
        }
    }
}

// Row `row` (0..15) of warp `warp`'s rows of A, dense over its 32 logical columns, from the
// warpgroup's fragment registers and metadata.
inline void dense_rows(const WarpGroup& g, int warp, int row, float* out) {
    for (int col = 0; col < 32; ++col) out[col] = 0.0f;
    for (int kept = 0; kept < 16; kept += 2) {
        int pos[2];
        for (int h = 0; h < 2; ++h) {
            const int kk = kept + h;
            const uint32_t word = g.meta[warp * 32 + (row % 8) * 4 + kk / 8];
            pos[h] = static_cast<int>((word >> (2 * (kk % 8) + 16 * (row / 8))) & 3);
        }
        if (pos[0] == pos[1]) fail("wgmma.sp: a group's two metadata positions are equal");
        for (int h = 0; h < 2; ++h) {
            const int kk = kept + h;
            const uint32_t reg = g.a[warp * 32 + (row % 8) * 4 + (kk % 8) / 2][(row / 8) + 2 * (kk / 8)];
            out[4 * (kept / 2) + pos[h]] = f16_to_f32(static_cast<uint16_t>(reg >> (16 * (kk % 2))));
        }
    }
}

// Where this block's dynamic shared memory starts in the shared window, as `smem_addr` reports
// it: after the 1 KiB a device reserves (sm_80 on), 1024-aligned as the kernel declares it. Not
// at 0, so that a descriptor's start is decoded as an address, not an offset.
constexpr uint32_t SMEM_WINDOW = 0x400;

// B element (k, n) through the descriptor, by layout type (bits 62-63): 0, no swizzle: core
// matrices of 8 k-rows x 16 bytes, LBO apart along k and SBO along n; 1, 128-byte swizzle
// (N-major): 64-column groups LBO apart, 8-row atoms SBO apart, k-row r of an atom 128 bytes
// at r * 128 whose 16-byte pieces sit at (piece ^ address bits 7-9) — the swizzle is of the
// shared address, so the atoms must be 1024-aligned when the base offset (bits 49-51) is 0.
inline float b_at(uint64_t desc, int k, int n) {
    const uint64_t start = (desc & 0x3FFF) << 4;
    const uint64_t lbo = ((desc >> 16) & 0x3FFF) << 4;
    const uint64_t sbo = ((desc >> 32) & 0x3FFF) << 4;
    uint64_t addr;
    if ((desc >> 62) == 0) {
        addr = start + (n / 8) * sbo + (k / 8) * lbo + (k % 8) * 16 + (n % 8) * 2;
    } else {
        addr = start + (n / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + (n % 64) * 2;
        addr ^= ((addr >> 7) & 7) << 4;
    }
    if (addr < SMEM_WINDOW) fail("wgmma: B element below the block's shared memory");
    const unsigned char* p = block.smem + (addr - SMEM_WINDOW);
    check_shared(p, 2, "wgmma: B element outside shared memory");
    return f16_to_f32(half_at(p, 0));
}

inline void evaluate(const WgmmaOp& op) {
    for (int q = 0; q < 4; ++q)
        if (op.a_regs[q] != op.a_seen[q]) fail("wgmma: A fragment registers changed before the wgmma completed");
    for (int j = 0; j < op.n / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
            const int col = 8 * j + 2 * op.quad + e % 2;
            float sum = op.acc[4 * j + e];
            for (int k = 0; k < 32; ++k) sum += op.rows[e / 2][k] * b_at(op.desc, k, col);
            op.acc[4 * j + e] = sum;
        }
    }
}

inline void wgmma_sp(float* acc, const uint32_t* a, uint64_t desc, uint32_t meta, int n) {
    if (!wgmma_fenced) fail("wgmma: no wgmma.fence since the thread's last wgmma.wait_group");
    if ((desc >> 62) > 1) fail("wgmma: only B without swizzle or with the 128-byte swizzle is emulated");
    if (((desc >> 49) & 7) != 0) fail("wgmma: only base offset 0 is emulated");
    if ((desc >> 62) == 1 && (((desc & 0x3FFF) << 4) & 1023) != 0)
        fail("wgmma: a 128-byte-swizzled B whose start is not 1024-aligned (base offset 0)");
    const int me = thread_idx.x % 128;
    WarpGroup& g = block.groups[thread_idx.x / 128];
    for (int q = 0; q < 4; ++q) g.a[me][q] = a[q];
    g.meta[me] = meta;
    g.desc[me] = desc;
    g.bar.arrive_and_wait();
    for (int i = 0; i < 128; ++i)
        if (g.desc[i] != desc) fail("wgmma: the warpgroup's B descriptors differ");
    WgmmaOp op{acc, n, lane() % 4, {}, desc, a, {a[0], a[1], a[2], a[3]}};
    const int warp = me / 32, row = lane() / 4;
    dense_rows(g, warp, row, op.rows[0]);
    dense_rows(g, warp, row + 8, op.rows[1]);
    // No thread may publish its next operands before every thread has read these.
    g.bar.arrive_and_wait();
    if (copy_mode == CopyMode::Eager) {
        evaluate(op);
    } else {
        wgmma_open.push_back(op);
    }
}

}  // namespace emu

typedef unsigned long long u64;
using std::min;

inline u32 smem_addr(const void* p) {
    emu::check_shared(p, 1, "shared address outside shared memory");
    return static_cast<u32>(static_cast<const unsigned char*>(p) - emu::block.smem) + emu::SMEM_WINDOW;
}

inline void fence_proxy_async() {}
inline void fence_accumulators(float*) {}
template <int R> inline void setmaxnreg_inc() {}
template <int R> inline void setmaxnreg_dec() {}
inline void mbar_init_fence() {}

inline void mbar_init(u64* bar, int count) {
    if (reinterpret_cast<uintptr_t>(bar) % 8 != 0) emu::fail("mbarrier: not 8-byte aligned");
    emu::check_shared(bar, 8, "mbarrier: outside shared memory");
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::block.sm90->bars[bar] = {count, count, 0, 0};
}

inline void mbar_expect_tx(u64* bar, u32 bytes) {
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::add_tx_locked(bar, static_cast<long>(bytes));
}

namespace emu {

// A bulk copy's checks, against this block's shared memory.
inline void check_bulk(const void* dst, const void* src, u32 bytes) {
    if (bytes == 0 || bytes % 16 != 0) fail("cp.async.bulk: size not a positive multiple of 16");
    if (reinterpret_cast<uintptr_t>(dst) % 16 != 0) fail("cp.async.bulk: destination not 16-byte aligned");
    if (reinterpret_cast<uintptr_t>(src) % 16 != 0) fail("cp.async.bulk: source not 16-byte aligned");
    check_shared(dst, bytes, "cp.async.bulk: destination outside shared memory");
}

// The copy lands at `dst` (this block's shared memory or a peer's) completing on `bar`: now
// (eager) or at a wait on `bar` (lazy). The caller holds the lock.
inline void deliver_bulk_locked(void* dst, const void* src, u32 bytes, u64* bar) {
    barrier_at(bar);
    if (copy_mode == CopyMode::Eager) {
        std::memcpy(dst, src, bytes);
        add_tx_locked(bar, -static_cast<long>(bytes));
    } else {
        block.sm90->bulk.push_back({bar, dst, src, static_cast<int>(bytes), {}});
    }
}

}  // namespace emu

inline void cp_async_bulk(void* dst, const void* src, u32 bytes, u64* bar) {
    emu::check_bulk(dst, src, bytes);
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::deliver_bulk_locked(dst, src, bytes, bar);
}

// The emulator's tensor map: what `cuTensorMapEncodeTiled` is given for B (2-D, fp16, no
// interleave, element strides 1), built by the harness; only the 128-byte swizzle with
// 128-byte box rows is emulated.
struct TensorMap {
    const uint16_t* base;
    long dims[2];       // elements: columns (innermost), rows
    long row_bytes;     // bytes between rows
    int box[2];         // columns, rows
    int swizzle_bytes;  // 128
};
#define GRID_CONSTANT

namespace emu {

// The address at `p`'s offset in the shared memory of the cluster's block `rank`.
template <typename T> T* peer(T* p, unsigned rank) {
    check_shared(p, 1, "mapa: address outside shared memory");
    if (rank >= static_cast<unsigned>(block.cluster_size)) fail("mapa: rank outside the cluster");
    return reinterpret_cast<T*>(block.peers[rank] + (reinterpret_cast<unsigned char*>(p) - block.smem));
}

// A box gathered into `staged` (see below) lands at `dst` completing on `bar`: now (eager) or at
// a wait on `bar` (lazy). The caller holds the lock.
inline void deliver_box_locked(void* dst, u64* bar, std::vector<unsigned char> staged) {
    barrier_at(bar);
    const int bytes = static_cast<int>(staged.size());
    if (copy_mode == CopyMode::Eager) {
        std::memcpy(dst, staged.data(), staged.size());
        add_tx_locked(bar, -static_cast<long>(bytes));
    } else {
        block.sm90->bulk.push_back({bar, dst, nullptr, bytes, std::move(staged)});
    }
}

}  // namespace emu

inline u32 cluster_rank() { return static_cast<u32>(emu::block.cluster_rank); }
inline void cluster_sync() { emu::block.cluster_bar->arrive_and_wait(); }

inline void mbar_arrive_cluster(u64* bar, u32 rank) {
    u64* there = emu::peer(bar, rank);
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::arrive_locked(there);
}

// The box of `map` at (c0, c1) as it lands at shared address `at`: element (column c0 + c,
// row c1 + r) at at + r * 128 + c * 2 with the address's bits 4-6 XOR its bits 7-9 (the
// swizzle is of the address, as wgmma reads it), zero outside the tensor.
inline std::vector<unsigned char> stage_box(const TensorMap* map, int c0, int c1, u32 at) {
    const int bytes = map->box[0] * map->box[1] * 2;
    std::vector<unsigned char> staged(static_cast<size_t>(bytes));
    for (int r = 0; r < map->box[1]; ++r) {
        for (int c = 0; c < map->box[0]; ++c) {
            const long row = long(c1) + r, col = long(c0) + c;
            const bool in = row >= 0 && row < map->dims[1] && col >= 0 && col < map->dims[0];
            const uint16_t x = in ? map->base[row * (map->row_bytes / 2) + col] : 0;
            u32 addr = at + static_cast<u32>(r * 128 + c * 2);
            addr ^= ((addr >> 7) & 7) << 4;
            std::memcpy(staged.data() + (addr - at), &x, 2);
        }
    }
    return staged;
}

inline void check_box(void* dst, const TensorMap* map) {
    if (map->swizzle_bytes != 128 || map->box[0] * 2 != 128)
        emu::fail("cp.async.bulk.tensor: only 128-byte box rows under the 128-byte swizzle are emulated");
    emu::check_shared(dst, static_cast<size_t>(map->box[0] * map->box[1] * 2),
                      "cp.async.bulk.tensor: box outside shared memory");
    if (smem_addr(dst) % 128 != 0) emu::fail("cp.async.bulk.tensor: destination not 128-byte aligned");
}

inline void cp_async_bulk_tensor_2d_multicast(void* dst, const TensorMap* map, int c0, int c1, u64* bar,
                                              unsigned short mask) {
    check_box(dst, map);
    if (mask == 0 || mask >> emu::block.cluster_size != 0)
        emu::fail("cp.async.bulk.tensor.multicast: the mask names no block, or one outside the cluster");
    const std::vector<unsigned char> staged = stage_box(map, c0, c1, smem_addr(dst));
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    for (unsigned r = 0; r < static_cast<unsigned>(emu::block.cluster_size); ++r)
        if (mask >> r & 1) emu::deliver_box_locked(emu::peer(dst, r), emu::peer(bar, r), staged);
}

// The bulk copy multicast to the cluster's blocks in `mask`: the same bytes land at `dst`'s
// offset in each one's shared memory and complete on the barrier at `bar`'s offset in each.
inline void cp_async_bulk_multicast(void* dst, const void* src, u32 bytes, u64* bar, unsigned short mask) {
    emu::check_bulk(dst, src, bytes);
    if (mask == 0 || mask >> emu::block.cluster_size != 0)
        emu::fail("cp.async.bulk.multicast: the mask names no block, or one outside the cluster");
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    for (unsigned r = 0; r < static_cast<unsigned>(emu::block.cluster_size); ++r)
        if (mask >> r & 1) emu::deliver_bulk_locked(emu::peer(dst, r), src, bytes, emu::peer(bar, r));
}

inline void cp_async_bulk_tensor_2d(void* dst, const TensorMap* map, int c0, int c1, u64* bar) {
    check_box(dst, map);
    std::vector<unsigned char> staged = stage_box(map, c0, c1, smem_addr(dst));
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::deliver_box_locked(dst, bar, std::move(staged));
}

inline void mbar_arrive(u64* bar) {
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    emu::arrive_locked(bar);
}

inline void cp_async_mbar_arrive_noinc(u64* bar) {
    if (!emu::committed.empty()) emu::fail("cp.async: commit groups mixed with mbarrier tracking");
    std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
    if (emu::copy_mode == emu::CopyMode::Eager) {
        emu::arrive_locked(bar);
    } else {
        emu::block.sm90->arrivals.push_back({bar, emu::thread_key(), std::move(emu::open_group)});
        emu::open_group.clear();
    }
}

inline void mbar_wait(u64* bar, int parity) {
    const auto start = std::chrono::steady_clock::now();
    while (true) {
        {
            std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
            emu::land_locked(bar, -1);
            // The phase of parity `parity` is complete once the current phase's parity differs.
            if (static_cast<int>(emu::barrier_at(bar).completed & 1) != parity) return;
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20))
            emu::fail("mbarrier: a wait never completed (deadlock)");
        std::this_thread::yield();
    }
}

// cp.async.wait_all: every copy of the thread, those tied to an mbarrier included.
inline void cp_async_wait_all() {
    {
        std::lock_guard<std::mutex> lock(emu::block.sm90->mu);
        emu::land_locked(nullptr, emu::thread_key());
    }
    cp_async_wait<0>();
}

inline void wgmma_fence() { emu::wgmma_fenced = true; }

inline void wgmma_commit() {
    emu::wgmma_committed.push_back(std::move(emu::wgmma_open));
    emu::wgmma_open.clear();
}

template <int N> inline void wgmma_wait() {
    while (emu::wgmma_committed.size() > static_cast<size_t>(N)) {
        for (const emu::WgmmaOp& op : emu::wgmma_committed.front()) emu::evaluate(op);
        emu::wgmma_committed.pop_front();
    }
    emu::wgmma_fenced = false;
}

inline void wgmma_sp(float* d, const u32* a, u64 desc_b, u32 meta) { emu::wgmma_sp(d, a, desc_b, meta, BN); }
