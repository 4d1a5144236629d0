use kernels::{spmm, synthetic, FormatSignature, ParamPoint, Pattern};
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rows, cols, n) = (3072, 768, 512);
    let m: usize = args[0].parse().unwrap();
    let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 64, m }, rows, cols).unwrap();
    let a = synthetic(&sig, 1).unwrap();
    let mut p = ParamPoint::default();
    for kv in args[1].split(',') {
        let (k, v) = kv.split_once('=').unwrap();
        p.0.insert(k.to_string(), v.parse().unwrap());
    }
    let x = kernels::random_values(cols * n, 2);
    let mut y = vec![0f32; rows * n];
    let t = std::time::Instant::now();
    for _ in 0..100 {
        spmm(&a, &x, n, &mut y, &p).unwrap();
    }
    println!("{:.0} us", t.elapsed().as_secs_f64() * 1e4);
}
