//! `#[op]`: one declaration per operator.
//!
//! Applied to a module holding `forward`, `backward` and `cases`, it generates the public
//! forward wrapper, the typed backward record, the backward dispatch and the registry
//! entry with the gradient-check cases. Built as parse → validate → expand; see
//! `docs/adding-an-op.md` for the contract.

mod ast;
mod expand;
mod parse;
mod validate;

use proc_macro::TokenStream;

/// Declares an operator. See `docs/adding-an-op.md`.
///
/// `#[op(saved = [a if b, b if a, out, mean: owned], attrs = [axis: isize])]` on a
/// `mod name { fn forward(..); fn backward(r, g, d); fn cases() }`, or `#[op(composition)]`
/// on a module with `forward` and `cases` only.
#[proc_macro_attribute]
pub fn op(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::op(args.into(), item.into()).into()
}
