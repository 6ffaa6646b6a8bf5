//! `#[packet_controller]`: turns an inherent impl block of handlers into a
//! `Controller`, and registers it through `inventory` unless told
//! `#[packet_controller(explicit)]`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, ImplItem, ItemImpl, LitStr, Token, Type};

use crate::crate_path::CratePath;
use crate::errors::Errors;
use crate::handler::Handler;
use crate::handler_attr;

/// The options in `#[packet_controller(...)]`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ControllerArgs {
    /// `explicit`: no `inventory` registration; the controller is passed to
    /// `Server::builder().controller(instance)`.
    pub(crate) explicit: bool,
}

impl Parse for ControllerArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Self::default();
        for key in Punctuated::<Ident, Token![,]>::parse_terminated(input)? {
            if key == "explicit" {
                if args.explicit {
                    return Err(syn::Error::new(key.span(), "duplicate option `explicit`"));
                }
                args.explicit = true;
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown option `{key}` for #[packet_controller]: \
                         the only option is `explicit`, as in #[packet_controller(explicit)]"
                    ),
                ));
            }
        }
        Ok(args)
    }
}

/// The expansion of `#[packet_controller(attr)] item`.
///
/// On an error the item is still emitted (without its `#[handler]`
/// attributes) next to the `compile_error!`s, so that the rest of the crate
/// and editors keep seeing the methods; when the block itself is usable, the
/// `Controller` impl is emitted too, with the handlers that were accepted.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = errors.check(syn::parse2::<ControllerArgs>(attr));
    let mut block = match syn::parse2::<ItemImpl>(item.clone()) {
        Ok(block) => block,
        Err(_) => {
            errors.push(syn::Error::new_spanned(
                &item,
                "#[packet_controller] goes on an inherent impl block: `impl MyController { ... }`",
            ));
            let errors = errors.into_compile_errors();
            return quote!(#errors #item);
        }
    };
    let controller = if check_block(&block, &mut errors) {
        let handlers = take_handlers(&mut block, &mut errors);
        args.map(|args| controller_impl(&block.self_ty, &handlers, &args))
    } else {
        // The methods are not handlers: only strip their attributes.
        for item in &mut block.items {
            if let ImplItem::Fn(method) = item {
                let _ = handler_attr::take_options(&mut method.attrs);
            }
        }
        None
    };
    let errors = errors.into_compile_errors();
    quote! {
        #errors
        #block
        #controller
    }
}

/// Reads every `fn` of the block as a handler, removing its `#[handler]`
/// attributes. A second handler for a request type already handled in the
/// block (under the same `#[cfg]`s) is an error, and left out.
fn take_handlers(block: &mut ItemImpl, errors: &mut Errors) -> Vec<Handler> {
    let mut handlers: Vec<Handler> = Vec::new();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else { continue };
        let Some(handler) = errors.check(Handler::from_method(method)) else {
            continue;
        };
        let key = request_key(handler.request());
        let first = handlers.iter().find(|earlier| {
            request_key(earlier.request()) == key && earlier.cfg_key() == handler.cfg_key()
        });
        if let Some(first) = first {
            errors.push(syn::Error::new_spanned(
                handler.request(),
                format!(
                    "`{key}` is already handled by `{}` in this block: \
                     a request type has one handler",
                    syn::ext::IdentExt::unraw(first.ident())
                ),
            ));
            continue;
        }
        handlers.push(handler);
    }
    handlers
}

/// A request type as written, without spaces, to compare two handlers'.
fn request_key(ty: &Type) -> String {
    ty.to_token_stream().to_string().replace(' ', "")
}

/// Refuses trait impls and generic impls; returns whether a `Controller`
/// impl can be written for the block.
fn check_block(block: &ItemImpl, errors: &mut Errors) -> bool {
    let mut usable = true;
    if let Some((_, path, _)) = &block.trait_ {
        errors.push(syn::Error::new_spanned(
            path,
            "#[packet_controller] goes on an inherent impl block (`impl MyController { ... }`), \
             not on a trait impl",
        ));
        usable = false;
    }
    if !block.generics.params.is_empty() || block.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &block.generics,
            "generic controllers are not supported: write #[packet_controller] on an impl block \
             for a concrete type",
        ));
        usable = false;
    }
    usable
}

/// `impl Controller for Self` and, unless `explicit`, its `inventory`
/// registration.
fn controller_impl(self_ty: &Type, handlers: &[Handler], args: &ControllerArgs) -> TokenStream {
    let t = CratePath::framework().at(Span::call_site());
    let name = controller_name(self_ty);
    let specs = handlers.iter().map(|handler| handler.spec(&name));
    let registration = (!args.explicit).then(|| {
        let name = LitStr::new(&name, Span::call_site());
        quote! {
            #t::__private::inventory::submit! {
                #t::__private::ControllerRegistration::new::<#self_ty>(#name)
            }
        }
    });
    quote! {
        #[automatically_derived]
        impl #t::__private::Controller for #self_ty {
            fn handlers(self: ::std::sync::Arc<Self>) -> ::std::vec::Vec<#t::__private::HandlerSpec> {
                ::std::vec![#(#specs),*]
            }
        }

        #registration
    }
}

/// The controller's name: the last segment of its type's path, or the type
/// as written when it is not a path.
fn controller_name(self_ty: &Type) -> String {
    match self_ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .map(|segment| syn::ext::IdentExt::unraw(&segment.ident).to_string())
            .unwrap_or_default(),
        Type::Group(group) => controller_name(&group.elem),
        other => other.to_token_stream().to_string().replace(' ', ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::{File, Item, parse_quote};

    fn args(tokens: TokenStream) -> Result<ControllerArgs, String> {
        syn::parse2(tokens).map_err(|error| error.to_string())
    }

    fn expand_file(attr: TokenStream, item: TokenStream) -> File {
        syn::parse2(expand(attr, item)).expect("the expansion parses as items")
    }

    fn compile_errors(file: &File) -> Vec<String> {
        file.items
            .iter()
            .filter_map(|item| match item {
                Item::Macro(mac)
                    if mac.mac.path.segments.last().unwrap().ident == "compile_error" =>
                {
                    Some(mac.mac.tokens.to_string())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reads_the_explicit_option() {
        assert_eq!(args(quote!()), Ok(ControllerArgs { explicit: false }));
        assert_eq!(
            args(quote!(explicit)),
            Ok(ControllerArgs { explicit: true })
        );
        assert_eq!(
            args(quote!(explicit,)),
            Ok(ControllerArgs { explicit: true })
        );
        assert_eq!(
            args(quote!(explicit, explicit)),
            Err("duplicate option `explicit`".to_owned())
        );
        assert!(
            args(quote!(auto))
                .unwrap_err()
                .starts_with("unknown option `auto`")
        );
        assert!(args(quote!(explicit = true)).is_err());
    }

    #[test]
    fn emits_the_block_the_controller_and_its_registration() {
        let file = expand_file(
            quote!(),
            quote! {
                impl Rooms {
                    #[handler(encrypted)]
                    fn join(&self, request: Join) -> Joined { todo!() }
                    async fn leave(request: Leave) {}
                    const LIMIT: u32 = 3;
                }
            },
        );
        assert_eq!(file.items.len(), 3);
        let Item::Impl(block) = &file.items[0] else {
            panic!("the block comes first")
        };
        assert!(block.trait_.is_none());
        assert_eq!(block.items.len(), 3);
        let ImplItem::Fn(join) = &block.items[0] else {
            panic!()
        };
        assert!(join.attrs.is_empty(), "#[handler] is stripped");

        let Item::Impl(controller) = &file.items[1] else {
            panic!("then the Controller impl")
        };
        let trait_path = &controller.trait_.as_ref().unwrap().1;
        assert_eq!(
            quote!(#trait_path).to_string(),
            ":: ternio :: __private :: Controller"
        );
        let body = quote!(#controller).to_string();
        assert!(body.contains("fn handlers (self : :: std :: sync :: Arc < Self >) -> :: std :: vec :: Vec < :: ternio :: __private :: HandlerSpec >"), "{body}");
        assert!(body.contains(":: std :: vec ! [{"), "{body}");
        assert!(body.contains("\"Rooms::join\""), "{body}");
        assert!(body.contains("\"Rooms::leave\""), "{body}");
        assert!(!body.contains("LIMIT"), "{body}");

        let Item::Macro(submit) = &file.items[2] else {
            panic!("then the registration")
        };
        assert_eq!(
            quote!(#submit).to_string(),
            ":: ternio :: __private :: inventory :: submit ! { \
             :: ternio :: __private :: ControllerRegistration :: new :: < Rooms > (\"Rooms\") }"
        );
        assert!(compile_errors(&file).is_empty());
    }

    #[test]
    fn explicit_controllers_are_not_registered() {
        let file = expand_file(
            quote!(explicit),
            quote!(impl crate::rooms::Rooms { fn join(r: Join) {} }),
        );
        assert_eq!(file.items.len(), 2);
        assert!(quote!(#file).to_string().contains("\"Rooms::join\""));
    }

    #[test]
    fn errors_keep_the_block_and_the_valid_handlers() {
        let file = expand_file(
            quote!(),
            quote! {
                impl Rooms {
                    #[handler(encrypted)]
                    fn bad(&mut self, request: Join) {}
                    fn good(request: Join) {}
                }
            },
        );
        assert_eq!(compile_errors(&file).len(), 1);
        let out = quote!(#file).to_string();
        assert!(out.contains("\"Rooms::good\""), "{out}");
        assert!(!out.contains("\"Rooms::bad\""), "{out}");
        assert!(!out.contains("# [handler"), "{out}");
    }

    #[test]
    fn refuses_other_items() {
        let file = expand_file(
            quote!(),
            quote!(impl Handler for Rooms { #[handler(x)] fn f(&self) {} }),
        );
        assert_eq!(
            compile_errors(&file).len(),
            1,
            "no error per method of a trait impl"
        );
        assert!(compile_errors(&file)[0].contains("not on a trait impl"));
        assert!(!quote!(#file).to_string().contains("# [handler"));

        let file = expand_file(
            quote!(),
            quote!(
                impl<T> Rooms<T> {
                    fn f(r: Join) {}
                }
            ),
        );
        assert!(compile_errors(&file)[0].contains("generic controllers"));

        let file = expand_file(quote!(bogus), quote!(impl Rooms { fn f(r: Join) {} }));
        assert!(compile_errors(&file)[0].contains("unknown option `bogus`"));
        assert_eq!(
            file.items.len(),
            2,
            "the error and the block, no controller"
        );

        let file = expand_file(
            quote!(),
            quote!(
                fn not_a_block() {}
            ),
        );
        assert!(compile_errors(&file)[0].contains("goes on an inherent impl block"));
        assert!(matches!(file.items.last(), Some(Item::Fn(_))));
    }

    #[test]
    fn refuses_a_second_handler_for_a_request_type() {
        let file = expand_file(
            quote!(),
            quote! {
                impl Rooms {
                    fn join(request: Join) {}
                    fn leave(request: Leave) {}
                    async fn join_again(&self, request: Join) -> Joined { todo!() }
                    #[cfg(feature = "a")]
                    fn leave_a(request: Leave) {}
                }
            },
        );
        assert_eq!(
            compile_errors(&file),
            [
                "\"`Join` is already handled by `join` in this block: a request type has one handler\""
            ]
        );
        let out = quote!(#file).to_string();
        assert!(!out.contains("\"Rooms::join_again\""), "{out}");
        assert!(out.contains("\"Rooms::leave_a\""), "{out}");
    }

    #[test]
    fn names_the_controller_after_its_type() {
        assert_eq!(controller_name(&parse_quote!(Rooms)), "Rooms");
        assert_eq!(controller_name(&parse_quote!(crate::r#Rooms)), "Rooms");
        assert_eq!(controller_name(&parse_quote!(Rooms<u8>)), "Rooms");
    }
}
