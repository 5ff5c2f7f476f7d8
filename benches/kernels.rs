//! Criterion benches of the kernels: the GEMM (square and the skinny training shapes, fast
//! and exact, 1 and 2 threads, B row-major and read transposed) and the element-wise lane
//! loops. For ratios against PyTorch in the same run use `tools/compare.sh` (it drives
//! `om bench gemm`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onemodel::compute::Settings;
use onemodel::core::kernels::gemm::{gemm, MatMut, MatRef};
use onemodel::core::kernels::lanes::{self, Src, Unary};
use onemodel::{KernelPath, Mode};

fn gemm_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("gemm");
    let shapes = [(64, 64, 64), (256, 256, 256), (512, 512, 512), (2048, 64, 64), (64, 2048, 64), (8, 128, 512), (32, 288, 1024)];
    for &(m, k, n) in &shapes {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 / 8.0 - 0.75).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 11) as f32 / 8.0 - 0.6).collect();
        let mut out = vec![0.0f32; m * n];
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        // Row-major B, and B = Wᵀ read in place (a linear layer's `x·Wᵀ`).
        let layouts = [("", MatRef::row_major(&b, k, n)), ("/wt", MatRef::row_major(&b, n, k).t())];
        for (layout, bm) in layouts {
            for mode in [Mode::Fast, Mode::Exact] {
                for threads in [1, 2] {
                    let s = Settings { mode, threads, path: KernelPath::best() };
                    let id = BenchmarkId::new(format!("{mode}/t{threads}{layout}"), format!("{m}x{k}x{n}"));
                    let am = MatRef::row_major(&a, m, k);
                    group.bench_function(id, |bench| bench.iter(|| gemm(s, am, bm, MatMut::row_major(&mut out, m, n))));
                }
            }
        }
    }
    group.finish();
}

fn lane_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("lanes");
    let x: Vec<f32> = (0..1 << 16).map(|i| (i % 977) as f32 / 100.0 - 4.8).collect();
    let mut out = vec![0.0f32; x.len()];
    group.throughput(Throughput::Elements(x.len() as u64));
    for op in [Unary::Relu, Unary::Tanh, Unary::Sigmoid, Unary::GeluErf, Unary::Exp] {
        for path in KernelPath::supported() {
            let s = Settings { mode: Mode::Exact, threads: 1, path };
            group.bench_function(BenchmarkId::new(format!("{op:?}"), path.name()), |bench| {
                bench.iter(|| lanes::unary(s, op, Src::Contig(&x), &mut out))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, gemm_benches, lane_benches);
criterion_main!(benches);
