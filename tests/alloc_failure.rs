//! Allocation failure is an `Error`, never an abort: a request above the pool's limit
//! (`om_core::pool::max_buffer_bytes`) or beyond what the allocator can serve returns
//! `Error::OutOfMemory` naming the operator and the bytes, and leaves the inputs unchanged.

use om_core::{pool, Error, Tensor};
use om_ops as ops;
use om_ops::methods::*;

/// Asserts `e` is an out-of-memory error of `op` for `bytes` bytes, with a readable message.
fn assert_oom(e: &Error, op: &str, bytes: u64) {
    assert!(matches!(e, Error::OutOfMemory { op: o, bytes: b, .. } if *o == op && *b == bytes), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("{op}: ")), "{msg}");
    assert!(msg.contains(&format!("you tried to allocate {bytes} bytes")), "{msg}");
}

#[test]
fn constructors_too_large_for_memory_are_errors() {
    let bytes = 4u64 << 40; // 2^40 elements of 4 bytes
    assert!(pool::max_buffer_bytes() as u64 <= bytes, "the default limit is the machine's memory");
    assert_oom(&Tensor::zeros(&[1 << 20, 1 << 20]).unwrap_err(), "zeros", bytes);
    assert_oom(&Tensor::ones(&[1 << 20, 1 << 20]).unwrap_err(), "ones", bytes);
    assert_oom(&Tensor::full(&[1 << 20, 1 << 20], 2.0).unwrap_err(), "full", bytes);
    assert_oom(&Tensor::randn_with_seed(&[1 << 20, 1 << 20], 1).unwrap_err(), "randn", bytes);
    // Overflowing counts stay shape errors.
    assert!(matches!(Tensor::zeros(&[1 << 40, 1 << 40]).unwrap_err(), Error::Shape { op: "zeros", .. }));
    assert!(matches!(Tensor::zeros(&[1 << 62, 2]).unwrap_err(), Error::Shape { op: "zeros", .. }));
}

#[test]
fn copying_a_huge_expanded_view_is_an_error() {
    let x = Tensor::from_vec(vec![1.5], &[1, 1]).unwrap();
    let v = x.expand([1 << 30, 1 << 30]).unwrap();
    assert_oom(&v.contiguous().unwrap_err(), "contiguous", 4 << 60);
    assert_oom(&ops::cast(&v, om_core::DType::I32).unwrap_err(), "cast", 4 << 60);
    assert_oom(&ops::flip(&v, [0]).unwrap_err(), "flip", 4 << 60);
    // A transposed expansion cannot be flattened as a view: reshape must copy.
    let row = Tensor::from_vec(vec![1.5, 2.5], &[1, 2]).unwrap();
    let t = ops::transpose(&row.expand([1isize << 40, 2]).unwrap(), 0, 1).unwrap();
    assert_oom(&ops::reshape(&t, [-1]).unwrap_err(), "reshape", 8 << 40);
    assert_eq!(x.to_vec(), vec![1.5]);
    assert_eq!(row.to_vec(), vec![1.5, 2.5]);
    assert_eq!((x.version(), row.version()), (0, 0));
}

#[test]
fn operators_whose_output_is_too_large_are_errors() {
    let a = Tensor::from_vec(vec![1.0, 2.0], &[2, 1]).unwrap().requires_grad().unwrap();
    let b = Tensor::from_vec(vec![3.0], &[1, 1]).unwrap();
    let big = a.expand([2, 1isize << 40]).unwrap();
    let e = ops::add(&big, &b).unwrap_err();
    assert_oom(&e, "add", 8 << 40);
    let e = ops::relu(&big).unwrap_err();
    assert_oom(&e, "relu", 8 << 40);
    let e = ops::concat(&[b.clone(), b.expand([1isize << 40, 1]).unwrap()], 0).unwrap_err();
    assert_oom(&e, "concat", 4 * ((1 << 40) + 1));
    // Nothing changed: values, versions, gradients.
    assert_eq!(a.to_vec(), vec![1.0, 2.0]);
    assert_eq!(b.to_vec(), vec![3.0]);
    assert_eq!((a.version(), b.version()), (0, 0));
    assert!(a.grad().is_none());
    // The pool still serves ordinary requests afterwards.
    let s = ops::add(&a, &b).unwrap().sum(None, false).unwrap();
    assert_eq!(s.item().unwrap(), 9.0);
}

#[test]
fn reducing_a_huge_expanded_view_sums_it_in_place() {
    let x = Tensor::ones(&[1, 1]).unwrap();
    let v = x.expand([1 << 30, 1 << 30]).unwrap();
    // 2^60 ones sum to 2^60 (PyTorch: 1.1529215e18); a running f64 sum would saturate at
    // 2^53 (2^53 + 1 rounds back to 2^53), so sums past 2^53 elements do not take one
    // (issue 22).
    assert_eq!(v.sum(None, false).unwrap().item().unwrap(), (1u64 << 60) as f32);
    // A reduction whose output is too large is still an error.
    let wide = x.expand([1isize << 40, 1 << 20]).unwrap();
    assert_oom(&ops::sum(&wide, Some(1), false).unwrap_err(), "sum", 4 << 40);
    assert_eq!(x.to_vec(), vec![1.0]);
}

#[test]
fn sums_of_expanded_views_have_the_bits_of_sums_of_their_copies() {
    let base = Tensor::randn_with_seed(&[3, 1, 4], 5).unwrap();
    for (shape, axes) in [(vec![3, 2000, 4], vec![None, Some(0), Some(1), Some(2)]), (vec![3, 9, 4], vec![Some(1)])] {
        let v = base.expand(shape.iter().map(|&d| d as isize).collect::<Vec<_>>()).unwrap();
        let t = ops::transpose(&v, 0, 2).unwrap(); // strided and expanded
        let copy = t.contiguous().unwrap();
        for axis in axes {
            for keep in [false, true] {
                for (a, b) in
                    [(ops::sum(&t, axis, keep), ops::sum(&copy, axis, keep)), (ops::mean(&t, axis, keep), ops::mean(&copy, axis, keep))]
                {
                    let (a, b) = (a.unwrap(), b.unwrap());
                    assert_eq!(a.shape(), b.shape());
                    let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&a), bits(&b), "{shape:?} axis {axis:?} keep {keep}");
                }
            }
        }
    }
}

#[test]
fn a_backward_seeded_with_a_huge_view_is_an_error_that_changes_no_gradient() {
    let x = Tensor::ones(&[1, 1]).unwrap().requires_grad().unwrap();
    let y = x.expand([1 << 30, 1 << 30]).unwrap();
    let seed = Tensor::ones(&[1, 1]).unwrap().expand([1 << 30, 1 << 30]).unwrap();
    assert_oom(&y.backward_with(Some(&seed), false).unwrap_err(), "backward", 4 << 60);
    assert!(x.grad().is_none());
    // The leaf still works: a sensible backward from it accumulates as usual.
    let s = x.expand([2, 3]).unwrap().sum(None, false).unwrap();
    s.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![6.0]);
}

#[test]
fn the_limit_is_a_setting() {
    // Other tests in this binary allocate at most a few hundred kilobytes at a time.
    let old = pool::set_max_buffer_bytes(1 << 20);
    let e = Tensor::zeros(&[1 << 19]).unwrap_err();
    let ok = Tensor::zeros(&[1 << 10]);
    pool::set_max_buffer_bytes(old);
    assert_oom(&e, "zeros", 2 << 20);
    assert!(e.to_string().contains("the limit is 1048576 bytes"), "{e}");
    assert!(ok.is_ok());
    assert_eq!(pool::max_buffer_bytes(), old);
}

/// The limit is an explicit setting: the library reads no environment variable (only the
/// `om` binary maps `ONEMODEL_MAX_TENSOR_BYTES` to `set_max_buffer_bytes`, tested in
/// `tests/cli_robust.rs`). The limit is read once per process, so this test runs itself
/// again in a child process with the variable set.
#[test]
fn the_environment_does_not_set_the_limit() {
    const CHILD: &str = "OM_TEST_LIMIT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        assert_ne!(pool::max_buffer_bytes(), 4096, "ONEMODEL_MAX_TENSOR_BYTES set the library's limit");
        assert!(Tensor::zeros(&[4096]).is_ok());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["the_environment_does_not_set_the_limit", "--exact", "--test-threads=1"])
        .env(CHILD, "1")
        .env("ONEMODEL_MAX_TENSOR_BYTES", "4096")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("1 passed"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}
