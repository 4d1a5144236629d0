//! Cached rayon pools, one per thread count, so that timing a kernel never includes spawning
//! threads and a `threads` parameter really bounds the parallelism.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rayon::ThreadPool;

use crate::KernelError;

/// Runs `f` inside a pool of exactly `threads` threads (created once per count); one thread runs
/// `f` on the caller's thread (handing a small product to a pool thread and back costs more than
/// the product).
pub(crate) fn with_threads<T: Send>(
    threads: usize,
    f: impl FnOnce() -> T + Send,
) -> Result<T, KernelError> {
    if threads == 1 {
        return Ok(f());
    }
    static POOLS: Mutex<BTreeMap<usize, Arc<ThreadPool>>> = Mutex::new(BTreeMap::new());
    let pool = {
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        match pools.get(&threads) {
            Some(p) => p.clone(),
            None => {
                let p = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(move |i| format!("kernels-{threads}-{i}"))
                    .build()
                    .map_err(|e| KernelError::Backend(format!("thread pool of {threads}: {e}")))?;
                let p = Arc::new(p);
                pools.insert(threads, p.clone());
                p
            }
        }
    };
    Ok(pool.install(f))
}
