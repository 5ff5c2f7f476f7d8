//! The element-wise losses refuse an input and a target of different shapes — where
//! PyTorch broadcasts them with only a warning (an `[n]` target against an `[n, 1]`
//! prediction becomes an `[n, n]` loss) — with an `Error::Shape` naming the operator and
//! both shapes, leaving the inputs untouched (values, no gradient, no graph).

use om_core::{Error, Result, Tensor};
use om_ops::{self as ops, KlDivReduction, Reduction};

type Loss = Box<dyn Fn(&Tensor, &Tensor) -> Result<Tensor>>;

/// Every element-wise loss, by name, with each reduction it offers.
fn losses() -> Vec<(&'static str, Loss)> {
    let mut v: Vec<(&'static str, Loss)> = Vec::new();
    for r in [Reduction::None, Reduction::Sum, Reduction::Mean] {
        v.push(("mse_loss", Box::new(move |x, t| ops::mse_loss(x, t, r))));
        v.push(("l1_loss", Box::new(move |x, t| ops::l1_loss(x, t, r))));
        v.push(("smooth_l1_loss", Box::new(move |x, t| ops::smooth_l1_loss(x, t, 1.0, r))));
        v.push(("huber_loss", Box::new(move |x, t| ops::huber_loss(x, t, 1.0, r))));
        v.push(("binary_cross_entropy", Box::new(move |x, t| ops::binary_cross_entropy(x, t, None, r))));
        v.push(("binary_cross_entropy_with_logits", Box::new(move |x, t| ops::binary_cross_entropy_with_logits(x, t, None, None, r))));
    }
    for r in [KlDivReduction::None, KlDivReduction::Sum, KlDivReduction::Mean, KlDivReduction::BatchMean] {
        for log_target in [false, true] {
            v.push(("kl_div", Box::new(move |x, t| ops::kl_div(x, t, r, log_target))));
        }
    }
    v
}

/// Pairs of shapes that broadcast together (so PyTorch would accept them with a warning)
/// or do not, but are never equal.
const MISMATCHED: [(&[usize], &[usize]); 7] =
    [(&[8, 1], &[8]), (&[8], &[8, 1]), (&[3, 4], &[4]), (&[3, 4], &[1, 4]), (&[3, 4], &[]), (&[2, 3], &[3, 2]), (&[5], &[6])];

fn leaf(shape: &[usize], seed: u64) -> Tensor {
    // Values in (0, 1): probabilities for binary_cross_entropy, valid for every loss.
    Tensor::rand_uniform(shape, 0.1, 0.9, seed).unwrap().requires_grad().unwrap()
}

#[test]
fn mismatched_shapes_are_errors_naming_both_shapes() {
    for (name, f) in losses() {
        for (xs, ts) in MISMATCHED {
            let (x, t) = (leaf(xs, 1), leaf(ts, 2));
            let (xv, tv) = (x.to_vec(), t.to_vec());
            match f(&x, &t) {
                Err(Error::Shape { op, shapes, .. }) => {
                    assert_eq!(op, name);
                    assert_eq!(shapes, vec![xs.to_vec(), ts.to_vec()], "{name}");
                }
                other => panic!("{name}: input {xs:?}, target {ts:?} gave {other:?}"),
            }
            let msg = f(&x, &t).unwrap_err().to_string();
            assert!(msg.starts_with(name) && msg.contains(&format!("{xs:?}")) && msg.contains(&format!("{ts:?}")), "{msg}");
            // The inputs are untouched.
            assert_eq!((x.to_vec(), t.to_vec()), (xv, tv), "{name}");
            assert!(x.grad().is_none() && t.grad().is_none() && x.is_leaf() && t.is_leaf(), "{name}");
        }
    }
}

#[test]
fn equal_shapes_and_explicit_expansion_still_work() {
    for (name, f) in losses() {
        let (x, t) = (leaf(&[8, 1], 3), leaf(&[8, 1], 4));
        assert!(f(&x, &t).is_ok(), "{name}");
        // Broadcasting on purpose: expand the target (its gradient sums back to [8]).
        let t8 = leaf(&[8], 5);
        let y = f(&x, &ops::expand(&ops::unsqueeze(&t8, 1).unwrap(), [8, 1]).unwrap()).unwrap();
        let y = if y.shape().is_empty() { y } else { ops::sum(&y, None, false).unwrap() };
        y.backward().unwrap();
        assert_eq!(t8.grad().unwrap().shape(), &[8], "{name}");
    }
}

/// The regression from issue 21: a `[n]` target against an `[n, 1]` prediction used to
/// give an `[n, n]` loss; the call is now refused, and the loss of the matching shapes is
/// the per-row mean.
#[test]
fn mse_of_a_column_and_a_vector_is_refused() {
    let p = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1]).unwrap();
    let y = Tensor::from_vec(vec![1.0, 2.0, 5.0], &[3]).unwrap();
    let e = ops::mse_loss(&p, &y, Default::default()).unwrap_err();
    assert!(e.to_string().contains("[3, 1]") && e.to_string().contains("[3]"), "{e}");
    let y = ops::reshape(&y, [3, 1]).unwrap();
    assert_eq!(ops::mse_loss(&p, &y, Default::default()).unwrap().item().unwrap(), 4.0 / 3.0);
}
