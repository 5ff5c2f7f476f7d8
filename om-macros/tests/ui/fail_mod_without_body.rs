use om_macros::op;

#[op(saved = [x])]
mod ident_op;

fn main() {}
