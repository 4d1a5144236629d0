//! A global allocator that starts every allocation of [`LineAligned::FROM`] bytes or more on a
//! 64-byte cache line, so that the kernels' in-place reads of B never straddle two lines.
//!
//! The tile kernels read B where it lies (`pack_b = 0`), one vector per stored value and N
//! tile. glibc starts a block it maps on its own (128 KiB and more, at first) 16 bytes past a
//! page, and a heap block anywhere on 16 bytes, so with rows a multiple of 16 floats every
//! AVX-512 load of a mapped B touched two lines, and of a heap B three times in four: at
//! 10×256×256, N:M 2:4, one thread (Intel Xeon Emerald Rapids), the same product ran in
//! 16.9 µs with B 16 bytes off a line and 9.6 µs on one, and which one a layer got depended on
//! the allocator, so tunings and passes of the same layers disagreed. Installed by the tool's
//! binaries (`#[global_allocator]`); a program calling [`crate::spmm`] gets the same speed from
//! any B that starts on a line and whose rows are a multiple of 16 floats.
//!
//! The price: std allocates an over-aligned zeroed block with `posix_memalign` and writes its
//! zeros, where `calloc` would have left a fresh mapping's pages untouched, and it grows an
//! over-aligned block by allocating and copying rather than `mremap`. Zeroed buffers of the
//! tool's sizes (activations, B panels) are written before they are read anyway.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, with blocks of [`Self::FROM`] bytes or more aligned to
/// [`Self::LINE`] bytes (smaller ones, and larger alignments, as asked).
pub struct LineAligned;

impl LineAligned {
    /// The alignment of large blocks: one cache line.
    pub const LINE: usize = 64;
    /// The smallest block aligned to a line (below it, strings and small vectors keep the
    /// allocator's cheaper path).
    pub const FROM: usize = 4096;

    /// The layout `layout` is allocated with: the same, or aligned to a line when large.
    fn widen(layout: Layout) -> Layout {
        if layout.size() >= Self::FROM && layout.align() < Self::LINE {
            Layout::from_size_align(layout.size(), Self::LINE).unwrap_or(layout)
        } else {
            layout
        }
    }
}

// SAFETY: every block is allocated and freed by `System` with the same layout, `widen(layout)`,
// a function of the caller's layout alone, which keeps the caller's size and at least its
// alignment; `realloc` moves a block whose widened alignment changes with its size.
unsafe impl GlobalAlloc for LineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract (a non-zero size); `widen` keeps the size.
        unsafe { System.alloc(Self::widen(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(Self::widen(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `widen(layout)` (the caller passes the layout it
        // was allocated with, and `widen` is deterministic).
        unsafe { System.dealloc(ptr, Self::widen(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = Self::widen(layout);
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does not
        // overflow `isize`.
        let new =
            Self::widen(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
        if new.align() == old.align() {
            // SAFETY: `ptr` was allocated with `old`; the new block keeps its alignment.
            return unsafe { System.realloc(ptr, old, new_size) };
        }
        // SAFETY: `new` has a non-zero size (the caller's contract); both blocks hold the
        // first `min(old, new)` bytes; `ptr` was allocated with `old`.
        unsafe {
            let moved = System.alloc(new);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                System.dealloc(ptr, old);
            }
            moved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aligned(p: *const u8) -> bool {
        (p as usize).is_multiple_of(LineAligned::LINE)
    }

    #[test]
    fn large_blocks_start_on_a_line_through_growth_and_shrinking() {
        let a = LineAligned;
        let small = Layout::from_size_align(100, 4).unwrap();
        // SAFETY: non-zero sizes; every pointer is freed with the layout it now has.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(7, 100);
            let q = a.realloc(p, small, 10_000);
            assert!(aligned(q));
            assert!(std::slice::from_raw_parts(q, 100).iter().all(|&b| b == 7));
            let large = Layout::from_size_align(10_000, 4).unwrap();
            let r = a.realloc(q, large, 20_000);
            assert!(aligned(r));
            assert!(std::slice::from_raw_parts(r, 100).iter().all(|&b| b == 7));
            let larger = Layout::from_size_align(20_000, 4).unwrap();
            let s = a.realloc(r, larger, 50);
            assert!(std::slice::from_raw_parts(s, 50).iter().all(|&b| b == 7));
            a.dealloc(s, Layout::from_size_align(50, 4).unwrap());
            let z = a.alloc_zeroed(larger);
            assert!(aligned(z));
            assert!(std::slice::from_raw_parts(z, 20_000)
                .iter()
                .all(|&b| b == 0));
            a.dealloc(z, larger);
        }
    }

    #[test]
    fn larger_alignments_are_kept() {
        let a = LineAligned;
        let page = Layout::from_size_align(8192, 4096).unwrap();
        // SAFETY: a non-zero size, freed with its layout.
        unsafe {
            let p = a.alloc(page);
            assert_eq!(p as usize % 4096, 0);
            a.dealloc(p, page);
        }
    }
}
