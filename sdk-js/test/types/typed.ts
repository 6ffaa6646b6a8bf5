// Must compile (`tsc -p test/types`, run by test/codegen.test.js): what the
// generated packet types let through, and what they resolve to.
import { Client, packet, i64, type ClientOptions, type PacketType, type SecureSessionInfo } from '../../dist/index.js';
import { Add, Count, Kind, Plant, Profile, Sample, Sum, type Point, type Tree } from './sample.js';

/** `A` and `B` are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
const same = <A, B>(proof: Same<A, B>): Same<A, B> => proof;

export async function typed(client: Client): Promise<void> {
  const sum = await client.request(Add, { a: 2n, b: 3n });
  same<typeof sum, Sum>(true);
  const value: bigint = sum.value;

  const ack = await client.request(Count, { to: 3 });
  same<typeof ack, undefined>(true);
  for await (const point of client.requestStream(Count, { to: 3 })) {
    same<typeof point, Point>(true);
  }

  const tree = await client.request(Plant, { depth: 2 }, { timeout: 100, signal: AbortSignal.timeout(50) });
  same<typeof tree, Tree>(true);
  same<typeof tree.children, Tree[]>(true);

  client.send(Profile, { name: 'n', age: 3, tags: [], kind: { variant: 'Stop' }, home: null });
  client.on(Sample, (sample) => {
    same<typeof sample.n, bigint | null>(true);
    if (sample.k.variant === 'Move') same<typeof sample.k.x, number>(true);
  });
  const kind: Kind = Kind.decode(Kind.encode({ variant: 'Move', x: 1, y: -1 }));
  void kind;
  void value;

  // A raw request resolves to the frame.
  const frame = await client.request(0x0010, new Uint8Array(0));
  same<typeof frame.body, Uint8Array>(true);

  // Hand-declared packets are typed as well.
  const HandSum = packet(0x0011, { value: i64 }, { name: 'Sum' });
  const HandAdd = packet(0x0010, { a: i64, b: i64 }, { name: 'Add', response: HandSum });
  const handSum = await client.request(HandAdd, { a: 1n, b: 2n });
  same<typeof handSum, { value: bigint }>(true);
  const annotated: PacketType<{ a: bigint; b: bigint }, { value: bigint }, unknown> = HandAdd;
  void annotated;

  // Secure sessions: the options, and what the client tells of one.
  const options: ClientOptions = { secure: { pin: '8f'.repeat(32) }, rekey: { frames: 1000, intervalMs: 60_000 } };
  const secure = await Client.connect('ws://127.0.0.1:7402/ws', { ...options, secure: true });
  const info: SecureSessionInfo | null = secure.secureSession;
  if (info) same<typeof info.pattern, 'NN' | 'NK'>(true);
}
