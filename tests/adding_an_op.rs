//! `docs/adding-an-op.md` walked through for real: the guide's `square` operator — its
//! code block itself, included at build time (see `build.rs`), so the guide cannot drift
//! from what is tested — registers itself and passes its gradient check.

use om_core::{registry, Case, Result, Tensor};

// The guide's example, extracted from `docs/adding-an-op.md` by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/adding_an_op_example.rs"));

#[test]
fn the_guide_example_registers_and_passes_gradcheck() {
    let entries = registry::entries().expect("no duplicate registrations");
    let entry = entries.iter().find(|e| e.name == "square").expect("`square` is registered");
    assert_eq!(entry.saved, &["x"]);
    assert_eq!(entry.signature, "square(x: &Tensor)");
    assert_eq!(entry.summary, "`2·x·g`.", "the `Backward:` sentence of its documentation");
    for case in (entry.cases)() {
        let report = om_core::gradcheck::run(&case).unwrap();
        assert!(report.passed(), "{}: {report:?}", case.name);
    }
}

#[test]
fn the_guide_example_computes_and_records() {
    let x = Tensor::from_vec(vec![1.0, -2.0, 3.0], &[3]).unwrap().requires_grad().unwrap();
    let y = square(&x).unwrap();
    assert_eq!(y.to_vec(), vec![1.0, 4.0, 9.0]);
    assert_eq!(y.grad_fn_name(), Some("square"));
    om_core::Tensor::backward_with(&y, Some(&Tensor::ones(&[3]).unwrap()), false).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, -4.0, 6.0]);
}
