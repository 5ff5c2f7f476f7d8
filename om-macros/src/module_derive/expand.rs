//! Expansion: builds the `Module` impl. Decides nothing; `validate` has checked what it
//! relies on. On errors it emits the `compile_error!`s and an empty impl, so uses of the
//! struct as a module do not cascade into further errors.

use super::ast::{Derive, Field, Role};
use super::{parse, validate};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{DeriveInput, GenericParam, WherePredicate};

/// Entry point of `#[derive(Module)]`.
pub fn derive(item: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(item) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Vec::new();
    let d = match parse::derive(input.clone(), &mut errors) {
        Ok(d) => d,
        Err(e) => return e.to_compile_error(),
    };
    validate::all(&d, &mut errors);
    if !errors.is_empty() {
        let errs = errors.iter().map(syn::Error::to_compile_error);
        let empty = impl_block(&d, &[], quote! { let _ = f; }, quote! { let _ = f; }, quote! { let _ = training; });
        return quote! { #(#errs)* #empty };
    }
    generate(&d)
}

fn generate(d: &Derive) -> TokenStream {
    let k = &d.krate;
    let mut params = Vec::new();
    let mut buffers = Vec::new();
    let mut training = Vec::new();
    let mut bounds: Vec<WherePredicate> = Vec::new();
    for f in &d.fields {
        let m = &f.member;
        let name = f.name();
        let span = f.ty.span();
        let child_name = |visit: TokenStream| {
            quote_spanned! {span=>
                #k::__private::Module::#visit(&self.#m, &mut |n: &str, t: &#k::__private::Tensor| f(&#k::__private::join(#name, n), t));
            }
        };
        match f.role {
            Role::Param => params.push(quote_spanned! {span=> #k::__private::Tensors::visit_tensors(&self.#m, #name, f); }),
            Role::Buffer => buffers.push(quote_spanned! {span=> #k::__private::Tensors::visit_tensors(&self.#m, #name, f); }),
            Role::Child => {
                params.push(child_name(quote!(visit_parameters)));
                buffers.push(child_name(quote!(visit_buffers)));
            }
            Role::Flatten => {
                params.push(quote_spanned! {span=> #k::__private::Module::visit_parameters(&self.#m, f); });
                buffers.push(quote_spanned! {span=> #k::__private::Module::visit_buffers(&self.#m, f); });
            }
            Role::Training => training.push(quote! { self.#m = training; }),
            Role::Skip => {}
        }
        if matches!(f.role, Role::Child | Role::Flatten) {
            training.push(quote_spanned! {span=> #k::__private::Module::set_training(&mut self.#m, training); });
        }
        if let Some(b) = bound(d, f) {
            bounds.push(b);
        }
    }
    let unused = |list: &[TokenStream], arg: TokenStream| {
        if list.is_empty() {
            quote! { let _ = #arg; }
        } else {
            quote! {}
        }
    };
    let (up, ub, ut) = (unused(&params, quote!(f)), unused(&buffers, quote!(f)), unused(&training, quote!(training)));
    impl_block(d, &bounds, quote! { #up #(#params)* }, quote! { #ub #(#buffers)* }, quote! { #ut #(#training)* })
}

/// `Type: Module` (or `Tensors`) for a field whose type names a type parameter of the
/// struct; other field types need no bound (and a bound on a private type would warn).
fn bound(d: &Derive, f: &Field) -> Option<WherePredicate> {
    let k = &d.krate;
    let ty = &f.ty;
    let names: Vec<String> = d
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    if !contains_ident(ty.to_token_stream(), &names) {
        return None;
    }
    match f.role {
        Role::Child | Role::Flatten => Some(syn::parse_quote!(#ty: #k::__private::Module)),
        Role::Param | Role::Buffer => Some(syn::parse_quote!(#ty: #k::__private::Tensors)),
        _ => None,
    }
}

fn contains_ident(tokens: TokenStream, names: &[String]) -> bool {
    tokens.into_iter().any(|tt| match tt {
        proc_macro2::TokenTree::Ident(i) => names.contains(&i.to_string()),
        proc_macro2::TokenTree::Group(g) => contains_ident(g.stream(), names),
        _ => false,
    })
}

fn impl_block(d: &Derive, bounds: &[WherePredicate], params: TokenStream, buffers: TokenStream, training: TokenStream) -> TokenStream {
    let k = &d.krate;
    let ident = &d.ident;
    let mut generics = d.generics.clone();
    if !bounds.is_empty() {
        generics.make_where_clause().predicates.extend(bounds.iter().cloned());
    }
    let (impl_g, ty_g, where_c) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_g #k::__private::Module for #ident #ty_g #where_c {
            fn visit_parameters(&self, f: &mut dyn ::core::ops::FnMut(&str, &#k::__private::Tensor)) {
                #params
            }
            fn visit_buffers(&self, f: &mut dyn ::core::ops::FnMut(&str, &#k::__private::Tensor)) {
                #buffers
            }
            fn set_training(&mut self, training: bool) {
                #training
            }
        }
    }
}
