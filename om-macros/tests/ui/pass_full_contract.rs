//! Every feature of the contract in one declaration: conditional and owned slots, `out`,
//! an optional input, attributes; plus a composition.
use om_core::{Case, Result, Tensor};
use om_macros::op;

/// Scales `a` by `b`, plus an optional bias.
#[op(saved = [a if b, b if a, out, scale: owned], attrs = [factor: f32, axes: Vec<isize>])]
mod scaled {
    use super::*;

    pub fn forward(a: &Tensor, b: &Tensor, bias: Option<&Tensor>, factor: f32, axes: Vec<isize>) -> Result<(Tensor, Owned)> {
        let _ = (b, bias, factor, axes);
        Ok((a.clone(), Owned { scale: a.clone() }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let _: &Tensor = r.out();
        let _: &Tensor = r.scale();
        let _: Result<&Tensor> = r.a();
        let _: f32 = r.factor;
        if d.needs_a() {
            d.a(g.clone());
        }
        if d.needs_bias() {
            d.bias(g.clone());
        }
        Ok(())
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

/// Twice `scaled`.
#[op(composition)]
mod twice {
    use super::*;

    pub fn forward(x: &Tensor) -> Result<Tensor> {
        scaled(&scaled(x, x, None, 1.0, vec![])?, x, Some(x), 2.0, vec![0])
    }

    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {
    let x = Tensor::ones(&[2]).unwrap();
    let _ = twice(&x).unwrap();
}
