use ternio_client::{Client, ClientError, Packet};

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

async fn run(client: Client) -> Result<(), ClientError> {
    let product: Product = client.request_async(&Add { a: 2, b: 3 }).await?;
    let _ = product.0;
    Ok(())
}

fn main() {}
