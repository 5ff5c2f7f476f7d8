//! One compile-fail case per distinct error message of `#[op]` and `#[op_wrapper]`, plus one
//! that must compile (and checks what the registry shows).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
