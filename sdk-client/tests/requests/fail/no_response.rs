use ternio_client::{Client, ClientError, Packet};

#[derive(Packet)]
#[packet(opcode = 0x0010)]
struct Add {
    a: i32,
    b: i32,
}

async fn run(client: Client) -> Result<(), ClientError> {
    client.request_async(&Add { a: 2, b: 3 }).await?;
    Ok(())
}

fn main() {}
