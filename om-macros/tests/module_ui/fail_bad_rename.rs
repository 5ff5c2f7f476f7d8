use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Net {
    #[module(param, name = "a.b")]
    weight: Tensor,
    #[module(skip, name = "c")]
    cache: Tensor,
}

fn main() {}
