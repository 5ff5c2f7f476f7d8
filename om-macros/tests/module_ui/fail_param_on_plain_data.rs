use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(param)]
    eps: f32,
}

fn main() {}
