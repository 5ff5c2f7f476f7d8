//! Expansion: builds the tokens of an `#[op]` from its [`Checked`] form, one module per
//! generated part — the typed record and its dispatch ([`record`]), the gradient sink
//! ([`grads`]), the forward wrapper ([`wrapper`]) and the registry entry ([`entry`]).
//! Decides nothing: `validate` has checked everything it relies on. On errors the user's
//! module is still emitted, beside the `compile_error!`s, so neither its body nor its call
//! sites cascade into further errors.

mod entry;
mod grads;
pub mod method;
mod record;
mod wrapper;

use crate::ast::{Checked, Kind};
use crate::{parse, validate};
use proc_macro2::TokenStream;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Attribute, FnArg, Item, ItemMod, Token, Type};

/// Inputs of a variadic operator kept inline in its call and record (as many as a graph
/// node keeps inline edges); more spill to the heap.
const VARIADIC_INLINE: usize = 8;

/// The record's type for a slice attribute `&[T]`: an inline list of `T` (no heap
/// allocation for short lists such as shapes and axes).
fn inline_list(core: &TokenStream, elem: &Type) -> TokenStream {
    quote!(#core::InlineVec<#elem, { #core::INLINE_RANK }>)
}

/// Entry point of `#[op]`.
pub fn op(args: TokenStream, item: TokenStream) -> TokenStream {
    let module: ItemMod = match syn::parse2(item.clone()) {
        Ok(m) => m,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[op] goes on an inline module: `mod name { fn forward(..) .. fn backward(..) .. fn cases() .. }`",
            )
            .to_compile_error();
            return quote! { #item #e };
        }
    };
    let mut errors = Vec::new();
    let args = match parse::args(args, &mut errors) {
        Ok(a) => a,
        Err(e) => return fallback(&validate::private_path(None), &module, None, &[], vec![e]),
    };
    let op = parse::op(args, module.clone(), &mut errors);
    let forward = op.forward.clone();
    let owned: Vec<syn::Ident> = op.args.saved.iter().filter(|s| s.owned).map(|s| s.name.clone()).collect();
    let core = validate::private_path(op.args.krate.as_ref());
    match validate::check(op, &mut errors) {
        Some(checked) => generate(&checked),
        None => fallback(&core, &module, forward.as_ref(), &owned, errors),
    }
}

/// Everything the declaration generates.
fn generate(op: &Checked) -> TokenStream {
    let module = &op.module;
    let (mod_ident, mod_vis, mod_token) = (&module.ident, &module.vis, &module.mod_token);
    let name = &op.name;
    let core = &op.core;
    let items = &op.items;
    let docs = docs(&module.attrs);
    let other_attrs = non_doc_attrs(&module.attrs);
    let entry = entry::tokens(op);
    let (generated, wrapper) = match &op.kind {
        Kind::Primitive { backward, saved, attrs } => {
            let record = record::tokens(op, backward, saved, attrs);
            let grads = grads::tokens(core, &op.inputs);
            let (hidden, public) = wrapper::primitive(op, &record.build, saved, attrs);
            let definitions = &record.definitions;
            (quote! { #definitions #grads #hidden }, public)
        }
        Kind::Composition => wrapper::composition(op),
    };
    let output = match &op.kind {
        Kind::Primitive { .. } => syn::parse_quote!(-> #core::Result<#core::Tensor>),
        Kind::Composition => op.forward.sig.output.clone(),
    };
    let method = method::tokens(&op.forward.sig, mod_ident, &quote!(super::#mod_ident), &output, &quote!(#core::Tensor));
    // The module holds generated items only (`NAME`, `Record`, `Grads`, `forward`, ..): hidden
    // from the documentation, where the public function documents the operator.
    quote! {
        #(#other_attrs)*
        #(#docs)*
        #[doc(hidden)]
        #mod_vis #mod_token #mod_ident {
            #(#items)*

            /// The operator's name.
            pub const NAME: &str = #name;

            #generated
            #method
            #entry
        }

        #(#docs)*
        #wrapper
    }
}

/// What is emitted when the declaration has errors: the user's module without `backward`
/// (which names the generated `Record`/`Grads`), with `NAME` and placeholder types (an
/// `Owned` with the declared owned slots), and a wrapper with the forward's signature,
/// so that only the `compile_error!`s are reported. A module without a body is left out
/// (emitting it would send rustc looking for its file).
fn fallback(
    core: &TokenStream,
    module: &ItemMod,
    forward: Option<&syn::ItemFn>,
    owned: &[syn::Ident],
    errors: Vec<syn::Error>,
) -> TokenStream {
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let mut module = module.clone();
    let Some((_, items)) = &mut module.content else {
        return quote! { #(#errs)* };
    };
    let name = module.ident.to_string();
    items.retain(|i| !matches!(i, Item::Fn(f) if f.sig.ident == "backward"));
    for item in items.iter_mut() {
        if let Item::Fn(f) = item {
            if f.sig.ident == "forward" {
                f.sig.inputs = without_receiver(&f.sig.inputs);
            }
        }
    }
    items.push(syn::parse_quote! {
        /// The operator's name.
        pub const NAME: &str = #name;
    });
    items.push(syn::parse_quote! {
        /// Placeholder while the declaration has errors.
        pub struct Record;
    });
    items.push(syn::parse_quote! {
        /// Placeholder while the declaration has errors.
        pub struct Grads;
    });
    items.push(syn::parse_quote! {
        /// Placeholder while the declaration has errors.
        pub struct Owned { #(pub #owned: #core::Tensor,)* }
    });
    // The method too, so that method calls do not cascade either.
    if let Some(f) = forward {
        let mut sig = f.sig.clone();
        sig.inputs = without_receiver(&sig.inputs);
        let (ident, output) = (&module.ident, syn::parse_quote!(-> #core::Result<#core::Tensor>));
        items.push(Item::Verbatim(method::tokens(&sig, ident, &quote!(super::#ident), &output, &quote!(#core::Tensor))));
    }
    let ident = &module.ident;
    let vis = &module.vis;
    let wrapper = forward.map(|f| {
        let args = without_receiver(&f.sig.inputs);
        let generics = &f.sig.generics;
        quote! {
            #[allow(unused_variables, clippy::too_many_arguments)]
            #vis fn #ident #generics (#args) -> #core::Result<#core::Tensor> {
                ::core::unreachable!("#[op] declaration has errors")
            }
        }
    });
    quote! { #module #wrapper #(#errs)* }
}

/// The parameters without a `self` (already reported), so the emitted code is a valid
/// free function.
fn without_receiver(inputs: &Punctuated<FnArg, Token![,]>) -> Punctuated<FnArg, Token![,]> {
    inputs.iter().filter(|a| matches!(a, FnArg::Typed(_))).cloned().collect()
}

/// The module's documentation attributes.
fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("doc")).collect()
}

/// The module's attributes other than its documentation.
fn non_doc_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| !a.path().is_ident("doc")).collect()
}

/// The names the wrapper passes on to `forward`: its parameters, in order.
fn call_args(forward: &syn::ItemFn) -> Vec<TokenStream> {
    forward
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(pt) => Some(quote::ToTokens::to_token_stream(&pt.pat)),
            _ => None,
        })
        .collect()
}
