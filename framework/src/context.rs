//! A request's [`Context`]: its header and its connection's handle.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use ternio_protocol::frame::Header;

use crate::hub::ConnectionHandle;
use crate::ids::ConnectionId;
use crate::registry::ConnectionShared;

/// The context of one request: its header, and the connection it came
/// from. A `Context` dereferences to that connection's
/// [`ConnectionHandle`], so every method of the handle is one of the
/// context's too: `ctx.push(&packet)`, `ctx.hub()`, `ctx.state::<T>()`,
/// `ctx.set_permission(1)`…
///
/// Cloning it is cheap (one reference count).
#[derive(Clone)]
pub struct Context {
    connection: ConnectionHandle,
    header: Header,
    /// The request's upload, when its handler takes one.
    upload: Option<Arc<crate::upload::UploadShared>>,
}

impl Context {
    pub(crate) fn new(connection: Arc<ConnectionShared>, header: Header) -> Self {
        Self {
            connection: ConnectionHandle::new(connection),
            header,
            upload: None,
        }
    }

    /// The context of a request that carries an upload.
    pub(crate) fn with_upload(mut self, upload: Option<Arc<crate::upload::UploadShared>>) -> Self {
        self.upload = upload;
        self
    }

    /// The request's upload, if it carries one.
    pub(crate) fn upload(&self) -> Option<Arc<crate::upload::UploadShared>> {
        self.upload.clone()
    }

    /// The id of the connection the request came from (its handle's
    /// [`id`](ConnectionHandle::id)).
    pub fn connection_id(&self) -> ConnectionId {
        self.connection.id()
    }

    /// The request's header.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The request's id; 0 for a fire-and-forget send, which gets no reply.
    pub fn request_id(&self) -> u32 {
        self.header.request_id
    }

    /// Whether the request arrived sealed.
    pub fn is_encrypted(&self) -> bool {
        self.header.flags.is_encrypted()
    }

    /// A handle to this connection, which may be kept and used from
    /// anywhere after the handler returns.
    pub fn connection(&self) -> ConnectionHandle {
        self.connection.clone()
    }
}

impl Deref for Context {
    type Target = ConnectionHandle;

    /// The handle of the connection the request came from.
    fn deref(&self) -> &ConnectionHandle {
        &self.connection
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("connection", &self.connection.id())
            .field("peer", &self.connection.peer_addr())
            .field("transport", &self.connection.transport())
            .field("header", &self.header)
            .finish()
    }
}
