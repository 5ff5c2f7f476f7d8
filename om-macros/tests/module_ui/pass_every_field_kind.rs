use om_core::module::Module;
use om_core::Tensor;
use om_macros::Module;

#[derive(Module)]
struct Leaf {
    #[module(param)]
    w: Tensor,
    #[module(buffer)]
    stat: Option<Tensor>,
    #[module(training)]
    training: bool,
    #[module(skip)]
    scratch: Tensor,
    eps: f32,
    dims: Vec<usize>,
}

#[derive(Module)]
#[module(crate = om_core)]
struct Tree {
    leaf: Leaf,
    #[module(flatten)]
    root: Option<Box<Leaf>>,
    #[module(name = "renamed")]
    many: Vec<Leaf>,
}

fn main() {
    let _ = |t: &Tree| t.parameters();
}
