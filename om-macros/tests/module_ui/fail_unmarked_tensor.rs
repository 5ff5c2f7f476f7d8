use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(param)]
    weight: Tensor,
    running_mean: Tensor,
}

fn main() {}
