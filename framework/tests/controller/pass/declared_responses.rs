//! Every form of return type a handler may have is checked against the
//! response its request declares, and accepted when they agree.

use std::fmt;

use ternio::{
    AppCode, AppError, Context, ErrorCode, HandlerError, IntoReply, Packet, packet_controller,
};

#[derive(Packet)]
#[packet(opcode = 0x0010, response = Sum)]
struct Add {
    a: i32,
    b: i32,
}

#[derive(Packet)]
#[packet(opcode = 0x0011)]
struct Sum(i32);

#[derive(Packet)]
#[packet(opcode = 0x0012, response = Sum)]
struct AddLater(i32, i32);

#[derive(Packet)]
#[packet(opcode = 0x0013, response = Sum)]
struct TryAdd(i32, i32);

#[derive(Packet)]
#[packet(opcode = 0x0014, response = Sum)]
struct TryAddLater(i32, i32);

#[derive(Packet)]
#[packet(opcode = 0x0020, response = ())]
struct Leave;

#[derive(Packet)]
#[packet(opcode = 0x0021, response = ())]
struct LeaveLater;

#[derive(Packet)]
#[packet(opcode = 0x0022, response = ())]
struct TryLeave;

#[derive(Packet)]
#[packet(opcode = 0x0023, response = ())]
struct TryLeaveLater;

#[derive(Packet)]
#[packet(opcode = 0x0030, response = Sum)]
struct Opaque;

#[derive(Packet)]
#[packet(opcode = 0x0031, response = ())]
struct OpaqueLater;

#[derive(Packet)]
#[packet(opcode = 0x0040, response = Sum)]
struct Gated;

#[derive(Debug)]
struct Refused;

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refused")
    }
}

impl AppError for Refused {
    fn code(&self) -> ErrorCode {
        AppCode::new(100).into()
    }
}

#[derive(Default)]
struct Calculator;

#[packet_controller]
impl Calculator {
    fn add(request: Add) -> Sum {
        Sum(request.a + request.b)
    }

    async fn add_later(&self, request: AddLater) -> Sum {
        Sum(request.0 + request.1)
    }

    fn try_add(request: TryAdd, _ctx: &Context) -> Result<Sum, HandlerError> {
        Ok(Sum(request.0 + request.1))
    }

    async fn try_add_later(request: TryAddLater) -> std::result::Result<Sum, Refused> {
        Ok(Sum(request.0 + request.1))
    }

    fn leave(_request: Leave) {}

    async fn leave_later(_request: LeaveLater) {}

    fn try_leave(_request: TryLeave) -> Result<(), Refused> {
        Err(Refused)
    }

    async fn try_leave_later(_request: TryLeaveLater) -> Result<(), HandlerError> {
        Ok(())
    }

    fn opaque(_request: Opaque) -> impl IntoReply<Response = Sum> + use<> {
        Sum(0)
    }

    async fn opaque_later(_request: OpaqueLater) -> impl IntoReply<Response = ()> {}

    // Two handlers of one request type under exclusive `cfg`s.
    #[cfg(debug_assertions)]
    fn gated(_request: Gated) -> Sum {
        Sum(1)
    }

    #[cfg(not(debug_assertions))]
    fn gated_release(_request: Gated) -> Sum {
        Sum(2)
    }
}

fn main() {}
