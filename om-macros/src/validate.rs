//! Validation: each cross-cutting rule of the `#[op]` contract is one function here, and
//! [`check`] turns a declaration that passes them all into the typed [`Checked`] form
//! that expansion reads. Errors are gathered (not first-only) and spanned at the
//! offending token.

use crate::ast::{into_target, slice_attr_elem, Checked, InputKind, Kind, Op, Slot, SlotSource};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Error, Ident, Item, ItemFn, Token, Type};

/// Runs every rule; the checked declaration if none failed.
pub fn check(op: Op, errors: &mut Vec<Error>) -> Option<Checked> {
    // Without a body there is nothing else to check (every other rule would only repeat it).
    let items = inline_items(&op, errors)?;
    let functions = required_functions(&op, items, errors);
    has_tensor_input(&op, errors);
    variadic_input_is_last(&op, errors);
    let saved = saved_slots(&op, errors);
    saved_names_are_unique(&op, errors);
    attrs_match_forward(&op, errors);
    attr_types_are_owned(&op, errors);
    composition_has_no_record(&op, errors);
    let Functions { items, forward, body } = functions?;
    if let Body::Primitive(backward) = &body {
        backward_reads_saved_slots(&op, backward, errors);
    }
    if !errors.is_empty() {
        return None;
    }
    let kind = match body {
        Body::Primitive(backward) => Kind::Primitive { backward, saved, attrs: op.args.attrs },
        Body::Composition => Kind::Composition,
    };
    let core = private_path(op.args.krate.as_ref());
    Some(Checked { name: op.module.ident.to_string(), module: op.module, items, forward, inputs: op.inputs, kind, core })
}

/// `<core>::__private` for the declared `crate = path`, or the default core path.
pub fn private_path(krate: Option<&syn::Path>) -> TokenStream {
    let krate = krate.cloned().unwrap_or_else(crate::crate_path::default_core);
    quote::quote!(#krate::__private)
}

/// The functions a declaration must have, once found.
struct Functions {
    items: Vec<Item>,
    forward: ItemFn,
    body: Body,
}

/// How the gradient is defined: by `backward`, or by the operators `forward` calls.
enum Body {
    Primitive(Box<ItemFn>),
    Composition,
}

fn op_name(op: &Op) -> String {
    op.module.ident.to_string()
}

/// `#[op]` goes on an inline module; its items.
fn inline_items(op: &Op, errors: &mut Vec<Error>) -> Option<Vec<Item>> {
    let Some((_, items)) = &op.module.content else {
        let name = op_name(op);
        errors.push(Error::new(op.module.ident.span(), format!("#[op] needs an inline module: `mod {name} {{ fn forward(..) .. }}`")));
        return None;
    };
    Some(items.clone())
}

/// `forward` and `cases` always, and `backward` exactly when the operator is not a
/// composition (a composition's `backward` is reported by [`composition_has_no_record`]).
fn required_functions(op: &Op, items: Vec<Item>, errors: &mut Vec<Error>) -> Option<Functions> {
    let name = op_name(op);
    let span = op.module.ident.span();
    if op.forward.is_none() {
        errors.push(Error::new(span, format!("`{name}` has no `fn forward`; add `pub fn forward(x: &Tensor, ..) -> Result<Tensor>`")));
    }
    if op.cases.is_none() {
        errors.push(Error::new(span, format!("`{name}` has no `fn cases() -> Vec<Case>`; every operator registers gradient-check cases")));
    }
    let body = match (op.args.composition, &op.backward) {
        (Some(_), _) => Some(Body::Composition),
        (None, Some(backward)) => Some(Body::Primitive(Box::new(backward.clone()))),
        (None, None) => {
            errors.push(Error::new(
                span,
                format!("`{name}` has no `fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()>`; add it, or declare `#[op(composition)]` if the operator is built from other operators"),
            ));
            None
        }
    };
    let (Some(forward), Some(_), Some(body)) = (&op.forward, &op.cases, body) else { return None };
    Some(Functions { items, forward: forward.clone(), body })
}

/// Every operator takes at least one tensor (not repeated when a parameter was already
/// reported as `self` or not a plain name).
fn has_tensor_input(op: &Op, errors: &mut Vec<Error>) {
    if let Some(f) = &op.forward {
        let all_plain = f.sig.inputs.iter().all(|a| matches!(a, syn::FnArg::Typed(pt) if matches!(*pt.pat, syn::Pat::Ident(_))));
        if op.inputs.is_empty() && all_plain {
            errors.push(Error::new(f.sig.ident.span(), "`forward` takes no tensor; inputs are `&Tensor` or `Option<&Tensor>` parameters"));
        }
    }
}

/// A `&[Tensor]` input comes after every other tensor input (its gradients are indexed
/// at run time); that it is not saved and conditions nothing is checked by
/// [`saved_slots`].
fn variadic_input_is_last(op: &Op, errors: &mut Vec<Error>) {
    let Some(pos) = op.inputs.iter().position(|i| i.kind == InputKind::Many) else { return };
    let name = &op.inputs[pos].name;
    if pos + 1 != op.inputs.len() {
        errors.push(Error::new(name.span(), format!("`{name}: &[Tensor]` must be the last tensor input of `forward`")));
    }
}

/// Resolves each saved item: an input, `out`, or an owned slot (whose name clashes with
/// neither); a condition names an input. A variadic input is neither saved nor a
/// condition. Items that do not resolve are reported and left out.
fn saved_slots(op: &Op, errors: &mut Vec<Error>) -> Vec<Slot> {
    let name = op_name(op);
    let input_list = op.inputs.iter().map(|i| i.name.to_string()).collect::<Vec<_>>().join(", ");
    let variadic = |n: &Ident| {
        Error::new(n.span(), format!("`{n}` takes any number of tensors (`&[Tensor]`), so it cannot be saved or name a condition"))
    };
    let mut slots = Vec::new();
    for s in &op.args.saved {
        let n = s.name.to_string();
        let input = op.inputs.iter().find(|i| i.name == s.name);
        let source = match (s.owned, input) {
            (true, None) if n != "out" => Some(SlotSource::Owned),
            (true, _) => {
                errors.push(Error::new(s.name.span(), format!("owned slot `{n}` clashes with an input or `out`; give it its own name")));
                None
            }
            (false, Some(i)) if i.kind == InputKind::Many => {
                errors.push(variadic(&s.name));
                None
            }
            (false, Some(i)) => Some(SlotSource::Input { optional: i.kind == InputKind::Optional }),
            (false, None) if n == "out" => Some(SlotSource::Out),
            (false, None) => {
                errors.push(Error::new(
                    s.name.span(),
                    format!(
                        "`{n}` is not an input of `{name}`; saved items name an input ({input_list}), `out`, or an owned slot `{n}: owned`"
                    ),
                ));
                None
            }
        };
        let cond = match &s.cond {
            None => Some(None),
            Some(c) => match op.inputs.iter().position(|i| &i.name == c) {
                Some(i) if op.inputs[i].kind == InputKind::Many => {
                    errors.push(variadic(c));
                    None
                }
                Some(i) => Some(Some((i, c.clone()))),
                None => {
                    errors.push(Error::new(
                        c.span(),
                        format!(
                            "`if {c}`: `{c}` is not an input of `{name}`; the condition names the input whose gradient needs this slot"
                        ),
                    ));
                    None
                }
            },
        };
        if let (Some(source), Some(cond)) = (source, cond) {
            slots.push(Slot { name: s.name.clone(), source, cond });
        }
    }
    slots
}

/// `backward` reads a saved slot through `r.NAME()`: reading an input or `out` that is not
/// saved is reported here with the slot to add (rustc would only say the record has no
/// such method).
fn backward_reads_saved_slots(op: &Op, backward: &ItemFn, errors: &mut Vec<Error>) {
    let Some(syn::FnArg::Typed(first)) = backward.sig.inputs.first() else { return };
    let syn::Pat::Ident(record) = &*first.pat else { return };
    let mut reads = Vec::new();
    method_calls_on(&record.ident, &backward.block, &mut reads);
    let mut reported: Vec<String> = Vec::new();
    for method in reads {
        let m = method.to_string();
        let known = m == "out" || op.inputs.iter().any(|i| i.name == method);
        if !known || op.args.saved.iter().any(|s| s.name == method) || reported.contains(&m) {
            continue;
        }
        let item = if op.args.saved.is_empty() { format!("`saved = [{m}]` to `#[op(..)]`") } else { format!("`{m}` to `saved = [..]`") };
        errors.push(Error::new(method.span(), format!("`backward` reads `{}.{m}()`, but `{m}` is not saved; add {item}", record.ident)));
        reported.push(m);
    }
}

/// Every `NAME` in a method call `receiver.NAME(..)` on the record's own binding in
/// `block`, found by a typed walk of the syntax tree (inside the arguments of macros such as
/// `assert!` too, when they parse as expressions).
fn method_calls_on(receiver: &Ident, block: &syn::Block, out: &mut Vec<Ident>) {
    struct Calls<'a> {
        receiver: &'a Ident,
        out: &'a mut Vec<Ident>,
    }
    impl<'ast> Visit<'ast> for Calls<'_> {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if matches!(&*call.receiver, syn::Expr::Path(p) if p.qself.is_none() && p.path.is_ident(self.receiver)) {
                self.out.push(call.method.clone());
            }
            visit::visit_expr_method_call(self, call);
        }
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            let args = mac.parse_body_with(Punctuated::<syn::Expr, Token![,]>::parse_terminated);
            for expr in args.iter().flatten() {
                self.visit_expr(expr);
            }
        }
    }
    Calls { receiver, out }.visit_block(block);
}

/// No slot is saved twice.
fn saved_names_are_unique(op: &Op, errors: &mut Vec<Error>) {
    let mut seen = Vec::new();
    for s in &op.args.saved {
        let n = s.name.to_string();
        if seen.contains(&n) {
            errors.push(Error::new(s.name.span(), format!("`{n}` is saved twice; list each slot once")));
        }
        seen.push(n);
    }
}

fn type_string(t: &Type) -> String {
    t.to_token_stream().to_string().replace(' ', "")
}

/// Declared attributes and the non-tensor parameters of `forward` agree in name and type.
fn attrs_match_forward(op: &Op, errors: &mut Vec<Error>) {
    if op.args.composition.is_some() || op.forward.is_none() {
        return;
    }
    for a in &op.args.attrs {
        match op.params.iter().find(|p| p.name == a.name) {
            None => errors.push(Error::new(
                a.name.span(),
                format!(
                    "attribute `{}` is not a parameter of `forward`; add `{}: {}` after the tensor inputs",
                    a.name,
                    a.name,
                    type_string(&a.ty)
                ),
            )),
            Some(p) if type_string(into_target(&p.ty).unwrap_or(&p.ty)) != type_string(&a.ty) => errors.push(Error::new(
                a.ty.span(),
                format!(
                    "attribute `{}` is declared `{}` but `forward` takes `{}` (an attribute `T` is taken as `T` or as `impl Into<T>`)",
                    a.name,
                    type_string(&a.ty),
                    type_string(&p.ty)
                ),
            )),
            Some(_) => {}
        }
    }
    for p in &op.params {
        if !op.args.attrs.iter().any(|a| a.name == p.name) {
            errors.push(Error::new(
                p.name.span(),
                format!("parameter `{}` of `forward` is neither a tensor (`&Tensor`, `Option<&Tensor>`) nor a declared attribute; add `{}: {}` to `attrs = [..]`", p.name, p.name, type_string(&p.ty)),
            ));
        }
    }
}

/// Attributes are stored in the record, so they must be owned values (or slices `&[T]` of
/// owned values, which the record copies).
fn attr_types_are_owned(op: &Op, errors: &mut Vec<Error>) {
    for a in &op.args.attrs {
        if let Some(bad) = borrowed_part(slice_attr_elem(&a.ty).unwrap_or(&a.ty)) {
            errors.push(Error::new(
                a.ty.span(),
                format!("attribute `{}` has type `{}`, which borrows ({bad}); attributes are stored in the record, so use an owned type such as `usize`, `[usize; 2]`, `f32`, `bool` or `Vec<i64>`", a.name, type_string(&a.ty)),
            ));
        }
    }
}

fn borrowed_part(ty: &Type) -> Option<&'static str> {
    match ty {
        Type::Reference(_) => Some("a reference"),
        Type::Slice(_) => Some("an unsized slice"),
        Type::TraitObject(_) | Type::ImplTrait(_) => Some("a trait object"),
        Type::Ptr(_) => Some("a raw pointer"),
        Type::Infer(_) => Some("an inferred type"),
        Type::Array(a) => borrowed_part(&a.elem),
        Type::Tuple(t) => t.elems.iter().find_map(borrowed_part),
        Type::Paren(p) => borrowed_part(&p.elem),
        Type::Path(p) => p.path.segments.iter().find_map(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
                syn::GenericArgument::Type(t) => borrowed_part(t),
                syn::GenericArgument::Lifetime(_) => Some("a lifetime"),
                _ => None,
            }),
            _ => None,
        }),
        _ => None,
    }
}

/// A composition has no record: no saved slots, no backward.
fn composition_has_no_record(op: &Op, errors: &mut Vec<Error>) {
    let Some(span) = op.args.composition else {
        return;
    };
    if !op.args.saved.is_empty() {
        errors.push(Error::new(span, "a composition has no record, so it saves nothing; remove `saved = [..]`"));
    }
    if let Some(b) = &op.backward {
        errors.push(Error::new(b.sig.ident.span(), "a composition gets its gradient from the operators it calls; remove `fn backward`"));
    }
}
