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
    let e = ops::reshape(&t(&[2, 3]), vec![4, 2]).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
    let e = ops::expand(&t(&[2, 3]), vec![4, 3]).unwrap_err();
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
        (ops::flip(&t(&[2, 3]), vec![2]).unwrap_err(), "flip"),
    ] {
        assert!(matches!(e, Error::Axis { op: o, .. } if o == op), "{op}: {e}");
    }
}

#[test]
fn invalid_argument_values() {
    for (e, op) in [
        (ops::slice(&t(&[4]), 0, 3, 5, 1).unwrap_err(), "slice"),
        (ops::slice(&t(&[4]), 0, 0, 4, 0).unwrap_err(), "slice"),
        (ops::select(&t(&[4]), 0, 4).unwrap_err(), "select"),
        (ops::permute(&t(&[2, 3]), vec![0, 0]).unwrap_err(), "permute"),
        (ops::permute(&t(&[2, 3]), vec![0]).unwrap_err(), "permute"),
        (ops::reshape(&t(&[2, 3]), vec![-1, -1]).unwrap_err(), "reshape"),
        (ops::flip(&t(&[2, 3]), vec![0, 0]).unwrap_err(), "flip"),
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
