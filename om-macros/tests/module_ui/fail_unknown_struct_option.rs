use om_macros::Module;

#[derive(Module)]
#[module(path = om_core)]
struct Empty;

fn main() {}
