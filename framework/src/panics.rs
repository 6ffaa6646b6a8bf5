//! What a caught panic says: handlers, handler futures and the streams
//! handlers return are polled under `catch_unwind`, and a panic becomes an
//! `INTERNAL` answer with its text in the log.

/// The text of a panic payload, for the log.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
