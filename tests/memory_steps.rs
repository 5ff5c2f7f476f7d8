//! The benchmark training steps of `shared/BENCHMARKS.md` and the `om train` models' steps
//! (with their Adam update), each inside an `ActivationScope`, at 1 and 2 kernel threads:
//! after warm-up a step allocates no pool memory, gives every buffer back, leaves no tensor
//! alive and makes no heap allocation at all, on its own thread or any other (a correctness
//! property of the allocation pattern, counted by the counting allocator installed here,
//! not a timing). One test, since the pool and the allocator counts are process-wide, and
//! without the libtest harness (`harness = false`, a `main`): the harness's own thread
//! allocates while a test runs (its "has been running for over 60 seconds" notice, three
//! heap calls), which the process-wide count would see in whichever step was running then.

use om_core::alloc_count::{self, CountingAlloc};
use om_core::{pool, ActivationScope, Compute, Result, ScopeStats, Tensor};
use om_models::benchmarks::{BenchModel, BenchStep};
use om_models::{Crnn, DigitNet};
use om_ops::nn::{Forward, Module};
use om_ops::optim::{Adam, Optimizer};
use om_ops::Reduction;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Heap allocations of one warm step, per model: (calls, bytes) on the step's thread and in
/// the whole process. Pinned exactly at what is measured (AMD EPYC Zen 5, 1 and 2 threads):
/// 0 for every model, against 729 / 32,631 (convnet), 3,126 / 141,005 (encoder) and
/// 1,131 / 149,904 (crnn_ctc) before issue 12's heap work. Any per-operator or per-tensor
/// allocation that comes back fails the test.
const HEAP_PER_STEP: (u64, u64) = (0, 0);

/// Warm-up steps before the measured one. A step's pool and heap needs are a function of
/// the shapes and the thread setting only (issue 22: the kernels take the scratch of a
/// parallel section up front, one part per thread that may take part, never inside a chunk,
/// and every thread of the kernel team sizes its GEMM packing scratch once, when it
/// starts), so the measured step is like every step from [`SETTLED`] on; 30 steps give a
/// timing dependence, should one come back, 28 chances to show before the measured step.
const WARMUP: usize = 30;

/// The steps that may still allocate: the first two (they create what the model keeps
/// across steps, its gradients and optimizer state, and fill the pool; measured: every model
/// at 1 and 2 threads allocates nothing from its third step on). Every later step must
/// allocate nothing from the pool and nothing on the heap.
const SETTLED: usize = 2;

/// One step of an `om train` model on a fixed batch: forward, loss, zero_grad, backward, Adam.
type TrainStep = Box<dyn FnMut() -> Result<()>>;

fn digits_step() -> Result<TrainStep> {
    let net = DigitNet::new([16, 32], 7)?;
    let mut opt = Adam::new(net.parameter_tensors(), 0.01)?;
    let x = Tensor::randn_with_seed(&[32, 1, 8, 8], 3)?;
    let y = Tensor::from_vec_i32((0..32).map(|i| i % 10).collect(), &[32])?;
    Ok(Box::new(move || {
        let loss = om_ops::cross_entropy(&net.forward(&x)?, &y, None, Default::default())?;
        opt.zero_grad()?;
        loss.backward()?;
        opt.step()
    }))
}

fn ocr_step() -> Result<TrainStep> {
    let net = Crnn::new(7)?;
    let mut opt = Adam::new(net.parameter_tensors(), 0.005)?;
    // strings of 4..8 digits, 8 columns (4 frames) per digit, padded to 64 columns
    let x = Tensor::randn_with_seed(&[32, 1, 8, 64], 3)?;
    let target_lengths: Vec<usize> = (0..32).map(|i| 4 + i % 5).collect();
    let input_lengths: Vec<usize> = target_lengths.iter().map(|l| 4 * l).collect();
    let targets = Tensor::from_vec_i32((0..32 * 8).map(|i| 1 + i % 10).collect(), &[32, 8])?;
    Ok(Box::new(move || {
        let lp = net.forward(&x)?;
        let loss = om_ops::ctc_loss(&lp, &targets, &input_lengths, &target_lengths, 0, Reduction::Mean, false)?;
        opt.zero_grad()?;
        loss.backward()?;
        opt.step()
    }))
}

/// Every measured step: the three benchmark models, then the two `om train` models.
fn steps() -> Result<Vec<(&'static str, TrainStep)>> {
    let mut all: Vec<(&'static str, TrainStep)> = Vec::new();
    for model in BenchModel::ALL {
        let step = BenchStep::new(model, 0)?;
        all.push((model.name(), Box::new(move || step.step().map(|_| ()))));
    }
    all.push(("digits", digits_step()?));
    all.push(("ocr", ocr_step()?));
    Ok(all)
}

/// One step in a scope, with the process's heap allocations during it.
fn scoped(step: &mut TrainStep) -> Result<(ScopeStats, alloc_count::HeapCounts)> {
    let before = alloc_count::process();
    let scope = ActivationScope::new();
    step()?;
    let s = scope.finish();
    Ok((s, alloc_count::process().since(before)))
}

fn main() -> Result<()> {
    warm_training_steps_allocate_no_pool_memory_and_no_heap()?;
    a_model_switch_settles_without_trimming()?;
    println!("memory_steps: ok (every model, 1 and 2 threads; a model switch without trimming)");
    Ok(())
}

fn warm_training_steps_allocate_no_pool_memory_and_no_heap() -> Result<()> {
    for threads in [1, 2] {
        Compute::set_threads(threads)?;
        for (name, mut step) in steps()? {
            // A process moving on to another model drops the previous one's cached buffers
            // (the automatic cache limit would too, eight steps later).
            pool::trim();
            let mut steps = [(0, 0); WARMUP];
            for seen in steps.iter_mut() {
                let (s, process) = scoped(&mut step)?;
                *seen = (s.pool_native_allocations, process.allocations);
            }
            let late = steps[SETTLED..].iter().position(|&a| a != (0, 0));
            assert_eq!(late, None, "{name} at {threads} thread(s): (pool, heap) allocations per warm-up step {steps:?}");
            let before = pool::stats();
            let (s, process) = scoped(&mut step)?;
            let after = pool::stats();
            let at = format!("{name} at {threads} thread(s)");
            assert_eq!(s.pool_native_allocations, 0, "{at}: {s:?}");
            assert_eq!(after.native_allocations, before.native_allocations, "{at}");
            assert_eq!(after.outstanding_bytes, before.outstanding_bytes, "{at}: a warm step kept buffers");
            assert_eq!(s.live_tensors_created, 0, "{at}: a step left tensors alive");
            assert!(s.peak_outstanding_bytes > after.outstanding_bytes, "{at}");
            let thread = (s.heap_allocations.unwrap(), s.heap_bytes.unwrap());
            assert_eq!(thread, HEAP_PER_STEP, "{at}: heap (calls, bytes) of a warm step on its thread");
            assert_eq!((process.allocations, process.bytes), HEAP_PER_STEP, "{at}: heap (calls, bytes) of a warm step, all threads");
        }
    }
    Compute::set_threads(1)?;
    Ok(())
}

/// Steps after a switch from the encoder to crnn_ctc in one process, without `pool::trim`,
/// until the automatic cache limit has forgotten the encoder's peak (it remembers
/// `pool::RECENT_STEPS` steps) and the pool has let go of the classes only the encoder used.
const SWITCH_SETTLE: usize = 2 * om_core::pool::RECENT_STEPS;

/// A process that trains the encoder and then crnn_ctc, without trimming the pool between
/// them, comes back to warm steps that allocate nothing: once the cache limit falls to
/// crnn_ctc's, the pool evicts the encoder's least recently used size classes first,
/// never crnn_ctc's own (before the LRU eviction: 6 native pool allocations per step, for
/// ever).
fn a_model_switch_settles_without_trimming() -> Result<()> {
    Compute::set_threads(1)?;
    pool::trim();
    let encoder = BenchStep::new(BenchModel::Encoder, 0)?;
    let mut first: TrainStep = Box::new(move || encoder.step().map(|_| ()));
    for _ in 0..WARMUP {
        scoped(&mut first)?;
    }
    let crnn = BenchStep::new(BenchModel::CrnnCtc, 0)?;
    let mut second: TrainStep = Box::new(move || crnn.step().map(|_| ()));
    let mut steps = [(0, 0); SWITCH_SETTLE + WARMUP];
    for seen in steps.iter_mut() {
        let (s, process) = scoped(&mut second)?;
        *seen = (s.pool_native_allocations, process.allocations);
    }
    let late = steps[SWITCH_SETTLE..].iter().position(|&a| a != (0, 0));
    assert_eq!(late, None, "crnn_ctc after the encoder: (pool, heap) allocations per step {steps:?}");
    Ok(())
}
