use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op()]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        d.x(r.x().clone());
        let _ = g;
        Ok(())
    }
    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {}
