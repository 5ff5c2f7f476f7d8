//! Bad input returns an `Error` naming the operator — never a panic — and leaves the
//! inputs and the graph untouched.

use om_core::{DType, Error, Tensor};
use om_ops as ops;

fn t(shape: &[usize]) -> Tensor {
    Tensor::ones(shape).unwrap()
}

#[test]
fn mismatched_shapes() {
    let e = ops::add(&t(&[2, 3]), &t(&[4])).unwrap_err();
    assert!(matches!(&e, Error::Shape { op: "add", shapes, .. } if shapes == &vec![vec![2, 3], vec![4]]), "{e}");
    let e = ops::matmul(&t(&[2, 3]), &t(&[4, 5])).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");
    let e = ops::reshape(&t(&[2, 3]), [4, 2]).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
    let e = ops::expand(&t(&[2, 3]), [4, 3]).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "expand", .. }), "{e}");
}

#[test]
fn axis_out_of_range() {
    for (e, op) in [
        (ops::sum(&t(&[2, 3]), Some(2), false).unwrap_err(), "sum"),
        (ops::mean(&t(&[2, 3]), Some(-3), false).unwrap_err(), "mean"),
        (ops::transpose(&t(&[2, 3]), 0, 5).unwrap_err(), "transpose"),
        (ops::slice(&t(&[2, 3]), 2, 0, 1, 1).unwrap_err(), "slice"),
        (ops::select(&t(&[2, 3]), -3, 0).unwrap_err(), "select"),
        (ops::unsqueeze(&t(&[2, 3]), 4).unwrap_err(), "unsqueeze"),
        (ops::flip(&t(&[2, 3]), [2]).unwrap_err(), "flip"),
    ] {
        assert!(matches!(e, Error::Axis { op: o, .. } if o == op), "{op}: {e}");
    }
}

#[test]
fn invalid_argument_values() {
    for (e, op) in [
        (ops::slice(&t(&[4]), 0, 0, 4, 0).unwrap_err(), "slice"),
        (ops::slice(&t(&[4]), 0, 0, 4, -1).unwrap_err(), "slice"),
        (ops::select(&t(&[4]), 0, 4).unwrap_err(), "select"),
        (ops::permute(&t(&[2, 3]), [0, 0]).unwrap_err(), "permute"),
        (ops::permute(&t(&[2, 3]), [0]).unwrap_err(), "permute"),
        (ops::reshape(&t(&[2, 3]), [-1, -1]).unwrap_err(), "reshape"),
        (ops::flip(&t(&[2, 3]), [0, 0]).unwrap_err(), "flip"),
    ] {
        assert!(matches!(e, Error::Argument { op: o, .. } if o == op), "{op}: {e}");
    }
}

#[test]
fn wrong_dtype() {
    let ids = Tensor::from_vec_i32(vec![1, 2, 3], &[3]).unwrap();
    let e = ops::relu(&ids).unwrap_err();
    assert!(matches!(e, Error::DType { op: "relu", expected: DType::F32, got: DType::I32, .. }), "{e}");
    let e = ops::matmul(&ids, &t(&[3])).unwrap_err();
    assert!(matches!(e, Error::DType { op: "matmul", .. }), "{e}");
    let e = ops::add(&t(&[3]), &ids).unwrap_err();
    assert!(matches!(e, Error::DType { op: "add", arg: "b", .. }), "{e}");
    assert!(matches!(ids.requires_grad(), Err(Error::DType { .. })));
}

#[test]
fn backward_on_a_tensor_that_does_not_require_grad() {
    let y = ops::sum(&t(&[3]), None, false).unwrap();
    assert!(matches!(y.backward(), Err(Error::NoGrad { op: "backward" })));
}

#[test]
fn a_failed_op_leaves_inputs_and_graph_untouched() {
    let x = Tensor::ones(&[2, 3]).unwrap().requires_grad().unwrap();
    let y = ops::mul(&x, &x).unwrap();
    let v = x.version();
    assert!(ops::add(&y, &t(&[4])).is_err());
    assert_eq!(x.version(), v);
    assert_eq!(y.grad_fn_name(), Some("mul"));
    ops::sum(&y, None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0; 6]);
}

#[test]
fn constructors_validate() {
    assert!(matches!(Tensor::from_vec(vec![1.0; 5], &[2, 3]), Err(Error::Shape { .. })));
    assert!(matches!(Tensor::from_vec(vec![], &[usize::MAX, 3]), Err(Error::Shape { .. })));
    assert!(matches!(Tensor::rand_uniform(&[2], 1.0, 0.0, 0), Err(Error::Argument { .. })));
    assert!(matches!(Tensor::ones(&[2]).unwrap().item(), Err(Error::Shape { .. })));
    assert!(om_core::Compute::set_threads(0).is_err());
}

#[test]
fn errors_print_the_operator_and_values() {
    let e = ops::add(&t(&[2, 3]), &t(&[4])).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("add:") && msg.contains("[2, 3]") && msg.contains("[4]"), "{msg}");
}

#[test]
fn linear_validates_shapes() {
    let e = ops::linear(&t(&[2, 3]), &t(&[4, 5]), None).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "linear", .. }), "{e}");
    let e = ops::linear(&t(&[2, 3]), &t(&[4, 3]), Some(&t(&[5]))).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "linear", .. }), "{e}");
    let e = ops::linear(&t(&[2, 3]), &t(&[3]), None).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "linear", .. }), "{e}");
}

#[test]
fn concat_validates_inputs() {
    let e = ops::concat(&[], 0).unwrap_err();
    assert!(matches!(e, Error::Argument { op: "concat", .. }), "{e}");
    let e = ops::concat(&[t(&[2, 3]), t(&[3, 3])], 1).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "concat", .. }), "{e}");
    let e = ops::concat(&[t(&[2, 3]), t(&[2, 3])], 2).unwrap_err();
    assert!(matches!(e, Error::Axis { op: "concat", .. }), "{e}");
}

#[test]
fn conv2d_invalid_arguments() {
    let x = t(&[2, 4, 5, 5]);
    let w = t(&[6, 2, 3, 3]);
    let b = t(&[6]);
    let conv = |x: &Tensor, w: &Tensor, b: Option<&Tensor>, s: [usize; 2], p: [usize; 4], d: [usize; 2], g: usize| {
        ops::conv2d(x, w, b, ops::Conv2dOptions::default().stride(s).padding(p).dilation(d).groups(g))
    };
    assert!(conv(&x, &w, Some(&b), [1, 1], [1, 1, 1, 1], [1, 1], 2).is_ok());
    // An unbatched image [C, H, W] gives an unbatched result, as in PyTorch.
    assert_eq!(conv(&t(&[4, 5, 5]), &w, Some(&b), [1, 1], [1, 1, 1, 1], [1, 1], 2).unwrap().shape(), &[6, 5, 5]);
    let shape_errors = [
        ("x rank 2", conv(&t(&[4, 5]), &w, None, [1, 1], [0; 4], [1, 1], 2)),
        ("x rank 5", conv(&t(&[1, 2, 4, 5, 5]), &w, None, [1, 1], [0; 4], [1, 1], 2)),
        ("unbatched C not divisible by groups", conv(&t(&[3, 5, 5]), &t(&[6, 1, 3, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("w rank", conv(&x, &t(&[6, 2, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("C not divisible by groups", conv(&x, &t(&[6, 1, 3, 3]), None, [1, 1], [0; 4], [1, 1], 3)),
        ("O not divisible by groups", conv(&x, &t(&[5, 2, 3, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("w channels vs C/groups", conv(&x, &t(&[6, 4, 3, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("empty kernel", conv(&x, &t(&[6, 2, 0, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("kernel larger than the input", conv(&x, &t(&[6, 2, 6, 3]), None, [1, 1], [0; 4], [1, 1], 2)),
        ("dilated kernel larger than the padded input", conv(&x, &w, None, [1, 1], [1, 0, 0, 0], [3, 1], 2)),
        ("bias shape", conv(&x, &w, Some(&t(&[5])), [1, 1], [0; 4], [1, 1], 2)),
        ("bias rank", conv(&x, &w, Some(&t(&[6, 1])), [1, 1], [0; 4], [1, 1], 2)),
    ];
    for (what, r) in shape_errors {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Shape { op: "conv2d", .. }), "{what}: {e}");
    }
    // One more padded row makes the dilated kernel fit.
    assert!(conv(&x, &w, None, [1, 1], [1, 0, 1, 0], [3, 1], 2).is_ok());
    let argument_errors = [
        ("zero stride", conv(&x, &w, None, [0, 1], [0; 4], [1, 1], 2)),
        ("zero dilation", conv(&x, &w, None, [1, 1], [0; 4], [1, 0], 2)),
        ("zero groups", conv(&x, &w, None, [1, 1], [0; 4], [1, 1], 0)),
    ];
    for (what, r) in argument_errors {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Argument { op: "conv2d", .. }), "{what}: {e}");
    }
    let ids = Tensor::from_vec_i32(vec![1; 6], &[6]).unwrap();
    let ids4 = Tensor::from_vec_i32(vec![1; 200], &[2, 4, 5, 5]).unwrap();
    for (arg, r) in [
        ("x", conv(&ids4, &w, None, [1, 1], [0; 4], [1, 1], 2)),
        ("w", conv(&x, &Tensor::from_vec_i32(vec![1; 108], &[6, 2, 3, 3]).unwrap(), None, [1, 1], [0; 4], [1, 1], 2)),
        ("bias", conv(&x, &w, Some(&ids), [1, 1], [0; 4], [1, 1], 2)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::DType { op: "conv2d", arg: a, .. } if a == arg), "{arg}: {e}");
    }
}

#[test]
fn pooling_invalid_arguments() {
    let x = t(&[1, 2, 5, 5]);
    assert!(ops::max_pool2d(&x, ops::Pool2d::new(3).stride(1).padding(1)).is_ok());
    assert!(ops::avg_pool2d(&x, ops::Pool2d::new(3).stride(1).padding(1)).is_ok());
    // ceil_mode: 5 → ceil((5 + 2 − 2)/3) + 1 = 3 windows, but the last would start past the
    // input and its left padding (6 ≥ 5 + 1), so 2, as PyTorch computes it.
    assert_eq!(ops::max_pool2d(&x, ops::Pool2d::new(2).stride(3).padding(1).ceil_mode(true)).unwrap().shape(), &[1, 2, 2, 2]);
    assert_eq!(ops::avg_pool2d(&x, ops::Pool2d::new(2).ceil_mode(true).count_include_pad(false)).unwrap().shape(), &[1, 2, 3, 3]);
    // Unbatched [C, H, W] images give unbatched results.
    assert_eq!(ops::max_pool2d(&t(&[2, 5, 5]), ops::Pool2d::new(2).ceil_mode(true)).unwrap().shape(), &[2, 3, 3]);
    assert_eq!(ops::global_avg_pool2d(&t(&[2, 5, 4])).unwrap().shape(), &[2, 1, 1]);
    let argument_errors = [
        ("max zero kernel", ops::max_pool2d(&x, ops::Pool2d::new([0, 3]).stride(1)), "max_pool2d"),
        ("max zero stride", ops::max_pool2d(&x, ops::Pool2d::new(3).stride([1, 0])), "max_pool2d"),
        ("max zero dilation", ops::max_pool2d(&x, ops::Pool2d::new(3).stride(1).dilation([0, 1])), "max_pool2d"),
        ("max padding above half the kernel", ops::max_pool2d(&x, ops::Pool2d::new(3).stride(1).padding([2, 0])), "max_pool2d"),
        ("avg zero kernel", ops::avg_pool2d(&x, ops::Pool2d::new([3, 0]).stride(1)), "avg_pool2d"),
        ("avg zero stride", ops::avg_pool2d(&x, ops::Pool2d::new(3).stride([0, 1]).count_include_pad(false)), "avg_pool2d"),
        ("avg padding above half the kernel", ops::avg_pool2d(&x, ops::Pool2d::new(2).stride(1).padding([0, 2])), "avg_pool2d"),
        (
            "avg ceil padding above half the kernel",
            ops::avg_pool2d(&x, ops::Pool2d::new(2).stride(1).padding([0, 2]).ceil_mode(true)),
            "avg_pool2d",
        ),
    ];
    for (what, r, op) in argument_errors {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Argument { op: o, .. } if o == op), "{what}: {e}");
    }
    let shape_errors = [
        ("max rank", ops::max_pool2d(&t(&[5, 5]), ops::Pool2d::new(2).stride(1)), "max_pool2d"),
        ("max rank 5", ops::max_pool2d(&t(&[1, 1, 2, 5, 5]), ops::Pool2d::new(2).stride(1).ceil_mode(true)), "max_pool2d"),
        ("max ceil window larger than the input", ops::max_pool2d(&x, ops::Pool2d::new([3, 6]).stride(2).ceil_mode(true)), "max_pool2d"),
        ("max unbatched empty image", ops::max_pool2d(&t(&[2, 0, 5]), ops::Pool2d::new(1).ceil_mode(true)), "max_pool2d"),
        ("max window larger than the input", ops::max_pool2d(&x, ops::Pool2d::new([3, 6]).stride(1)), "max_pool2d"),
        (
            "max dilated window larger than the input",
            ops::max_pool2d(&x, ops::Pool2d::new(3).stride(1).padding(1).dilation([4, 1])),
            "max_pool2d",
        ),
        ("avg rank", ops::avg_pool2d(&t(&[5, 5]), ops::Pool2d::new(2).stride(1)), "avg_pool2d"),
        (
            "avg ceil window larger than the input",
            ops::avg_pool2d(&t(&[2, 2, 7]), ops::Pool2d::new(3).stride(2).ceil_mode(true).count_include_pad(false)),
            "avg_pool2d",
        ),
        ("avg window larger than the input", ops::avg_pool2d(&t(&[1, 1, 2, 7]), ops::Pool2d::new(3).stride(1)), "avg_pool2d"),
        ("global rank", ops::global_avg_pool2d(&t(&[3, 4])), "global_avg_pool2d"),
        ("global unbatched empty plane", ops::global_avg_pool2d(&t(&[3, 0, 4])), "global_avg_pool2d"),
        ("global empty plane", ops::global_avg_pool2d(&t(&[2, 3, 0, 4])), "global_avg_pool2d"),
    ];
    for (what, r, op) in shape_errors {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Shape { op: o, .. } if o == op), "{what}: {e}");
    }
    let ids = Tensor::from_vec_i32(vec![1; 50], &[1, 2, 5, 5]).unwrap();
    for (r, op) in [
        (ops::max_pool2d(&ids, ops::Pool2d::new(2).stride(1)), "max_pool2d"),
        (ops::avg_pool2d(&ids, ops::Pool2d::new(2).stride(1)), "avg_pool2d"),
        (ops::global_avg_pool2d(&ids), "global_avg_pool2d"),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::DType { op: o, .. } if o == op), "{op}: {e}");
    }
}

fn ids(v: Vec<i32>, shape: &[usize]) -> Tensor {
    Tensor::from_vec_i32(v, shape).unwrap()
}

/// Asserts `r` is the error `variant` naming `op`, and returns its message.
fn expect_err(r: om_core::Result<Tensor>, op: &str, variant: &str) -> String {
    let e = r.expect_err("expected an error");
    let got = match &e {
        Error::Shape { .. } => "Shape",
        Error::DType { .. } => "DType",
        Error::Axis { .. } => "Axis",
        Error::Argument { .. } => "Argument",
        _ => "other",
    };
    assert_eq!((e.op(), got), (op, variant), "{e}");
    e.to_string()
}

#[test]
fn layer_norm_invalid_arguments() {
    let x = t(&[2, 4]);
    expect_err(ops::layer_norm(&x, Some(&t(&[3])), None, 1e-5), "layer_norm", "Shape");
    expect_err(ops::layer_norm(&x, None, Some(&t(&[4, 1])), 1e-5), "layer_norm", "Shape");
    expect_err(ops::layer_norm(&Tensor::scalar(1.0), None, None, 1e-5), "layer_norm", "Shape");
    expect_err(ops::layer_norm(&t(&[2, 0]), None, None, 1e-5), "layer_norm", "Shape");
    for eps in [-1e-5, f32::NAN, f32::INFINITY] {
        expect_err(ops::layer_norm(&x, None, None, eps), "layer_norm", "Argument");
    }
    expect_err(ops::layer_norm(&ids(vec![1; 4], &[4]), None, None, 1e-5), "layer_norm", "DType");
    expect_err(ops::layer_norm(&x, Some(&ids(vec![1; 4], &[4])), None, 1e-5), "layer_norm", "DType");
}

#[test]
fn batch_norm2d_invalid_arguments() {
    let x = t(&[2, 3, 2, 2]);
    let (c, c4) = (t(&[3]), t(&[4]));
    let bn = |x: &Tensor, g: Option<&Tensor>, rm: Option<&Tensor>, rv: Option<&Tensor>, training: bool, eps: f32| {
        ops::batch_norm2d(x, g, None, rm, rv, ops::BatchNormOptions::train().training(training).eps(eps))
    };
    expect_err(bn(&t(&[2, 3, 4]), None, None, None, true, 1e-5), "batch_norm2d", "Shape");
    expect_err(bn(&x, Some(&c4), None, None, true, 1e-5), "batch_norm2d", "Shape");
    expect_err(ops::batch_norm2d(&x, None, Some(&c4), None, None, ops::BatchNormOptions::train()), "batch_norm2d", "Shape");
    expect_err(bn(&x, None, Some(&c4), Some(&c), true, 1e-5), "batch_norm2d", "Shape");
    expect_err(bn(&x, None, Some(&c), Some(&c4), false, 1e-5), "batch_norm2d", "Shape");
    expect_err(bn(&x, None, Some(&c), None, true, 1e-5), "batch_norm2d", "Argument");
    expect_err(bn(&x, None, None, None, false, 1e-5), "batch_norm2d", "Argument");
    expect_err(bn(&x, None, None, None, true, -1.0), "batch_norm2d", "Argument");
    expect_err(bn(&x, None, None, None, true, f32::NAN), "batch_norm2d", "Argument");
    expect_err(
        ops::batch_norm2d(&x, None, None, None, None, ops::BatchNormOptions::train().momentum(f32::NAN)),
        "batch_norm2d",
        "Argument",
    );
    expect_err(bn(&t(&[1, 3, 1, 1]), None, None, None, true, 1e-5), "batch_norm2d", "Shape");
    let grad_stat = t(&[3]).requires_grad().unwrap();
    let msg = expect_err(bn(&x, None, Some(&grad_stat), Some(&c), false, 1e-5), "batch_norm2d", "Argument");
    assert!(msg.contains("running_mean"), "{msg}");
    // A failed call leaves the running stats untouched.
    let (rm, rv) = (Tensor::zeros(&[3]).unwrap(), t(&[3]));
    let v = (rm.version(), rv.version());
    expect_err(ops::batch_norm2d(&x, Some(&c4), None, Some(&rm), Some(&rv), ops::BatchNormOptions::train()), "batch_norm2d", "Shape");
    let strided = ops::slice(&t(&[6]), 0, 0, 6, 2).unwrap();
    expect_err(bn(&x, None, Some(&rm), Some(&strided), true, 1e-5), "batch_norm2d", "Argument");
    assert_eq!((rm.version(), rv.version()), v);
    assert_eq!(rm.to_vec(), vec![0.0; 3]);
}

#[test]
fn embedding_invalid_arguments() {
    let w = t(&[5, 3]);
    let msg = expect_err(ops::embedding(&w, &ids(vec![0, 7, 1], &[3]), None), "embedding", "Argument");
    assert!(msg.contains("id 7"), "{msg}");
    let msg = expect_err(ops::embedding(&w, &ids(vec![0, -1], &[2]), None), "embedding", "Argument");
    assert!(msg.contains("id -1"), "{msg}");
    let e = ops::embedding(&w, &t(&[2]), None).unwrap_err();
    assert!(matches!(e, Error::DType { op: "embedding", arg: "ids", expected: DType::I32, got: DType::F32 }), "{e}");
    expect_err(ops::embedding(&t(&[5]), &ids(vec![0], &[1]), None), "embedding", "Shape");
    expect_err(ops::embedding(&w, &ids(vec![0], &[1]), Some(5)), "embedding", "Argument");
    expect_err(ops::embedding(&w, &ids(vec![0], &[1]), Some(-6)), "embedding", "Argument");
}

#[test]
fn nll_loss_invalid_arguments() {
    let lp = t(&[3, 4]);
    let o = |ignore_index| ops::CrossEntropyOptions { ignore_index, ..Default::default() };
    let msg = expect_err(ops::nll_loss(&lp, &ids(vec![0, 4, 1], &[3]), None, o(None)), "nll_loss", "Argument");
    assert!(msg.contains("target 4"), "{msg}");
    expect_err(ops::nll_loss(&lp, &ids(vec![0, -100, 1], &[3]), None, o(Some(-1))), "nll_loss", "Argument");
    assert!(ops::nll_loss(&lp, &ids(vec![0, -100, 1], &[3]), None, Default::default()).is_ok());
    let e = ops::nll_loss(&lp, &t(&[3]), None, o(None)).unwrap_err();
    assert!(matches!(e, Error::DType { op: "nll_loss", arg: "targets", .. }), "{e}");
    expect_err(ops::nll_loss(&lp, &ids(vec![0, 1], &[2]), None, o(None)), "nll_loss", "Shape");
    expect_err(ops::nll_loss(&t(&[4]), &ids(vec![0], &[1]), None, o(None)), "nll_loss", "Shape");
    expect_err(ops::nll_loss(&t(&[2, 3, 4]), &ids(vec![0, 1], &[2]), None, o(None)), "nll_loss", "Shape");
    // Class weights: one per class, no gradient; label smoothing in [0, 1].
    let targets = ids(vec![0, 1, 2], &[3]);
    expect_err(ops::nll_loss(&lp, &targets, Some(&t(&[3])), o(None)), "nll_loss", "Shape");
    let w = Tensor::from_vec(vec![1.0; 4], &[4]).unwrap().requires_grad().unwrap();
    expect_err(ops::nll_loss(&lp, &targets, Some(&w), o(None)), "nll_loss", "Argument");
    let smoothing = |label_smoothing| ops::CrossEntropyOptions { label_smoothing, ..Default::default() };
    // cross_entropy names itself, with the inner operator as context (issue 22).
    let msg = expect_err(ops::cross_entropy(&lp, &targets, None, smoothing(1.5)), "cross_entropy", "Argument");
    assert!(msg.contains("1.5"), "{msg}");
    expect_err(ops::cross_entropy(&lp, &targets, None, smoothing(f32::NAN)), "cross_entropy", "Argument");
}

fn expect_rnn_err(r: om_core::Result<ops::RnnOutput>, op: &str, variant: &str) -> String {
    match r {
        Ok(_) => panic!("{op}: expected a {variant} error"),
        Err(e) => expect_err(Err(e), op, variant),
    }
}

#[test]
fn lstm_layer_invalid_arguments() {
    let (x, wi, wh, b, s) = (t(&[3, 2, 4]), t(&[12, 4]), t(&[12, 3]), t(&[12]), t(&[2, 3]));
    let layer = |x: &Tensor, wi: &Tensor, wh: &Tensor, b: Option<&Tensor>, h0: Option<&Tensor>, c0: Option<&Tensor>| {
        ops::lstm_layer(x, wi, wh, b, b, h0, c0, false, false)
    };
    assert!(layer(&x, &wi, &wh, Some(&b), Some(&s), Some(&s)).is_ok());
    let msg = expect_err(layer(&t(&[0, 2, 4]), &wi, &wh, None, None, None), "lstm_layer", "Shape");
    assert!(msg.contains("T = 0"), "{msg}");
    expect_err(layer(&t(&[3, 8]), &wi, &wh, None, None, None), "lstm_layer", "Shape");
    let msg = expect_err(layer(&x, &t(&[12, 5]), &wh, None, None, None), "lstm_layer", "Shape");
    assert!(msg.contains("w_ih"), "{msg}");
    expect_err(layer(&x, &t(&[9, 4]), &t(&[9, 3]), None, None, None), "lstm_layer", "Shape"); // 3H rows: a GRU's weights
    expect_err(layer(&x, &wi, &t(&[12, 4]), None, None, None), "lstm_layer", "Shape");
    let msg = expect_err(layer(&x, &wi, &wh, Some(&t(&[9])), None, None), "lstm_layer", "Shape");
    assert!(msg.contains("b_ih"), "{msg}");
    let msg = expect_err(layer(&x, &wi, &wh, None, Some(&t(&[3, 3])), None), "lstm_layer", "Shape");
    assert!(msg.contains("h0"), "{msg}");
    let msg = expect_err(layer(&x, &wi, &wh, None, None, Some(&t(&[2, 4]))), "lstm_layer", "Shape");
    assert!(msg.contains("c0"), "{msg}");
    let e = layer(&x, &ids(vec![0; 48], &[12, 4]), &wh, None, None, None).unwrap_err();
    assert!(matches!(e, Error::DType { op: "lstm_layer", arg: "w_ih", .. }), "{e}");
    let e = layer(&ids(vec![0; 24], &[3, 2, 4]), &wi, &wh, None, None, None).unwrap_err();
    assert!(matches!(e, Error::DType { op: "lstm_layer", arg: "x", .. }), "{e}");
}

#[test]
fn gru_layer_invalid_arguments() {
    let (x, wi, wh) = (t(&[3, 2, 4]), t(&[9, 4]), t(&[9, 3]));
    assert!(ops::gru_layer(&x, &wi, &wh, None, None, Some(&t(&[2, 3])), true).is_ok());
    expect_err(ops::gru_layer(&t(&[0, 2, 4]), &wi, &wh, None, None, None, true), "gru_layer", "Shape");
    expect_err(ops::gru_layer(&x, &t(&[12, 4]), &t(&[12, 3]), None, None, None, false), "gru_layer", "Shape");
    expect_err(ops::gru_layer(&x, &t(&[9, 3]), &wh, None, None, None, false), "gru_layer", "Shape");
    expect_err(ops::gru_layer(&x, &wi, &wh, None, Some(&t(&[12])), None, false), "gru_layer", "Shape");
    expect_err(ops::gru_layer(&x, &wi, &wh, None, None, Some(&t(&[1, 2, 3])), false), "gru_layer", "Shape");
    let e = ops::gru_layer(&x, &wi, &wh, None, None, Some(&ids(vec![0; 6], &[2, 3])), false).unwrap_err();
    assert!(matches!(e, Error::DType { op: "gru_layer", arg: "h0", .. }), "{e}");
}

#[test]
fn lstm_and_gru_stacks_invalid_arguments() {
    let set = |g: usize, i: usize| ops::RnnWeights::new(t(&[g * 2, i]), t(&[g * 2, 2]), t(&[g * 2]), t(&[g * 2]));
    let bi2 = ops::RnnConfig { layers: 2, bidirectional: true, batch_first: true };
    let x = t(&[3, 5, 4]); // batch-first: B = 3, T = 5, I = 4
    let lstm_w = vec![set(4, 4), set(4, 4), set(4, 4), set(4, 4)];
    let gru_w = vec![set(3, 4), set(3, 4), set(3, 4), set(3, 4)];
    let states = t(&[4, 3, 2]);
    let out = ops::lstm(&x, Some(&states), Some(&states), &lstm_w, bi2).unwrap();
    assert_eq!((out.y.shape(), out.h_n.shape()), ([3, 5, 4].as_slice(), [4, 3, 2].as_slice()));
    assert!(ops::gru(&x, Some(&states), &gru_w, bi2).is_ok());

    // Layer/direction weight count.
    let msg = expect_rnn_err(ops::lstm(&x, None, None, &lstm_w[..3], bi2), "lstm", "Argument");
    assert!(msg.contains("expected 4 weight sets"), "{msg}");
    expect_rnn_err(ops::gru(&x, None, &gru_w[..2], bi2), "gru", "Argument");
    expect_rnn_err(ops::gru(&x, None, &[], ops::RnnConfig { layers: 0, ..bi2 }), "gru", "Argument");
    // Layer 1 reads dirs·H = 4 features; a set for 5 is rejected by the stack.
    let mut bad = lstm_w.clone();
    bad[3] = set(4, 5);
    let msg = expect_rnn_err(ops::lstm(&x, None, None, &bad, bi2), "lstm", "Shape");
    assert!(msg.contains("w_ih"), "{msg}");
    // Mixed hidden sizes, LSTM weights in a GRU, wrong input size.
    let mut bad = gru_w.clone();
    bad[1] = ops::RnnWeights::without_bias(t(&[9, 4]), t(&[9, 3]));
    expect_rnn_err(ops::gru(&x, None, &bad, bi2), "gru", "Shape");
    expect_rnn_err(ops::gru(&x, None, &lstm_w, bi2), "gru", "Shape");
    expect_rnn_err(ops::lstm(&t(&[3, 5, 6]), None, None, &lstm_w, bi2), "lstm", "Shape");
    // States must be [layers·dirs, B, H].
    let msg = expect_rnn_err(ops::lstm(&x, Some(&t(&[2, 3, 2])), None, &lstm_w, bi2), "lstm", "Shape");
    assert!(msg.contains("h0"), "{msg}");
    let msg = expect_rnn_err(ops::lstm(&x, None, Some(&t(&[4, 5, 2])), &lstm_w, bi2), "lstm", "Shape");
    assert!(msg.contains("c0"), "{msg}");
    expect_rnn_err(ops::gru(&x, Some(&t(&[4, 3, 3])), &gru_w, bi2), "gru", "Shape");
    // Rank, empty sequence, dtype.
    expect_rnn_err(ops::gru(&t(&[5, 4]), None, &gru_w, bi2), "gru", "Shape");
    let msg = expect_rnn_err(ops::gru(&t(&[3, 0, 4]), None, &gru_w, bi2), "gru", "Shape");
    assert!(msg.contains("T = 0"), "{msg}");
    let e = ops::lstm(&ids(vec![0; 60], &[3, 5, 4]), None, None, &lstm_w, bi2).unwrap_err();
    assert!(matches!(e, Error::DType { op: "lstm", arg: "x", .. }), "{e}");
}

#[test]
fn ctc_loss_invalid_arguments() {
    use ops::Reduction::Mean;
    let lp = t(&[5, 2, 4]);
    let tg = ids(vec![1, 2, 3, 0], &[2, 2]);
    assert!(ops::ctc_loss(&lp, &tg, &[5, 4], &[2, 1], 0, Mean, false).is_ok());
    // Lengths as i32 tensors, concatenated targets, input length 0 (allowed, as in PyTorch).
    assert!(ops::ctc_loss(&lp, &ids(vec![1, 2, 3], &[3]), &ids(vec![5, 0], &[2]), &ids(vec![2, 1], &[2]), 0, Mean, false).is_ok());
    let ctc = |lp: &Tensor, tg: &Tensor, il: &[usize], tl: &[usize], blank: usize| ops::ctc_loss(lp, tg, il, tl, blank, Mean, false);
    let shape_errors = [
        ("input lengths count", ctc(&lp, &tg, &[5], &[2, 1], 0)),
        ("target lengths count", ctc(&lp, &tg, &[5, 5], &[2, 1, 1], 0)),
        ("log_probs rank", ctc(&t(&[5, 8]), &tg, &[5, 5], &[2, 1], 0)),
        ("padded targets rows", ctc(&lp, &ids(vec![1; 6], &[3, 2]), &[5, 5], &[2, 1], 0)),
        ("concatenated targets length", ctc(&lp, &ids(vec![1, 2, 3, 1], &[4]), &[5, 5], &[2, 1], 0)),
        ("targets rank", ctc(&lp, &ids(vec![1; 4], &[2, 2, 1]), &[5, 5], &[1, 1], 0)),
        ("length tensor rank", ops::ctc_loss(&lp, &tg, &ids(vec![5, 5], &[1, 2]), &[2, 1], 0, Mean, false)),
    ];
    for (what, r) in shape_errors {
        let msg = expect_err(r, "ctc_loss", "Shape");
        assert!(!msg.is_empty(), "{what}");
    }
    let argument_errors = [
        ("input length > T", ctc(&lp, &tg, &[6, 5], &[2, 1], 0), "input length 6"),
        ("target length > S", ctc(&lp, &tg, &[5, 5], &[3, 1], 0), "target length 3"),
        ("label out of range", ctc(&lp, &ids(vec![1, 4, 3, 0], &[2, 2]), &[5, 5], &[2, 1], 0), "label 4"),
        ("negative label", ctc(&lp, &ids(vec![1, -1, 3, 0], &[2, 2]), &[5, 5], &[2, 1], 0), "label -1"),
        ("blank in targets", ctc(&lp, &ids(vec![1, 2, 3, 0], &[2, 2]), &[5, 5], &[2, 1], 2), "is the blank"),
        ("blank >= C", ctc(&lp, &tg, &[5, 5], &[2, 1], 4), "blank 4"),
        ("negative length", ops::ctc_loss(&lp, &tg, &ids(vec![5, -1], &[2]), &[2, 1], 0, Mean, false), "non-negative"),
    ];
    for (what, r, needle) in argument_errors {
        let msg = expect_err(r, "ctc_loss", "Argument");
        assert!(msg.contains(needle), "{what}: {msg}");
    }
    // Padding past a target's length is not checked (as in PyTorch): only the used labels are.
    assert!(ctc(&lp, &ids(vec![1, 2, 3, -7], &[2, 2]), &[5, 5], &[2, 1], 0).is_ok());
    for (arg, r) in [
        ("log_probs", ctc(&ids(vec![0; 40], &[5, 2, 4]), &tg, &[5, 5], &[2, 1], 0)),
        ("targets", ctc(&lp, &t(&[2, 2]), &[5, 5], &[2, 1], 0)),
        ("input_lengths", ops::ctc_loss(&lp, &tg, &t(&[2]), &[2, 1], 0, Mean, false)),
        ("target_lengths", ops::ctc_loss(&lp, &tg, &[5, 5], &t(&[2]), 0, Mean, false)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::DType { op: "ctc_loss", arg: a, .. } if a == arg), "{arg}: {e}");
    }
}

#[test]
fn conv_transpose2d_invalid_arguments() {
    let x = t(&[2, 4, 3, 3]);
    let w = t(&[4, 3, 3, 3]); // Cout = 6 with groups = 2
    let b = t(&[6]);
    #[allow(clippy::too_many_arguments)]
    fn ct(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        s: [usize; 2],
        p: [usize; 2],
        op: [usize; 2],
        d: [usize; 2],
        g: usize,
    ) -> om_core::Result<Tensor> {
        ops::conv_transpose2d(x, w, b, ops::ConvTranspose2dOptions::default().stride(s).padding(p).output_padding(op).dilation(d).groups(g))
    }
    let y = ct(&x, &w, Some(&b), [2, 2], [1, 1], [1, 1], [1, 1], 2).unwrap();
    assert_eq!(y.shape(), &[2, 6, 6, 6]);
    let y = ct(&t(&[4, 3, 3]), &w, Some(&b), [2, 2], [1, 1], [1, 1], [1, 1], 2).unwrap();
    assert_eq!(y.shape(), &[6, 6, 6], "an unbatched image gives an unbatched result");
    // Output padding below the dilation (but not the stride) is allowed, as in PyTorch.
    assert!(ct(&x, &w, None, [1, 1], [0, 0], [1, 0], [2, 1], 2).is_ok());
    let op = "conv_transpose2d";
    for (what, r) in [
        ("x rank 2", ct(&t(&[4, 3]), &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("x rank 5", ct(&t(&[1, 2, 4, 3, 3]), &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("unbatched w dimension 0 vs Cin", ct(&t(&[2, 3, 3]), &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("w rank", ct(&x, &t(&[4, 3, 3]), None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("Cin not divisible by groups", ct(&x, &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 3)),
        ("w dimension 0 vs Cin", ct(&x, &t(&[2, 3, 3, 3]), None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("empty kernel", ct(&x, &t(&[4, 3, 0, 3]), None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("bias shape", ct(&x, &w, Some(&t(&[3])), [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("bias rank", ct(&x, &w, Some(&t(&[6, 1])), [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("empty input image", ct(&t(&[2, 4, 0, 3]), &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("padding crops the whole output", ct(&x, &w, None, [1, 1], [3, 0], [0, 0], [1, 1], 2)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Shape { op: "conv_transpose2d", .. }), "{what}: {e}");
    }
    for r in [
        ct(&x, &w, None, [0, 1], [0, 0], [0, 0], [1, 1], 2),
        ct(&x, &w, None, [1, 1], [0, 0], [0, 0], [1, 0], 2),
        ct(&x, &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 0),
        // output padding must be below max(stride, dilation)
        ct(&x, &w, None, [2, 2], [0, 0], [2, 0], [1, 1], 2),
        ct(&x, &w, None, [1, 1], [0, 0], [0, 1], [1, 1], 2),
        ct(&x, &w, None, [2, 1], [0, 0], [0, 2], [1, 2], 2),
    ] {
        expect_err(r, op, "Argument");
    }
    let ids4 = ids(vec![1; 72], &[2, 4, 3, 3]);
    for (arg, r) in [
        ("x", ct(&ids4, &w, None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("w", ct(&x, &ids(vec![1; 108], &[4, 3, 3, 3]), None, [1, 1], [0, 0], [0, 0], [1, 1], 2)),
        ("bias", ct(&x, &w, Some(&ids(vec![1; 6], &[6])), [1, 1], [0, 0], [0, 0], [1, 1], 2)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::DType { op: "conv_transpose2d", arg: a, .. } if a == arg), "{arg}: {e}");
    }
}

#[test]
fn resize2d_invalid_arguments() {
    use ops::ResizeMode::{Bilinear, Nearest, NearestExact};
    let x = t(&[1, 2, 4, 5]);
    assert!(ops::resize2d(&x, ops::Interpolate::size([3, 7]).mode(Bilinear).align_corners(true)).is_ok());
    assert_eq!(ops::resize2d(&x, [3, 7]).unwrap().shape(), &[1, 2, 3, 7]);
    let op = "resize2d";
    assert_eq!(ops::resize2d(&t(&[2, 4, 5]), ops::Interpolate::size([3, 7]).mode(NearestExact)).unwrap().shape(), &[2, 3, 7], "unbatched");
    expect_err(ops::resize2d(&t(&[4, 5]), 3), op, "Shape");
    expect_err(ops::resize2d(&t(&[2, 0, 5]), 3), op, "Shape");
    expect_err(ops::resize2d(&t(&[1, 1, 2, 4, 5]), ops::Interpolate::size(3).mode(Bilinear)), op, "Shape");
    expect_err(ops::resize2d(&t(&[1, 2, 0, 5]), ops::Interpolate::size(3).mode(Bilinear)), op, "Shape");
    expect_err(ops::resize2d(&x, [0, 3]), op, "Argument");
    expect_err(ops::resize2d(&x, ops::Interpolate::size([3, 0]).mode(Bilinear).align_corners(true)), op, "Argument");
    for mode in [Nearest, NearestExact] {
        let msg = expect_err(ops::resize2d(&x, ops::Interpolate::size(3).mode(mode).align_corners(true)), op, "Argument");
        assert!(msg.contains("align_corners"), "{msg}");
    }
    let e = ops::resize2d(&ids(vec![1; 40], &[1, 2, 4, 5]), 3).unwrap_err();
    assert!(matches!(e, Error::DType { op: "resize2d", arg: "x", .. }), "{e}");
}

#[test]
fn resize2d_scale_invalid_arguments() {
    use ops::ResizeMode::{Bilinear, NearestExact};
    let x = t(&[1, 2, 4, 5]);
    // floor(4·1.5) × floor(5·0.5) = 6×2; unbatched gives an unbatched result.
    assert_eq!(
        ops::resize2d_scale(&x, ops::Interpolate::scale_factor([1.5, 0.5]).mode(Bilinear).align_corners(true)).unwrap().shape(),
        &[1, 2, 6, 2]
    );
    assert_eq!(
        ops::resize2d_scale(&t(&[2, 4, 5]), ops::Interpolate::scale_factor([0.5, 2.0]).mode(NearestExact).recompute_scale_factor(true))
            .unwrap()
            .shape(),
        &[2, 2, 10]
    );
    let op = "resize2d_scale";
    for bad in [[0.0, 1.0], [1.0, -2.0], [f64::NAN, 1.0], [1.0, f64::INFINITY]] {
        let msg = expect_err(ops::resize2d_scale(&x, bad), op, "Argument");
        assert!(msg.contains("positive and finite"), "{msg}");
    }
    // floor(4·0.2) = 0 rows.
    let msg = expect_err(ops::resize2d_scale(&x, ops::Interpolate::scale_factor([0.2, 1.0]).mode(Bilinear)), op, "Argument");
    assert!(msg.contains("0×5"), "{msg}");
    expect_err(ops::resize2d_scale(&x, [1e300, 1.0]), op, "Argument");
    expect_err(ops::resize2d_scale(&x, ops::Interpolate::scale_factor([2.0, 2.0]).mode(NearestExact).align_corners(true)), op, "Argument");
    expect_err(ops::resize2d_scale(&t(&[4, 5]), [2.0, 2.0]), op, "Shape");
    expect_err(ops::resize2d_scale(&t(&[1, 2, 0, 5]), [2.0, 2.0]), op, "Shape");
    let e = ops::resize2d_scale(&ids(vec![1; 40], &[1, 2, 4, 5]), [2.0, 2.0]).unwrap_err();
    assert!(matches!(e, Error::DType { op: "resize2d_scale", arg: "x", .. }), "{e}");
}

/// The options values (`Pool2d`, `Conv2dOptions`, `ConvTranspose2dOptions`, `Interpolate`)
/// and the layers built from them refuse what PyTorch refuses, naming the operator or layer.
#[test]
fn options_invalid_arguments() {
    use ops::nn::{AvgPool2d, Conv2d, MaxPool2d};
    use ops::{Conv2dOptions, ConvTranspose2dOptions, Interpolate, Pool2d};
    let x = t(&[1, 2, 6, 6]);
    // The short forms and PyTorch's defaults.
    assert_eq!(ops::max_pool2d(&x, 2).unwrap().shape(), &[1, 2, 3, 3]);
    assert_eq!(ops::avg_pool2d(&x, [3, 2]).unwrap().shape(), &[1, 2, 2, 3]);
    assert_eq!(ops::interpolate(&x, 3).unwrap().shape(), &[1, 2, 3, 3]);
    assert_eq!(ops::interpolate(&x, 0.5).unwrap().shape(), &[1, 2, 3, 3]);
    let msg = expect_err(ops::max_pool2d(&x, -1), "max_pool2d", "Argument");
    assert!(msg.contains("kernel size must not be negative"), "{msg}");
    expect_err(ops::max_pool2d(&x, Pool2d::new(2).stride(-2)), "max_pool2d", "Argument");
    expect_err(ops::max_pool2d(&x, Pool2d::new(3).padding([1, -1])), "max_pool2d", "Argument");
    expect_err(ops::max_pool2d(&x, Pool2d::new(0)), "max_pool2d", "Argument");
    let msg = expect_err(ops::max_pool2d(&x, Pool2d::new(2).count_include_pad(false)), "max_pool2d", "Argument");
    assert!(msg.contains("count_include_pad"), "{msg}");
    let msg = expect_err(ops::avg_pool2d(&x, Pool2d::new(2).dilation(2)), "avg_pool2d", "Argument");
    assert!(msg.contains("dilation"), "{msg}");
    expect_err(ops::avg_pool2d(&x, Pool2d::new(2).padding(2)), "avg_pool2d", "Argument");
    expect_err(ops::avg_pool2d(&x, Pool2d::new(2).divisor_override(0)), "avg_pool2d", "Argument");
    expect_err(ops::max_pool2d(&x, Pool2d::new(2).divisor_override(3)), "max_pool2d", "Argument");
    // The layers check their options when built.
    for (r, op) in [
        (MaxPool2d::new(0).map(|_| ()), "MaxPool2d"),
        (MaxPool2d::new(Pool2d::new(2).padding(2)).map(|_| ()), "MaxPool2d"),
        (MaxPool2d::new(Pool2d::new(2).count_include_pad(false)).map(|_| ()), "MaxPool2d"),
        (AvgPool2d::new(Pool2d::new(2).stride(0)).map(|_| ()), "AvgPool2d"),
        (AvgPool2d::new(Pool2d::new(2).dilation(2)).map(|_| ()), "AvgPool2d"),
        (Conv2d::new(2, 4, -3).map(|_| ()), "Conv2d"),
        (Conv2d::with_options(2, 4, 3, Conv2dOptions::default().groups(3)).map(|_| ()), "Conv2d"),
    ] {
        let e = r.expect_err(op);
        assert!(matches!(e, Error::Argument { op: o, .. } if o == op), "{op}: {e}");
    }
    // Convolutions.
    let w = t(&[4, 2, 3, 3]);
    expect_err(ops::conv2d(&x, &w, None, Conv2dOptions::default().padding(-1)), "conv2d", "Argument");
    expect_err(ops::conv2d(&x, &w, None, Conv2dOptions::default().stride([1, -1])), "conv2d", "Argument");
    expect_err(ops::conv2d(&x, &w, None, Conv2dOptions::default().dilation(0)), "conv2d", "Argument");
    assert_eq!(ops::conv2d(&x, &w, None, Conv2dOptions::default().padding(ops::Padding2d::same())).unwrap().shape(), &[1, 4, 6, 6]);
    let msg =
        expect_err(ops::conv2d(&x, &w, None, Conv2dOptions::default().padding(ops::Padding2d::same()).stride(2)), "conv2d", "Argument");
    assert!(msg.contains("'same'"), "{msg}");
    let wt = t(&[2, 3, 3, 3]);
    expect_err(ops::conv_transpose2d(&x, &wt, None, ConvTranspose2dOptions::default().output_padding(-1)), "conv_transpose2d", "Argument");
    expect_err(ops::conv_transpose2d(&x, &wt, None, ConvTranspose2dOptions::default().output_padding(1)), "conv_transpose2d", "Argument");
    // Resizing: each primitive takes its own target; a size takes no recompute_scale_factor.
    let msg = expect_err(ops::resize2d(&x, 2.0), "resize2d", "Argument");
    assert!(msg.contains("resize2d_scale"), "{msg}");
    let msg = expect_err(ops::resize2d_scale(&x, [3, 3]), "resize2d_scale", "Argument");
    assert!(msg.contains("resize2d"), "{msg}");
    expect_err(ops::interpolate(&x, Interpolate::size(3).recompute_scale_factor(true)), "interpolate", "Argument");
    expect_err(ops::interpolate(&x, Interpolate::size([3, -1])), "interpolate", "Argument");
    expect_err(ops::interpolate(&x, Interpolate::scale_factor(-2.0)), "interpolate", "Argument");
    // clamp needs a bound.
    expect_err(ops::clamp(&x, None, None), "clamp", "Argument");
}
