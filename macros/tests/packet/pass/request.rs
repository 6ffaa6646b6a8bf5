//! `response = T` implements `Request` with `T` as the response, a packet
//! or `()`, and combines with the other keys.

use ternio_macros::Packet;
use ternio_protocol::{Packet as _, Request};

#[derive(Packet)]
#[packet(opcode = 0x0010, response = Sum)]
struct Add {
    a: i32,
    b: i32,
}

#[derive(Packet, Debug, PartialEq)]
#[packet(opcode = 0x0011)]
struct Sum(i32);

mod nested {
    #[derive(ternio_macros::Packet)]
    #[packet(opcode = 0x0012, droppable)]
    #[packet(response = (), max_depth = 4)]
    pub struct Leave;
}

#[derive(Packet)]
#[packet(response = self::Sum, opcode = 0x0013)]
struct Double(i32);

fn response_of<R: Request>() -> &'static str {
    std::any::type_name::<R::Response>()
}

fn main() {
    assert!(response_of::<Add>().ends_with("Sum"));
    assert_eq!(response_of::<nested::Leave>(), "()");
    assert!(nested::Leave::DROPPABLE);
    assert!(response_of::<Double>().ends_with("Sum"));
    let _ = Add { a: 1, b: 2 }.a + Add { a: 1, b: 2 }.b;
    let _ = Double(1).0;
}
