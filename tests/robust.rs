//! Issue 22's failures, each as a test: atomic loads (`nn::load` of views, `optim::load`
//! naming the kind of state found), huge views (printing, saving, sums past 2^53), errors
//! naming the operator the user called, and checked geometry — a property test driving
//! every geometry attribute near 0, 1 and `usize::MAX` / `isize::MAX` under `catch_unwind`
//! with a time limit.

mod seeded;

use om_core::module::Module;
use om_core::{Error, Tensor};
use om_ops::optim::{self, Adam, Optimizer, Sgd};
use om_ops::{nn, Conv2dOptions, ConvTranspose2dOptions, Interpolate, Pool2d};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("om-robust-{}-{name}", std::process::id()))
}

/// A module of a parameter `w` and a buffer `buf`, which may be any view.
struct TwoTensors {
    w: Tensor,
    buf: Tensor,
}

impl Module for TwoTensors {
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("w", &self.w);
    }
    fn visit_buffers(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("buf", &self.buf);
    }
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

/// The file a contiguous module with `w = [10, 11]` and `buf = 100..106` as `[3, 2]` saves.
fn saved_file(name: &str) -> PathBuf {
    let src = TwoTensors {
        w: Tensor::from_vec(vec![10.0, 11.0], &[2]).unwrap(),
        buf: Tensor::from_vec((100..106).map(|v| v as f32).collect(), &[3, 2]).unwrap(),
    };
    let path = tmp(name);
    nn::save(&src, &path).unwrap();
    path
}

#[test]
fn loading_into_a_transposed_buffer_writes_through_the_view() {
    let path = saved_file("transposed.safetensors");
    let storage = Tensor::zeros(&[6]).unwrap();
    let m = TwoTensors { w: Tensor::zeros(&[2]).unwrap(), buf: storage.as_strided([3, 2], [1, 3], 0).unwrap() };
    nn::load(&m, &path).expect("a transposed buffer loads");
    assert_eq!(m.buf.to_vec(), (100..106).map(|v| v as f32).collect::<Vec<_>>());
    assert_eq!(storage.to_vec(), vec![100.0, 102.0, 104.0, 101.0, 103.0, 105.0]);
    assert_eq!(m.w.to_vec(), vec![10.0, 11.0]);
    std::fs::remove_file(&path).ok();
}

#[test]
fn loading_into_an_expanded_buffer_fails_before_any_write() {
    let path = saved_file("expanded.safetensors");
    let m = TwoTensors {
        w: Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap(),
        buf: Tensor::zeros(&[2]).unwrap().as_strided([3, 2], [0, 1], 0).unwrap(),
    };
    let (w0, b0) = (bits(&m.w), bits(&m.buf));
    let e = nn::load(&m, &path).expect_err("an expanded buffer cannot hold distinct values").to_string();
    assert!(e.starts_with("nn::load:"), "{e}");
    assert!(e.contains("expanded.safetensors") && e.contains("`buf`"), "the error names the file and the tensor: {e}");
    assert_eq!((bits(&m.w), bits(&m.buf)), (w0, b0), "nothing changes on failure");
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_file_with_one_bad_tensor_at_the_end_changes_nothing() {
    let path = tmp("bad-last.safetensors");
    let w = Tensor::from_vec(vec![10.0, 11.0], &[2]).unwrap();
    let bad = Tensor::zeros(&[2, 3]).unwrap();
    om_core::io::save(&path, [("w", &w), ("buf", &bad)]).unwrap();
    let m = TwoTensors { w: Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap(), buf: Tensor::zeros(&[3, 2]).unwrap() };
    let e = nn::load(&m, &path).expect_err("`buf` has the wrong shape").to_string();
    assert!(e.contains("bad-last.safetensors") && e.contains("`buf`"), "{e}");
    assert_eq!(m.w.to_vec(), vec![1.0, 2.0], "the first tensor must not be written");
    std::fs::remove_file(&path).ok();
}

#[test]
fn an_adam_state_loaded_into_sgd_names_the_kind_found() {
    let p = Tensor::ones(&[3]).unwrap().requires_grad().unwrap();
    let adam = Adam::new(vec![p.clone()], 0.1).unwrap();
    let path = tmp("adam-state.safetensors");
    optim::save(&adam, &path).unwrap();
    let mut sgd = Sgd::new(vec![p], 0.5).unwrap();
    let e = optim::load(&mut sgd, &path).expect_err("an Adam state is not an SGD state").to_string();
    assert!(e.contains("a state file of Adam") && e.contains("not of Sgd") && e.contains("adam-state.safetensors"), "{e}");
    assert_eq!(sgd.lr(), 0.5);
    std::fs::remove_file(&path).ok();
}

/// `ones([1, 1])` seen as `[2^30, 2^30]` (2^60 elements, one stored).
fn huge_ones() -> Tensor {
    let big = 1usize << 30;
    Tensor::ones(&[1, 1]).unwrap().as_strided([big, big], [0, 0], 0).unwrap()
}

#[test]
fn huge_views_print_a_summary() {
    let s = huge_ones().to_string();
    assert!(s.starts_with("tensor([[1., 1., 1.,"), "{s}");
    assert!(s.contains("..."), "{s}");
    assert!(s.len() < 400, "a summary, not every element: {s}");
}

#[test]
fn saving_a_view_too_large_to_materialise_is_out_of_memory() {
    let path = tmp("huge.safetensors");
    let e = om_core::io::save(&path, [("huge", &huge_ones())]).expect_err("2^60 elements do not fit");
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    let m = TwoTensors { w: huge_ones(), buf: Tensor::zeros(&[1]).unwrap() };
    let e = nn::save(&m, &path).expect_err("2^60 elements do not fit");
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    assert!(!path.exists());
}

#[test]
fn sums_and_means_past_2_53_elements_do_not_saturate() {
    let x = huge_ones();
    assert_eq!(om_ops::sum(&x, None, false).unwrap().item().unwrap(), 2f32.powi(60));
    assert_eq!(om_ops::mean(&x, None, false).unwrap().item().unwrap(), 1.0);
}

#[test]
fn errors_name_the_operator_the_user_called() {
    // cross_entropy (a composition over nll_loss): a class index out of range.
    let logits = Tensor::zeros(&[2, 3]).unwrap();
    let targets = Tensor::from_vec_i32(vec![0, 7], &[2]).unwrap();
    let e = om_ops::cross_entropy(&logits, &targets, None, Default::default()).expect_err("class 7 of 3");
    assert_eq!(e.op(), "cross_entropy", "{e}");
    assert!(e.to_string().starts_with("cross_entropy: "), "{e}");
    // masked_fill and max_dim over a view too large for their outputs.
    let big = Tensor::ones(&[1, 1]).unwrap().as_strided([1 << 40, 1 << 20], [0, 0], 0).unwrap();
    let mask = Tensor::from_vec_i32(vec![1], &[1]).unwrap();
    let e = om_ops::masked_fill(&big, &mask, 0.0).expect_err("2^60 outputs");
    assert_eq!(e.op(), "masked_fill", "{e}");
    let e = om_ops::max_dim(&big, 1, false).expect_err("2^40 outputs");
    assert_eq!(e.op(), "max_dim", "{e}");
    assert!(!e.to_string().starts_with(':'), "{e}");
}

#[test]
fn the_reported_geometry_failures_are_errors_naming_the_op_and_attribute() {
    let x = Tensor::ones(&[1, 1, 4, 4]).unwrap();
    let w = Tensor::ones(&[1, 1, 3, 3]).unwrap();
    let e = contained("conv2d dilation 1<<63".into(), LIMIT, move || {
        om_ops::conv2d(&x, &w, None, Conv2dOptions::default().dilation(1usize << 63)).expect_err("the window overflows")
    });
    assert!(e.to_string().starts_with("conv2d: ") && e.to_string().contains("dilation"), "{e}");
    let x = Tensor::ones(&[1, 1, 4, 4]).unwrap();
    let w = Tensor::ones(&[1, 1, 3, 3]).unwrap();
    let e = contained("conv2d padding usize::MAX".into(), LIMIT, move || {
        om_ops::conv2d(&x, &w, None, Conv2dOptions::default().padding(usize::MAX)).expect_err("the padded length overflows")
    });
    assert!(e.to_string().starts_with("conv2d: ") && e.to_string().contains("padding"), "{e}");
    let e = contained("max_pool2d dilation 1<<63".into(), LIMIT, || {
        let x = Tensor::ones(&[1, 1, 4, 4]).unwrap();
        om_ops::max_pool2d(&x, Pool2d::new(3).dilation(1usize << 63)).expect_err("the window overflows")
    });
    assert!(e.to_string().starts_with("max_pool2d: ") && e.to_string().contains("dilation"), "{e}");
    for avg in [false, true] {
        // A window of 2^63 − 1 with padding 2^62 − 1: mostly padding, done in no time.
        contained(format!("pool padding 2^62 (avg: {avg})"), LIMIT, move || {
            let x = Tensor::ones(&[1, 1, 4, 4]).unwrap();
            let o = Pool2d::new(usize::MAX).stride(1).padding((1usize << 62) - 1);
            let r = if avg { om_ops::avg_pool2d(&x, o) } else { om_ops::max_pool2d(&x, o) };
            if let Ok(y) = r {
                assert!(y.to_vec().iter().all(|v| v.is_finite()), "{y:?}");
            }
        });
    }
    contained("CosineAnnealingLR t_max 1<<63".into(), LIMIT, || {
        let p = Tensor::ones(&[1]).unwrap().requires_grad().unwrap();
        let mut opt = Sgd::new(vec![p], 0.1).unwrap();
        let mut s = optim::CosineAnnealingLR::new(&mut opt, 1usize << 63, 0.0).unwrap();
        optim::LrScheduler::step(&mut s, &mut opt).unwrap();
        assert!((opt.lr() - 0.1).abs() < 1e-6, "{}", opt.lr());
    });
}

/// Runs `f` in a thread; fails if it panics or takes longer than `limit`. Buffers are
/// limited to 1 GiB in this test process, so a legal but huge size (a `Linear` of 2^32
/// inputs) is refused rather than filling the machine's memory.
fn contained<R: Send + 'static>(what: String, limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    om_core::pool::set_max_buffer_bytes(1 << 30);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => panic!("{what}: panicked"),
        Err(_) => panic!("{what}: still running after {limit:?}"),
    }
}

fn attribute() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(2),
        Just(3),
        Just(usize::MAX),
        Just(usize::MAX - 1),
        Just(isize::MAX as usize),
        Just(isize::MAX as usize + 1),
        Just(1usize << 62),
        Just((1usize << 62) - 1),
        Just(1usize << 63),
        Just(1usize << 32),
        0usize..6,
    ]
}

const LIMIT: Duration = Duration::from_secs(20);

/// An error must name the operator (a non-empty op, no bare `: ...`).
fn named(op: &str, r: om_core::Result<Tensor>) {
    if let Err(e) = r {
        assert!(!e.op().is_empty() && !e.to_string().starts_with(':'), "{op}: an error naming no operator: {e}");
    }
}

proptest! {
    #![proptest_config(seeded::fixed(256))]

    #[test]
    fn conv_geometry_is_checked(k in 1usize..4, s in attribute(), p in attribute(), d in attribute()) {
        let what = format!("conv2d k={k} stride={s} padding={p} dilation={d}");
        contained(what, LIMIT, move || {
            let x = Tensor::ones(&[1, 1, 4, 4]).unwrap();
            let w = Tensor::ones(&[1, 1, k, k]).unwrap();
            let r = om_ops::conv2d(&x, &w, None, Conv2dOptions::default().stride(s).padding(p).dilation(d));
            if let Ok(y) = &r {
                // A real output: every value is a sum of at most k·k ones.
                assert!(y.to_vec().iter().all(|v| (0.0..=(k * k) as f32).contains(v)), "conv2d: {y:?}");
                // Padding whose padded length overflows an index is refused, never zeros.
                assert!(p < usize::MAX / 4, "conv2d with padding {p} returned {y:?}");
            }
            named("conv2d", r);
        });
    }

    #[test]
    fn conv_transpose_geometry_is_checked(k in 1usize..4, s in attribute(), p in attribute(), op in attribute(), d in attribute()) {
        let what = format!("conv_transpose2d k={k} stride={s} padding={p} output_padding={op} dilation={d}");
        contained(what, LIMIT, move || {
            let x = Tensor::ones(&[1, 1, 3, 3]).unwrap();
            let w = Tensor::ones(&[1, 1, k, k]).unwrap();
            let o = ConvTranspose2dOptions::default().stride(s).padding(p).output_padding(op).dilation(d);
            named("conv_transpose2d", om_ops::conv_transpose2d(&x, &w, None, o));
        });
    }

    #[test]
    fn pool_geometry_is_checked(k in attribute(), s in attribute(), p in attribute(), d in attribute(), ceil in any::<bool>()) {
        let what = format!("pool k={k} stride={s} padding={p} dilation={d} ceil={ceil}");
        contained(what, LIMIT, move || {
            let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
            let o = Pool2d::new(k).stride(s).padding(p).dilation(d).ceil_mode(ceil);
            let r = om_ops::max_pool2d(&x, o);
            if let (Ok(y), true) = (&r, d > 16 && k > 1) {
                // A dilation past the input leaves one tap per window: never the input
                // unchanged for a window of several taps, unless one output per input.
                assert!(y.numel() <= 16, "{y:?}");
            }
            named("max_pool2d", r);
            named("avg_pool2d", om_ops::avg_pool2d(&x, Pool2d::new(k).stride(s).padding(p).ceil_mode(ceil)));
        });
    }

    #[test]
    fn resize_geometry_is_checked(h in attribute(), w in attribute()) {
        let what = format!("resize2d to {h}x{w}");
        contained(what, LIMIT, move || {
            let x = Tensor::ones(&[1, 1, 2, 2]).unwrap();
            named("resize2d", om_ops::resize2d(&x, Interpolate::size([h, w])));
        });
    }

    #[test]
    fn layer_sizes_are_checked(a in attribute(), b in attribute()) {
        let what = format!("layers of sizes {a}, {b}");
        contained(what, LIMIT, move || {
            let _ = nn::Linear::new(a, b);
            let _ = nn::MultiheadAttention::new(a, b, true);
            let _ = nn::Embedding::new(a, b, None);
            let _ = nn::Conv2d::new(a, b, 3);
        });
    }

    #[test]
    fn schedulers_take_any_length(t in attribute()) {
        let what = format!("CosineAnnealingLR t_max={t}");
        contained(what, LIMIT, move || {
            let p = Tensor::ones(&[1]).unwrap().requires_grad().unwrap();
            let mut opt = Sgd::new(vec![p], 0.1).unwrap();
            if let Ok(mut s) = optim::CosineAnnealingLR::new(&mut opt, t, 0.0) {
                for _ in 0..3 {
                    optim::LrScheduler::step(&mut s, &mut opt).unwrap();
                    assert!(opt.lr().is_finite() && opt.lr() >= 0.0, "lr {}", opt.lr());
                }
            }
        });
    }
}
