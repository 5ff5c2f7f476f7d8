//! `#[op]`: one declaration per operator.
//!
//! Applied to a module holding `forward`, `backward` and `cases`, it generates the public
//! forward wrapper, the typed backward record, the backward dispatch and the registry
//! entry with the gradient-check cases. Built as parse ([`parse`], into the syntax of
//! [`ast`]) → validate (into the checked form) → expand (one module per generated part);
//! see `docs/adding-an-op.md` for the contract.

mod ast;
mod expand;
mod op_wrapper;
mod parse;
mod signature;
mod validate;

use proc_macro::TokenStream;

/// Declares an operator. See `docs/adding-an-op.md`.
///
/// `#[op(saved = [a if b, b if a, out, mean: owned], attrs = [axis: isize])]` on a
/// `mod name { fn forward(..); fn backward(r, g, d); fn cases() }`, or `#[op(composition)]`
/// on a module with `forward` and `cases` only. A `Backward: ..` paragraph in the module's
/// documentation is the backward rule shown in `docs/ops.md`.
#[proc_macro_attribute]
pub fn op(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::op(args.into(), item.into()).into()
}

/// Marks a hand-written public function as the entry point of the operator whose module it
/// names, when that operator's generated wrapper is private: the registry (`om ops`,
/// `docs/ops.md`) then shows this function's call signature.
///
/// `#[op_wrapper(primitive::ctc_loss)] pub fn ctc_loss(log_probs: &Tensor, ..) -> Result<Tensor>`
#[proc_macro_attribute]
pub fn op_wrapper(args: TokenStream, item: TokenStream) -> TokenStream {
    op_wrapper::expand(args.into(), item.into()).into()
}
