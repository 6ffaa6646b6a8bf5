//! The `#[handler(...)]` attribute on a method of a `#[packet_controller]`:
//! options that become builder calls on the method's `HandlerSpec`.
//!
//! `#[handler(encrypted, timeout_ms = 500, rate_limit(10, 60))]` becomes
//! `.encrypted().timeout_ms(500).rate_limit(10, 60)`. The macro does not know
//! the options: `HandlerSpec` does, and an unknown one fails as "no method
//! named ..." at the key.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Ident, Meta, Token, parenthesized, token};

use crate::errors::Errors;

/// The name of the attribute.
const ATTRIBUTE: &str = "handler";

/// One option: `key`, `key = value` or `key(a, b)`.
#[derive(Debug, Clone)]
pub(crate) struct HandlerOption {
    /// The builder method to call.
    pub(crate) key: Ident,
    /// Its arguments: none, the value, or the list in parentheses.
    pub(crate) args: Vec<Expr>,
}

impl Parse for HandlerOption {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key: Ident = input.parse().map_err(|error| {
            syn::Error::new(
                error.span(),
                "expected a handler option: `key`, `key = value` or `key(args)`",
            )
        })?;
        let args = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            vec![input.parse()?]
        } else if input.peek(token::Paren) {
            let content;
            parenthesized!(content in input);
            Punctuated::<Expr, Token![,]>::parse_terminated(&content)?
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        Ok(Self { key, args })
    }
}

impl ToTokens for HandlerOption {
    /// `.key(args)`, spanned at the key.
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self { key, args } = self;
        tokens.extend(quote_spanned!(key.span()=> .#key(#(#args),*)));
    }
}

/// Removes the `#[handler(...)]` attributes from `attrs` and returns their
/// options in order. Every attribute is removed even when one fails to parse.
pub(crate) fn take_options(attrs: &mut Vec<Attribute>) -> syn::Result<Vec<HandlerOption>> {
    let mut options = Vec::new();
    let mut errors = Errors::default();
    attrs.retain(|attr| {
        if !attr.path().is_ident(ATTRIBUTE) {
            return true;
        }
        match &attr.meta {
            Meta::Path(_) => {}
            Meta::List(list) => {
                let parsed =
                    list.parse_args_with(Punctuated::<HandlerOption, Token![,]>::parse_terminated);
                options.extend(errors.check(parsed).into_iter().flatten());
            }
            Meta::NameValue(meta) => errors.push(syn::Error::new_spanned(
                meta,
                "expected #[handler(key, key = value, key(args), ...)]",
            )),
        }
        false
    });
    errors.finish().map(|()| options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;
    use syn::parse_quote;

    fn calls(options: &[HandlerOption]) -> String {
        quote!(#(#options)*).to_string()
    }

    #[test]
    fn options_become_builder_calls_in_order() {
        let mut attrs: Vec<Attribute> = vec![
            parse_quote!(#[doc = "kept"]),
            parse_quote!(#[handler(encrypted, timeout_ms = 500)]),
            parse_quote!(#[handler(rate_limit(10, Duration::from_secs(1)),)]),
            parse_quote!(#[handler]),
            parse_quote!(#[inline]),
        ];
        let options = take_options(&mut attrs).unwrap();
        assert_eq!(
            calls(&options),
            ". encrypted () . timeout_ms (500) . rate_limit (10 , Duration :: from_secs (1))"
        );
        assert_eq!(attrs.len(), 2);
        assert!(attrs[0].path().is_ident("doc") && attrs[1].path().is_ident("inline"));
    }

    #[test]
    fn bad_options_are_removed_and_reported() {
        let mut attrs: Vec<Attribute> = vec![
            parse_quote!(#[handler(timeout_ms = )]),
            parse_quote!(#[handler = "x"]),
            parse_quote!(#[handler("x")]),
        ];
        let error = take_options(&mut attrs).unwrap_err();
        assert!(attrs.is_empty());
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(
            messages[1].starts_with("expected #[handler(key"),
            "{messages:?}"
        );
        assert!(
            messages[2].starts_with("expected a handler option"),
            "{messages:?}"
        );
    }
}
