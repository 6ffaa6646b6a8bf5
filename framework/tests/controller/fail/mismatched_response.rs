use ternio::{HandlerError, IntoReply, Packet, packet_controller};

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
#[packet(opcode = 0x0012)]
struct Product(i32);

#[derive(Packet)]
#[packet(opcode = 0x0020, response = ())]
struct Leave;

#[derive(Packet)]
#[packet(opcode = 0x0030, response = Sum)]
struct Opaque;

#[derive(Default)]
struct Calculator;

#[packet_controller]
impl Calculator {
    fn add(request: Add) -> Product {
        Product(request.a * request.b)
    }

    async fn leave(_request: Leave) -> Result<Sum, HandlerError> {
        Ok(Sum(0))
    }

    fn opaque(_request: Opaque) -> impl IntoReply + use<> {
        Sum(1)
    }
}

fn main() {}
