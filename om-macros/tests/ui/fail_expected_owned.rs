use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(saved = [mean: kept])]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let _ = (r, g, d);
        Ok(())
    }
    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {}
