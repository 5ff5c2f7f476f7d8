//! Parsing: the struct, its fields and the `#[module(..)]` options on both. Unknown or
//! malformed options are gathered as errors; what the options mean together is checked in
//! `validate`.

use super::ast::{Derive, Field, Role};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields, Index, LitStr, Member, Path, Type};

/// Reads the derive input; `Err` when it is not a struct (nothing else can be checked).
pub fn derive(input: DeriveInput, errors: &mut Vec<syn::Error>) -> syn::Result<Derive> {
    let fields = match input.data {
        Data::Struct(s) => s.fields,
        Data::Enum(e) => return Err(syn::Error::new(
            e.enum_token.span,
            "`#[derive(Module)]` goes on a struct; an enum's variants cannot share parameter names — hold the variants' layers in a struct",
        )),
        Data::Union(u) => return Err(syn::Error::new(u.union_token.span, "`#[derive(Module)]` goes on a struct, not a union")),
    };
    let krate = struct_options(&input.attrs, errors).unwrap_or_else(crate::crate_path::default_core);
    let fields = match fields {
        Fields::Named(f) => f.named.into_iter().map(|f| field(Member::Named(f.ident.clone().expect("named")), f, errors)).collect(),
        Fields::Unnamed(f) => f
            .unnamed
            .into_iter()
            .enumerate()
            .map(|(i, f)| field(Member::Unnamed(Index { index: i as u32, span: f.ty.span() }), f, errors))
            .collect(),
        Fields::Unit => Vec::new(),
    };
    Ok(Derive { ident: input.ident, generics: input.generics, krate, fields })
}

/// `#[module(crate = path)]` on the struct.
fn struct_options(attrs: &[Attribute], errors: &mut Vec<syn::Error>) -> Option<Path> {
    let mut krate = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        let res = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                krate = Some(meta.value()?.parse::<Path>()?);
                Ok(())
            } else {
                Err(meta.error(format!(
                    "unknown struct option `{}`; the struct takes `#[module(crate = path)]` (the path of the core crate, e.g. `onemodel::__private::core`)",
                    path_text(&meta.path)
                )))
            }
        });
        if let Err(e) = res {
            errors.push(e);
        }
    }
    krate
}

fn path_text(p: &Path) -> String {
    p.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::")
}

/// One field and its `#[module(..)]` options.
fn field(member: Member, f: syn::Field, errors: &mut Vec<syn::Error>) -> Field {
    let span = f.ident.as_ref().map_or_else(|| f.ty.span(), |i| i.span());
    let mut explicit: Vec<(Role, Span)> = Vec::new();
    let mut rename = None;
    let mut options_failed = false;
    for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
        let res = attr.parse_nested_meta(|meta| {
            let key = path_text(&meta.path);
            let role = match key.as_str() {
                "param" => Role::Param,
                "buffer" => Role::Buffer,
                "skip" => Role::Skip,
                "training" => Role::Training,
                "flatten" => Role::Flatten,
                "name" => {
                    let lit: LitStr = meta.value()?.parse()?;
                    rename = Some((lit.value(), lit.span()));
                    return Ok(());
                }
                _ => {
                    return Err(meta.error(format!(
                        "unknown field option `{key}`; a field takes `param`, `buffer`, `skip`, `training`, `flatten` or `name = \"..\"`"
                    )))
                }
            };
            explicit.push((role, meta.path.span()));
            Ok(())
        });
        if let Err(e) = res {
            options_failed = true;
            errors.push(e);
        }
    }
    let plain_data = is_plain_data(&f.ty);
    let role = match explicit.first() {
        Some((r, _)) => *r,
        None if plain_data => Role::Skip,
        None => Role::Child,
    };
    Field { member, holds_tensors: holds_tensors(&f.ty), plain_data, options_failed, ty: f.ty, span, explicit, role, rename }
}

/// The last path segment of `ty` and its single type argument, if any.
fn last_segment(ty: &Type) -> Option<(String, Option<&Type>)> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    let arg = match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first() {
            Some(syn::GenericArgument::Type(t)) => Some(t),
            _ => None,
        },
        _ => None,
    };
    Some((seg.ident.to_string(), arg))
}

/// Containers read through: `Option`, `Vec`, `Box`, arrays, slices and references.
fn element(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Array(a) => Some(&a.elem),
        Type::Slice(s) => Some(&s.elem),
        Type::Reference(r) => Some(&r.elem),
        Type::Paren(p) => Some(&p.elem),
        _ => match last_segment(ty) {
            Some((name, Some(arg))) if matches!(name.as_str(), "Option" | "Vec" | "Box") => Some(arg),
            _ => None,
        },
    }
}

/// `Tensor`, or a container of tensors.
fn holds_tensors(ty: &Type) -> bool {
    match element(ty) {
        Some(inner) => holds_tensors(inner),
        None => matches!(last_segment(ty), Some((name, None)) if name == "Tensor"),
    }
}

/// Numbers, `bool`, `char`, strings, and containers or tuples of them: fields that cannot
/// hold parameters, skipped without an attribute.
fn is_plain_data(ty: &Type) -> bool {
    const PLAIN: [&str; 17] =
        ["bool", "char", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "String"];
    if let Type::Tuple(t) = ty {
        return t.elems.iter().all(is_plain_data);
    }
    match element(ty) {
        Some(inner) => is_plain_data(inner),
        None => matches!(last_segment(ty), Some((name, None)) if PLAIN.contains(&name.as_str()) || name == "str"),
    }
}
