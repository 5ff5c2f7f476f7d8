use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Net {
    #[module(param)]
    weight: Tensor,
    #[module(param, name = "weight")]
    other: Tensor,
}

fn main() {}
