use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(attrs = [name: &str])]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor, name: &str) -> Result<Tensor> {
        let _ = name;
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
