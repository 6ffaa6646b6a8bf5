// Must compile with every `@ts-expect-error` line an error (tsc reports an
// unused one): what the generated packet types refuse.
import { Client } from '../../dist/index.js';
import { Add, Count, Profile, Sample, Sum } from './sample.js';

export async function refused(client: Client): Promise<void> {
  // @ts-expect-error a u64/i64 field takes a bigint, not a number
  await client.request(Add, { a: 2, b: 3n });
  // @ts-expect-error a field is missing
  await client.request(Add, { a: 2n });
  // @ts-expect-error a field that Add does not have
  await client.request(Add, { a: 2n, b: 3n, c: 4n });
  const sum = await client.request(Add, { a: 2n, b: 3n });
  // @ts-expect-error the answer is a Sum, whose value is a bigint
  const text: string = sum.value;
  void text;
  const ack = await client.request(Count, { to: 1 });
  // @ts-expect-error an acknowledgement resolves to undefined
  ack.value;
  // @ts-expect-error an enum value names one of its variants
  client.send(Profile, { name: 'n', age: 1, tags: [], kind: { variant: 'Jump' }, home: null });
  // @ts-expect-error a variant's fields come with it
  client.send(Profile, { name: 'n', age: 1, tags: [], kind: { variant: 'Move', x: 1 }, home: null });
  client.on(Sample, (sample) => {
    // @ts-expect-error an option may be null
    const n: bigint = sample.n;
    void n;
  });
  // @ts-expect-error Sum is not a request of Count's stream items
  for await (const item of client.requestStream(Count, { to: 1 }, { item: Sum })) void item;
  // @ts-expect-error a pin is bytes or a hex string
  await Client.connect('ws://127.0.0.1:7402/ws', { secure: { pin: 42 } });
  // @ts-expect-error secure is a boolean or { pin }
  await Client.connect('ws://127.0.0.1:7402/ws', { secure: 'NK' });
}
