//! `docs/adding-an-op.md` walked through for real: the guide's `square` operator, declared
//! here in a test crate exactly as the guide shows, registers itself and passes its
//! gradient check.

use om_core::kernels::elementwise::{binary, unary};
use om_core::{registry, Case, Result, Tensor};
use om_macros::op;

/// Element-wise square `x²`. Backward: `2·x·g`.
#[op(saved = [x])]
pub mod square {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        unary(NAME, x, |v| v * v)
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(binary(NAME, g, r.x(), |g, x| 2.0 * x * g)?);
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![Case::new("contiguous", vec![Case::input(&[3, 4], -1.0, 1.0, 1)], |x| super::square(&x[0]))]
    }
}

#[test]
fn the_guide_example_registers_and_passes_gradcheck() {
    let entries = registry::entries().expect("no duplicate registrations");
    let entry = entries.iter().find(|e| e.name == "square").expect("`square` is registered");
    assert_eq!(entry.saved, &["x"]);
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

/// The guide's code block is this file's declaration, character for character, so the two
/// cannot drift apart.
#[test]
fn the_guide_shows_exactly_the_code_tested_here() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let guide = std::fs::read_to_string(root.join("docs/adding-an-op.md")).unwrap();
    let block = guide.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("the guide has a rust block");
    let this_file = std::fs::read_to_string(root.join("tests/adding_an_op.rs")).unwrap();
    assert!(block.lines().count() > 10, "the guide's block is the whole declaration:\n{block}");
    assert!(this_file.contains(block), "docs/adding-an-op.md's example differs from tests/adding_an_op.rs:\n{block}");
}
