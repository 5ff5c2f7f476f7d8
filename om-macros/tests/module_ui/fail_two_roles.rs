use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(param, buffer)]
    weight: Tensor,
}

fn main() {}
