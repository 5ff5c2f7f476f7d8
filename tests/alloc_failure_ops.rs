//! Allocation failure in the operator families (issue 11): for convolutions, pooling,
//! normalisation, recurrent layers, attention, CTC, embedding, cross-entropy, matrix
//! products and the optimizers, a buffer the pool refuses is an `Error::OutOfMemory` naming
//! the operator, returned by the forward call or by `backward()`, and it changes nothing:
//! no input value or storage version, no leaf gradient, no parameter, no optimizer state.
//!
//! The pool's limit is process-wide, so every test holds [`LIMIT`] while it lowers it, and
//! restores it before asserting (a failing assertion must not leave the limit low).

use om_core::compute::{Compute, Settings};
use om_core::{pool, Error, Result, Tensor};
use om_ops::methods::*;
use om_ops::nn::{Forward, Linear};
use om_ops::optim::{Adam, Optimizer, Sgd, SgdConfig};
use om_ops::{self as ops, Reduction, ResizeMode};
use std::sync::{Mutex, MutexGuard};

/// Serialises the tests of this binary: each changes the process-wide limit.
static LIMIT: Mutex<()> = Mutex::new(());

/// A limit every input below fits in but no operator's output or scratch does.
const SMALL: usize = 256;

fn serial() -> MutexGuard<'static, ()> {
    LIMIT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with the pool's limit at `bytes`, restoring the old limit afterwards.
fn with_limit<R>(bytes: usize, f: impl FnOnce() -> R) -> R {
    let old = pool::set_max_buffer_bytes(bytes);
    let r = f();
    pool::set_max_buffer_bytes(old);
    r
}

/// Asserts that `r` is an out-of-memory error naming one of `ops`.
fn assert_oom<T: std::fmt::Debug>(r: Result<T>, ops: &[&str]) {
    match r {
        Err(Error::OutOfMemory { op, bytes, limit }) => {
            assert!(ops.contains(&op), "the error names `{op}`, expected one of {ops:?}");
            assert!(bytes > limit, "{bytes} bytes refused under a limit of {limit}");
        }
        other => panic!("expected an out-of-memory error naming {ops:?}, got {other:?}"),
    }
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

/// Values, storage version and gradient bits of each tensor, to compare before and after.
fn snapshot(ts: &[&Tensor]) -> Vec<(Vec<u32>, u64, Option<Vec<u32>>)> {
    ts.iter().map(|t| (bits(t), t.version(), t.grad().map(|g| bits(&g)))).collect()
}

fn leaf(shape: &[usize], seed: u64) -> Tensor {
    Tensor::rand_uniform(shape, -1.0, 1.0, seed).unwrap().requires_grad().unwrap()
}

/// Builds an operator's output from its leaves.
type Build = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

/// One operator family: `f` builds its output from the leaves `inputs` (plus constants).
struct Family {
    /// The names an error may carry (a composition's error names the operator that failed).
    ops: &'static [&'static str],
    inputs: Vec<Tensor>,
    f: Build,
}

impl Family {
    fn new(ops: &'static [&'static str], inputs: Vec<Tensor>, f: impl Fn(&[Tensor]) -> Result<Tensor> + 'static) -> Family {
        Family { ops, inputs, f: Box::new(f) }
    }
}

fn families() -> Vec<Family> {
    let ids = Tensor::from_vec_i32(vec![1, 4, 4, 0, 2, 5, 5, 1, 3, 0, 2, 4], &[12]).unwrap();
    let classes = Tensor::from_vec_i32(vec![2, 0, 1, 3, 4, 2, 0, 1], &[8]).unwrap();
    let ctc_targets = Tensor::from_vec_i32(vec![1, 2, 2, 3, 1, 3], &[2, 3]).unwrap();
    vec![
        Family::new(&["conv2d"], vec![leaf(&[2, 3, 6, 6], 1), leaf(&[4, 3, 3, 3], 2), leaf(&[4], 3)], |x| {
            ops::conv2d(&x[0], &x[1], Some(&x[2]), ops::Conv2dOptions::default().padding(1))
        }),
        Family::new(&["conv_transpose2d"], vec![leaf(&[2, 3, 4, 4], 4), leaf(&[3, 2, 3, 3], 5), leaf(&[2], 6)], |x| {
            ops::conv_transpose2d(&x[0], &x[1], Some(&x[2]), ops::ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1))
        }),
        Family::new(&["resize2d"], vec![leaf(&[1, 2, 4, 4], 7)], |x| {
            ops::resize2d(&x[0], ops::Interpolate::size([9, 7]).mode(ResizeMode::Bilinear))
        }),
        Family::new(&["max_pool2d"], vec![leaf(&[2, 3, 8, 8], 8)], |x| ops::max_pool2d(&x[0], ops::Pool2d::new(2).stride(1))),
        Family::new(&["avg_pool2d"], vec![leaf(&[2, 3, 8, 8], 9)], |x| ops::avg_pool2d(&x[0], ops::Pool2d::new(3).stride(1).padding(1))),
        Family::new(&["batch_norm2d"], vec![leaf(&[4, 3, 5, 5], 10), leaf(&[3], 11), leaf(&[3], 12)], |x| {
            ops::batch_norm2d(&x[0], Some(&x[1]), Some(&x[2]), None, None, ops::BatchNormOptions::train())
        }),
        Family::new(&["layer_norm"], vec![leaf(&[6, 40], 13), leaf(&[40], 14), leaf(&[40], 15)], |x| {
            ops::layer_norm(&x[0], Some(&x[1]), Some(&x[2]), 1e-5)
        }),
        Family::new(
            &["lstm_layer"],
            vec![leaf(&[5, 2, 3], 16), leaf(&[16, 3], 17), leaf(&[16, 4], 18), leaf(&[16], 19), leaf(&[2, 4], 20)],
            |x| ops::lstm_layer(&x[0], &x[1], &x[2], Some(&x[3]), None, Some(&x[4]), None, false, false),
        ),
        Family::new(&["gru_layer"], vec![leaf(&[5, 2, 3], 21), leaf(&[12, 3], 22), leaf(&[12, 4], 23), leaf(&[12], 24)], |x| {
            ops::gru_layer(&x[0], &x[1], &x[2], None, Some(&x[3]), None, true)
        }),
        Family::new(&["attention"], vec![leaf(&[2, 2, 6, 4], 25), leaf(&[2, 2, 7, 4], 26), leaf(&[2, 2, 7, 5], 27)], |x| {
            ops::attention(&x[0], &x[1], &x[2], None, 0.5)
        }),
        Family::new(&["ctc_loss"], vec![leaf(&[8, 2, 5], 28)], move |x| {
            ops::ctc_loss(&x[0], &ctc_targets, &[8, 7], &[3, 2], 0, Reduction::Mean, false)
        }),
        Family::new(&["embedding"], vec![leaf(&[6, 8], 29)], move |x| ops::embedding(&x[0], &ids, Some(5))),
        Family::new(&["cross_entropy", "log_softmax", "nll_loss"], vec![leaf(&[8, 10], 30)], move |x| {
            ops::cross_entropy(&x[0], &classes, None, Default::default())
        }),
        Family::new(&["matmul"], vec![leaf(&[2, 5, 6], 31), leaf(&[6, 7], 32)], |x| ops::matmul(&x[0], &x[1])),
        // Without a bias: the engine's own sum of a broadcast bias gradient is not an
        // operator's rule (see docs/autograd.md).
        Family::new(&["linear", "matmul"], vec![leaf(&[10, 6], 33), leaf(&[7, 6], 34)], |x| ops::linear(&x[0], &x[1], None)),
    ]
}

#[test]
fn a_forward_whose_buffers_are_refused_is_an_error_naming_the_operator_and_changes_nothing() {
    let _serial = serial();
    for fam in families() {
        let refs: Vec<&Tensor> = fam.inputs.iter().collect();
        let before = snapshot(&refs);
        let r = with_limit(SMALL, || (fam.f)(&fam.inputs));
        assert_oom(r, fam.ops);
        assert_eq!(snapshot(&refs), before, "{:?}", fam.ops);
        // With memory to spare the same call succeeds.
        assert!((fam.f)(&fam.inputs).is_ok(), "{:?}", fam.ops);
    }
}

#[test]
fn a_backward_whose_buffers_are_refused_is_an_error_that_leaves_every_leaf_gradient_untouched() {
    let _serial = serial();
    for fam in families() {
        let refs: Vec<&Tensor> = fam.inputs.iter().collect();
        let loss = (fam.f)(&fam.inputs).unwrap().sum(None, false).unwrap();
        // A first pass gives every leaf a gradient; the refused second pass must keep it.
        loss.backward_with(None, true).unwrap();
        let before = snapshot(&refs);
        assert!(before.iter().all(|(_, _, g)| g.is_some()), "{:?}", fam.ops);
        let r = with_limit(SMALL, || loss.backward_with(None, true));
        assert_oom(r, fam.ops);
        assert_eq!(snapshot(&refs), before, "{:?}: a refused backward changed a leaf", fam.ops);
        // The graph is intact: the same pass with memory to spare adds the same gradient
        // once more, which doubles it exactly.
        loss.backward_with(None, false).unwrap();
        for ((_, _, g0), t) in before.iter().zip(&refs) {
            let doubled: Vec<u32> = g0.as_ref().unwrap().iter().map(|&b| (2.0 * f32::from_bits(b)).to_bits()).collect();
            assert_eq!(bits(&t.grad().unwrap()), doubled, "{:?}: the retried pass", fam.ops);
        }
    }
}

#[test]
fn scratch_refused_inside_parallel_chunks_is_an_error_after_the_loop() {
    let _serial = serial();
    // Small outputs, large per-chunk scratch: the output fits under the limit, the
    // scratch of every chunk (an image's unfolding, a block's attention weights) does not.
    let (x, w) = (leaf(&[2, 16, 6, 6], 50), leaf(&[1, 16, 3, 3], 51));
    let (q, k, v) = (leaf(&[1, 2, 2, 2], 52), leaf(&[1, 2, 64, 2], 53), leaf(&[1, 2, 64, 1], 54));
    let conv = || ops::conv2d(&x, &w, None, ops::Conv2dOptions::default().padding(1));
    // Only the weight's gradient: its chunks (bands of the unfolding) ask for the scratch.
    let conv_dw = || ops::conv2d(&x.detach(), &w, None, ops::Conv2dOptions::default().padding(1));
    let attention = || ops::attention(&q, &k, &v, None, 0.5);
    for threads in [1, 2] {
        let settings = Settings { threads, ..Compute::settings() };
        Compute::with(settings, || {
            assert_oom(with_limit(4096, conv), &["conv2d"]);
            assert_oom(with_limit(1024, attention), &["attention"]);
            for (loss, limit, op) in
                [(conv().unwrap(), 4096, "conv2d"), (conv_dw().unwrap(), 4096, "conv2d"), (attention().unwrap(), 1024, "attention")]
            {
                let loss = loss.sum(None, false).unwrap();
                assert_oom(with_limit(limit, || loss.backward_with(None, true)), &[op]);
            }
            assert!([&x, &w, &q, &k, &v].iter().all(|t| t.grad().is_none()), "{threads} threads");
        });
    }
}

#[test]
fn running_statistics_are_unchanged_when_batch_norm_is_refused() {
    let _serial = serial();
    let x = leaf(&[4, 3, 5, 5], 40);
    let (rm, rv) = (Tensor::zeros(&[3]).unwrap(), Tensor::ones(&[3]).unwrap());
    let r = with_limit(SMALL, || ops::batch_norm2d(&x, None, None, Some(&rm), Some(&rv), ops::BatchNormOptions::train()));
    assert_oom(r, &["batch_norm2d"]);
    assert_eq!((rm.to_vec(), rv.to_vec()), (vec![0.0; 3], vec![1.0; 3]));
    assert_eq!((rm.version(), rv.version()), (0, 0));
}

/// A model of two parameters: a small weight and a larger one.
fn model() -> (Linear, Linear, Tensor) {
    let (a, b) = (Linear::with_seed(4, 3, true, 1).unwrap(), Linear::with_seed(3, 40, true, 2).unwrap());
    let x = Tensor::rand_uniform(&[5, 4], -1.0, 1.0, 3).unwrap();
    (a, b, x)
}

fn params(a: &Linear, b: &Linear) -> Vec<Tensor> {
    let mut p = vec![a.weight.clone(), b.weight.clone()];
    p.extend(a.bias.clone());
    p.extend(b.bias.clone());
    p
}

fn train_step(a: &Linear, b: &Linear, x: &Tensor, opt: &mut dyn Optimizer) -> Result<()> {
    opt.zero_grad()?;
    let y = b.forward(&a.forward(x)?.tanh()?)?;
    y.mul(&y)?.sum(None, false)?.backward()?;
    opt.step()
}

#[test]
fn optimizer_state_that_cannot_be_allocated_is_an_error_naming_the_optimizer() {
    let _serial = serial();
    let (a, b, _) = model();
    let (pa, pb) = (params(&a, &b), params(&a, &b));
    assert_oom(with_limit(SMALL, || Adam::new(pa, 0.01).map(|_| ())), &["Adam"]);
    assert_oom(with_limit(SMALL, || Adam::adamw(pb, 0.01).map(|_| ())), &["Adam"]);
    let sgd = SgdConfig::default().lr(0.1).momentum(0.9);
    assert_oom(with_limit(SMALL, || sgd.build(params(&a, &b)).map(|_| ())), &["Sgd"]);
}

#[test]
fn a_refused_step_leaves_parameters_and_optimizer_state_bit_identical() {
    let _serial = serial();
    // Two identical models and optimizers: one takes a refused step in the middle.
    let runs: Vec<Vec<Vec<u32>>> = [false, true]
        .into_iter()
        .map(|refuse| {
            let (a, b, x) = model();
            let p = params(&a, &b);
            let mut sgd = Sgd::new(p.clone(), 0.05).unwrap();
            train_step(&a, &b, &x, &mut sgd).unwrap();
            // Momentum set by a new config: its state is allocated by the next step; the
            // first weight's buffer fits under the limit, the second's does not.
            sgd.set_config(sgd.config().momentum(0.9)).unwrap();
            if refuse {
                let limit = p[0].numel() * 4;
                assert!(p[1].numel() * 4 > limit);
                let before: Vec<_> = p.iter().map(|t| (bits(t), t.version())).collect();
                let r = with_limit(limit, || sgd.step());
                assert_oom(r, &["Sgd"]);
                assert_eq!(p.iter().map(|t| (bits(t), t.version())).collect::<Vec<_>>(), before, "a refused step wrote");
            }
            for _ in 0..3 {
                train_step(&a, &b, &x, &mut sgd).unwrap();
            }
            let mut adam = Adam::new(p.clone(), 0.01).unwrap();
            for _ in 0..2 {
                train_step(&a, &b, &x, &mut adam).unwrap();
            }
            p.iter().map(bits).collect()
        })
        .collect();
    assert_eq!(runs[0], runs[1], "the refused step changed the parameters or the optimizer's state");
}
