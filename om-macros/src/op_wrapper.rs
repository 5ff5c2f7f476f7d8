//! `#[op_wrapper(path::to::op)]`: marks a hand-written public function as the entry point
//! of an `#[op]` whose generated wrapper is private (because the public function checks or
//! decodes its arguments first, as `ctc_loss` does), so the registry shows the signature
//! users call.

use crate::signature;
use proc_macro2::TokenStream;
use quote::quote;

/// The function unchanged, plus its registration as the public entry of the operator.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let op: syn::Path = match syn::parse2(args) {
        Ok(p) => p,
        Err(e) => {
            let e = syn::Error::new(e.span(), "#[op_wrapper] names the operator's module: `#[op_wrapper(path::to::op_name)]`");
            let e = e.to_compile_error();
            return quote! { #item #e };
        }
    };
    let function: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new_spanned(&item, "#[op_wrapper] goes on the public function that calls the operator").to_compile_error();
            return quote! { #item #e };
        }
    };
    let call = signature::call(&function.sig.ident.to_string(), &function.sig, Some(&function.sig.output));
    quote! {
        #function

        const _: () = {
            ::om_core::__private::inventory::submit! {
                ::om_core::__private::OpWrapper { op: #op::NAME, signature: #call }
            }
        };
    }
}
