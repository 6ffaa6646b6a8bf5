use ternio::{Packet, packet_controller};

#[derive(Packet)]
#[packet(opcode = 0x0010)]
struct Add {
    a: i32,
    b: i32,
}

#[derive(Packet)]
#[packet(opcode = 0x0011)]
struct Sum(i32);

#[derive(Default)]
struct Calculator;

#[packet_controller]
impl Calculator {
    fn add(request: Add) -> Sum {
        Sum(request.a + request.b)
    }
}

fn main() {}
