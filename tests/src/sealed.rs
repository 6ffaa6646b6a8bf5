//! A scripted client's secure session: a [`RawConnection`] and, after an
//! NN handshake, its keys, so that a test can write any frame sealed and
//! read the server's frames opened.

use std::net::SocketAddr;

use bytes::BytesMut;
use ternio::protocol::Frame;
use ternio::protocol::frame::{Flags, Framing, Header};
use ternio::protocol::secure::{Initiator, SecureChannel};
use ternio::protocol::system;

use crate::RawConnection;

/// A raw TCP connection, plain or with a secure session.
pub struct SealedConnection {
    /// The link.
    pub raw: RawConnection,
    /// The secure session's keys, once the handshake is done.
    pub channel: Option<SecureChannel>,
}

impl SealedConnection {
    /// A plain connection to `address`.
    pub async fn plain(address: SocketAddr) -> Self {
        Self {
            raw: RawConnection::connect(address).await,
            channel: None,
        }
    }

    /// A connection to `address` after an NN handshake (request id 1000).
    pub async fn secure(address: SocketAddr) -> Self {
        let mut connection = Self::plain(address).await;
        let mut initiator = Initiator::new(None).unwrap();
        let body = initiator.request_body().unwrap();
        connection
            .raw
            .send_body(Header::new(system::HANDSHAKE, Flags::NONE, 1000), &body)
            .await;
        let answer = connection.raw.recv().await.expect("the handshake's answer");
        connection.channel = Some(initiator.finish(&answer.body).unwrap());
        connection
    }

    /// Sends `body` under `header`, sealed on a secure session.
    pub async fn send_frame(&mut self, header: Header, body: &[u8]) {
        match &mut self.channel {
            Some(channel) => {
                let mut out = BytesMut::new();
                channel
                    .sealer
                    .write_frame_with(
                        &mut out,
                        Framing::LengthPrefixed,
                        header,
                        usize::MAX,
                        |out| out.extend_from_slice(body),
                    )
                    .unwrap();
                self.raw.send_raw(&out).await.unwrap();
            }
            None => self.raw.send_body(header, body).await,
        }
    }

    /// The next frame, opened on a secure session; `None` at the end of
    /// the stream.
    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = self.raw.recv().await?;
        Some(
            match (&mut self.channel, frame.header.flags.is_encrypted()) {
                (Some(channel), true) => {
                    let mut body = BytesMut::from(&frame.body[..]);
                    channel.opener.open(&frame.header, &mut body).unwrap();
                    Frame {
                        header: frame.header,
                        body: body.freeze(),
                    }
                }
                _ => frame,
            },
        )
    }
}
