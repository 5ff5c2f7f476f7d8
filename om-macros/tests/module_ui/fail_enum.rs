use om_macros::Module;

#[derive(Module)]
enum Net {
    A,
}

fn main() {}
