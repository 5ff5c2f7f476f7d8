use om_core::{Result, Tensor};
use om_macros::op_wrapper;

#[op_wrapper("ident_op")]
pub fn ident(x: &Tensor) -> Result<Tensor> {
    Ok(x.clone())
}

fn main() {}
