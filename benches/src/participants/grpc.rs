//! `tonic-unary`, `tonic-duplex` and their TLS variants, with no protoc:
//! a hand-written codec that carries the payload as the raw message bytes,
//! and a hand-written service in the shape tonic's generated code has
//! (`tonic::server::Grpc` on the server, `tonic::client::Grpc` on the client).
//!
//! Server: `tonic::transport::Server` with its default settings (plus
//! `TCP_NODELAY`, and the listen backlog Ternio's servers get), the router, and for TLS a rustls config from
//! `ServerTlsConfig` with the harness's self-signed certificate. Client: one
//! `Channel` per client, hence one HTTP/2 connection each.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::net::SocketAddr;
use std::task::{Context as TaskContext, Poll};

use anyhow::{Result, anyhow, bail};
use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, StreamingService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

use crate::participants::Endpoint;
use crate::tls::TlsMaterial;

/// The service's full name.
const SERVICE: &str = "ternio.bench.Echo";
/// The unary method's path.
const UNARY: &str = "/ternio.bench.Echo/Unary";
/// The bidirectional streaming method's path.
const DUPLEX: &str = "/ternio.bench.Echo/Duplex";
/// The name the self-signed certificate is made for.
pub const TLS_DOMAIN: &str = "localhost";

/// Messages as raw bytes: what a `bytes` protobuf field would hold, without
/// the field tag.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The echo service: `Unary` and `Duplex`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoService;

impl NamedService for EchoService {
    const NAME: &'static str = SERVICE;
}

/// The unary method: answers with the request's bytes.
struct UnaryEcho;

impl UnaryService<Bytes> for UnaryEcho {
    type Response = Bytes;
    type Future = Ready<Result<Response<Bytes>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        ready(Ok(Response::new(request.into_inner())))
    }
}

/// The streaming method: the response stream is the request stream itself,
/// so each message is answered as it arrives, with no task in between.
struct DuplexEcho;

impl StreamingService<Bytes> for DuplexEcho {
    type Response = Bytes;
    type ResponseStream = Streaming<Bytes>;
    type Future = Ready<Result<Response<Streaming<Bytes>>, Status>>;

    fn call(&mut self, request: Request<Streaming<Bytes>>) -> Self::Future {
        ready(Ok(Response::new(request.into_inner())))
    }
}

impl<B> Service<http::Request<B>> for EchoService
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match request.uri().path() {
            UNARY => {
                Box::pin(async move { Ok(Grpc::new(BytesCodec).unary(UnaryEcho, request).await) })
            }
            DUPLEX => {
                Box::pin(
                    async move { Ok(Grpc::new(BytesCodec).streaming(DuplexEcho, request).await) },
                )
            }
            _ => Box::pin(async move { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// Starts the server on the current runtime, on 127.0.0.1 with a free
/// port, over TLS when `tls` is given.
pub async fn start(tls: Option<&TlsMaterial>) -> Result<SocketAddr> {
    let listener = crate::participants::bind_loopback()?;
    let addr = listener.local_addr()?;
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut builder = Server::builder().tcp_nodelay(true);
    if let Some(tls) = tls {
        let identity = Identity::from_pem(&tls.cert_pem, &tls.key_pem);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let router = builder.add_service(EchoService);
    tokio::spawn(router.serve_with_incoming(incoming));
    Ok(addr)
}

/// One channel (one HTTP/2 connection) to the server at `endpoint`.
async fn channel(endpoint: &Endpoint) -> Result<Channel> {
    let scheme = if endpoint.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut builder =
        tonic::transport::Endpoint::from_shared(format!("{scheme}://{}", endpoint.addr))?
            .tcp_nodelay(true);
    if let Some(tls) = &endpoint.tls {
        builder = builder.tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&tls.cert_pem))
                .domain_name(TLS_DOMAIN),
        )?;
    }
    Ok(builder.connect().await?)
}

/// A tonic client making unary calls on its own channel.
pub struct UnaryClient {
    grpc: tonic::client::Grpc<Channel>,
}

impl UnaryClient {
    /// Connects a new channel.
    pub async fn connect(endpoint: &Endpoint) -> Result<Self> {
        Ok(Self {
            grpc: tonic::client::Grpc::new(channel(endpoint).await?),
        })
    }

    /// One unary call; returns the answer's bytes.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<Bytes> {
        self.grpc.ready().await?;
        let response = self
            .grpc
            .unary(
                Request::new(payload.clone()),
                PathAndQuery::from_static(UNARY),
                BytesCodec,
            )
            .await?;
        Ok(response.into_inner())
    }
}

/// A tonic client holding one bidirectional stream on its own channel.
pub struct DuplexClient {
    sender: mpsc::Sender<Bytes>,
    replies: Streaming<Bytes>,
}

impl DuplexClient {
    /// Connects a new channel and opens the stream.
    pub async fn connect(endpoint: &Endpoint) -> Result<Self> {
        let mut grpc = tonic::client::Grpc::new(channel(endpoint).await?);
        grpc.ready().await?;
        let (sender, receiver) = mpsc::channel(1);
        let response = grpc
            .streaming(
                Request::new(ReceiverStream::new(receiver)),
                PathAndQuery::from_static(DUPLEX),
                BytesCodec,
            )
            .await?;
        Ok(Self {
            sender,
            replies: response.into_inner(),
        })
    }

    /// Writes one message on the stream and reads one.
    pub async fn echo(&mut self, payload: &Bytes) -> Result<Bytes> {
        self.sender
            .send(payload.clone())
            .await
            .map_err(|_| anyhow!("the request stream is closed"))?;
        match self.replies.message().await? {
            Some(reply) => Ok(reply),
            None => bail!("the server ended the stream"),
        }
    }

    /// Ends the request stream and waits for the server to end its own.
    pub async fn close(mut self) {
        drop(self.sender);
        while let Ok(Some(_)) = self.replies.message().await {}
    }
}
