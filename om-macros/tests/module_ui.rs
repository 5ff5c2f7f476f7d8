//! One compile-fail case per distinct error message of `#[derive(Module)]`, plus one that
//! must compile.

#[test]
fn module_ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/module_ui/pass_*.rs");
    t.compile_fail("tests/module_ui/fail_*.rs");
}
