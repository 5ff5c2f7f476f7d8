//! Concurrency: `Tensor` is `Send + Sync`; the arithmetic mode, thread count and grad mode
//! are per thread; several threads training independent models at once, each with 1 or 2
//! kernel threads (so they contend for the one kernel thread team), get the same bits as the
//! same trainings run one after another, and nothing deadlocks. The stress run repeats this;
//! `cargo test --release -p om-tests --test concurrency -- --ignored` runs it longer.

use om_core::compute::{Compute, Mode};
use om_core::{autograd, Tensor};
use om_models::benchmarks::{BenchModel, BenchStep};
use om_ops::optim::{Optimizer, SgdConfig};
use std::sync::mpsc;
use std::time::Duration;

const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<Tensor>();

/// One training: `steps` SGD steps of `model` with `threads` kernel threads in `mode`. Returns
/// the losses and the final parameters, as bits.
#[derive(Clone, Copy, Debug)]
struct Training {
    model: BenchModel,
    threads: usize,
    mode: Mode,
    seed: u64,
}

fn train(t: Training, steps: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    Compute::set_mode(t.mode);
    Compute::set_threads(t.threads).unwrap();
    let bench = BenchStep::new(t.model, t.seed).unwrap();
    let mut sgd = SgdConfig::default().lr(0.01).momentum(0.9).build(bench.parameters().to_vec()).unwrap();
    let losses = (0..steps).map(|_| {
        let loss = bench.step().unwrap();
        sgd.step().unwrap();
        loss.to_bits()
    });
    let losses = losses.collect();
    let params = bench.parameters().iter().map(|p| p.to_vec().iter().map(|v| v.to_bits()).collect()).collect();
    (losses, params)
}

/// Four trainings that differ in model, kernel threads, mode and seed.
fn trainings() -> [Training; 4] {
    [
        Training { model: BenchModel::Convnet, threads: 2, mode: Mode::Exact, seed: 1 },
        Training { model: BenchModel::Encoder, threads: 1, mode: Mode::Fast, seed: 2 },
        Training { model: BenchModel::CrnnCtc, threads: 2, mode: Mode::Fast, seed: 3 },
        Training { model: BenchModel::Convnet, threads: 1, mode: Mode::Exact, seed: 4 },
    ]
}

/// Runs the trainings on four threads at once, `rounds` times, and compares every result with
/// the same training run alone. A round that does not finish within a generous bound fails
/// the test as a deadlock instead of hanging CI.
fn concurrent_equals_sequential(rounds: usize, steps: usize) {
    let alone: Vec<_> = trainings().into_iter().map(|t| std::thread::spawn(move || train(t, steps)).join().unwrap()).collect();
    for round in 0..rounds {
        let (tx, rx) = mpsc::channel();
        for (i, t) in trainings().into_iter().enumerate() {
            let tx = tx.clone();
            std::thread::spawn(move || tx.send((i, train(t, steps))).unwrap());
        }
        drop(tx);
        for _ in 0..trainings().len() {
            let (i, got) =
                rx.recv_timeout(Duration::from_secs(300)).unwrap_or_else(|e| panic!("round {round}: a training did not finish: {e}"));
            assert!(got == alone[i], "round {round}: {:?} trained concurrently differs from alone", trainings()[i]);
        }
    }
}

#[test]
fn four_threads_training_at_once_match_one_after_another() {
    concurrent_equals_sequential(4, 3);
}

#[test]
#[ignore = "long stress run: cargo test --release -p om-tests --test concurrency -- --ignored"]
fn four_threads_training_at_once_stress() {
    concurrent_equals_sequential(20, 4);
}

#[test]
fn settings_and_grad_mode_are_per_thread() {
    Compute::set_mode(Mode::Exact);
    Compute::set_threads(2).unwrap();
    let _no_grad = autograd::NoGradGuard::new();
    let (mode, threads, grad) = std::thread::spawn(|| (Compute::mode(), Compute::threads(), autograd::is_grad_enabled())).join().unwrap();
    assert_eq!((mode, threads, grad), (Mode::Fast, 1, true), "a new thread starts from the defaults");
    assert_eq!((Compute::mode(), Compute::threads(), autograd::is_grad_enabled()), (Mode::Exact, 2, false));
}

#[test]
fn a_tensor_moved_to_another_thread_keeps_its_graph() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap().requires_grad().unwrap();
    let y = om_ops::mul(&x, &x).unwrap();
    let loss = std::thread::spawn(move || om_ops::sum(&y, None, false).unwrap()).join().unwrap();
    std::thread::spawn(move || loss.backward().unwrap()).join().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
}
