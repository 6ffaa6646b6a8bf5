//! Resumption's exchanges on a link (docs/PROTOCOL.md section 4.2): the
//! `RESUME` a reconnection presents before its link is installed, the
//! server's answer taken on the reader task (new keys in place before the
//! next frame is read), and the `ACK`s that come due by time. The state
//! they act on is the session's ([`Session`](crate::resume::Session)).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ternio_protocol::frame::{Flags, Header};
use ternio_protocol::replay::ACK_DELAY;
use ternio_protocol::resume::ResumeInitiator;
use ternio_protocol::secure::{KEY_LEN, RekeyPolicy};
use ternio_protocol::system::{self, Cancel, ErrorBody, Resume, Resumed};
use ternio_protocol::{Decode, Encode, ErrorCode};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::error::{ClientError, CloseReason};
use crate::keeper;
use crate::link::Link;
use crate::resume::{PendingResume, ResumeFailed, Session};
use crate::secure::RawBody;
use crate::send::{Mode, SendError};

/// What a secure session's resumption is keyed by: its latest session
/// secret, and the server key the client pins, if it does.
pub(crate) type SecureResume = (Zeroizing<[u8; KEY_LEN]>, Option<[u8; KEY_LEN]>);

/// Sends `RESUME` on `link` (not installed yet), waits for the reader to
/// take the answer (keys in place on a secure session), then replays what
/// the server lacks. `secure` is a secure session's latest session secret
/// and pinned server key.
pub(crate) async fn resume(
    session: &Session,
    link: &Arc<Link>,
    id: u32,
    secure: Option<SecureResume>,
    max_frame_size: usize,
    timeout: Duration,
) -> Result<(), ResumeFailed> {
    // A reader may still be handing over what the lost link brought: its
    // frames are in the count once it is done.
    tokio::time::timeout(timeout, session.settled())
        .await
        .map_err(|_| {
            ResumeFailed::Refused(
                "the lost link's reader did not hand over what it read in time".into(),
            )
        })?;
    let (ticket, received) = session.resume_request()?;
    let noise = |error: ternio_protocol::secure::HandshakeError| {
        ResumeFailed::Refused(format!("resumption handshake: {error}"))
    };
    let mut initiator = match &secure {
        Some((secret, pin)) => {
            // The ticket and count are bound to the handshake (prologue).
            Some(
                ResumeInitiator::new(pin.as_ref(), &secret[..], &ticket, received)
                    .map_err(noise)?,
            )
        }
        None => None,
    };
    let (pattern, message) = match &mut initiator {
        Some(initiator) => (
            initiator.pattern().to_u8(),
            Bytes::from(initiator.message().map_err(noise)?),
        ),
        None => (0, Bytes::new()),
    };
    let request = Resume {
        ticket,
        received,
        pattern,
        message,
    };
    let (done, outcome) = oneshot::channel();
    link.begin_resume(PendingResume {
        id,
        initiator,
        done,
    });
    let header = Header::new(system::RESUME, Flags::NONE, id);
    let mut body = BytesMut::new();
    request.encode(&mut body);
    link.send_unrecorded(Mode::Handshake, header, &RawBody(&body), max_frame_size)
        .map_err(|error| ResumeFailed::Link(send_error(link, error)))?;
    let resumed = match tokio::time::timeout(timeout, outcome).await {
        Err(_) => return Err(ResumeFailed::Link(ClientError::Timeout(timeout))),
        Ok(Err(_)) => return Err(ResumeFailed::Link(ClientError::Closed(link.end_reason()))),
        Ok(Ok(outcome)) => outcome?,
    };
    // What the server lacks goes out again first, as it was.
    for (header, body) in session.resumed(&resumed)? {
        link.send_unrecorded(
            Mode::Sealable {
                required: false,
                compress: None,
            },
            header,
            &RawBody(&body),
            max_frame_size,
        )
        .map_err(|error| ResumeFailed::Link(send_error(link, error)))?;
    }
    // The streams dropped while no link was up: their `CANCEL` (a system
    // frame, never replayed) goes now, before any new request can take
    // their ids (docs/PROTOCOL.md section 4.5).
    for request_id in session.take_abandoned() {
        link.send_unrecorded(
            Mode::Sealable {
                required: false,
                compress: None,
            },
            Header::new(system::CANCEL, Flags::NONE, 0),
            &Cancel { request_id },
            max_frame_size,
        )
        .map_err(|error| ResumeFailed::Link(send_error(link, error)))?;
    }
    Ok(())
}

/// Sends the `ACK`s of `link` when they come due by time, [`ACK_DELAY`]
/// after the first frame since the last one (the reader sends those due by
/// count): runs with the link's other tasks.
pub(crate) async fn acknowledge(session: Arc<Session>, link: Arc<Link>, max_frame_size: usize) {
    loop {
        if !session.has_unacked() {
            session.ack_due.notified().await;
        }
        keeper::sleep_until(Instant::now() + ACK_DELAY).await;
        if link.lost_reason().is_some() {
            return;
        }
        match session.send_ack(|take_ack| link.send_ack(take_ack, max_frame_size)) {
            // Not yet (a handshake waits, or nothing went on the link
            // yet): nothing was taken, the next round tries again.
            Ok(()) | Err(SendError::Handshaking) => {}
            Err(_) => return,
        }
    }
}

/// The error a failed send on `link` comes to.
fn send_error(link: &Link, error: SendError) -> ClientError {
    match error {
        SendError::TooLarge(error) => ClientError::FrameTooLarge(error),
        SendError::Lost(reason) => ClientError::Closed(reason),
        _ => ClientError::Closed(link.end_reason()),
    }
}

/// Takes the server's answer to `pending` (on the reader task): on a
/// secure session the new keys go in place at once; the caller learns the
/// outcome. Returns why to close the link, if the answer is not one.
pub(crate) fn answer(
    pending: PendingResume,
    link: &Link,
    (header, body, sealed): (Header, &Bytes, bool),
    rekey: RekeyPolicy,
) -> Option<CloseReason> {
    let PendingResume {
        initiator, done, ..
    } = pending;
    if sealed {
        link.fail_handshake();
        let _ = done.send(Err(ResumeFailed::Link(ClientError::Handshake(
            "a sealed answer to RESUME".into(),
        ))));
        return Some(CloseReason::Protocol("a sealed answer to RESUME".into()));
    }
    if header.flags.is_error() {
        link.fail_handshake();
        let refusal = ErrorBody::parse(body).map_or_else(
            |_| "refused".to_owned(),
            |error| match error.code {
                ErrorCode::HandshakeFailed => error.message,
                code => format!("{code}: {}", error.message),
            },
        );
        let _ = done.send(Err(ResumeFailed::Refused(refusal)));
        return None;
    }
    let resumed = match Resumed::decode_body(body) {
        Ok(resumed) => resumed,
        Err(error) => {
            link.fail_handshake();
            let _ = done.send(Err(ResumeFailed::Link(ClientError::Handshake(
                error.to_string(),
            ))));
            return Some(CloseReason::Protocol(format!("RESUMED: {error}")));
        }
    };
    match initiator {
        // Message 2 carries the answer's fields: changed on the way (its
        // `received`, its ticket), they fail here, and nothing of the
        // answer is used (no replay from a forged count).
        Some(initiator) => match initiator.finish(&resumed) {
            Ok(channel) => link.complete_handshake(channel, rekey),
            Err(error) => {
                link.fail_handshake();
                let message = format!("resumption handshake: {error}");
                let _ = done.send(Err(ResumeFailed::Link(ClientError::Handshake(
                    message.clone(),
                ))));
                return Some(CloseReason::Protocol(message));
            }
        },
        None if !resumed.message.is_empty() => {
            link.fail_handshake();
            let _ = done.send(Err(ResumeFailed::Link(ClientError::Handshake(
                "a Noise message in the answer to a plain RESUME".into(),
            ))));
            return Some(CloseReason::Protocol(
                "a Noise message in the answer to a plain RESUME".into(),
            ));
        }
        None => link.fail_handshake(),
    }
    let _ = done.send(Ok(resumed));
    None
}
