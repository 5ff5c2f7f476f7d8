//! Validation: each cross-cutting rule of the `#[op]` contract is one function here.
//! Errors are gathered (not first-only) and spanned at the offending token.

use crate::ast::{slice_attr_elem, InputKind, Op};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Error, Type};

/// Runs every rule.
pub fn all(op: &Op, errors: &mut Vec<Error>) {
    required_functions(op, errors);
    has_tensor_input(op, errors);
    saved_names_are_known(op, errors);
    saved_names_are_unique(op, errors);
    attrs_match_forward(op, errors);
    attr_types_are_owned(op, errors);
    composition_has_no_record(op, errors);
    variadic_input_is_last(op, errors);
}

/// A `&[Tensor]` input comes after every other tensor input, is not saved and conditions
/// nothing (its gradients are indexed at run time).
fn variadic_input_is_last(op: &Op, errors: &mut Vec<Error>) {
    let Some(pos) = op.inputs.iter().position(|i| i.kind == InputKind::Many) else { return };
    let name = &op.inputs[pos].name;
    if pos + 1 != op.inputs.len() {
        errors.push(Error::new(name.span(), format!("`{name}: &[Tensor]` must be the last tensor input of `forward`")));
    }
    for s in &op.args.saved {
        if &s.name == name || s.cond.as_ref() == Some(name) {
            errors.push(Error::new(
                s.name.span(),
                format!("`{name}` takes any number of tensors, so it cannot be saved or name a condition"),
            ));
        }
    }
}

fn op_name(op: &Op) -> String {
    op.module.ident.to_string()
}

/// `forward` and `cases` always; `backward` exactly when the op has a record.
fn required_functions(op: &Op, errors: &mut Vec<Error>) {
    let name = op_name(op);
    let span = op.module.ident.span();
    if op.module.content.is_none() {
        errors.push(Error::new(span, format!("#[op] needs an inline module: `mod {name} {{ fn forward(..) .. }}`")));
        return;
    }
    if op.forward.is_none() {
        errors.push(Error::new(span, format!("`{name}` has no `fn forward`; add `pub fn forward(x: &Tensor, ..) -> Result<Tensor>`")));
    }
    if op.cases.is_none() {
        errors.push(Error::new(span, format!("`{name}` has no `fn cases() -> Vec<Case>`; every operator registers gradient-check cases")));
    }
    if op.args.composition.is_none() && op.backward.is_none() {
        errors.push(Error::new(
            span,
            format!("`{name}` has no `fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()>`; add it, or declare `#[op(composition)]` if the operator is built from other operators"),
        ));
    }
}

/// Every operator takes at least one tensor.
fn has_tensor_input(op: &Op, errors: &mut Vec<Error>) {
    if let Some(f) = &op.forward {
        if op.inputs.is_empty() {
            errors.push(Error::new(f.sig.ident.span(), "`forward` takes no tensor; inputs are `&Tensor` or `Option<&Tensor>` parameters"));
        }
    }
}

/// A saved item names an input, `out`, or an owned slot; a condition names an input.
fn saved_names_are_known(op: &Op, errors: &mut Vec<Error>) {
    let name = op_name(op);
    let inputs: Vec<String> = op.inputs.iter().map(|i| i.name.to_string()).collect();
    for s in &op.args.saved {
        let n = s.name.to_string();
        if !s.owned && n != "out" && !inputs.contains(&n) {
            errors.push(Error::new(
                s.name.span(),
                format!(
                    "`{n}` is not an input of `{name}`; saved items name an input ({}), `out`, or an owned slot `{n}: owned`",
                    inputs.join(", ")
                ),
            ));
        }
        if s.owned && (n == "out" || inputs.contains(&n)) {
            errors.push(Error::new(s.name.span(), format!("owned slot `{n}` clashes with an input or `out`; give it its own name")));
        }
        if let Some(c) = &s.cond {
            if !inputs.contains(&c.to_string()) {
                errors.push(Error::new(
                    c.span(),
                    format!("`if {c}`: `{c}` is not an input of `{name}`; the condition names the input whose gradient needs this slot"),
                ));
            }
        }
    }
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
            Some(p) if type_string(&p.ty) != type_string(&a.ty) => errors.push(Error::new(
                a.ty.span(),
                format!("attribute `{}` is declared `{}` but `forward` takes `{}`", a.name, type_string(&a.ty), type_string(&p.ty)),
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
