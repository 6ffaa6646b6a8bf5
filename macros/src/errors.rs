//! [`Errors`]: the compile errors of one macro call, gathered so that a user
//! sees every mistake at once rather than one per build.

use proc_macro2::TokenStream;

/// Compile errors gathered while expanding one macro call.
#[derive(Debug, Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds `error` to the list.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// The value of `result`, or `None` after recording its error.
    pub(crate) fn check<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    /// One `compile_error!` per recorded error (nothing when there is none).
    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.0
            .map(syn::Error::into_compile_error)
            .unwrap_or_default()
    }

    /// `Ok(())` when no error was recorded, or all of them as one error.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
