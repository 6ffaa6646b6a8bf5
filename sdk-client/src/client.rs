//! The [`Client`] handle.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::system::{self, ErrorBody, Ping, Pong};
use ternio_protocol::{Packet, Response};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::task::JoinHandle;

use crate::config::ClientConfig;
use crate::connection::Shared;
use crate::error::{ClientError, CloseReason};

/// How long [`Client::close`] waits for its last frames to leave.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// A connection to a Ternio server. Cheap to clone; every clone shares the
/// connection, which closes when the last clone is dropped or on [`close`](Self::close).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.shared.fail_all(CloseReason::Local);
    }
}

impl Client {
    /// Connects over TCP with the default [`ClientConfig`].
    pub async fn connect_tcp(address: impl ToSocketAddrs) -> Result<Self, ClientError> {
        Self::connect_tcp_with(address, ClientConfig::default()).await
    }

    /// Connects over TCP with `config`.
    pub async fn connect_tcp_with(
        address: impl ToSocketAddrs,
        config: ClientConfig,
    ) -> Result<Self, ClientError> {
        let stream = tokio::time::timeout(config.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| ClientError::Timeout(config.connect_timeout))?
            .map_err(ClientError::Connect)?;
        stream.set_nodelay(true).map_err(ClientError::Connect)?;
        let shared = Arc::new(Shared::new(stream, config));
        let tasks = [
            tokio::spawn(Arc::clone(&shared).read_loop()),
            tokio::spawn(Arc::clone(&shared).write_loop()),
        ];
        Ok(Self {
            inner: Arc::new(Inner { shared, tasks }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Sends `request` and waits for its response, up to the default timeout.
    ///
    /// `Resp` is the packet type the handler returns, or `()` for a handler
    /// that returns nothing. A handler's error comes back as
    /// [`ClientError::Remote`] with its code.
    pub async fn request_async<Req: Packet, Resp: Response>(
        &self,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        self.request_with_timeout(request, self.shared().config().request_timeout)
            .await
    }

    /// [`request_async`](Self::request_async) with its own timeout.
    pub async fn request_with_timeout<Req: Packet, Resp: Response>(
        &self,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, ClientError> {
        let frame = self.shared().call(Req::OPCODE, request, timeout).await?;
        if frame.header.flags.is_error() {
            let error = ErrorBody::parse(&frame.body)?;
            return Err(ClientError::Remote {
                code: error.code,
                message: error.message,
            });
        }
        Ok(Resp::from_response(
            frame.header.opcode,
            &frame.body,
            Req::OPCODE,
        )?)
    }

    /// Sends `packet` with no reply expected (request id 0). Returns once the
    /// frame is queued; a server-side error is only logged.
    pub fn send<P: Packet>(&self, packet: &P) -> Result<(), ClientError> {
        if let Some(reason) = self.shared().close_reason() {
            return Err(ClientError::Closed(reason));
        }
        self.shared()
            .send(Header::new(P::OPCODE, Flags::NONE, 0), packet)
    }

    /// Sends a `PING` and returns the round-trip time when its `PONG` arrives.
    pub async fn ping(&self) -> Result<Duration, ClientError> {
        let value = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let started = Instant::now();
        let timeout = self.shared().config().request_timeout;
        let frame = self
            .shared()
            .call(system::PING, &Ping { value }, timeout)
            .await?;
        if frame.header.flags.is_error() {
            let error = ErrorBody::parse(&frame.body)?;
            return Err(ClientError::Remote {
                code: error.code,
                message: error.message,
            });
        }
        let pong = Pong::from_response(frame.header.opcode, &frame.body, system::PING)?;
        if pong.value != value {
            return Err(ternio_protocol::DecodeError::Invalid(
                "PONG carries another value than the PING",
            )
            .into());
        }
        Ok(started.elapsed())
    }

    /// Sends `DISCONNECT NORMAL`, waits briefly for it to leave, and closes.
    /// Pending requests fail with [`ClientError::Closed`].
    pub async fn close(&self) {
        self.shared().close(CLOSE_LINGER).await;
    }

    /// Why the connection closed, or `None` while it is open.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared().close_reason()
    }

    /// Pushes the server sent that nothing handled (they are counted and dropped).
    pub fn unhandled_pushes(&self) -> u64 {
        self.shared().unhandled_pushes()
    }
}
