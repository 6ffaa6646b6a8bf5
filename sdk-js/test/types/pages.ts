// Must compile: the example pages' generated declarations
// (examples/web/*/packets.d.ts) type their requests and pushes.
import type { Client } from '../../dist/index.js';
import { JoinRoom as ChatJoin, Say, ChatMessage, type RoomInfo } from '../../../examples/web/chat/packets.js';
import { Login, JoinRoom, Moved, type RoomState, type Welcome } from '../../../examples/web/rooms/packets.js';

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
const same = <A, B>(proof: Same<A, B>): Same<A, B> => proof;

export async function pages(client: Client): Promise<void> {
  const info = await client.request(ChatJoin, { room: 'lobby' });
  same<typeof info, RoomInfo>(true);
  const said = await client.request(Say, { room: 'lobby', text: 'hi' });
  same<typeof said, undefined>(true);
  client.on(ChatMessage, (message) => same<typeof message.text, string>(true));
  const welcome = await client.request(Login, { name: 'ann', token: '' });
  same<typeof welcome, Welcome>(true);
  const state = await client.request(JoinRoom, { room: 'lobby' });
  same<typeof state, RoomState>(true);
  client.on(Moved, (moved) => same<typeof moved.moves, bigint>(true));
  // @ts-expect-error a room is a string
  await client.request(JoinRoom, { room: 1 });
}
