use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(saved = [x])]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor, w: &Tensor) -> Result<Tensor> {
        let _ = w;
        Ok(x.clone())
    }
    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(g.clone());
        d.w(r.w().clone());
        let _ = (r.out(), r.x());
        Ok(())
    }
    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {}
