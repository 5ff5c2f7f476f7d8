use om_macros::op_wrapper;

#[op_wrapper(ident_op)]
pub struct Ident;

fn main() {}
