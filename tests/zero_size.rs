//! Zero-size tensors through every registered operator, forward and backward.
//!
//! For each gradient-check case of each registered operator (read from the registry, so a
//! new `#[op]` is covered with no list to keep), the case's inputs are resized along chosen
//! axes: one input's axis alone, an axis of every input aligned from the left (a batch dim)
//! or from the right (a broadcast dim), or every dim of one size across all inputs (a
//! contracted or shared length). A resizing is *applicable* when the case still runs with
//! the axes one and two longer (the operator's semantics allow the change); the output
//! shape at size 0 is then extrapolated from the shapes at `n`, `n + 1` and `n + 2` when they
//! grow linearly. At size 0 the case must return `Ok` with that shape, and its backward
//! (seeded with ones) must give every input a gradient of the input's shape — or a clear
//! `Err` naming the operator where PyTorch raises too ([`EXPECTED_ERRORS`]). Everything runs
//! under `catch_unwind`; the number of panics must be zero.
//!
//! Resized inputs keep their values by wrapping indices around the old axis length, so
//! indices stay in range and values stay in the case's domain.

use om_core::registry::Case;
use om_core::{Error, Result, Tensor};
use om_tests::{panic_message, resized};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Errors that are correct at size 0: the operator, a fragment of our message, and what
/// PyTorch 2.15 does (`tools/zero_size_torch.py` prints it). Where PyTorch returns NaN
/// instead (a mean or variance of nothing), refusing is this library's deliberate choice,
/// also required by `prop_invalid_args`.
const EXPECTED_ERRORS: &[(&str, &str, &str)] = &[
    ("amax", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("vector_norm", "infinity norm of zero elements", "raises: linalg.vector_norm cannot compute the inf norm on an empty tensor"),
    ("amin", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("argmax", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("argmin", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("max_dim", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("min_dim", "reduced extent is empty", "raises: Expected reduction dim to have non-zero size"),
    ("mean", "mean over zero elements", "NaN (deliberate difference; also the mean reduction of every loss)"),
    ("var", "variance of zero elements", "NaN (deliberate difference)"),
    ("std", "variance of zero elements", "NaN (deliberate difference)"),
    ("var_correction", "variance of zero elements", "NaN (deliberate difference)"),
    ("std_correction", "variance of zero elements", "NaN (deliberate difference)"),
    ("layer_norm", "normalised axis is empty", "an empty result (deliberate difference, as mean; tests/errors.rs pins it)"),
    ("global_avg_pool2d", "mean of an empty image plane", "NaN from adaptive_avg_pool2d (deliberate difference, as mean)"),
    ("max_pool2d", "input image must be at least 1×1", "raises: only a 0 batch dim is allowed"),
    ("max_pool2d", "output would be empty", "raises: output size is too small"),
    ("avg_pool2d", "input image must be at least 1×1", "raises: only a 0 batch dim is allowed"),
    ("avg_pool2d", "output would be empty", "raises: output size is too small"),
    ("resize2d", "input image must be at least 1×1", "raises: Input and output sizes should be greater than 0"),
    ("resize2d_scale", "input image must be at least 1×1", "raises: Input and output sizes should be greater than 0"),
    ("conv2d", "kernel must be at least 1×1", "raises: kernel size should be greater than zero"),
    ("conv2d", "is larger than the padded input", "raises: Kernel size can't be greater than actual input size"),
    ("conv_transpose2d", "kernel must be at least 1×1", "raises: non-empty weight tensor expected"),
    ("conv_transpose2d", "input image must be at least 1×1", "raises: Only zero batch or zero channel inputs are supported"),
    ("select", "out of range", "raises: index out of range"),
    ("take_along_axis", "out of range", "raises: index out of bounds (gather)"),
    ("lstm", "sequence is empty", "raises: Expected sequence length to be larger than 0 in RNN"),
    ("gru", "sequence is empty", "raises: Expected sequence length to be larger than 0 in RNN"),
    ("lstm_layer", "sequence is empty", "raises: Expected sequence length to be larger than 0 in RNN"),
    ("gru_layer", "sequence is empty", "raises: Expected sequence length to be larger than 0 in RNN"),
    ("lstm_pair_layer", "sequence is empty", "raises: Expected sequence length to be larger than 0 in RNN (a bidirectional nn.LSTM layer)"),
    ("lstm", "input size must be at least 1", "raises: input_size must be greater than zero"),
    ("gru", "input size must be at least 1", "raises: input_size must be greater than zero"),
    ("lstm_layer", "input size must be at least 1", "raises: input_size must be greater than zero"),
    ("gru_layer", "input size must be at least 1", "raises: input_size must be greater than zero"),
    ("lstm_pair_layer", "input size must be at least 1", "raises: input_size must be greater than zero"),
];

/// Which dims of which inputs one resizing changes: `(input, axis)` pairs.
type Axes = Vec<(usize, usize)>;

/// The outcome of running a case on resized inputs.
enum Outcome {
    /// Forward and backward ran; the output's shape.
    Ok(Vec<usize>),
    /// The case returned an error.
    Err(Error),
    /// The case panicked, with the panic message.
    Panic(String),
}

/// Runs `case` with the dims `axes` set to `len` (all other inputs fresh copies), forward
/// then backward seeded with ones; checks every gradient's shape.
fn run(case: &Case, axes: &Axes, len: usize) -> Outcome {
    let attempt = || -> Result<Vec<usize>> {
        let inputs: Vec<Tensor> = (0..case.inputs.len())
            .map(|j| {
                let mine: Vec<usize> = axes.iter().filter(|(i, _)| *i == j).map(|&(_, a)| a).collect();
                resized(&case.inputs[j], &mine, len)
            })
            .collect::<Result<_>>()?;
        let out = (case.f)(&inputs)?;
        let shape = out.shape().to_vec();
        if out.needs_grad() {
            out.backward_with(Some(&Tensor::ones(&shape)?), false)?;
            for (j, x) in inputs.iter().enumerate() {
                if let Some(g) = x.grad() {
                    if g.shape() != x.shape() {
                        return Err(Error::shape(
                            "zero_size",
                            &[g.shape(), x.shape()],
                            format!("gradient of input {j} has the wrong shape"),
                        ));
                    }
                    if len == 0 && out.numel() == 0 && g.to_vec().iter().any(|&v| v != 0.0) {
                        return Err(Error::argument("zero_size", format!("gradient of input {j} is not zero for an empty output")));
                    }
                }
            }
        }
        Ok(shape)
    };
    match catch_unwind(AssertUnwindSafe(attempt)) {
        Ok(Ok(s)) => Outcome::Ok(s),
        Ok(Err(e)) => Outcome::Err(e),
        Err(p) => Outcome::Panic(panic_message(&*p)),
    }
}

/// The resizings tried for a case, without duplicates.
fn resizings(case: &Case) -> Vec<(String, Axes)> {
    let shapes: Vec<&[usize]> = case.inputs.iter().map(|t| t.shape()).collect();
    let mut out: Vec<(String, Axes)> = Vec::new();
    let mut push = |name: String, mut axes: Axes| {
        axes.sort_unstable();
        if !axes.is_empty() && !out.iter().any(|(_, a)| *a == axes) {
            out.push((name, axes));
        }
    };
    for (j, s) in shapes.iter().enumerate() {
        for a in 0..s.len() {
            push(format!("input {j} axis {a}"), vec![(j, a)]);
        }
    }
    let max_rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    for a in 0..max_rank {
        push(format!("axis {a} from the left"), (0..shapes.len()).filter(|&j| shapes[j].len() > a).map(|j| (j, a)).collect());
        push(
            format!("axis -{} from the right", a + 1),
            (0..shapes.len()).filter(|&j| shapes[j].len() > a).map(|j| (j, shapes[j].len() - 1 - a)).collect(),
        );
    }
    let mut sizes: Vec<usize> = shapes.iter().flat_map(|s| s.iter().copied()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for d in sizes {
        let axes = shapes.iter().enumerate().flat_map(|(j, s)| (0..s.len()).filter(move |&a| s[a] == d).map(move |a| (j, a))).collect();
        push(format!("every dim of size {d}"), axes);
    }
    out
}

/// The shape at size 0 extrapolated from the shapes at sizes 1, 2 and 3 (each dim linear
/// in the size), or `None` when they do not grow linearly.
fn extrapolate(s1: &[usize], s2: &[usize], s3: &[usize]) -> Option<Vec<usize>> {
    if s1.len() != s2.len() || s2.len() != s3.len() {
        return None;
    }
    (0..s1.len())
        .map(|i| {
            let (a, b, c) = (s1[i] as i64, s2[i] as i64, s3[i] as i64);
            (c - b == b - a && 2 * a >= b).then(|| (2 * a - b) as usize)
        })
        .collect()
}

#[test]
fn zero_size_inputs_work_through_every_op_and_its_backward() {
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let (mut tried, mut ok, mut expected_err, mut skipped) = (0, 0, 0, 0);
    let mut failures: Vec<String> = Vec::new();
    let mut panics = 0;
    for entry in entries {
        for case in (entry.cases)() {
            let n_axes = resizings(&case);
            for (what, axes) in n_axes {
                let (s1, s2, s3) = match (run(&case, &axes, 1), run(&case, &axes, 2), run(&case, &axes, 3)) {
                    (Outcome::Ok(a), Outcome::Ok(b), Outcome::Ok(c)) => (a, b, c),
                    (a, b, c) => {
                        for (len, o) in [(1, a), (2, b), (3, c)] {
                            if let Outcome::Panic(m) = o {
                                panics += 1;
                                failures.push(format!("{}::{} ({what} -> {len}): PANIC: {m}", entry.name, case.name));
                            }
                        }
                        skipped += 1;
                        continue;
                    }
                };
                tried += 1;
                let expected = extrapolate(&s1, &s2, &s3);
                let label = format!("{}::{} ({what} -> 0)", entry.name, case.name);
                match run(&case, &axes, 0) {
                    Outcome::Ok(s) => match &expected {
                        Some(e) if *e != s => failures.push(format!("{label}: shape {s:?}, expected {e:?}")),
                        _ => ok += 1,
                    },
                    Outcome::Err(e) => {
                        let msg = e.to_string();
                        // The error of an inner operator (a loss's `mean`) names the op called, with
                        // the inner one as context: `binary_cross_entropy: (in mean) ...`.
                        let from = |op: &str| op == e.op() || msg.starts_with(&format!("{}: (in {op}) ", e.op()));
                        if EXPECTED_ERRORS.iter().any(|(op, frag, _)| from(op) && msg.contains(frag)) {
                            expected_err += 1;
                        } else {
                            failures.push(format!("{label}: unexpected error: {msg}"));
                        }
                    }
                    Outcome::Panic(m) => {
                        panics += 1;
                        failures.push(format!("{label}: PANIC: {m}"));
                    }
                }
            }
        }
    }
    eprintln!("zero-size: {tried} resizings tried, {ok} ok, {expected_err} expected errors, {skipped} not applicable, {panics} panics");
    assert!(ok >= 600, "only {ok} resizings ran: the search for applicable resizings has stopped finding them");
    assert!(failures.is_empty(), "{} failures ({panics} panics):\n{}", failures.len(), failures.join("\n"));
}

/// The fixed cases, by value: an empty batch through batch norm in training leaves the
/// running stats alone; zero input features or channels give the bias (an empty sum is 0).
#[test]
fn empty_batches_and_features_give_pytorchs_values() -> Result<()> {
    let x = Tensor::zeros(&[0, 3, 4, 4])?.requires_grad()?;
    let (rm, rv) = (Tensor::full(&[3], 0.5)?, Tensor::full(&[3], 2.0)?);
    let gamma = Tensor::ones(&[3])?.requires_grad()?;
    let y = om_ops::batch_norm2d(&x, Some(&gamma), None, Some(&rm), Some(&rv), om_ops::BatchNormOptions::train())?;
    assert_eq!(y.shape(), [0, 3, 4, 4]);
    assert_eq!((rm.to_vec(), rv.to_vec()), (vec![0.5; 3], vec![2.0; 3]), "running stats changed by an empty batch");
    om_ops::sum(&y, None, false)?.backward()?;
    assert_eq!(gamma.grad().map(|g| g.to_vec()), Some(vec![0.0; 3]));

    let bias = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
    let y = om_ops::linear(&Tensor::zeros(&[3, 0])?.requires_grad()?, &Tensor::zeros(&[2, 0])?, Some(&bias))?;
    assert_eq!((y.shape(), y.to_vec()), (&[3, 2][..], [1.0, -2.0].repeat(3)));

    let w = Tensor::zeros(&[2, 0, 3, 3])?.requires_grad()?;
    let y = om_ops::conv2d(&Tensor::zeros(&[1, 0, 4, 4])?, &w, Some(&bias), om_ops::Conv2dOptions::default().padding(1))?;
    assert_eq!((y.shape(), y.to_vec()), (&[1, 2, 4, 4][..], [vec![1.0; 16], vec![-2.0; 16]].concat()));
    om_ops::sum(&y, None, false)?.backward()?;
    assert_eq!(w.grad().map(|g| g.shape().to_vec()), Some(vec![2, 0, 3, 3]));

    let x = Tensor::zeros(&[5, 0, 3])?.requires_grad()?;
    let weights = [om_ops::RnnWeights::without_bias(Tensor::zeros(&[16, 3])?, Tensor::zeros(&[16, 4])?)];
    let r = om_ops::lstm(&x, None, None, &weights, om_ops::RnnConfig::new(1))?;
    assert_eq!((r.y.shape(), r.h_n.shape()), (&[5, 0, 4][..], &[1, 0, 4][..]));
    Ok(())
}

/// Zero-size calls the resizing above cannot reach (targets and lengths fixed inside the
/// cases): each must give `Ok` with the expected shape and values, and a backward.
#[test]
fn zero_size_calls_outside_the_registered_cases() -> Result<()> {
    use om_ops::Reduction;
    let leaf = |shape: &[usize]| Tensor::zeros(shape).and_then(Tensor::requires_grad);
    let ids = |v: Vec<i32>, shape: &[usize]| Tensor::from_vec_i32(v, shape);
    let sum = || om_ops::CrossEntropyOptions { reduction: Reduction::Sum, ..Default::default() };
    type Call = Box<dyn Fn() -> Result<Tensor>>;
    let ok: Vec<(&str, Call, Vec<usize>)> = vec![
        (
            "cross_entropy, empty batch, sum",
            Box::new(move || om_ops::cross_entropy(&leaf(&[0, 5])?, &ids(vec![], &[0])?, None, sum())),
            vec![],
        ),
        ("nll_loss, empty batch, sum", Box::new(move || om_ops::nll_loss(&leaf(&[0, 5])?, &ids(vec![], &[0])?, None, sum())), vec![]),
        (
            "take_along_axis, no indices along the axis",
            Box::new(move || om_ops::take_along_axis(&leaf(&[3, 4])?, &ids(vec![], &[3, 0])?, 1)),
            vec![3, 0],
        ),
        (
            "take_along_axis, from an empty batch",
            Box::new(move || om_ops::take_along_axis(&leaf(&[0, 4])?, &ids(vec![], &[0, 2])?, 1)),
            vec![0, 2],
        ),
        (
            "ctc_loss, an empty target (all blanks)",
            Box::new(move || {
                let lp = om_ops::log_softmax(&leaf(&[4, 2, 3])?, -1)?;
                om_ops::ctc_loss(&lp, &ids(vec![1, 2], &[2])?, &[4usize, 3][..], &[0usize, 2][..], 0, Reduction::Sum, false)
            }),
            vec![],
        ),
        (
            "cross_entropy, empty batch, mean",
            Box::new(move || om_ops::cross_entropy(&leaf(&[0, 5])?, &ids(vec![], &[0])?, None, Default::default())),
            vec![],
        ),
        (
            "ctc_loss, empty batch, sum",
            Box::new(move || om_ops::ctc_loss(&leaf(&[4, 0, 3])?, &ids(vec![], &[0, 2])?, &[][..], &[][..], 0, Reduction::Sum, false)),
            vec![],
        ),
        (
            "ctc_loss, empty batch, mean",
            Box::new(move || om_ops::ctc_loss(&leaf(&[4, 0, 3])?, &ids(vec![], &[0, 2])?, &[][..], &[][..], 0, Reduction::Mean, false)),
            vec![],
        ),
        ("concat of empty pieces", Box::new(move || om_ops::concat(&[leaf(&[2, 0])?, leaf(&[2, 3])?, leaf(&[2, 0])?], 1)), vec![2, 3]),
        (
            "where_ on empty operands",
            Box::new(move || om_ops::where_(&Tensor::zeros(&[0, 3])?, &leaf(&[0, 3])?, &leaf(&[1, 3])?)),
            vec![0, 3],
        ),
    ];
    // Values where they are not the empty list: NaN for a loss averaged over no rows
    // (PyTorch's value; the `mean` operator itself refuses), 0 for a sum over nothing. For
    // an empty CTC batch PyTorch raises ("log_probs tensor must not be empty"); the library
    // accepts it as for the other losses.
    let values: Vec<(&str, Vec<f32>)> = vec![
        ("cross_entropy, empty batch, sum", vec![0.0]),
        ("nll_loss, empty batch, sum", vec![0.0]),
        ("cross_entropy, empty batch, mean", vec![f32::NAN]),
        ("ctc_loss, empty batch, sum", vec![0.0]),
        ("ctc_loss, empty batch, mean", vec![f32::NAN]),
    ];
    let mut failures = Vec::new();
    for (what, f, shape) in &ok {
        match catch_unwind(AssertUnwindSafe(|| -> Result<Tensor> {
            let y = f()?;
            y.backward_with(Some(&Tensor::ones(y.shape())?), false)?;
            Ok(y)
        })) {
            Ok(Ok(y)) if y.shape() == &shape[..] => {
                let want = values.iter().find(|(w, _)| w == what).map(|(_, v)| v.clone());
                let same = |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || x.is_nan() && y.is_nan());
                if let Some(want) = want.filter(|w| !same(&y.to_vec(), w)) {
                    failures.push(format!("{what}: values {:?}, expected {want:?}", y.to_vec()));
                }
            }
            Ok(Ok(y)) => failures.push(format!("{what}: shape {:?}, expected {shape:?}", y.shape())),
            Ok(Err(e)) => failures.push(format!("{what}: {e}")),
            Err(_) => failures.push(format!("{what}: PANIC")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// A tensor without elements is contiguous whatever its strides (as in PyTorch), and an
/// empty view of an empty storage reads as nothing everywhere.
#[test]
fn empty_tensors_are_contiguous_and_empty_views_read_nothing() -> Result<()> {
    for shape in [&[3, 0][..], &[0, 4], &[2, 0, 5]] {
        let t = Tensor::zeros(shape)?;
        assert!(t.is_contiguous(), "{shape:?} with strides {:?}", t.strides());
    }
    let view = om_ops::slice(&Tensor::zeros(&[0, 4])?.requires_grad()?, 1, 2, 4, 1)?;
    assert_eq!(view.shape(), [0, 2]);
    assert!(view.to_vec().is_empty());
    assert_eq!(om_ops::contiguous(&view)?.shape(), [0, 2]);
    assert_eq!(om_ops::sum(&view, None, false)?.to_vec(), vec![0.0]);
    assert_eq!(om_ops::relu(&view)?.shape(), [0, 2]);
    let ids = om_ops::slice(&Tensor::from_vec_i32(vec![], &[0, 4])?, 1, 2, 4, 1)?;
    assert!(ids.to_vec_i32().is_empty());
    Ok(())
}
