//! glibc allocator settings for candle on the CPU (STACK.md: returning tensor buffers to the OS
//! cost ~3× in training throughput).
// The one `unsafe` outside `kernels`: mallopt is an FFI call with no safe wrapper, and the
// settings cannot be given any other way from inside the process.
#![allow(unsafe_code)]

/// Keeps freed tensor buffers in the process instead of returning them to the OS: mmap threshold
/// 32 MiB, trim threshold 512 MiB, top pad 64 MiB. Call once at start-up, before threads start.
/// A no-op on targets without glibc.
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for (param, value) in [
        (libc::M_MMAP_THRESHOLD, 32 << 20),
        (libc::M_TRIM_THRESHOLD, 512 << 20),
        (libc::M_TOP_PAD, 64 << 20),
    ] {
        // SAFETY: mallopt only adjusts allocator tunables; it takes plain integers, touches no
        // memory of ours, and glibc serialises it against concurrent allocations.
        unsafe {
            libc::mallopt(param, value);
        }
    }
}
