use ternio::{Packet, packet_controller};

#[derive(Packet)]
#[packet(opcode = 0x0020, response = ())]
struct Leave;

struct Rooms {
    capacity: usize,
}

#[packet_controller]
impl Rooms {
    fn leave(&self, _request: Leave) {
        let _ = self.capacity;
    }
}

fn main() {}
