use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(parameter)]
    weight: Tensor,
}

fn main() {}
