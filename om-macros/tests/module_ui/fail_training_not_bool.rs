use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(training)]
    mode: u8,
}

fn main() {}
