//! Random invalid arguments to the element-wise, reduction and view operators return an
//! `Err` naming the operator — never a panic, never an `Ok`. Every call runs under
//! `catch_unwind`; a panic fails the case (and is counted in the message).
//!
//! Each family runs `CASES` random cases per run (about 0.3 s for all of them in release,
//! 30,000 per family in 0.3 s when raised); a failing case is shrunk by proptest and
//! reported with its minimal input (no regression files are written).
//!
//! Invalid by construction: shapes that do not broadcast, `i32` inputs to `f32`-only
//! operators, axes outside the rank, indices outside the axis, slice step 0, permutations
//! that are not one, element counts that differ or overflow (zero sizes aside), negative
//! sizes, fewer target axes than the input has, empty and mismatched `concat` lists,
//! `mean` over zero elements.

mod seeded;

use om_core::{DType, Error, Result, Tensor};
use om_ops::{self as ops, GeluForm};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::panic::{catch_unwind, AssertUnwindSafe};

const CASES: u32 = 1000;

/// A binary element-wise operator.
type Binary = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// `sum` or `mean`.
type Reduction = fn(&Tensor, Option<isize>, bool) -> Result<Tensor>;

/// Runs `f`, requiring an `Err` naming `op`: a panic or an `Ok` fails the case.
fn must_fail(op: &str, what: &str, f: impl FnOnce() -> Result<Tensor>) -> std::result::Result<(), TestCaseError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(TestCaseError::fail(format!("{op} panicked on {what}: {msg}")))
        }
        Ok(Ok(t)) => Err(TestCaseError::fail(format!("{op} accepted {what}, giving {:?}", t.shape()))),
        Ok(Err(e)) if e.op() != op => Err(TestCaseError::fail(format!("{op} on {what}: the error names `{}`: {e}", e.op()))),
        Ok(Err(_)) => Ok(()),
    }
}

/// A shape of rank 0..=4 with dims in 0..=5 (zero-size dims included).
fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..=5, 0..=4)
}

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::full(shape, 0.5).unwrap()
}

fn i32s(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec_i32(vec![1; n], shape).unwrap()
}

/// A shape that does not broadcast with `a`: one aligned dim changed to a size other than
/// 1 and `a`'s (which must not be 1 either), plus up to two extra leading dims.
fn mismatched(a: Vec<usize>, pick: usize, new: usize, lead: Vec<usize>) -> Option<Vec<usize>> {
    let candidates: Vec<usize> = (0..a.len()).filter(|&i| a[i] != 1).collect();
    let &i = candidates.get(pick % candidates.len().max(1))?;
    let d = (2..9).map(|k| (new + k) % 9).find(|&d| d != 1 && d != a[i])?;
    let mut b = a;
    b[i] = d;
    Some(lead.into_iter().chain(b).collect())
}

/// An axis outside `-rank..rank` (or `-rank-1..=rank` with `extra`).
fn bad_axis(rank: usize, k: usize, negative: bool, extra: bool) -> isize {
    let r = (rank + extra as usize) as isize;
    if negative {
        -r - 1 - k as isize
    } else {
        r + k as isize
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..seeded::fixed(CASES) })]

    #[test]
    fn binary_ops_reject_unbroadcastable_shapes_and_i32(a in shape(), pick in 0usize..4, new in 0usize..9,
                                                       lead in prop::collection::vec(1usize..3, 0..=2), swap: bool, which in 0usize..4) {
        let binaries: [(&str, Binary); 4] = [("add", ops::add), ("sub", ops::sub), ("mul", ops::mul), ("div", ops::div)];
        let (op, f) = binaries[which];
        if let Some(b) = mismatched(a.clone(), pick, new, lead) {
            let (x, y) = if swap { (f32s(&b), f32s(&a)) } else { (f32s(&a), f32s(&b)) };
            must_fail(op, &format!("{:?} and {:?}", x.shape(), y.shape()), || f(&x, &y))?;
        }
        let (x, y) = if swap { (i32s(&a), f32s(&a)) } else { (f32s(&a), i32s(&a)) };
        must_fail(op, &format!("i32 {a:?}"), || f(&x, &y))?;
    }

    #[test]
    fn unary_ops_reject_i32(a in shape(), which in 0usize..6) {
        let x = i32s(&a);
        let (op, r) = match which {
            0 => ("neg", catch_unwind(AssertUnwindSafe(|| ops::neg(&x)))),
            1 => ("relu", catch_unwind(AssertUnwindSafe(|| ops::relu(&x)))),
            2 => ("sigmoid", catch_unwind(AssertUnwindSafe(|| ops::sigmoid(&x)))),
            3 => ("tanh", catch_unwind(AssertUnwindSafe(|| ops::tanh(&x)))),
            4 => ("gelu", catch_unwind(AssertUnwindSafe(|| ops::gelu(&x, GeluForm::Erf)))),
            _ => ("gelu", catch_unwind(AssertUnwindSafe(|| ops::gelu(&x, GeluForm::Tanh)))),
        };
        must_fail(op, &format!("i32 {a:?}"), || r.unwrap_or_else(|p| std::panic::resume_unwind(p)))?;
    }

    #[test]
    fn reductions_reject_bad_axes_dtypes_and_empty_means(a in shape(), k in 0usize..5, negative: bool, keep: bool, mean: bool) {
        let (op, f): (&str, Reduction) = if mean { ("mean", ops::mean) } else { ("sum", ops::sum) };
        let x = f32s(&a);
        let axis = bad_axis(a.len(), k, negative, false);
        must_fail(op, &format!("axis {axis} of {a:?}"), || f(&x, Some(axis), keep))?;
        must_fail(op, &format!("i32 {a:?}"), || f(&i32s(&a), None, keep))?;
        if let Some(z) = a.iter().position(|&d| d == 0) {
            must_fail("mean", &format!("axis {z} of {a:?}"), || ops::mean(&x, Some(z as isize), keep))?;
            must_fail("mean", &format!("all of {a:?}"), || ops::mean(&x, None, keep))?;
        }
    }

    #[test]
    fn axis_taking_views_reject_out_of_range_axes(a in shape(), k in 0usize..5, negative: bool, which in 0usize..7) {
        let x = f32s(&a);
        let r = a.len();
        let bad = bad_axis(r, k, negative, false);
        let what = format!("axis {bad} of {a:?}");
        match which {
            0 => must_fail("transpose", &what, || ops::transpose(&x, bad, 0))?,
            1 => must_fail("transpose", &what, || ops::transpose(&x, 0, bad))?,
            2 => must_fail("slice", &what, || ops::slice(&x, bad, 0, 1, 1))?,
            3 => must_fail("select", &what, || ops::select(&x, bad, 0))?,
            4 => must_fail("squeeze", &what, || ops::squeeze(&x, Some(bad)))?,
            5 => must_fail("flip", &what, || ops::flip(&x, [bad]))?,
            _ => {
                let bad = bad_axis(r, k, negative, true);
                must_fail("unsqueeze", &format!("axis {bad} of {a:?}"), || ops::unsqueeze(&x, bad))?
            }
        }
    }

    #[test]
    fn indexing_views_reject_bad_indices_steps_and_permutations(a in prop::collection::vec(0usize..=5, 1..=4), axis in 0usize..4,
                                                                 k in 0usize..5, negative: bool, perm in prop::collection::vec(-6isize..6, 0..=6)) {
        let x = f32s(&a);
        let r = a.len();
        let axis = axis % r;
        let dim = a[axis] as isize;
        let index = if negative { -dim - 1 - k as isize } else { dim + k as isize };
        must_fail("select", &format!("index {index} on axis {axis} of {a:?}"), || ops::select(&x, axis as isize, index))?;
        must_fail("slice", &format!("step 0 on {a:?}"), || ops::slice(&x, axis as isize, 0, a[axis] as isize, 0))?;
        let mut seen = vec![false; r];
        let valid = perm.len() == r && perm.iter().all(|&p| {
            let p = if p < 0 { p + r as isize } else { p };
            (0..r as isize).contains(&p) && !std::mem::replace(&mut seen[p as usize], true)
        });
        if !valid {
            must_fail("permute", &format!("{perm:?} of {a:?}"), || ops::permute(&x, &perm))?;
        }
        if r >= 1 {
            must_fail("flip", &format!("axis {axis} twice in {a:?}"), || ops::flip(&x, [axis as isize, axis as isize - r as isize]))?;
        }
    }

    #[test]
    fn reshape_rejects_wrong_counts_and_bad_sizes(a in shape(), target in prop::collection::vec(0isize..7, 0..=4), which in 0usize..4,
                                                  huge in 33u32..63) {
        let x = f32s(&a);
        let n: usize = a.iter().product();
        let t: Vec<isize> = match which {
            // A count that differs from the input's.
            0 => {
                let mut t = target.clone();
                let m: usize = t.iter().map(|&d| d as usize).product();
                if m == n {
                    t.push(if n == 0 { 1 } else { 2 });
                    if n == 0 { t.push(0); t.retain(|&d| d != 0); t.push(7); }
                }
                t
            }
            1 => [target.clone(), vec![-1, -1]].concat(),
            2 => [target.clone(), vec![-2]].concat(),
            _ => [target.clone(), vec![1 << huge, 1 << huge, 1 << huge]].concat(),
        };
        let m = t.iter().try_fold(1usize, |acc, &d| if d < 0 { None } else { acc.checked_mul(d as usize) });
        if which == 0 && m == Some(n) {
            return Ok(()); // the adjustment could not make the counts differ
        }
        must_fail("reshape", &format!("{a:?} to {t:?}"), || ops::reshape(&x, &t))?;
    }

    #[test]
    fn expand_rejects_mismatched_fewer_negative_and_overflowing_sizes(a in shape(), pick in 0usize..4, new in 0usize..9, which in 0usize..4,
                                                                      huge in 33u32..63) {
        let x = f32s(&a);
        let as_isize = |s: &[usize]| s.iter().map(|&d| d as isize).collect::<Vec<_>>();
        let t: Option<Vec<isize>> = match which {
            0 => mismatched(a.clone(), pick, new, vec![]).map(|b| as_isize(&b)),
            1 => (!a.is_empty()).then(|| as_isize(&a[1..])),
            2 => Some([vec![-1], as_isize(&a)].concat()),
            _ => Some([vec![1 << huge, 1 << huge, 1 << huge], as_isize(&a)].concat()),
        };
        if let Some(t) = t {
            must_fail("expand", &format!("{a:?} to {t:?}"), || ops::expand(&x, &t))?;
        }
    }

    #[test]
    fn concat_rejects_empty_lists_mismatches_dtypes_and_bad_axes(a in prop::collection::vec(0usize..=5, 1..=4), pick in 0usize..4,
                                                                new in 0usize..9, k in 0usize..5, negative: bool, axis in 0usize..4) {
        let x = f32s(&a);
        let r = a.len();
        must_fail("concat", "no tensors", || ops::concat(&[], 0))?;
        let bad = bad_axis(r, k, negative, false);
        must_fail("concat", &format!("axis {bad} of {a:?}"), || ops::concat(&[x.clone(), x.clone()], bad))?;
        let axis = axis % r;
        must_fail("concat", &format!("i32 {a:?}"), || ops::concat(&[x.clone(), i32s(&a)], axis as isize))?;
        let mut other = a.clone();
        other.insert(0, 1);
        must_fail("concat", &format!("{a:?} and {other:?}"), || ops::concat(&[x.clone(), f32s(&other)], axis as isize))?;
        // A mismatch outside the axis.
        if let Some(b) = mismatched(a.clone(), pick, new, vec![]) {
            let off = (0..r).find(|&i| b[i] != a[i]).unwrap_or(0);
            if off != axis {
                must_fail("concat", &format!("{a:?} and {b:?} on axis {axis}"), || ops::concat(&[x.clone(), f32s(&b)], axis as isize))?;
            }
        }
    }
}

#[test]
fn dtype_errors_name_the_argument() {
    let e = ops::add(&Tensor::ones(&[2]).unwrap(), &Tensor::from_vec_i32(vec![1, 2], &[2]).unwrap()).unwrap_err();
    assert!(matches!(e, Error::DType { op: "add", got: DType::I32, .. }), "{e}");
}
