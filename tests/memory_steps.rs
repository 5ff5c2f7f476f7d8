//! The benchmark training steps of `shared/BENCHMARKS.md` and the `om train` models' steps
//! (with their Adam update), each inside an `ActivationScope`, at 1 and 2 kernel threads:
//! after warm-up a step allocates no pool memory, gives every buffer back, leaves no tensor
//! alive and makes no heap allocation at all, on its own thread or any other (a correctness
//! property of the allocation pattern, counted by the counting allocator installed here,
//! not a timing). One test, since the pool and the allocator counts are process-wide.

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

/// Warm-up steps: the kernels' helper threads join calls opportunistically, so growing all
/// of their thread-local packing scratch can take more than a few steps — on a loaded
/// machine more than ten (one 2-thread OCR run needed an 11th), so 30.
const WARMUP: usize = 30;

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

#[test]
fn warm_training_steps_allocate_no_pool_memory_and_no_heap() -> Result<()> {
    for threads in [1, 2] {
        Compute::set_threads(threads)?;
        for (name, mut step) in steps()? {
            // A process moving on to another model drops the previous one's cached buffers
            // (the automatic cache limit would too, eight steps later).
            pool::trim();
            for _ in 0..WARMUP {
                scoped(&mut step)?;
            }
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
