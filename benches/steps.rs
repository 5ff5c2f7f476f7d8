//! Criterion benches of the three training steps of `shared/BENCHMARKS.md` (clear grads,
//! forward, loss, backward), fast and exact, 1 and 2 threads. For ratios against PyTorch
//! in the same run use `tools/compare_steps.sh` (it drives `om bench step`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use om_models::benchmarks::{BenchModel, BenchStep};
use onemodel::{Compute, Mode};

fn step_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("step");
    group.sample_size(20);
    for model in BenchModel::ALL {
        let step = BenchStep::new(model, 0).expect("building a benchmark model");
        for mode in [Mode::Fast, Mode::Exact] {
            for threads in [1, 2] {
                Compute::set_mode(mode);
                Compute::set_threads(threads).expect("a valid thread count");
                let id = BenchmarkId::new(format!("{mode}/t{threads}"), model.name());
                group.bench_function(id, |bench| bench.iter(|| step.step().expect("a benchmark step")));
            }
        }
    }
    group.finish();
}

criterion_group!(benches, step_benches);
criterion_main!(benches);
