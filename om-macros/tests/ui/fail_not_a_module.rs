use om_macros::op;

#[op]
fn ident_op() {}

fn main() {}
