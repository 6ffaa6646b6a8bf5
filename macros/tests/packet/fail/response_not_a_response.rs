use ternio_macros::Packet;

#[derive(Packet)]
#[packet(opcode = 0x0010, response = String)]
struct Add {
    a: i32,
    b: i32,
}

fn main() {}
