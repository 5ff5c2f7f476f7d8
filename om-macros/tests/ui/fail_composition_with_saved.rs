use om_core::{Case, Result, Tensor};
use om_macros::op;

#[op(composition, saved = [x])]
mod ident_op {
    use super::*;
    pub fn forward(x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
    fn cases() -> Vec<Case> {
        vec![]
    }
}

fn main() {}
