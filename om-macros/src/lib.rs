//! `#[op]`: one declaration per operator.
//!
//! Applied to a module holding `forward`, `backward` and `cases`, it generates the public
//! forward wrapper, the typed backward record, the backward dispatch and the registry
//! entry with the gradient-check cases. Built as parse (`parse`, into the syntax of
//! `ast`) → validate (into the checked form) → expand (one module per generated part);
//! see `docs/adding-an-op.md` for the contract.

mod ast;
mod crate_path;
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
///
/// The expansion reaches the core crate only through its hidden `__private` module, at
/// `::om_core` in crates whose manifest lists `om-core`, else at
/// `::onemodel::__private::core` (a crate using the `onemodel` facade alone);
/// `#[op(crate = path, ..)]` names it explicitly. When `forward`'s first parameter is a
/// `&Tensor`, the operator is also a `Tensor` method of the same name and arguments (the
/// trait `Method` in its module).
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

// `#[derive(Module)]`: a model's named parameters, buffers and training mode.
mod module_derive;

/// Implements `om_core::module::Module` (re-exported as `om_ops::nn::Module`) from a
/// struct's fields, in declaration order, with PyTorch's state-dict names.
///
/// | field | role | names |
/// |---|---|---|
/// | a module (`Linear`, `Vec<Block>`, `Option<Box<dyn Forward>>`, ...), unmarked | child: its parameters, buffers and training mode | `field.weight`, `field.0.weight` |
/// | `#[module(flatten)]` module | child without the prefix | `weight` |
/// | `#[module(param)]` `Tensor`, `Option<Tensor>`, `Vec<Tensor>`, `[Tensor; N]` | trainable parameter | `field`, `field.0` |
/// | `#[module(buffer)]` tensor field | saved, not trained (running statistics) | `field` |
/// | `#[module(training)] bool` | set by `set_training` / `train` / `eval` | — |
/// | `#[module(skip)]`, or plain data (numbers, `bool`, `String`, containers of them) | ignored | — |
///
/// `#[module(name = "..")]` renames a field in the weights. A tensor field without
/// `param`, `buffer` or `skip` is an error (a forgotten buffer would silently drop state
/// from the weights), so are conflicting options and duplicate names. The expansion names
/// the core crate as `#[op]` does: `::om_core` in crates whose manifest lists `om-core`,
/// else `::onemodel::__private::core`; `#[module(crate = path)]` on the struct says it
/// explicitly (e.g. for a renamed dependency).
///
/// ```ignore
/// #[derive(Module)]
/// struct Net {
///     conv: Conv2d,                       // conv.weight, conv.bias
///     bn: BatchNorm2d,                    // bn.weight, bn.bias; buffers bn.running_mean, ...
///     blocks: Vec<Block>,                 // blocks.0.fc.weight, ...
///     #[module(param)]
///     scale: Tensor,                      // scale
///     #[module(skip)]
///     cache: Tensor,                      // not saved
///     dropout_p: f32,                     // plain data: ignored
/// }
/// ```
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(item: TokenStream) -> TokenStream {
    module_derive::derive(item.into()).into()
}
