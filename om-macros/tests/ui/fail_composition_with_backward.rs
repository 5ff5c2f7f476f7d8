use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(composition)]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor) -> Result<Tensor> {
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

fn main() {}
