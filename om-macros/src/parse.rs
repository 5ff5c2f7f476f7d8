//! Parsing: the `#[op(...)]` arguments and the module's `forward`/`backward`/`cases`.

use crate::ast::{AttrItem, Input, InputKind, Op, OpArgs, Param, SavedItem};
use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{bracketed, FnArg, Ident, Item, ItemMod, Pat, Token, Type};

/// Parses the attribute arguments; duplicate keys are gathered as errors.
pub fn args(tokens: TokenStream, errors: &mut Vec<syn::Error>) -> syn::Result<OpArgs> {
    let parser = |input: ParseStream| {
        let mut out = OpArgs { saved: Vec::new(), attrs: Vec::new(), composition: None, krate: None };
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            // `crate` is a keyword: read any identifier.
            let key: Ident = Ident::parse_any(input)?;
            let k = key.to_string();
            if seen.contains(&k) {
                errors.push(syn::Error::new(
                    key.span(),
                    format!("duplicate item `{k}` in #[op(...)]; give each of `crate`, `saved`, `attrs`, `composition` once"),
                ));
            }
            seen.push(k.clone());
            match k.as_str() {
                "composition" => out.composition = Some(key.span()),
                "crate" => {
                    input.parse::<Token![=]>()?;
                    out.krate = Some(input.parse::<syn::Path>()?);
                }
                "saved" => {
                    input.parse::<Token![=]>()?;
                    let content;
                    bracketed!(content in input);
                    let items = Punctuated::<SavedItem, Token![,]>::parse_terminated_with(&content, saved_item)?;
                    out.saved = items.into_iter().collect();
                }
                "attrs" => {
                    input.parse::<Token![=]>()?;
                    let content;
                    bracketed!(content in input);
                    let items = Punctuated::<AttrItem, Token![,]>::parse_terminated_with(&content, attr_item)?;
                    out.attrs = items.into_iter().collect();
                }
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown #[op] argument `{k}`; expected `saved = [..]`, `attrs = [..]`, `composition` or `crate = path`"),
                    ))
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(out)
    };
    parser.parse2(tokens)
}

fn saved_item(input: ParseStream) -> syn::Result<SavedItem> {
    let name: Ident = input.parse()?;
    let mut item = SavedItem { name, cond: None, owned: false };
    if input.peek(Token![if]) {
        input.parse::<Token![if]>()?;
        item.cond = Some(input.parse()?);
    } else if input.peek(Token![:]) {
        input.parse::<Token![:]>()?;
        let kw: Ident = input.parse()?;
        if kw != "owned" {
            return Err(syn::Error::new(
                kw.span(),
                format!("expected `owned` after `{}:`; a saved slot is `x`, `x if y`, `out` or `name: owned`", item.name),
            ));
        }
        item.owned = true;
    }
    Ok(item)
}

fn attr_item(input: ParseStream) -> syn::Result<AttrItem> {
    let name: Ident = input.parse()?;
    input.parse::<Token![:]>()?;
    let ty: Type = input.parse()?;
    Ok(AttrItem { name, ty })
}

/// Classifies a parameter type as a tensor input.
fn input_kind(ty: &Type) -> Option<InputKind> {
    if is_tensor_ref(ty) {
        return Some(InputKind::Required);
    }
    if let Type::Reference(r) = ty {
        if let Type::Slice(sl) = &*r.elem {
            if matches!(&*sl.elem, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Tensor")) {
                return Some(InputKind::Many);
            }
        }
    }
    if let Type::Path(p) = ty {
        let seg = p.path.segments.last()?;
        if seg.ident == "Option" {
            if let syn::PathArguments::AngleBracketed(a) = &seg.arguments {
                if let Some(syn::GenericArgument::Type(inner)) = a.args.first() {
                    if is_tensor_ref(inner) {
                        return Some(InputKind::Optional);
                    }
                }
            }
        }
    }
    None
}

fn is_tensor_ref(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => {
            matches!(&*r.elem, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Tensor"))
        }
        _ => false,
    }
}

/// Parses the module and its functions.
pub fn op(args: OpArgs, module: ItemMod, errors: &mut Vec<syn::Error>) -> Op {
    let mut op = Op { args, module, forward: None, backward: None, cases: None, inputs: Vec::new(), params: Vec::new() };
    let items = op.module.content.as_ref().map(|(_, items)| items.clone()).unwrap_or_default();
    for item in items {
        if let Item::Fn(f) = item {
            let slot = match f.sig.ident.to_string().as_str() {
                "forward" => &mut op.forward,
                "backward" => &mut op.backward,
                "cases" => &mut op.cases,
                _ => continue,
            };
            *slot = Some(f);
        }
    }
    if let Some(f) = &op.forward {
        for arg in &f.sig.inputs {
            let FnArg::Typed(pt) = arg else {
                errors.push(syn::Error::new_spanned(arg, "`forward` is a free function; remove `self`"));
                continue;
            };
            let Pat::Ident(pi) = &*pt.pat else {
                errors.push(syn::Error::new_spanned(&pt.pat, "`forward` parameters must be plain names"));
                continue;
            };
            let name = pi.ident.clone();
            match input_kind(&pt.ty) {
                Some(kind) => op.inputs.push(Input { name, kind }),
                None => op.params.push(Param { name, ty: (*pt.ty).clone() }),
            }
        }
    }
    op
}
