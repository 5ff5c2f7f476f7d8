//! `crate = path` names the core crate explicitly (here through a renamed import); a
//! method keeps the function's generics, lifetimes and `impl Into<T>` parameters; an
//! operator whose first input is not a `&Tensor` registers no method.
extern crate om_core as renamed_core;
use renamed_core::{Case, Result, Tensor};
use om_macros::op;

/// `x` scaled by `by`. Backward: `by·g`.
#[op(crate = renamed_core, attrs = [by: f32])]
pub mod scale {
    use super::*;

    pub fn forward<'a>(x: &'a Tensor, by: impl Into<f32>) -> Result<Tensor> {
        let _ = by;
        Ok(x.clone())
    }

    fn backward(_r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

/// The first tensor of a list.
#[op(composition, crate = ::om_core)]
pub mod first {
    use super::*;

    pub fn forward(xs: &[Tensor]) -> Result<Tensor> {
        Ok(xs[0].clone())
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {
    use scale::Method as _;
    let x = Tensor::ones(&[2]).unwrap();
    assert_eq!(x.scale(2.0f32).unwrap().to_vec(), scale(&x, 2.0f32).unwrap().to_vec());
    assert_eq!(first(&[x.clone()]).unwrap().to_vec(), vec![1.0, 1.0]);
    let entries = om_core::registry::entries().unwrap();
    let entry = |name: &str| *entries.iter().find(|e| e.name == name).unwrap();
    assert!(om_core::registry::has_method(entry("scale")));
    assert!(!om_core::registry::has_method(entry("first")));
}
