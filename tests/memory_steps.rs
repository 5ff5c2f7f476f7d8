//! The benchmark training steps of `shared/BENCHMARKS.md`, each inside an
//! `ActivationScope`: after warm-up a step allocates no pool memory, gives every buffer back,
//! leaves no tensor alive, and stays within its measured heap allocations (a correctness
//! property of the allocation pattern, counted by the counting allocator installed here,
//! not a timing). One test, since the pool is process-wide.

use om_core::alloc_count::CountingAlloc;
use om_core::{pool, ActivationScope, Result, ScopeStats};
use om_ops::models::benchmarks::{BenchModel, BenchStep};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Heap allocations of one warm step on the step's thread, per model: (calls, bytes), the
/// figures this test measures (AMD EPYC Zen 5; `om bench memory`, which counts the whole
/// process, shows one call more per model: 27 / 936, 171 / 20,328, 109 / 103,216), against
/// 729 / 32,631, 3,126 / 141,005 and 1,131 / 149,904 before tensor handles, shapes, graph
/// nodes and storages stopped allocating per step. Any per-operator or per-tensor allocation
/// that comes back fails the test; what remains is named in `docs/memory.md`.
const HEAP_BOUNDS: [(BenchModel, u64, u64); 3] =
    [(BenchModel::Convnet, 26, 880), (BenchModel::Encoder, 170, 20_272), (BenchModel::CrnnCtc, 108, 103_160)];

fn scoped(step: &BenchStep) -> Result<ScopeStats> {
    let scope = ActivationScope::new();
    step.step()?;
    Ok(scope.finish())
}

#[test]
fn warm_benchmark_steps_allocate_no_pool_memory_and_little_heap() -> Result<()> {
    for model in BenchModel::ALL {
        let step = BenchStep::new(model, 0)?;
        for _ in 0..3 {
            scoped(&step)?;
        }
        let before = pool::stats();
        let s = scoped(&step)?;
        let after = pool::stats();
        let name = model.name();
        assert_eq!(s.pool_native_allocations, 0, "{name}: {s:?}");
        assert_eq!(after.native_allocations, before.native_allocations, "{name}");
        assert_eq!(after.outstanding_bytes, before.outstanding_bytes, "{name}: a warm step kept buffers");
        assert_eq!(s.live_tensors_created, 0, "{name}: a step left tensors alive");
        assert!(s.peak_outstanding_bytes > after.outstanding_bytes, "{name}");
        let (_, max_calls, max_bytes) = HEAP_BOUNDS.into_iter().find(|b| b.0 == model).expect("a bound per model");
        let (calls, bytes) = (s.heap_allocations.unwrap(), s.heap_bytes.unwrap());
        assert!(calls <= max_calls, "{name}: {calls} heap allocations per warm step (bound {max_calls})");
        assert!(bytes <= max_bytes, "{name}: {bytes} heap bytes per warm step (bound {max_bytes})");
    }
    Ok(())
}
