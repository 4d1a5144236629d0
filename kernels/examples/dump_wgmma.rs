use kernels::cuda::{compile_ptx, wgmma_configs, KernelSource};
fn main() {
    let all = wgmma_configs(128);
    let picks = [
        all.iter()
            .find(|c| {
                c.bm == 128
                    && c.bn == 256
                    && c.bk == 64
                    && c.stages == 3
                    && c.tma == 1
                    && c.cluster == 4
                    && c.keep == 1
            })
            .unwrap(),
        all.iter()
            .find(|c| {
                c.bm == 128
                    && c.bn == 128
                    && c.bk == 64
                    && c.stages == 4
                    && c.pingpong == 1
                    && c.swizzle == 1
                    && c.bulk == 1
            })
            .unwrap(),
    ];
    for (i, c) in picks.iter().enumerate() {
        let t = std::time::Instant::now();
        let ptx = compile_ptx(KernelSource::SpmmVnmWgmmaF16, &c.defines(), "sm_90a").unwrap();
        eprintln!(
            "{c}: NVRTC {:.2} s, {} bytes",
            t.elapsed().as_secs_f64(),
            ptx.len()
        );
        std::fs::write(format!("/tmp/x{i}.ptx"), ptx).unwrap();
    }
}
