use om_macros::Module;

struct Options {
    stride: usize,
}

#[derive(Module)]
struct Conv {
    options: Options,
}

fn main() {
    let _ = Options { stride: 1 }.stride;
}
